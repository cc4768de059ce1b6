#!/usr/bin/env bash
# Deterministic reductions against the default path, in one run: AllReduce (and ReduceScatter) of float from
# 8 B to MAX bytes, 2/4/8 ranks (one process each over shm and over net-socket; threads of one process), each size
# measured with the switch off and on back to back (TUTTI_DETERMINISTIC=0/1). Writes benchmarks/results/deterministic.md and
# the raw outputs under benchmarks/results/raw/det-*.txt.
#
# usage: benchmarks/deterministic.sh [BUILD_DIR]     (default: ./build; the perf tools must be built)
#   RANKS="2 4 8" COLLS="all_reduce reduce_scatter" MAX=256M override the sweep.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
results=$root/benchmarks/results
raw=$results/raw
ranks=${RANKS:-"2 4 8"}
colls=${COLLS:-"all_reduce reduce_scatter"}
max=${MAX:-256M}

for c in $colls; do
  [ -x "$build/bin/${c}_perf" ] || { echo "deterministic.sh: $build/bin/${c}_perf not found" >&2; exit 1; }
done
mkdir -p "$raw"
rm -f "$raw"/det-*.txt

# Sizes in segments, iterations shrinking as sizes grow; each segment runs five times (the largest three), the
# switch off and on alternating, and the table keeps each size's fastest run: on 2 cores one rank losing its core
# for a time slice spoils a run, and the same call's time varies up to twofold from run to run (4 processes over
# sockets, AllReduce of 16 MiB, six runs of the default: 22.7 to 49.0 ms). Small calls average 500 iterations a run,
# as benchmarks/side_by_side.sh: over 50, two paths sending the same messages (8 processes over shm, AllReduce of 8 B,
# deterministic or not up the same tree) differed by a third from run to run, over 1000 by 7%.
# From 16 MiB a run is 3 calls, so one disturbed call spoils it: with two runs a size, 8 threads' ReduceScatter of
# 64 MiB read 1.55 against the default where paired runs and CPU profiles put them level (1.14, and 3.2 against
# 3.2-3.8 s of samples); three runs a size since.
#        min   max   factor iters warmup repeats limit
segments=("8    64K   8 500 50 5  90"
          "256K 4M    4  50  5 5 120"
          "16M  $max  4   3  1 3 300")

run() {
  local out=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "## command: ${envs[*]} $*" >> "$out"
  local rc=0
  env "${envs[@]}" timeout "$limit" "$@" >> "$out" 2>&1 || rc=$?
  [ "$rc" = 0 ] || { echo "## FAILED (exit $rc)" >> "$out"; echo "  failed (exit $rc): ${envs[*]} $*" >&2; }
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
for np in $ranks; do
  for c in $colls; do
    echo "== $c, $np ranks" >&2
    for seg in "${segments[@]}"; do
      read -r b e f n w reps limit <<< "$seg"
      sweep=(-b "$b" -e "$e" -f "$f" -n "$n" -w "$w" -c 0)
      for ((rep = 0; rep < reps; ++rep)); do
        for det in 0 1; do
          run "$raw/det-$det-shm-$c-np$np.txt" TUTTI_DETERMINISTIC=$det -- "$build/bin/${c}_perf" -P "$np" "${sweep[@]}"
          run "$raw/det-$det-socket-$c-np$np.txt" TUTTI_DETERMINISTIC=$det NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 \
            NCCL_SOCKET_IFNAME=lo -- "$build/bin/${c}_perf" -P "$np" "${sweep[@]}"
          run "$raw/det-$det-threads-$c-np$np.txt" TUTTI_DETERMINISTIC=$det -- "$build/bin/${c}_perf" -g "$np" "${sweep[@]}"
        done
      done
    done
  done
done
elapsed=$(( $(date +%s) - start ))

# The numerical error against the exactly rounded sum, switch off and on (tests/integration/determinism).
errors=$raw/det-error.txt
if [ -x "$build/bin/test_determinism" ]; then
  "$build/bin/test_determinism" --gtest_filter='DetError.*' > "$errors" 2>&1 || echo "DetError failed" >&2
else
  echo "test_determinism not built" > "$errors"
fi

# The fold alone, default order against the fixed order, in the same run: where a call's time is mostly the fold
# (threads reading each other's inputs in place), the call's ratio tends to this one.
fold=$raw/det-fold.txt
if [ -x "$build/bin/fold_perf" ]; then
  "$build/bin/fold_perf" -b 16K -e 1M -f 4 -r "2 4 8" -d float > "$fold" 2>&1 || echo "fold_perf failed" >&2
else
  echo "fold_perf not built" > "$fold"
fi

python3 - "$raw" "$results/deterministic.md" "$elapsed" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "$(git -C "$root" rev-parse --short HEAD)" "$ranks" "$colls" "$max" <<'EOF'
import glob, os, re, sys
raw, out, elapsed, load0, load1, commit, ranks, colls, maxb = sys.argv[1:]

empty = set()  # sizes whose calls have no element per rank (a ReduceScatter of 8 B on 4 ranks): nothing to time

def best(path):
    """size -> fastest out-of-place time (us) over every run in the file."""
    t = {}
    if not os.path.exists(path):
        return t
    for line in open(path):
        f = line.split()
        if len(f) >= 6 and f[0].isdigit() and f[1].isdigit():
            try:
                us = float(f[5])
            except ValueError:
                continue
            size = int(f[0])
            if int(f[1]) == 0:
                empty.add(size)
            t[size] = min(us, t.get(size, us))
    return t

def human(b):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div}{unit}"
    return str(b)

