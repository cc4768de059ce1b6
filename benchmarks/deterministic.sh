#!/usr/bin/env bash
# Deterministic reductions against the default path, in one run: AllReduce (and ReduceScatter) of float from
# 8 B to MAX bytes, 2/4/8 ranks (one process each over shm and over net-socket; threads of one process). Each launch
# of a perf tool measures both settings on the same ranks (--det-pairs: timed loops with the switch off and on in
# turns, tuttiCommSetDeterministic), so that the two share the ranks' placement on the cores, the buffers and the
# host's moment. Writes benchmarks/results/deterministic.md and the raw outputs under benchmarks/results/raw/det-*.txt.
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

# Sizes in segments, iterations shrinking as sizes grow. Each segment is launched several times per transport, and
# each launch times every size in PAIRS rounds of two loops, one per setting, in turns (off-on, on-off); the table
# keeps each setting's fastest loop. On 2 cores one rank losing its core for a time slice spoils a loop, and the
# same call's time varies up to twofold from launch to launch (4 processes over sockets, AllReduce of 16 MiB, six
# runs of the default: 22.7 to 49.0 ms), with where the scheduler puts the ranks: a launch's placement serves both
# settings, where separate launches compared two placements. Small calls average 500 iterations a loop, as
# benchmarks/side_by_side.sh: over 50, two paths sending the same messages (8 processes over shm, AllReduce of 8 B,
# deterministic or not up the same tree) differed by a third from run to run, over 1000 by 7%. Six launches up to
# 4 MiB and three at 16 and 64 MiB: with three and two, each run of the table had 4-5 sizes above the target, never
# the same ones twice, each of them from one launch (one setting's fastest loop far from its others); 256 MiB, the
# longest calls, keeps two launches of two rounds. Loops of 6 calls at 16 and 64 MiB: with 3, one loop of the
# default on 2 threads at 16 MiB took 978 us where its other eight took 1226-1362 (the deterministic loops
# 1145-1205), and made that row's ratio 1.17 (paired 0.90).
#        min   max   factor iters warmup launches pairs limit
segments=("8    64K   8 500 50 6 2 120"
          "256K 4M    4  50  5 6 2 180"
          "16M  64M   4   6  1 3 3 400"
          "256M $max  4   3  1 2 2 400")
bytes() { numfmt --from=iec "$1"; }

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
      read -r b e f n w launches pairs limit <<< "$seg"
      # MAX cuts the sweep: segments past it are skipped, the one it falls in ends at it.
      [ "$(bytes "$b")" -le "$(bytes "$max")" ] || continue
      [ "$(bytes "$e")" -le "$(bytes "$max")" ] || e=$max
      sweep=(-b "$b" -e "$e" -f "$f" -n "$n" -w "$w" -c 0 --det-pairs "$pairs")
      for ((rep = 0; rep < launches; ++rep)); do
        run "$raw/det-shm-$c-np$np.txt" -- "$build/bin/${c}_perf" -P "$np" "${sweep[@]}"
        run "$raw/det-socket-$c-np$np.txt" NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo -- \
          "$build/bin/${c}_perf" -P "$np" "${sweep[@]}"
        run "$raw/det-threads-$c-np$np.txt" -- "$build/bin/${c}_perf" -g "$np" "${sweep[@]}"
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
    """size -> ([fastest loop off, fastest loop on] in us over every launch in the file, [each launch's median
    ratio of its rounds])."""
    t = {}
    if not os.path.exists(path):
        return t
    for line in open(path):
        f = line.split()
        if len(f) >= 15 and f[0].isdigit() and f[1].isdigit():
            try:
                us = (float(f[5]), float(f[9]))
                median = float(f[14])
            except ValueError:
                continue
            size = int(f[0])
            if int(f[1]) == 0:
                empty.add(size)
            old = t.get(size, ([us[0], us[1]], []))
            t[size] = ([min(old[0][0], us[0]), min(old[0][1], us[1])], old[1] + [median])
    return t

def human(b):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div}{unit}"
    return str(b)

lines = ["# Deterministic reductions vs the default path", "",
         f"- command: `benchmarks/deterministic.sh` (RANKS=\"{ranks}\", COLLS=\"{colls}\", MAX={maxb}); run time {elapsed} s",
         f"- load average before: {load0}, after: {load1}; commit {commit}",
         f"- machine: {os.cpu_count()} cores; perf tools with -P N (N processes; threads: -g N, N threads of one process), float sum, -c 0",
         "- each launch times both settings on the same ranks (`--det-pairs`: loops with the switch off and on in turns);",
         "  a setting's time is its fastest loop over the launches",
         "- socket: NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo",
         "- ratio = deterministic time / default time (targets: at most 1.15 on shm and threads, 1.3 on socket); paired =",
         "  the median over the launches of each launch's median ratio of its rounds (for reading the noise; not the",
         "  ratio judged); an empty call (no element per rank: a ReduceScatter of fewer bytes than ranks x 4) has nothing",
         "  to compare", ""]
summary = []
for c in colls.split():
    for tr in ("shm", "socket", "threads"):
        for np_ in ranks.split():
            empty.clear()
            pairs = best(f"{raw}/det-{tr}-{c}-np{np_}.txt")
            sizes = sorted(pairs)
            if not sizes:
                continue
            lines += [f"## {c}, {tr}, {np_} ranks", "", "| size | default us | deterministic us | ratio | paired |",
                      "|---:|---:|---:|---:|---:|"]
            worst, within = 0, 0
            target = 1.3 if tr == "socket" else 1.15
            for s in [s for s in sizes if s in empty]:
                (d0, d1), _ = pairs[s]
                lines.append(f"| {human(s)} | {d0:.2f} | {d1:.2f} | empty call | |")
            sizes = [s for s in sizes if s not in empty]
            for s in sizes:
                (d0, d1), medians = pairs[s]
                r = d1 / d0 if d0 > 0 else float("inf")
                worst = max(worst, r)
                within += r <= target
                m = sorted(medians)
                paired = m[len(m) // 2] if len(m) % 2 else (m[len(m) // 2 - 1] + m[len(m) // 2]) / 2
                lines.append(f"| {human(s)} | {d0:.1f} | {d1:.1f} | {r:.2f} | {paired:.2f} |")
            lines.append("")
            summary.append(f"| {c} | {tr} | {np_} | {worst:.2f} | {within} of {len(sizes)} |")
lines[13:13] = ["## Worst ratio per row", "", "| collective | transport | ranks | worst ratio | sizes within the target |",
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
