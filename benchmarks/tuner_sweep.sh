#!/usr/bin/env bash
# Forced versus automatic choice of the tuner, AllReduce 8 B .. 256 MiB (x4), 2 and 4 ranks (one process
# each), over shm and over net-socket on loopback: all_reduce_perf runs once per forced pair (NCCL_ALGO x
# NCCL_PROTO in {ring, tree} x {Simple, LL, LL128}) and once automatic; a short automatic run with
# NCCL_DEBUG_SUBSYS=TUNING records what the tuner picked per size. A pair the engine does not run fails at
# init or on its first call and shows as n/a; the sweep goes on. Writes benchmarks/results/tuner_sweep.md
# (tuner_results.py sweep) and prints the summary line; raw outputs go to <build>/tuner-sweep/.
#
# usage: benchmarks/tuner_sweep.sh BUILD_DIR       (all_reduce_perf and the plugins must be built)
#   RANKS="2 4" PATHS="shm net" narrow the sweep; QUICK=1 stops at 1 MiB (a smoke run, ~1 minute);
#   CONFIRM=N (default 5): head-to-head runs per row of auto against the row's best forced pair;
#   EXTRA=N (default 30): more of them for the rows still above 1.10 after that;
#   BIND=0: leave the ranks unbound (default: all_reduce_perf --bind, rank r on CPU r mod cores, the proxy
#   thread then off its rank's CPU; unbound, each launch's thread placement makes small sizes bimodal).
bind=()
[ "${BIND:-1}" = 0 ] || bind=(--bind)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
perf=$build/bin/all_reduce_perf
[ -x "$perf" ] || { echo "tuner_sweep.sh: $perf not found; build it: cmake --build $build --target" \
  "all_reduce_perf tutti_transport_shm tutti_transport_p2p tutti_net_socket tutti_tuner_default" >&2; exit 1; }
raw=$build/tuner-sweep
out=$root/benchmarks/results/tuner_sweep.md
ranks=${RANKS:-"2 4"}
paths=${PATHS:-"shm net"}
algos="ring tree"
protos="Simple LL LL128"
socket_env=(NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo)
mkdir -p "$raw"
rm -f "$raw"/*.txt "$raw"/*.log

# Size segments: fewer iterations as sizes grow, but never only a handful (the first calls after a size
# change include waking ranks that went to sleep: 5 calls of 256 KiB averaged 2.5x the steady state);
# segments below 16 MiB are swept three times and keep each size's fastest sweep (a rank losing its core
# for a time slice spoils one sweep).
# `limit` bounds one run in seconds: LL on a socket at 256 MiB would take minutes, so such a run is cut
# and its missing rows show as "-" (the rows printed before the cut count). The largest segment measures
# only the pairs within 2x of the fastest at the size before it (LL would spend minutes there, and lose).
#        min   max   factor iters warmup repeats limit
segments=("8    8     4 1000 100 3 20"
          "16   64K   4  200  20 3 30"
          "256K 4M    4   20   4 3 60"
          "16M  256M  4    3   1 1 60")
[ "${QUICK:-0}" = 1 ] && segments=("8 8 4 50 5 1 20" "16 64K 4 10 2 1 20" "256K 1M 4 4 1 1 30")

# run FILE ENV... -- ARGS...: appends one run (command first). A failure is recorded and the sweep goes on.
run() {
  local file=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "## command: ${envs[*]} $perf $* ${bind[*]}" >> "$file"
  local rc=0
  env "${envs[@]}" timeout "$limit" "$perf" "$@" "${bind[@]}" -c 0 >> "$file" 2>&1 || rc=$?
  [ "$rc" = 0 ] || echo "## FAILED (exit $rc)" >> "$file"
  return "$rc"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
for path in $paths; do
  base_env=(TUTTI_SWEEP=1)  # env needs at least one assignment
  [ "$path" = net ] && base_env=("${socket_env[@]}")
  for np in $ranks; do
    echo "== $path, $np ranks" >&2
    # Which pairs run at all: one 8 B call each. The rest of the sweep skips refused pairs (n/a).
    pairs=()
    limit=20
    for a in $algos; do
      for p in $protos; do
        if run "$raw/$path-np$np-$a-$p-probe.log" "${base_env[@]}" NCCL_ALGO=$a NCCL_PROTO=$p -- \
             -P "$np" -b 8 -e 8 -n 1 -w 0; then
          pairs+=("$a/$p")
        else
          echo "   $a/$p: n/a" >&2
        fi
      done
    done
    # The automatic pick per size, from the TUNING log of a short run over every size.
    last=${segments[-1]}
    run "$raw/$path-np$np-auto-log.txt" "${base_env[@]}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING -- \
      -P "$np" -b 8 -e "$(echo "$last" | awk '{print $2}')" -f 2 -n 1 -w 0 || true
    for seg in "${segments[@]}"; do
      read -r b e f n w reps limit <<< "$seg"
      if [ "$seg" = "${segments[-1]}" ] && [ "${#segments[@]}" -gt 1 ]; then
        prev=$(echo "${segments[-2]}" | awk '{print $2}')
        read -r -a pairs <<< "$(python3 "$root/benchmarks/tuner_results.py" keep "$raw" "$path" "$np" \
          "$(numfmt --from=iec "$prev")" 2)"
        echo "   from $b: ${pairs[*]:-none}" >&2
      fi
      sweep=(-P "$np" -b "$b" -e "$e" -f "$f" -n "$n" -w "$w")
      for ((rep = 0; rep < reps; ++rep)); do
        # Interleaved, so load that comes and goes hits every pair alike.
        run "$raw/$path-np$np-auto.txt" "${base_env[@]}" -- "${sweep[@]}" || true
        for ap in "${pairs[@]}"; do
          run "$raw/$path-np$np-${ap%/*}-${ap#*/}.txt" "${base_env[@]}" NCCL_ALGO=${ap%/*} \
            NCCL_PROTO=${ap#*/} -- "${sweep[@]}" || true
        done
      done
    done
  done
