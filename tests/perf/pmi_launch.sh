#!/bin/sh
# Starts N copies of a perf tool the way a PMI launcher would (PMI_RANK / PMI_SIZE, one rank each), so the
# unique-id hand-off through TUTTI_PERF_ID_FILE is tested without MPI installed.
# usage: pmi_launch.sh N tool [args...]; prints rank 0's output, exits non-zero when any rank failed.
set -u
n=$1; shift
dir=$(mktemp -d /tmp/tutti-perf-pmi.XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
export TUTTI_PERF_ID_FILE="$dir/id"
pids=""
r=0
while [ "$r" -lt "$n" ]; do
  PMI_RANK=$r PMI_SIZE=$n "$@" > "$dir/out.$r" 2>&1 &
  pids="$pids $!"
  r=$((r + 1))
done
rc=0
for p in $pids; do wait "$p" || rc=1; done
cat "$dir/out.0"
r=1
while [ "$r" -lt "$n" ]; do
  if [ -s "$dir/out.$r" ]; then echo "--- rank $r:"; cat "$dir/out.$r"; fi
  r=$((r + 1))
done
exit $rc
