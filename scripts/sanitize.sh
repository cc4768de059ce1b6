#!/usr/bin/env bash
# The test suite under sanitizers (cmake/Sanitizers.cmake), for CI and for developers.
#
#   scripts/sanitize.sh asan|tsan|all
#
#   asan  <prefix>-asan    -DTUTTI_SANITIZE=address,undefined: ASan + LeakSanitizer + UBSan over the suite
#                          (minus the exclusions printed with the run); any report fails its test.
#   tsan  <prefix>-tsan-ci -DTUTTI_SANITIZE=thread: the multi-threaded suites (ranks as threads in one
#                          process, host executor, proxy, bootstrap, profiler); any report fails its test.
#
# Each configuration is configured, built and its ctest subset run (-j$SANITIZE_JOBS, --timeout 600).
# The time of every step is printed, with a summary at the end; the exit status is 1 when any step failed.
# Environment: SANITIZE_JOBS (default 2), SANITIZE_BUILD_PREFIX (default <repo>/build), SANITIZE_CTEST_ARGS
# (extra ctest arguments, e.g. "-R Bootstrap" while iterating).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${SANITIZE_JOBS:-2}
prefix=${SANITIZE_BUILD_PREFIX:-$root/build}
read -r -a extra <<<"${SANITIZE_CTEST_ARGS:-}"

summary=()
failed=0