done

# Confirmation: the sweep above picks each row's best forced pair as the fastest of six pairs, each the
# fastest of its repeats, so "best" has had six times the chances of a lucky run that auto had (on 2 cores
# one run of the same pair can be 1.5x another). Every row is therefore measured again head to head: auto
# and that row's best pair alternately, CONFIRM (5) times each, into files of their own; the table's
# auto/best compares the fastest of these fresh runs, so both sides had the same number of chances.
# h2h ROUNDS ROW...: ROUNDS alternating head-to-head runs of each row ("path np size algo/proto iters warmup
# limit").
h2h() {
  local rounds=$1 rep row path np size ap n w
  shift
  for ((rep = 0; rep < rounds; ++rep)); do
    for row in "$@"; do
      read -r path np size ap n w limit <<< "$row"
      base_env=(TUTTI_SWEEP=1)
      [ "$path" = net ] && base_env=("${socket_env[@]}")
      sweep=(-P "$np" -b "$size" -e "$size" -n "$n" -w "$w")
      # Alternate which side runs first, so a slow spell does not always fall on the same one.
      if (( rep % 2 == 0 )); then
        run "$raw/h2h-$path-np$np-auto.txt" "${base_env[@]}" -- "${sweep[@]}" || true
      fi
      run "$raw/h2h-$path-np$np-${ap%/*}-${ap#*/}.txt" "${base_env[@]}" NCCL_ALGO=${ap%/*} \
        NCCL_PROTO=${ap#*/} -- "${sweep[@]}" || true
      if (( rep % 2 == 1 )); then
        run "$raw/h2h-$path-np$np-auto.txt" "${base_env[@]}" -- "${sweep[@]}" || true
      fi
    done
  done
}
mapfile -t rows < <(python3 "$root/benchmarks/tuner_results.py" best "$raw")
echo "== head to head: auto against the best forced pair, ${#rows[@]} rows x ${CONFIRM:-5}" >&2
h2h "${CONFIRM:-5}" "${rows[@]}"
# Rows still above 1.10 get EXTRA (30) more rounds, both sides alike, all of them run (no stopping once a
# row looks fine): on 2 cores one run of 4 ranks over sockets can take 1.35x another of the same pair, and
# its time depends on where the scheduler placed the 8 threads for that run, so the fastest of 5 is not a
# stable figure. Even 15 were not: at 8 B one launch in about 25 lands in a 67-us placement against the usual
# 85-130 us, and which side drew it decided the row.
mapfile -t rows < <(python3 "$root/benchmarks/tuner_results.py" doubtful "$raw")
if [ "${#rows[@]}" -gt 0 ] && [ "${EXTRA:-30}" -gt 0 ]; then
  echo "== head to head again: ${#rows[@]} rows above 1.10 x ${EXTRA:-30}" >&2
  h2h "${EXTRA:-30}" "${rows[@]}"
fi
elapsed=$(( $(date +%s) - start ))

header=$(mktemp)
trap 'rm -f "$header"' EXIT
{
  echo "# Tuner: forced pairs against the automatic choice"
  echo
  echo "- command: \`benchmarks/tuner_sweep.sh $1\` (RANKS=\"$ranks\", PATHS=\"$paths\", CONFIRM=${CONFIRM:-5}, EXTRA=${EXTRA:-30}, BIND=${BIND:-1}, sweep segments:" \
       "${segments[*]/%/;} as min max factor iters warmup repeats limit)"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), run time ${elapsed} s, load average before: $load_before," \
       "after: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the host skews small sizes most)"
  echo "- machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1)," \
       "$(free -g | awk '/^Mem:/{print $2}') GiB, Linux $(uname -r)"
  echo "- Tutti: commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- core plugins ||
       echo ' (+ local changes)'), host backend, default config, \`all_reduce_perf -P N -c 0\`; forced:" \
       "\`NCCL_ALGO=<algo> NCCL_PROTO=<proto>\`; net: \`${socket_env[*]}\`"
} > "$header"
python3 "$root/benchmarks/tuner_results.py" sweep "$raw" "$header" "$out"
echo "wrote $out (${elapsed} s)" >&2
