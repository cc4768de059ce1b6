#!/usr/bin/env bash
# Every function NCCL's libnccl.so.2 exports must be exported by ours (binary drop-in).
# Every function our nccl.h and nccl_device/*.h declare must be exported too (a declaration without a definition is a link
# error for the user).
#   check_exports.sh <our libnccl.so.2> <our nccl.h> <exports lists, comma-separated> [reference libnccl.so.2 ...]
# The lists in the tree are NCCL 2.28.9's (nm -D of the library) and 2.30.7's (from its sources); each
# reference library that exists is compared as well.
set -euo pipefail
ours=$1 header=$2 lists=$3
shift 3
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
mapfile -t want < <(grep -oE '^[A-Za-z_][A-Za-z0-9_ *]*[ *]p?nccl[A-Za-z0-9_]+\(' "$header" |
                    grep -oE 'p?nccl[A-Za-z0-9_]+\($' | tr -d '(' | sort -u)
((${#want[@]} > 100)) || { echo "FAIL: only ${#want[@]} declarations found in $header"; exit 1; }
check "$header" "${want[@]}"
# The host functions the device API's headers declare (nccl_device/*.h, NCCL_EXTERN_C).
mapfile -t want < <(cat "$(dirname "$header")"/nccl_device/*.h | grep -E '^NCCL_EXTERN_C' |
                    grep -oE 'nccl[A-Za-z0-9_]+\(' | head -n 1000 | tr -d '(' | sort -u)
((${#want[@]} > 15)) || { echo "FAIL: only ${#want[@]} declarations found in nccl_device/*.h"; exit 1; }
check "nccl_device/*.h" "${want[@]}"
IFS=, read -r -a listFiles <<<"$lists"
for list in "${listFiles[@]}"; do
  mapfile -t want < <(grep -v '^#' "$list")
  check "$(basename "$list")" "${want[@]}"
done
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
