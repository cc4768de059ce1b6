#!/usr/bin/env bash
# Measures the constants of the default tuner (plugins/tuner-default) on this host: for each link (process =
# threads of one process, shm = processes over shared memory, net = processes over net-socket on loopback)
# and each protocol the engine runs (forced, ring AllReduce), the 8 B time at 2 and 4 ranks and the time of
# two large sizes at 2 ranks; then fits overhead, per-step latency and bandwidth (tuner_results.py fit) and
# prints them as TUTTI_TUNER_* variables and a YAML snippet. Writes benchmarks/results/tuner_calibration.md;
# raw outputs go to <build>/tuner-calibration/.
#
# usage: benchmarks/calibrate_tuner.sh BUILD_DIR     (all_reduce_perf and the plugins must be built)
#   REPEATS=N (default 5) repeats every run and keeps the fastest; LINKS="shm net" limits the links.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
perf=$build/bin/all_reduce_perf
[ -x "$perf" ] || { echo "calibrate_tuner.sh: $perf not found; build it: cmake --build $build --target" \
  "all_reduce_perf tutti_transport_shm tutti_transport_p2p tutti_net_socket tutti_tuner_default" >&2; exit 1; }
raw=$build/tuner-calibration
out=$root/benchmarks/results/tuner_calibration.md
repeats=${REPEATS:-5}
links=${LINKS:-"process shm net"}
protos="LL LL128 Simple"
socket_env=(NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo)
mkdir -p "$raw"
rm -f "$raw"/*.txt

# mode LINK NRANKS: the perf tool's rank placement for a link.
mode() { if [ "$1" = process ]; then echo "-g $2"; else echo "-P $2"; fi; }

# run FILE LIMIT LINK ARGS...: appends one run (command first); a failure (pair not supported, time limit)
# is recorded in the file and never stops the calibration.
run() {
  local file=$1 limit=$2 link=$3; shift 3
  local envs=(NCCL_ALGO=ring "NCCL_PROTO=$proto")
  [ "$link" = net ] && envs+=("${socket_env[@]}")
  echo "## command: ${envs[*]} $perf $*" >> "$file"
  local rc=0
  env "${envs[@]}" timeout "$limit" "$perf" "$@" -c 0 >> "$file" 2>&1 || rc=$?
  [ "$rc" = 0 ] || echo "## FAILED (exit $rc)" >> "$file"
  return "$rc"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
for link in $links; do
  for proto in $protos; do
    echo "== $link $proto" >&2
    # Latency: 8 B at 2 and 4 ranks. A failure at 2 ranks means the engine refuses the pair: skip the rest.
    if ! run "$raw/$link-$proto-lat-np2.txt" 30 "$link" $(mode "$link" 2) -b 8 -e 8 -n 100 -w 10; then
      echo "   $link $proto: not available (n/a)" >&2
      continue
    fi
    for ((r = 1; r < repeats; ++r)); do
      run "$raw/$link-$proto-lat-np2.txt" 30 "$link" $(mode "$link" 2) -b 8 -e 8 -n 100 -w 10 || true
    done
    for ((r = 0; r < repeats; ++r)); do
      run "$raw/$link-$proto-lat-np4.txt" 60 "$link" $(mode "$link" 4) -b 8 -e 8 -n 100 -w 10 || true
    done
    # Bandwidth: two sizes a factor 4 apart, large enough that latency is a small part; LL moves 8 B lines
    # for 4 B of data, so it gets smaller sizes to keep the run short.
    if [ "$proto" = LL ]; then sizes=(-b 1M -e 4M -f 4 -n 4 -w 1); else sizes=(-b 4M -e 16M -f 4 -n 6 -w 2); fi
    for ((r = 0; r < repeats; ++r)); do
      run "$raw/$link-$proto-bw.txt" 120 "$link" $(mode "$link" 2) "${sizes[@]}" || true
    done
  done
done
elapsed=$(( $(date +%s) - start ))

header=$(mktemp)
trap 'rm -f "$header"' EXIT
{
  echo "# Default tuner calibration"
  echo
  echo "- command: \`benchmarks/calibrate_tuner.sh $1\` (REPEATS=$repeats, LINKS=\"$links\")"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), run time ${elapsed} s, load average before: $load_before," \
       "after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1)," \
       "$(free -g | awk '/^Mem:/{print $2}') GiB, Linux $(uname -r)"
  echo "- Tutti: commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- core plugins ||
       echo ' (+ local changes)'), host backend, default config, \`all_reduce_perf -c 0\`"
  echo "- links: process = \`-g N\` (threads, p2p); shm = \`-P N\` (processes); net = \`-P N\` with" \
       "\`${socket_env[*]}\`"
  echo "- runs: 8 B with \`-n 100 -w 10\` (2 and 4 ranks); large sizes \`-b 4M -e 16M" \
       "-f 4 -n 6 -w 2\` (LL: \`-b 1M -e 4M -n 4 -w 1\`), each repeated $repeats times"
} > "$header"
python3 "$root/benchmarks/tuner_results.py" fit "$raw" "$header" "$out" "$root/plugins/tuner-default/options.cc"
echo "wrote $out (${elapsed} s)" >&2
