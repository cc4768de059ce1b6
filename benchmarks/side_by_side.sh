#!/usr/bin/env bash
# Tutti vs Open MPI on this host, in one run: AllReduce, AllGather, ReduceScatter, Broadcast, AlltoAll from 8 B to
# 256 MiB with 2 and 4 ranks (one process each), Tutti over shm and over net-socket against Open MPI over
# shared memory (vader/sm) and TCP. Writes benchmarks/results/side_by_side.md and the raw outputs under
# benchmarks/results/raw/. See benchmarks/README.md.
#
# usage: benchmarks/side_by_side.sh [BUILD_DIR]      (default: ./build; the perf tools must be built)
#   RANKS="2 4" COLLS="all_reduce ..." override the sweep; QUICK=1 stops at 1 MiB (a smoke run); RECHECK=1 then
#   measures every row below 1.0 again (benchmarks/recheck_below.py) and adds what it found to side_by_side.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
results=$root/benchmarks/results
raw=$results/raw
ranks=${RANKS:-"2 4"}
colls=${COLLS:-"all_reduce all_gather reduce_scatter broadcast alltoall"}

die() { echo "side_by_side.sh: $*" >&2; exit 1; }

for c in $colls; do
  [ -x "$build/bin/${c}_perf" ] || die "$build/bin/${c}_perf not found; build it first: cmake --build $build --target ${c}_perf"
done
# Open MPI is a benchmark dependency only (no ctest needs it): install it when missing and allowed.
if ! command -v mpicc > /dev/null || ! command -v mpirun > /dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    apt-get install -y openmpi-bin libopenmpi-dev > /dev/null || die "apt-get install openmpi-bin libopenmpi-dev failed"
  else
    die "Open MPI is missing: install openmpi-bin and libopenmpi-dev (mpicc, mpirun)"
  fi
fi
# Open MPI 4 calls its shared-memory BTL 'vader'; Open MPI 5 renamed it 'sm'.
if ompi_info --parsable | grep -q '^mca:btl:vader:'; then shm_btl=vader; else shm_btl=sm; fi
mpirun_base=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1)
mpi_shm=(--mca btl "self,$shm_btl")
mpi_tcp=(--mca btl self,tcp --mca btl_tcp_if_include lo)

mkdir -p "$build/bench" "$raw"
rm -f "$raw"/tutti-*.txt "$raw"/ompi-*.txt "$raw"/host-limits.txt  # its own outputs only (other tools keep theirs here)
mpicc -O2 -Wall -o "$build/bench/mpi_coll_perf" "$root/benchmarks/mpi/mpi_coll_perf.c"
cc -O2 -Wall -o "$build/bench/host_limits" "$root/benchmarks/mpi/host_limits.c"

# Size segments: iterations shrink as sizes grow so the whole run stays within a quarter of an hour on 2 cores.
# Each segment is swept `repeats` times and the tables keep each size's fastest sweep: the host is shared,
# and one rank losing its core for a scheduler time slice (~4 ms) spoils a small-size row. Small calls run
# 500 to 1000 iterations (as the OSU benchmarks do): a sub-microsecond call timed over 50 is a 25 us window,
# where the ranks' skew after the start barrier and one late wake-up weigh as much as the calls (AllGather of
# 16 B over shm, 2 ranks, the three 50-call runs of one sweep: Tutti 0.49, 1.78 and 7.24 us, Open MPI 0.30,
# 0.51 and 0.56).
# From 16 MiB a sweep is a handful of calls, and the host's state drifts over minutes (a 256 MiB AllGather's first
# sweep at 170 ms, the next at 95, Tutti and Open MPI alike): three sweeps there too, 16 to 64 MiB over 5 calls.
# Up to 64 KiB a sweep takes seconds, most of it the start of the processes, and a single descheduled rank moves a
# row by tens of percent: five sweeps there, so each side's fastest is nearer its true best on a shared host.
# From 256 KiB to 4 MiB too: a sweep there times 20 to 100 calls, tens of milliseconds, and in the runs before,
# most of the rows one side led by 4-18% in the sweep (2 ranks over shm, AllGather and AlltoAll, 1 and 4 MiB) were
# led by the other side, or by neither, when measured again in 7 interleaved runs (side_by_side_recheck.md).
# `limit` is the time limit of one run in seconds: a run that hangs is killed and recorded as failed; the rows
# it printed before still count.
#        min   max   factor iters warmup repeats limit
segments=("8    8     4 1000 100 5  60"
          "16   64K   4  500  50 5  60"
          "256K 1M    4  100  10 5  60"
          "4M   4M    4   20   3 5  40"
          "16M  64M   4    5   1 3 240"
          "256M 256M  4    2   1 3 240")
