#!/usr/bin/env bash
# "Nodes" on one machine: one network namespace per node, each with its own ranks (TUTTI_HOSTNAME node<i>).
# Two nodes are joined by a veth pair; three or more by a bridge in a switch namespace of their own. Every
# rank runs tutti_mp_rank, i.e. the multi-process collective matrix (mp_cases.h) on one communicator; then
# the INIT logs must show shm for every connection inside a node and net for every connection across
# nodes, and (with all suites) every rank must have connected to every other rank. The 10.201.77.0/24
# addresses exist only inside these namespaces; no traffic leaves the machine.
#
# Usage: netns_test.sh <tutti_mp_rank> <ranks per node, e.g. 2,2 or 1,1,1> [suite ...]
# Exit 0 = passed, 1 = failed, 77 (ctest SKIP_RETURN_CODE) = cannot run here (the reason is printed).
#
# Nothing is left behind: the EXIT trap (also reached on INT/TERM/HUP) kills the ranks, deletes the
# namespaces (and with them every veth and bridge) and the ranks' /dev/shm segments. A detached janitor
# does the same if this script is killed outright (SIGKILL, e.g. a ctest timeout), and a run deletes
# the namespaces of earlier runs whose script is gone.
set -u
prefix=ttns                 # namespaces are ${prefix}<script pid>-<name>
deadline=90                 # seconds until ranks still running count as hung and are killed (< ctest TIMEOUT)
port=29400                  # NCCL_COMM_ID port; the namespaces are private to this run, so it cannot collide

# Whether process $1 runs (a zombie does not: its parent may not have reaped it yet).
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# Stops the watchdog, kills the ranks listed in <work>/pids that still run this program, removes their
# /dev/shm segments, deletes the namespaces of run <tag> (their links go with them) and the work directory.
# Idempotent: the EXIT trap and the janitor may both run it.
cleanup_run() {
  local tag=$1 work=$2 bin=$3 p ns
  local -a rank_pids=()
  [ -f "$work/watchdog.pid" ] && kill "$(cat "$work/watchdog.pid")" 2>/dev/null
  [ -f "$work/pids" ] && read -r -a rank_pids <"$work/pids"
  for p in "${rank_pids[@]}"; do
    # Only a process that still runs our binary: the pid may have been reused since.
    [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$bin" ] && kill -9 "$p" 2>/dev/null
  done
  for p in "${rank_pids[@]}"; do
    for _ in $(seq 1 50); do alive "$p" || break; sleep 0.05; done
    rm -f /dev/shm/tutti-shm-"$p"-* 2>/dev/null
  done
  for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep "^$tag-"); do
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$work"
}

if [ "${1:-}" = --janitor ]; then  # --janitor <script pid> <tag> <work> <bin>: waits for the script to go
  while alive "$2"; do sleep 0.5; done
  cleanup_run "$3" "$4" "$5"
  exit 0
fi

