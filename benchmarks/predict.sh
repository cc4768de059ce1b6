#!/usr/bin/env bash
# Predicted vs measured: AllReduce from 8 B to 256 MiB with 2 and 4 ranks (one process each) over shm and
# over net-socket on loopback. The prediction is the library's own (ncclGroupSimulateEnd: the tuner chain's
# cost of the algorithm/protocol it picks, printed by the perf tools' --predict column); the measurement is
# the same tool's out-of-place time. Writes benchmarks/results/predict.md and the raw outputs under
# benchmarks/results/raw/predict-*.txt.
#
# usage: benchmarks/predict.sh [BUILD_DIR]      (default: ./build; all_reduce_perf must be built)
#   RANKS="2 4" overrides the rank counts; QUICK=1 stops at 1 MiB (a smoke run); OUT=FILE writes elsewhere.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
results=$root/benchmarks/results
raw=$results/raw
out=${OUT:-$results/predict.md}
ranks=${RANKS:-"2 4"}
perf=$build/bin/all_reduce_perf

die() { echo "predict.sh: $*" >&2; exit 1; }
[ -x "$perf" ] || die "$perf not found; build it first: cmake --build $build --target all_reduce_perf"
"$perf" -h 2>&1 | grep -q -- --predict || die "$perf has no --predict option (rebuild it)"
command -v python3 > /dev/null || die "python3 is needed for the table"

# Same segments as side_by_side.sh: iterations shrink as sizes grow; each segment is swept `repeats` times
# and the fastest sweep of each size is kept (one rank losing its core for a time slice spoils a row).
#        min   max   factor iters warmup repeats limit(s)
segments=("8    8     4 100 10 5  30"
          "16   64K   4  50  5 5  30"
          "256K 4M    4  20  3 3  60"
          "16M  256M  4   3  1 2 300")
[ "${QUICK:-0}" = 1 ] && segments=("8 8 4 20 2 1 30" "16 64K 4 10 2 1 30" "256K 1M 4 5 1 1 30")

mkdir -p "$raw"
rm -f "$raw"/predict-*.txt

# run OUTFILE [ENV=V ...] -- COMMAND...: appends the command and its output; a failure is recorded, not fatal.
run() {
  local file=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "## command: ${envs[*]} $*" >> "$file"
  local rc=0
  env "${envs[@]}" timeout "$limit" "$@" >> "$file" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    echo "## FAILED (exit $rc)" >> "$file"
    echo "  failed (exit $rc): ${envs[*]} $*" >&2
  fi
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
for np in $ranks; do
  echo "== AllReduce, $np ranks" >&2
  for seg in "${segments[@]}"; do
    read -r b e f n w reps limit <<< "$seg"
    sweep=(-b "$b" -e "$e" -f "$f" -n "$n" -w "$w" -c 0 --predict)
    for ((rep = 0; rep < reps; ++rep)); do
      run "$raw/predict-shm-np$np.txt" -- "$perf" -P "$np" "${sweep[@]}"
      run "$raw/predict-socket-np$np.txt" NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo -- \
        "$perf" -P "$np" "${sweep[@]}"
    done
  done
done
elapsed=$(( $(date +%s) - start ))

header=$(mktemp)
trap 'rm -f "$header"' EXIT
{
  echo "# Predicted vs measured AllReduce time"
  echo
  echo "- command: \`benchmarks/predict.sh ${1:-}\` (RANKS=\"$ranks\", sweep segments: ${segments[*]/%/;})"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), run time ${elapsed} s, load average before: $load_before," \
       "after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1), Linux $(uname -r)"
  echo "- Tutti: commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- core plugins || echo ' (+ local changes)')," \
       "\`all_reduce_perf -P N -c 0 --predict\`, float sum, default config (tuner chain: default)"
  echo "- socket: NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo"
  echo "- predicted: ncclGroupSimulateEnd's estimatedTime for the same call (us); measured: slowest rank's" \
       "average per call, out-of-place, fastest of the repeats (us); error = (predicted - measured) / measured"
} > "$header"
python3 "$root/benchmarks/predict_table.py" "$header" "$out" \
  "shm, 2 ranks=$raw/predict-shm-np2.txt" "socket, 2 ranks=$raw/predict-socket-np2.txt" \
  "shm, 4 ranks=$raw/predict-shm-np4.txt" "socket, 4 ranks=$raw/predict-socket-np4.txt"
echo "wrote $out (${elapsed} s)" >&2