[ "${QUICK:-0}" = 1 ] && segments=("8 8 4 20 2 1 30" "16 64K 4 10 2 1 30" "256K 1M 4 5 1 1 30")

mpi_name() {
  case $1 in
    all_reduce) echo allreduce ;; all_gather) echo allgather ;;
    reduce_scatter) echo reducescatter ;; broadcast) echo broadcast ;; alltoall) echo alltoall ;;
  esac
}

# run OUTFILE [ENV=V ...] -- COMMAND...: appends the command and its output; a failure is recorded, not fatal.
run() {
  local out=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "## command: ${envs[*]} $*" >> "$out"
  local rc=0
  env "${envs[@]}" timeout "$limit" "$@" >> "$out" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    echo "## FAILED (exit $rc)" >> "$out"
    echo "  failed (exit $rc): ${envs[*]} $*" >&2
  fi
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# The host's own limits, measured once before the sweep: what bounds the latency rows (a TCP hop over loopback,
# a wake-up of a sleeping process) and the copy rows (one core's memcpy).
"$build/bench/host_limits" > "$raw/host-limits.txt" || die "host_limits failed"
start=$(date +%s)
for np in $ranks; do
  for c in $colls; do
    m=$(mpi_name "$c")
    echo "== $c, $np ranks" >&2
    for seg in "${segments[@]}"; do
      read -r b e f n w reps limit <<< "$seg"
      sweep=(-b "$b" -e "$e" -f "$f" -n "$n" -w "$w" -c 0)
      for ((rep = 0; rep < reps; ++rep)); do
        run "$raw/tutti-shm-$m-np$np.txt" -- "$build/bin/${c}_perf" -P "$np" "${sweep[@]}"
        run "$raw/tutti-socket-$m-np$np.txt" NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo -- \
          "$build/bin/${c}_perf" -P "$np" "${sweep[@]}"
        run "$raw/ompi-shm-$m-np$np.txt" -- "${mpirun_base[@]}" -np "$np" "${mpi_shm[@]}" \
          "$build/bench/mpi_coll_perf" -C "$m" "${sweep[@]}"
        run "$raw/ompi-tcp-$m-np$np.txt" -- "${mpirun_base[@]}" -np "$np" "${mpi_tcp[@]}" \
          "$build/bench/mpi_coll_perf" -C "$m" "${sweep[@]}"
      done
    done
  done
done
elapsed=$(( $(date +%s) - start ))

header=$(mktemp)
trap 'rm -f "$header"' EXIT
{
  echo "# Tutti vs Open MPI, side by side"
  echo
  echo "- command: \`benchmarks/side_by_side.sh ${1:-}\` (RANKS=\"$ranks\", sweep segments: ${segments[*]/%/;})"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), run time ${elapsed} s, load average before: $load_before," \
       "after: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the host skews small sizes most)"
  echo "- machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(free -g | awk '/^Mem:/{print $2}') GiB," \
       "Linux $(uname -r)"
  echo "- Tutti: commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- core plugins || echo ' (+ local changes)')," \
       "perf tools with -P N (N forked processes, one rank each), -c 0, default config"
  echo "- Tutti socket: NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo"
  echo "- Open MPI: $(ompi_info --parsable | sed -n 's/^ompi:version:full://p'), \`${mpirun_base[*]} -np N\`" \
       "with \`${mpi_shm[*]}\` (shm) or \`${mpi_tcp[*]}\` (tcp); benchmarks/mpi/mpi_coll_perf.c"
  echo "- time: slowest rank's average per call (us), out-of-place (Broadcast: in place, as MPI_Bcast's one buffer; out" \
       "of place Tutti's root also copies its input to its output); busbw with nccl-tests' factors (GB/s)"
  echo "- limits of this host, measured before the sweep (benchmarks/mpi/host_limits.c):" \
       "$(sed -n 's/^limit: \([^ ]*\) \(.*\)$/\1 \2/p' "$raw/host-limits.txt" | paste -sd ';' | sed 's/;/; /g')"
} > "$header"
python3 "$root/benchmarks/tabulate.py" "$raw" "$header" "$results/side_by_side.md"
echo "wrote $results/side_by_side.md (${elapsed} s)" >&2
# RECHECK=1: then every row below 1.0 again, 7 interleaved runs a side, tested (recheck_below.py; ~15 min more), and
# side_by_side.md written again with each such row's verdict beside it.
if [ "${RECHECK:-0}" = 1 ]; then
  python3 "$root/benchmarks/recheck_below.py" "$build" || die "recheck_below.py failed"
  python3 "$root/benchmarks/tabulate.py" "$raw" "$header" "$results/side_by_side.md" \
    "$results/side_by_side_recheck.md"
  echo "wrote $results/side_by_side.md again, with the recheck's verdicts" >&2
fi
