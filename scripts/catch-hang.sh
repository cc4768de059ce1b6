#!/usr/bin/env bash
# Runs one test of a gtest binary again and again to catch an intermittent hang: a run still going after
# LIMIT seconds has the stacks of the test process and of every process below it (the ranks of a multi-process
# test) written with gdb, then is left to its own watchdog. Failures keep their output too.
#
# usage: scripts/catch-hang.sh BINARY GTEST_FILTER [RUNS=50] [LIMIT=25] [OUT=/tmp/catch-hang]
#   e.g. scripts/catch-hang.sh build-asan/bin/test_multiproc_shrink '*ShrinkAfterKill*Net*' 100
# Writes OUT/summary.txt (one line a run that hung or failed), OUT/run-N.out and, for a hang, OUT/run-N.stacks.
set -uo pipefail

bin=${1:?usage: catch-hang.sh BINARY GTEST_FILTER [RUNS] [LIMIT] [OUT]}
filter=${2:?usage: catch-hang.sh BINARY GTEST_FILTER [RUNS] [LIMIT] [OUT]}
runs=${3:-50}
limit=${4:-25}
out=${5:-/tmp/catch-hang}
[ -x "$bin" ] || { echo "catch-hang.sh: $bin is not an executable" >&2; exit 2; }
command -v gdb > /dev/null || { echo "catch-hang.sh: gdb is needed (apt-get install gdb)" >&2; exit 2; }
mkdir -p "$out"
: > "$out/summary.txt"

descendants() {  # every process below $1
  local c
  for c in $(pgrep -P "$1"); do
    echo "$c"
    descendants "$c"
  done
}

hangs=0 fails=0
for i in $(seq 1 "$runs"); do
  "$bin" --gtest_filter="$filter" > "$out/run-$i.out" 2>&1 &
  pid=$!
  deadline=$((SECONDS + limit))
  while kill -0 "$pid" 2> /dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
  if kill -0 "$pid" 2> /dev/null; then
    hangs=$((hangs + 1))
    echo "run $i: still running after $limit s, stacks in run-$i.stacks" >> "$out/summary.txt"
    for p in "$pid" $(descendants "$pid"); do
      echo "===== pid $p: $(tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null)"
      timeout 60 gdb -p "$p" -batch -ex "thread apply all bt" 2>&1
    done > "$out/run-$i.stacks"
  fi
  wait "$pid"
  rc=$?
  if [ "$rc" != 0 ]; then
    fails=$((fails + 1))
    echo "run $i: exit $rc" >> "$out/summary.txt"
  else
    rm -f "$out/run-$i.out"
  fi
done
echo "catch-hang.sh: $runs runs, $hangs past $limit s, $fails failed; see $out/summary.txt"
[ "$hangs" = 0 ] && [ "$fails" = 0 ]
