#!/usr/bin/env bash
# Two "nodes" on one machine: network namespaces joined by a veth pair, two ranks in each (4 ranks,
# TUTTI_HOSTNAME node0/node1). Runs tutti_mp_rank's collective and send/recv checks, then proves from the
# INIT logs that pairs on one node used shm and pairs across nodes used net. The /30 below exists only on
# the veth inside these namespaces; no traffic leaves the machine.
# Usage: netns_test.sh <path to tutti_mp_rank>. Exit 77 (ctest SKIP_RETURN_CODE) when it cannot run here.
set -u
bin=${1:?usage: netns_test.sh <tutti_mp_rank>}
skip() { echo "SKIP: $*"; exit 77; }

[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null 2>&1 || skip "the ip command (iproute2) is not installed"
[ -x "$bin" ] || { echo "FAIL: $bin is not an executable"; exit 1; }

tag="tt$$"                       # unique per run: concurrent runs do not collide
ns0="${tag}n0"; ns1="${tag}n1"
veth0="${tag}a"; veth1="${tag}b"  # interface names stay under 16 characters
addr0=10.201.77.1; addr1=10.201.77.2
work=$(mktemp -d "${TMPDIR:-/tmp}/tutti-netns.XXXXXX")
pids=()

cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  ip netns del "$ns0" 2>/dev/null
  ip netns del "$ns1" 2>/dev/null
  ip link del "$veth0" 2>/dev/null   # only left when moving it into a namespace failed
  rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$ns0" 2>"$work/err" || skip "ip netns add failed: $(cat "$work/err")"
ip netns add "$ns1" || skip "ip netns add failed"
ip link add "$veth0" type veth peer name "$veth1" 2>"$work/err" || skip "cannot create a veth pair: $(cat "$work/err")"
set -e
ip link set "$veth0" netns "$ns0"
ip link set "$veth1" netns "$ns1"
ip -n "$ns0" addr add "$addr0/30" dev "$veth0"
ip -n "$ns1" addr add "$addr1/30" dev "$veth1"
for ns in "$ns0" "$ns1"; do ip -n "$ns" link set lo up; done
ip -n "$ns0" link set "$veth0" up
ip -n "$ns1" link set "$veth1" up
set +e
# A fresh veth pair takes a moment to get carrier; wait (bounded) until both ends are up.
for _ in $(seq 1 50); do
  ip -n "$ns1" link show "$veth1" | grep -q 'LOWER_UP' && ip -n "$ns0" link show "$veth0" | grep -q 'LOWER_UP' && break
  sleep 0.1
done
if command -v ping >/dev/null 2>&1; then
  ip netns exec "$ns0" ping -c 1 -W 3 "$addr1" >/dev/null 2>&1 || { echo "FAIL: the veth link carries no traffic"; exit 1; }
fi

port=$((20000 + $$ % 20000))
start=$(date +%s.%N)
for r in 0 1 2 3; do
  node=$((r / 2))
  if [ $node = 0 ]; then ns=$ns0; ifc=$veth0; else ns=$ns1; ifc=$veth1; fi
  ip netns exec "$ns" env TUTTI_HOSTNAME="node$node" NCCL_SOCKET_IFNAME="$ifc" NCCL_COMM_ID="$addr0:$port" \
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE="$work/log.$r" \
    timeout -s KILL 25 "$bin" "$r" 4 >"$work/out.$r" 2>&1 &
  pids+=($!)
done

fail=0
for r in 0 1 2 3; do
  wait "${pids[$r]}"; rc=$?
  echo "----- rank $r (exit $rc) -----"; tail -n 20 "$work/out.$r"
  if [ $rc != 0 ]; then
    fail=1
    [ $rc = 137 ] && echo "rank $r was killed after 25 s (hang)"
    echo "--- log of rank $r ---"; tail -n 30 "$work/log.$r" 2>/dev/null
  fi
done
pids=()
echo "ranks finished in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"

# Every logged connection: same node must be shm, different nodes net; every rank must log both kinds
# (each has a same-node peer and cross-node peers in the checks above).
for r in 0 1 2 3; do
  lines=$(grep -ho 'rank [0-9]* channel [0-9]* [a-z0-9]* [<>-]* rank [0-9]* via [a-z]*' "$work/log.$r" 2>/dev/null)
  bad=$(echo "$lines" | awk 'NF { me=$2; peer=$(NF-2); t=$NF; want=(int(me/2)==int(peer/2)) ? "shm" : "net";
                               if (me != peer && t != want) print "  " $0 " (expected " want ")" }')
  nshm=$(echo "$lines" | grep -c 'via shm'); nnet=$(echo "$lines" | grep -c 'via net')
  echo "rank $r: $nshm shm and $nnet net connections"
  if [ -n "$bad" ]; then echo "FAIL: rank $r used the wrong transport:"; echo "$bad"; fail=1; fi
  if [ "$nshm" = 0 ] || [ "$nnet" = 0 ]; then echo "FAIL: rank $r logged no shm or no net connection"; fail=1; fi
done

left=$(ls /dev/shm 2>/dev/null | grep -E "^tutti-shm-($(grep -ho '^[^:]*:[0-9]*' "$work"/log.* | cut -d: -f2 | sort -u | paste -sd'|'))-")
if [ -n "$left" ]; then echo "FAIL: left in /dev/shm: $left"; fail=1; fi

[ $fail = 0 ] && echo "PASS" || echo "FAIL"
exit $fail
