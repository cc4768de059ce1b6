#!/usr/bin/env bash
# Installs the SDK from a Tutti build tree into a scratch prefix, builds every example in sdk/examples
# against that prefix only, and checks each plugin loads and exports exactly its ABI symbols.
# Usage: check_examples.sh <tutti build dir> <tutti source dir> <scratch dir>
set -euo pipefail
build=$1 src=$2 work=$3
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"

# 1. The SDK is the installed headers: nothing else may be needed.
cmake --install "$build" --component sdk --prefix "$prefix" > "$work/install.log" \
  || { cat "$work/install.log"; fail "cmake --install --component sdk"; }
(cd "$src/sdk/include" && find tutti -type f | sort) > "$work/headers.src"
(cd "$prefix/include" && find tutti -type f | sort) > "$work/headers.installed"
diff "$work/headers.src" "$work/headers.installed" || fail "installed headers differ from sdk/include"

# 2. Configure and build the examples with only that prefix.
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
cmake -S "$src/tests/integration/sdk/umbrella" -B "$work/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DTUTTI_SDK_DIR="$prefix" -DTUTTI_EXAMPLES_DIR="$src/sdk/examples" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  "-DCMAKE_C_FLAGS=-Werror -Wpedantic" "-DCMAKE_CXX_FLAGS=-Werror" > "$work/configure.log" \
  || { cat "$work/configure.log"; fail "configure"; }
found=$(sed -n 's/^TUTTI_SDK_INCLUDE:PATH=//p' "$work/build/CMakeCache.txt")
[ "$found" = "$prefix/include" ] || fail "examples found the SDK in '$found', not in $prefix/include"
cmake --build "$work/build" -j2 > "$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build"; }
# Every include directory must be inside the prefix: nothing from the Tutti source or build tree.
grep -oE -- '(-I|-isystem) *[^ "]+' "$work/build/compile_commands.json" | sed -E 's/^(-I|-isystem) *//' | sort -u \
  > "$work/include-dirs"
while read -r dir; do
  case "$dir" in
    "$prefix"/*) ;;
    *) fail "an example compiles with include directory $dir, outside the installed SDK" ;;
  esac
done < "$work/include-dirs"
[ -s "$work/include-dirs" ] || fail "no include directory recorded for the examples"

# 3. Each plugin: loads with RTLD_NOW, exports its symbols, and nothing else (hidden visibility).
check() {  # check <library> <symbol>...
  local lib=$work/build/$1; shift
  [ -f "$lib" ] || fail "$lib was not built"
  "$work/build/dlopen_check" "$lib" "$@" || fail "dlopen check of $lib"
  local exported expected
  exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[BDGRSTVW]$/ {print $3}' | sort | tr '\n' ' ')
  expected=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  [ "$exported" = "$expected" ] || fail "$lib exports [$exported], expected [$expected]"
}
check net/libnccl-net-example.so ncclNetPlugin_v12 ncclNetPlugin_v11
check tuner/libnccl-tuner-example.so ncclTunerPlugin_v6
check profiler/libnccl-profiler-example.so ncclProfiler_v6
check transport/libtutti-transport-example.so tuttiTransport_v1
echo "sdk examples: all built out of tree against $prefix and loaded"
