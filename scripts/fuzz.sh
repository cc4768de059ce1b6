#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan) in build-fuzz and runs each one for
# SECONDS (default 15) on a copy of its seed corpus. Prints one line per target and exits non-zero when any
# target finds a crash, leak, timeout or out-of-memory, or cannot be built.
#
#   scripts/fuzz.sh [SECONDS]        env: FUZZ_JOBS targets at once (default: the number of CPUs; each
#                                         target is one single-threaded process), FUZZ_TARGETS="config ..."
#                                         FUZZ_BUILD=<dir> (default <repo>/build-fuzz), FUZZ_KEEP=1 keeps the
#                                         working corpora and logs (printed at the end)
# A crash leaves its reproducer (crash-*/leak-*/timeout-*/oom-*) in the target's log directory; rerun it
# with build-fuzz/bin/fuzz_<target> <file>.
set -euo pipefail

seconds=${1:-15}
if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: $0 [seconds per target, >= 1]" >&2
  exit 2
fi
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUZZ_BUILD:-$repo/build-fuzz}
targets=${FUZZ_TARGETS:-"config env_parsers bootstrap_wire net_socket_wire"}
jobs=${FUZZ_JOBS:-$(nproc)}

command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (apt-get install clang)" >&2; exit 2; }
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$repo" -B "$build" -DTUTTI_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 2; }
  rm -f "$build.configure.log"
fi
if ! cmake --build "$build" -j2 --target tutti_fuzzers >"$build/fuzz-build.log" 2>&1; then
  tail -40 "$build/fuzz-build.log" >&2
  echo "fuzz: build failed" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/tutti-fuzz.XXXXXX")
[ "${FUZZ_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

# run_one TARGET: fuzzes a copy of the seeds; the libFuzzer log and any reproducer stay in $work/TARGET.
run_one() {
  local t=$1 dir=$work/$1
  mkdir -p "$dir/corpus"
  cp "$repo/tests/fuzz/corpus/$t/"* "$dir/corpus/"
  # -rss_limit_mb also caps single allocations (malloc_limit_mb defaults to it): no unbounded allocation.
  local rc=0
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/bin/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    corpus >log 2>&1) || rc=$?
  echo "$rc" >"$dir/rc"
}

# The reproducers libFuzzer left in DIR.
findings() {
  find "$1" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \)
}

pids=()
for t in $targets; do
  [ -x "$build/bin/fuzz_$t" ] || { echo "fuzz: no target fuzz_$t" >&2; exit 2; }
  run_one "$t" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "$jobs" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
wait

status=0
for t in $targets; do
  dir=$work/$t
  rc=$(cat "$dir/rc" 2>/dev/null || echo "?")
  # From libFuzzer's final stats and its last "#N ... cov: C ft: F corp: K/..." status line.
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$dir/log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -oE 'ft: [0-9]+' "$dir/log" | tail -1 | cut -d' ' -f2)
  corp=$(grep -oE 'corp: [0-9]+' "$dir/log" | tail -1 | cut -d' ' -f2)
  found=$(findings "$dir" | wc -l)
  verdict=ok
  if [ "$rc" != 0 ] || [ "$found" -gt 0 ]; then
    verdict=FAIL
    status=1
  fi
  printf 'fuzz_%-16s %-4s execs %-10s exec/s %-7s cov %-5s ft %-6s corpus %-5s crashes %s (rc %s)\n' \
    "$t" "$verdict" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$found" "$rc"
  if [ "$verdict" = FAIL ]; then
    grep -E 'ERROR|invariant violated|SUMMARY|^    #[0-9] ' "$dir/log" | head -20 | sed 's/^/    /' >&2
    findings "$dir" | sed 's/^/    reproducer: /' >&2
    trap - EXIT  # keep the reproducer
  fi
done
[ "$status" = 0 ] || echo "fuzz: failures; logs and reproducers in $work" >&2
[ "${FUZZ_KEEP:-0}" != 1 ] || echo "fuzz: logs and corpora in $work"
exit $status