lines = ["# Deterministic reductions vs the default path", "",
         f"- command: `benchmarks/deterministic.sh` (RANKS=\"{ranks}\", COLLS=\"{colls}\", MAX={maxb}); run time {elapsed} s",
         f"- load average before: {load0}, after: {load1}; commit {commit}",
         f"- machine: {os.cpu_count()} cores; perf tools with -P N (N processes; threads: -g N, N threads of one process), float sum, -c 0; each size the fastest of its runs",
         "- socket: NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo",
         "- ratio = deterministic time / default time (targets: at most 1.15 on shm and threads, 1.3 on socket); an",
         "  empty call (no element per rank: a ReduceScatter of fewer bytes than ranks x 4) has nothing to compare", ""]
summary = []
for c in colls.split():
    for tr in ("shm", "socket", "threads"):
        for np_ in ranks.split():
            empty.clear()
            d0 = best(f"{raw}/det-0-{tr}-{c}-np{np_}.txt")
            d1 = best(f"{raw}/det-1-{tr}-{c}-np{np_}.txt")
            sizes = sorted(set(d0) & set(d1))
            if not sizes:
                continue
            lines += [f"## {c}, {tr}, {np_} ranks", "", "| size | default us | deterministic us | ratio |", "|---:|---:|---:|---:|"]
            worst, within = 0, 0
            target = 1.3 if tr == "socket" else 1.15
            for s in [s for s in sizes if s in empty]:
                lines.append(f"| {human(s)} | {d0[s]:.2f} | {d1[s]:.2f} | empty call |")
            sizes = [s for s in sizes if s not in empty]
            for s in sizes:
                r = d1[s] / d0[s] if d0[s] > 0 else float("inf")
                worst = max(worst, r)
                within += r <= target
                lines.append(f"| {human(s)} | {d0[s]:.1f} | {d1[s]:.1f} | {r:.2f} |")
            lines.append("")
            summary.append(f"| {c} | {tr} | {np_} | {worst:.2f} | {within} of {len(sizes)} |")
lines[8:8] = ["## Worst ratio per row", "", "| collective | transport | ranks | worst ratio | sizes within the target |",
              "|---|---|---:|---:|---:|"] + summary + [""]
err = [l.rstrip() for l in open(f"{raw}/det-error.txt") if l.startswith("error n=")]
lines += ["## Numerical error against the exactly rounded sum", "",
          "`test_determinism --gtest_filter=DetError.*`: 2^18 float sums of wide-range data (the inputs of the",
          "determinism tests), the element-wise sum of n ranks computed with compensation in double and rounded once;",
          "mean absolute error in units of the last place of the type.", "", "```"] + err + ["```", ""]
fold = [l.rstrip() for l in open(f"{raw}/det-fold.txt")]
lines += ["## The fold alone", "",
          "`fold_perf -b 16K -e 1M -f 4 -r \"2 4 8\" -d float`, in this run: n rows of one output in the default path's",
          "order (fp32 sums) and in the fixed order (each fp32 row widened to fp64, summed there and rounded once: the",
          "exactly rounded sums above, at twice the instructions an element). Where a call's time is mostly its fold (ranks",
          "as threads reading each other's inputs in place, rows in cache), its ratio tends to the fold's.", "", "```"] + fold + ["```", ""]
open(out, "w").write("\n".join(lines) + "\n")
print(f"wrote {out}")
EOF
