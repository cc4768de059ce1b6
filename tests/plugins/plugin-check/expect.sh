#!/usr/bin/env bash
# expect.sh <exit status> [--match REGEX]... [--json FILE [--json-match REGEX]...] -- <command...>
# Runs the command, shows its output, and fails unless it exits with the given status and every REGEX
# (extended, per line) is found in its output (or in the JSON file it wrote).
set -u
want=$1; shift
matches=(); json=""; jmatches=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --match) matches+=("$2"); shift 2 ;;
    --json) json=$2; shift 2 ;;
    --json-match) jmatches+=("$2"); shift 2 ;;
    *) echo "expect.sh: unknown argument $1"; exit 2 ;;
  esac
done
shift
[ -n "$json" ] && rm -f "$json"
out=$("$@" 2>&1); rc=$?
echo "$out"
status=0
if [ "$rc" != "$want" ]; then echo "expect.sh: exit status $rc, expected $want"; status=1; fi
for m in "${matches[@]+"${matches[@]}"}"; do
  grep -Eq -- "$m" <<<"$out" || { echo "expect.sh: output lacks /$m/"; status=1; }
done
for m in "${jmatches[@]+"${jmatches[@]}"}"; do
  grep -Eq -- "$m" "$json" 2>/dev/null || { echo "expect.sh: $json lacks /$m/"; status=1; }
done
exit $status