skip() { echo "SKIP: $*"; exit 77; }
usage() { echo "usage: $0 <tutti_mp_rank> <ranks per node, e.g. 2,2 or 1,1,1> [suite ...]"; exit 1; }
[ $# -ge 2 ] || usage
bin=$(readlink -f "$1") || usage
layout=$2
shift 2
suites=("$@")
[[ $layout =~ ^[1-9](,[1-9])+$ ]] || { echo "FAIL: layout '$layout' is not two or more counts (2,1)"; usage; }
IFS=, read -r -a per_node <<<"$layout"
nnodes=${#per_node[@]}
node_of=()                  # node_of[rank]
for i in "${!per_node[@]}"; do
  for _ in $(seq 1 "${per_node[$i]}"); do node_of+=("$i"); done
done
nranks=${#node_of[@]}

[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null 2>&1 || skip "the ip command (iproute2) is not installed"
[ -x "$bin" ] || { echo "FAIL: $bin is not an executable"; exit 1; }

# Namespaces of earlier runs whose script no longer exists (killed before its janitor could clean up).
for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep -E "^$prefix[0-9]+-"); do
  owner=${ns#"$prefix"}; owner=${owner%%-*}
  alive "$owner" || { echo "deleting stale namespace $ns"; ip netns del "$ns" 2>/dev/null; }
done

tag="$prefix$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/tutti-netns.XXXXXX")
pids=()
watchdog=
on_exit() {
  exec 2>/dev/null  # the shell's "Killed" notices for ranks stopped here add nothing
  [ -n "$watchdog" ] && kill "$watchdog"
  cleanup_run "$tag" "$work" "$bin"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
# The janitor is detached (own session, parent gone) so that killing this script's process tree spares it.
( setsid "$BASH" "$0" --janitor $$ "$tag" "$work" "$bin" </dev/null >/dev/null 2>&1 & )

ns_of() { echo "$tag-n$1"; }
addr_of() { echo "10.201.77.$(($1 + 1))"; }
ifc=veth0                   # the node's interface, same name in every node namespace
# Runs a setup command; a failure after the first namespace worked is a failure of the test, not a skip.
must() { "$@" 2>"$work/err" || { echo "FAIL: '$*' failed: $(cat "$work/err")"; exit 1; }; }
ip netns add "$(ns_of 0)" 2>"$work/err" || skip "ip netns add failed: $(cat "$work/err")"
for i in $(seq 1 $((nnodes - 1))); do must ip netns add "$(ns_of "$i")"; done
# Links are created directly inside the namespaces, so none ever exists in the host's namespace.
if [ "$nnodes" = 2 ]; then
  ip link add "$ifc" netns "$(ns_of 0)" type veth peer name "$ifc" netns "$(ns_of 1)" 2>"$work/err" ||
    skip "cannot create a veth pair: $(cat "$work/err")"
else
  sw="$tag-sw"
  must ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge forward_delay 0 2>"$work/err" ||
    skip "cannot create a bridge for $nnodes nodes: $(cat "$work/err")"
  must ip -n "$sw" link set br0 up
  for i in $(seq 0 $((nnodes - 1))); do
    ip link add "$ifc" netns "$(ns_of "$i")" type veth peer name "port$i" netns "$sw" 2>"$work/err" ||
      skip "cannot create a veth pair: $(cat "$work/err")"
    must ip -n "$sw" link set "port$i" master br0 up
  done
fi
for i in $(seq 0 $((nnodes - 1))); do
  must ip -n "$(ns_of "$i")" addr add "$(addr_of "$i")/24" dev "$ifc"
  must ip -n "$(ns_of "$i")" link set lo up
  must ip -n "$(ns_of "$i")" link set "$ifc" up
done
# A fresh veth takes a moment to get carrier; wait (bounded) until every node's end is up.
for _ in $(seq 1 50); do
  down=0
  for i in $(seq 0 $((nnodes - 1))); do
    ip -n "$(ns_of "$i")" link show "$ifc" | grep -q LOWER_UP || down=1
  done
  [ $down = 0 ] && break
  sleep 0.1
done
[ $down = 0 ] || { echo "FAIL: the veth links did not come up"; exit 1; }
if command -v ping >/dev/null 2>&1; then
  for i in $(seq 1 $((nnodes - 1))); do
    ip netns exec "$(ns_of "$i")" ping -c 1 -W 3 "$(addr_of 0)" >/dev/null 2>&1 ||
      { echo "FAIL: node $i cannot reach node 0 over the veth links"; exit 1; }
  done
fi

forced=
for v in NCCL_ALGO NCCL_PROTO; do [ -n "${!v:-}" ] && forced+=" $v=${!v}"; done
echo "layout $layout: $nranks ranks on $nnodes nodes, suites: ${suites[*]:-all}$forced"
start=$(date +%s.%N)
for r in $(seq 0 $((nranks - 1))); do
  node=${node_of[$r]}
  # ip netns exec and env both exec, so $! is the rank's own pid (its /dev/shm segments carry it).
  ip netns exec "$(ns_of "$node")" env TUTTI_HOSTNAME="node$node" NCCL_SOCKET_IFNAME="$ifc" \
    NCCL_COMM_ID="$(addr_of 0):$port" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE="$work/log.$r" \
    "$bin" "$r" "$nranks" "${suites[@]}" >"$work/out.$r" 2>&1 &
  pids+=($!)
  printf '%s ' "$!" >>"$work/pids"  # at once, so a cleanup at any point finds every rank started so far
done
# Watchdog: kills the ranks still running at the deadline. Its own sleep is killed with it, and it holds
# no output pipe, so a passing run does not wait for it. Once the work directory is gone (this script was
# killed and the janitor cleaned up) the pids may belong to someone else: then it does nothing.
(
  exec >/dev/null 2>&1
  sleeper=
  trap 'kill $sleeper 2>/dev/null; exit 0' TERM
  sleep "$deadline" & sleeper=$!
  wait "$sleeper"
  [ -d "$work" ] || exit 0
  touch "$work/watchdog"
  kill -9 "${pids[@]}"
) &
watchdog=$!
echo "$watchdog" >"$work/watchdog.pid"

fail=0
summary=()                  # one line per problem, repeated at the end
problem() { echo "FAIL: $1"; summary+=("$1"); fail=1; }
for r in $(seq 0 $((nranks - 1))); do
  { wait "${pids[$r]}"; } 2>/dev/null; rc=$?  # (the shell's own "Killed" notice adds nothing)
  if [ $rc = 0 ]; then
    echo "rank $r (node ${node_of[$r]}): $(tail -n 1 "$work/out.$r")"
    continue
  fi
  fail=1
  echo "----- rank $r (node ${node_of[$r]}, pid ${pids[$r]}) failed: exit $rc -----"
  why="exit $rc"
  if [ -e "$work/watchdog" ] && [ $rc = 137 ]; then
    why="still running after $deadline s (hang), killed"; echo "rank $r was $why"
  fi
  # The failed checks name their case and rank. Without any (a crash, a hang, a failed init) the end of
  # the INIT log is what says where the rank was.
  nfail=$(grep -c '^\[ failure \]' "$work/out.$r")
  if [ "$nfail" != 0 ]; then
    grep -m 20 '^\[ failure \]' "$work/out.$r"
    [ "$nfail" -gt 20 ] && echo "... $((nfail - 20)) more failed checks"
    why="$nfail failed check(s), first: $(grep -m 1 '^\[ failure \]' "$work/out.$r" | cut -c13-)"
  fi
  echo "--- last lines of its output (failed checks left out) ---"
  grep -v '^\[ failure \]' "$work/out.$r" | tail -n 10
  if [ "$nfail" = 0 ]; then echo "--- last lines of its log ---"; tail -n 20 "$work/log.$r" 2>/dev/null; fi
  summary+=("rank $r (node ${node_of[$r]}) failed: $why")
done
kill "$watchdog" 2>/dev/null
wait "$watchdog" 2>/dev/null
watchdog=
echo "ranks finished in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"

# Every logged connection: same node must be shm, different nodes net. Every rank has a peer on another
# node, so it must log net; shm only where its node has another rank. With all suites (all-pairs send/recv
# among them) every rank must also have logged a connection with every other rank.
for r in $(seq 0 $((nranks - 1))); do
  [ -s "$work/log.$r" ] || { problem "rank $r wrote no INIT log"; continue; }
  lines=$(grep -ho 'rank [0-9]* channel [0-9]* [a-z0-9]* [<>-]* rank [0-9]* via [a-z]*' "$work/log.$r")
  bad=$(echo "$lines" | awk -v nodes="${node_of[*]}" '
    BEGIN { n = split(nodes, node, " ") }
    NF { me = $2; peer = $(NF - 2); t = $NF
         if (me + 1 > n || peer + 1 > n) { print "  " $0 " (no such rank)"; next }
         want = (node[me + 1] == node[peer + 1]) ? "shm" : "net"
         if (me != peer && t != want) print "  " $0 " (expected " want ")" }')
  nshm=$(echo "$lines" | grep -c 'via shm'); nnet=$(echo "$lines" | grep -c 'via net')
  echo "rank $r: $nshm shm and $nnet net connections"
  if [ -n "$bad" ]; then problem "rank $r used the wrong transport (the connections follow)"; echo "$bad"; fi
  [ "$nnet" = 0 ] && problem "rank $r logged no net connection"
  if [ "${per_node[${node_of[$r]}]}" -gt 1 ] && [ "$nshm" = 0 ]; then
    problem "rank $r logged no shm connection although its node has other ranks"
  fi
  if [ ${#suites[@]} = 0 ]; then
    peers=" $(echo "$lines" | awk 'NF { print $(NF - 2) }' | sort -un | paste -sd' ') "
    for p in $(seq 0 $((nranks - 1))); do
      [ "$p" = "$r" ] && continue
      [[ $peers == *" $p "* ]] || problem "rank $r logged no connection with rank $p"
    done
  fi
done

# Ranks that exited on their own must have removed their segments (the cleanup removes them anyway).
if [ ! -e "$work/watchdog" ]; then
  left=$(ls /dev/shm 2>/dev/null | grep -E "^tutti-shm-($(echo "${pids[*]}" | tr ' ' '|'))-")
  [ -n "$left" ] && problem "left in /dev/shm: $(echo $left)"
fi

if [ $fail = 0 ]; then echo "PASS"; exit 0; fi
echo "FAIL (layout $layout)"
for line in "${summary[@]}"; do echo "  $line"; done
exit 1