# step <config> <what> <command...>: runs the command; prints and records its duration and status.
step() {
  local config=$1 what=$2 start rc secs
  shift 2
  echo "==> [$config] $what: $*"
  start=$(date +%s)
  "$@"
  rc=$?
  secs=$(($(date +%s) - start))
  summary+=("$(printf '%-5s %-10s %5d s  %s' "$config" "$what" "$secs" \
    "$([ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc)")")")
  echo "==> [$config] $what: $secs s, exit $rc"
  [ "$rc" -eq 0 ] || failed=1
  return "$rc"
}

# exclusions <name of an array of "regex|reason" entries>: prints what is left out and why, and sets
# $exclude_re to the alternation of the regexes (for ctest -E). The regex ends at the first '|': one
# alternative per entry.
exclusions() {
  local -n entries=$1
  local e re=()
  for e in "${entries[@]}"; do
    printf '    not run: %-34s %s\n' "${e%%|*}" "${e#*|}"
    re+=("${e%%|*}")
  done
  exclude_re=$(IFS='|'; echo "${re[*]}")
}

# configure_and_build CONFIG DIR SANITIZERS [TARGET...]: everything, or only the targets named (their plugins
# come with them: the test targets depend on the plugins they load).
configure_and_build() {
  local config=$1 dir=$2 sanitize=$3
  shift 3
  local targets=()
  (($#)) && targets=(--target "$@")
  step "$config" configure nice -n 15 cmake -S "$root" -B "$dir" -DTUTTI_SANITIZE="$sanitize" \
    -DTUTTI_WITH_CUDA=OFF -DTUTTI_WITH_SIM=OFF || return 1
  step "$config" build nice -n 15 cmake --build "$dir" -j"$jobs" "${targets[@]}"
}

# --- AddressSanitizer + UBSan + LeakSanitizer ------------------------------------------------------------
# The whole suite but:
asan_skip=(
  '^soak_|memory bounds: ASan keeps freed memory in quarantine, so RSS grows by design (LSan checks leaks in
                                     every test); the normal build runs them'
  '@|forced algorithm/protocol repeats of the matrices (name@ring_LL, ...): the same code paths as the
                                     base matrices, which run; the normal build runs every variant'
  '^perf_|perf-tool sweeps: the collectives of the Threads/ and Processes/ matrices, timed; the normal build
                                     runs them'
  'MpMatrix\.Cases/.*_k[48]$|4 and 8 forked ranks of the process matrix: the code paths of its 2- and 3-rank rows,
                                     10-15 s each under ASan; the normal build runs them'
  'MpMatrix\.Cases/NetZeroCopy_.*_k3$|3 forked ranks over zero-copy sockets, direct copies and one-shot calls: the
                                     per-peer code of their 2-rank rows (~4 s each under ASan); their shm and
                                     socket rows run with 3 ranks, and the normal build runs every row'
  'MpMatrix\.Cases/Direct_.*_k3$|as above'
  'MpMatrix\.Cases/OneShot_.*_k3$|as above'
  'Ranks/Configured\..*/k8  #|8 ranks of the many-step configurations (small buffers, four channels, PAT):
                                     the buffers and steps of their k2 and k3 runs, with 8 threads on the
                                     cores (~6 s each under ASan); the normal build runs them'
  'Threads/LargeCounts\..*_k8$|multi-MiB counts on 8 thread ranks: the buffers and steps of their 2- and
                                     3-rank rows, 8 ranks on the cores (~8 s each under ASan); the normal
                                     build runs them'
  '^multiproc\.netns\.|network-namespace nodes: the net/shm paths of the Processes/ matrix (which runs), minutes more'
  '^install\.|installs the build and links uninstrumented clients (and the .deb) against the instrumented
                                     library, which ASan refuses; the normal build runs them'
  '^example\.mpi$|Open MPI'"'"'s own allocations left at exit would be LSan reports; the normal build runs it'
  '^plugin_check_tuner_hang$|waits out a deliberately hung plugin (17 s+): it checks the guard, not memory'
  '^plugin_check_tuner_crash$|the plugin stores through NULL on purpose: UBSan/ASan report it (exit 1) before
                                     the SIGSEGV that this check asserts can happen; the normal build runs it'
)

run_asan() {
  local dir=$prefix-asan exclude_re
  mkdir -p "$(dirname "$dir")"
  configure_and_build asan "$dir" address,undefined || return 1
  echo "==> [asan] tests: all labels but ib (needs an HCA); left out:"
  exclusions asan_skip
  # abort_on_error: a report ends the process with SIGABRT, so even a test that only checks a child's exit
  # code sees it. Allocation stacks come from the fast (frame-pointer) unwinder, ASan's default: every target
  # here, plugins included, keeps its frame pointers (cmake/Sanitizers.cmake), and the slow unwinder made the
  # suite's tests take 1.6x as long (the bad-argument rows and 2-/3-process AllReduce rows: 84 s -> 52 s); where a
  # report's allocation stack stops inside a library built without frame pointers, rerun that test with
  # fast_unwind_on_malloc=0 added to ASAN_OPTIONS. LSan reports leaks at exit; the suppressions file lists
  # third-party leaks only, each explained there.
  step asan test env \
    ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:check_initialization_order=1:strict_init_order=1" \
    LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    nice -n 15 ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 600 -LE '^ib$' -E "$exclude_re" \
    "${extra[@]}"
}

# --- ThreadSanitizer ---------------------------------------------------------------------------------------
# Only what runs several threads over shared state in one process. (The ctest name of a parameterized test
# ends in "  # GetParam() = ...", so a regex anchored with $ after the instance name never matches it.)
tsan_labels='^(unit|integration|sdk|determinism)$'
tsan_skip=(
  'Processes/|ranks as forked processes: each process is single-threaded per rank; the thread suites cover it'
  '^multiproc\.|network-namespace nodes: forked processes, as above'
  '^perf_|perf-tool sweeps: the same collectives as the Threads/ matrix, slower under TSan'
  '@|forced algorithm/protocol repeats of the matrices: same synchronisation as the base matrices'
  'Ranks/Configured\..*/k8  #|8 ranks of the many-step configurations: the synchronisation of their k2 and k3 runs
                                     with 8 threads on the cores (about 4 min under TSan); run under ASan'
  'Threads/LargeCounts|multi-MiB counts: the synchronisation of Threads/CollectiveMatrix with 10x the copying
                                     (several minutes under TSan); run under ASan'
  'BadArgsMatrix|one row per bad argument, checked on one thread; run under ASan'
  '^soak_|forked processes (TSan cannot start threads after a multi-threaded fork); run under ASan'
  '^RmaProcesses\.|one-sided operations between forked ranks; the thread variants run'
  '^RmaHosts\.|one-sided operations between forked ranks on separate hosts; run under ASan'
  '^SymProcesses\.|collectives on symmetric windows between forked ranks; the thread variants run'
  '^NetSocket\.DefaultsKeepOneChunkMessagesInline$|counts the threads of the process, and the TSan runtime
                                     adds its own'
  '^plugin_check_|label plugins: tutti-plugin-check forks a worker per check; run under ASan'
  '^sdk_examples_out_of_tree$|builds uninstrumented examples out of tree; run under ASan'
  '^profiler_trace\.e2e_procs$|forked ranks; the threads variant runs'
  '^config\.|tutti-info on config files: single-threaded parsing; run under ASan'
  '^DetTable\.|deterministic reductions of millions of elements: the synchronisation of the DetThreads runs
                                     with more copying; run under ASan'
  '^DetError\.|as DetTable'
  '^DetThreadsLarge\.|as DetTable'
  'DetThreads\..*/16$|deterministic reductions on 16 ranks: the synchronisation of the 2- to 5-rank runs;
                                     run under ASan'
  '_k8[_ ]|8 ranks as threads (collective matrix, send/recv patterns, grouped init): the synchronisation
                                     of their 2- to 5-rank runs, with 8 threads on the cores (about 4 min
                                     under TSan); run under ASan'
  'DetThreads\..*/8$|as the 8-rank rows above'
  'SymThreads\..*/8$|as the 8-rank rows above'
  '^DetPair\.|the two-rank deterministic path under every forced protocol: the synchronisation of the
                                     DetThreads runs (TSan spends a minute clearing shadow pages of its
                                     buffers); run under ASan'
  '^DetProcesses\.|deterministic reductions between forked ranks; the thread variants run'
  '^DetExchangeSteps\.|the exchange step each rank count chooses at init, 4 and 8 thread ranks with 1.2 MB
                                     calls (a minute under TSan): the synchronisation of the DetThreads and
                                     DetPipeline.Segmented runs, which run; run under ASan'
  '^DetPipeline\.WholeOverTheNetworkUnlessSet$|the pipeline segments each transport chooses at init: as DetExchangeSteps'
  'Doubling\..*/k[678]  #|recursive doubling and Bruck on 6 to 8 thread ranks: the synchronisation of their 2- to
                                     5-rank runs (non-powers of two included) with more threads than cores
                                     (two and a half minutes under TSan); run under ASan'
  '^DetScatterGather\.RoundsOfASlotMatchTheReference$|the scatter-gather in rounds of a 4 KiB slot, 3 and 8
                                     thread ranks and 4 over sockets (two and a half minutes under TSan):
                                     the synchronisation of DetScatterGather.EveryTypeAndOp, which runs, a
                                     round at a time; run under ASan'
  '^DetFixedOrderNet\.|6 thread ranks over sockets taking the deterministic paths by rank count (over a
                                     minute under TSan): the synchronisation of the DetScatterGather and
                                     DetNetworkTree runs over sockets, which run; run under ASan'
)

# The multi-threaded suites, the only ones built under TSan (the others run under ASan): ranks as threads of
# one process (collectives, groups, send/recv, nonblocking and abort, call checks), the host executor and
# waits, bootstrap and net-socket threads, host streams, profilers, the device runtime's streams, events and
# capture replay, one-sided windows and signals, collectives on symmetric windows, growing a communicator,
# deterministic reductions. Not the primitives' stress test (test_prims_tsan): the normal build compiles it and
# the core sources it drives with -fsanitize=thread already (tests/unit/prims_stress), and its ctest runs it
# under TSan; here it would be the same program a second time.
tsan_targets=(test_collectives_matrix test_collectives_grouped test_collectives_variants test_sendrecv
  test_reliability test_callcheck_threads test_host_wait test_bootstrap test_net_socket
  test_comm_registry test_host_streams test_profiler_events profiler_trace_test test_simulate all_reduce_perf
  test_device_runtime test_rma test_sym test_grow test_determinism)

run_tsan() {
  local dir=$prefix-tsan-ci exclude_re ids
  mkdir -p "$(dirname "$dir")"
  configure_and_build tsan "$dir" thread "${tsan_targets[@]}" || return 1
  echo "==> [tsan] tests: labels $tsan_labels of ${tsan_targets[*]}; left out:"
  exclusions tsan_skip
  # ctest -I 0,0,0,N,...: exactly the tests whose program is one of the targets built. ctest applies -I to
  # the list left after -L and -E, by position in it (not by the test's own number), so the positions are
  # counted in that same filtered list.
  ids=$(ctest --test-dir "$dir" -N -V -L "$tsan_labels" -E "$exclude_re" 2>/dev/null |
    awk -v re="/bin/($(IFS='|'; echo "${tsan_targets[*]}"))\$" \
      '/^[0-9]+: Test command:/ { ++pos; if ($4 ~ re) ids = ids "," pos } END { print ids }')
  [ -n "$ids" ] || { echo "==> [tsan] no test selected" >&2; failed=1; return 1; }
  # halt_on_error + exitcode 66: the first report ends the process with a code no test expects.
  # second_deadlock_stack: both stacks of a lock-order inversion.
  step tsan test env \
    TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$root/scripts/tsan.supp" \
    nice -n 15 ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 600 -L "$tsan_labels" \
    -E "$exclude_re" -I "0,0,0$ids" "${extra[@]}"
}

case "${1:-}" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan; run_tsan ;;
  *) echo "usage: $0 asan|tsan|all" >&2; exit 2 ;;
esac

echo "==> sanitizer summary (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
printf '    %s\n' "${summary[@]}"
exit "$failed"
