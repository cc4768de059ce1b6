#!/usr/bin/env bash
# The two regimes of a stream of small messages over loopback TCP, measured: 2 ranks broadcasting a few bytes many
# times, Tutti over net-socket and Open MPI over its tcp BTL, each run alone in a network namespace of its own so
# that the kernel's TCP counters (/proc/net/snmp, /proc/net/netstat) count its segments only. A run either sends
# about one data segment per call, with an ACK for every second one (per message: the root's system call carries
# its segment through the whole loopback stack), or, once a backlog forms at the root's socket, appends call after
# call to segments still queued there, many calls a segment (per message: a copy into the socket). Which one a
# run falls into, and stays in, is the kernel's matter: the table shows each run's time beside its segments and
# ACKs per call. Writes benchmarks/results/socket_regimes.md and the raw outputs under
# benchmarks/results/raw/socket-regimes.txt.
#
# usage: benchmarks/socket_regimes.sh [BUILD_DIR]    (default: ./build; broadcast_perf must be built; root: unshare)
#   SIZES="8 64" RUNS=6 ITERS=50000 override the sweep.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
results=$root/benchmarks/results
raw=$results/raw
sizes=${SIZES:-"8 64"}
runs=${RUNS:-6}
iters=${ITERS:-50000}
warmup=50

die() { echo "socket_regimes.sh: $*" >&2; exit 1; }
[ -x "$build/bin/broadcast_perf" ] || die "$build/bin/broadcast_perf not found"
command -v unshare > /dev/null || die "unshare (util-linux) not found"
if ! command -v mpicc > /dev/null || ! command -v mpirun > /dev/null; then
  die "Open MPI not found (benchmarks/side_by_side.sh installs it)"
fi
mkdir -p "$build/bench" "$raw"
mpicc -O2 -Wall -o "$build/bench/mpi_coll_perf" "$root/benchmarks/mpi/mpi_coll_perf.c"
out=$raw/socket-regimes.txt
: > "$out"

# counters: TCP OutSegs, and the ACKs without data the senders took in (TcpExt TCPPureAcks + TCPHPAcks), of the
# current network namespace.
counters() {
  awk '/^Tcp: [0-9]/ {for (i = 1; i <= NF; ++i) if (h[i] == "OutSegs") segs = $i}
       /^Tcp: [A-Z]/ {for (i = 1; i <= NF; ++i) h[i] = $i}
       /^TcpExt: [A-Z]/ {for (i = 1; i <= NF; ++i) x[i] = $i}
       /^TcpExt: [0-9]/ {for (i = 1; i <= NF; ++i) if (x[i] == "TCPPureAcks" || x[i] == "TCPHPAcks") acks += $i}
       END {print segs, acks}' /proc/net/snmp /proc/net/netstat
}
export -f counters

# one LIB SIZE: prints "LIB SIZE us segments acks calls" from a run in a new network namespace.
one() {
  local lib=$1 size=$2
  # shellcheck disable=SC2016  # the script runs in the namespace's shell, its arguments after it
  unshare -n bash -c '
    set -e
    ip link set lo up 2>/dev/null || ifconfig lo up
    read -r s0 a0 <<< "$(counters)"
    if [ "$0" = tutti ]; then
      # Out of place, then in place (as MPI_Bcast, one buffer): the time of the in-place loop.
      t=$(NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo "$2/bin/broadcast_perf" -P 2 -b "$1" -e "$1" \
            -n "$3" -w "$4" -c 0 | tee -a "$5" | awk "!/^#/ && NF > 9 {print \$10}")
      calls=$((2 * ($3 + $4)))
    else
      t=$(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 -np 2 --mca btl self,tcp \
            --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo "$2/bench/mpi_coll_perf" -C broadcast \
            -b "$1" -e "$1" -n "$3" -w "$4" | tee -a "$5" | awk "!/^#/ && NF > 5 {print \$6}")
      calls=$(($3 + $4))
    fi
    read -r s1 a1 <<< "$(counters)"
    echo "$0 $1 $t $((s1 - s0)) $((a1 - a0)) $calls"
  ' "$lib" "$size" "$build" "$iters" "$warmup" "$out"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
rows=()
for size in $sizes; do
  for ((r = 0; r < runs; ++r)); do
    for lib in tutti ompi; do
      echo "## $lib, $size B, run $((r + 1))" >> "$out"
      line=$(one "$lib" "$size") || die "$lib, $size B: the run failed (see $out)"
      echo "## counted: $line" >> "$out"
      rows+=("$line")
    done
  done
done
elapsed=$(( $(date +%s) - start ))

{
  echo "# Small messages over loopback TCP: the two regimes"
  echo
  echo "- command: \`benchmarks/socket_regimes.sh ${1:-}\` (SIZES=\"$sizes\", RUNS=$runs, ITERS=$iters), run time ${elapsed} s"
  echo "- load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg); commit" \
       "$(git -C "$root" rev-parse --short HEAD); $(nproc) cores, Linux $(uname -r)"
  echo "- 2 ranks, Broadcast from rank 0, $iters calls after $warmup of warm-up; Tutti: broadcast_perf -P 2 over net-socket" \
       "(NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo; its in-place time; it runs out of place first, so" \
       "its counters cover twice the calls); Open MPI: mpi_coll_perf over the tcp BTL; Tutti and Open MPI in turns," \
       "each run in a network namespace of its own (unshare -n)"
  echo "- segments: TCP segments sent (Tcp OutSegs) per call; ACKs: segments without data the sender took in" \
       "(TcpExt TCPPureAcks + TCPHPAcks) per call; both include the connections' setup and the bootstrap"
  echo
  echo "| library | size | run | us per call | segments per call | ACKs per call |"
  echo "|---|---:|---:|---:|---:|---:|"
  declare -A runNo
  for line in "${rows[@]}"; do
    read -r lib size t segs acks calls <<< "$line"
    key="$lib-$size"
    runNo[$key]=$(( ${runNo[$key]:-0} + 1 ))
    name=$([ "$lib" = tutti ] && echo Tutti || echo "Open MPI")
    awk -v n="$name" -v s="$size" -v r="${runNo[$key]}" -v t="$t" -v g="$segs" -v a="$acks" -v c="$calls" \
      'BEGIN {printf "| %s | %s B | %d | %s | %.2f | %.2f |\n", n, s, r, t, g / c, a / c}'
  done
} > "$results/socket_regimes.md"
echo "wrote $results/socket_regimes.md (${elapsed} s)" >&2
