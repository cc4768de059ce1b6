#!/usr/bin/env bash
# Every function NCCL's libnccl.so.2 exports must be exported by ours (binary drop-in).
#   check_exports.sh <our libnccl.so.2> <exports list> [reference libnccl.so.2 ...]
# The list in the tree is NCCL 2.28.9's; each reference library that exists is compared as well.
set -euo pipefail
ours=$1 list=$2
shift 2
exports() { nm -D --defined-only "$1" | awk '$2 ~ /^[TWiV]$/ {print $3}' | sort -u; }
[[ -f $ours ]] || { echo "FAIL: $ours: no such file"; exit 1; }
have=$(exports "$ours")
fail=0
check() {  # <what> <names...>
  local what=$1 missing
  shift
  missing=$(comm -23 <(printf '%s\n' "$@" | sort -u) <(printf '%s\n' "$have"))
  if [[ -n $missing ]]; then
    echo "FAIL: $(wc -l <<<"$missing") functions of $what not exported by $ours:"
    sed 's/^/  /' <<<"$missing"
    fail=1
  else
    echo "ok: all $# functions of $what exported"
  fi
}
mapfile -t want < <(grep -v '^#' "$list")
check "$list" "${want[@]}"
for ref in "$@"; do
  [[ -f $ref ]] || { echo "skip: $ref not present"; continue; }
  mapfile -t want < <(exports "$ref")
  check "$ref" "${want[@]}"
done
# Only the C API leaves the library: nothing C++ (mangled) and nothing outside nccl*/pnccl*/tutti*.
extra=$(nm -D --defined-only "$ours" | awk '{print $NF}' | grep -Ev '^(p?nccl|tutti)' || true)
if [[ -n $extra ]]; then
  echo "FAIL: exported symbols outside the C API:"; sed 's/^/  /' <<<"$extra" | head -20; fail=1
fi
exit $fail
