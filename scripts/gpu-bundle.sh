#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on a GPU machine that cannot build Tutti (no yaml-cpp, fmt, Boost or
# GoogleTest there, no package registry): a CUDA build's test_gpu, gpu_perf, libnccl and plugins, the shared
# libraries they load beyond glibc and the driver, and optionally NVIDIA's nccl-tests binaries built against
# Tutti. Debug info is stripped; the bundle is one .tar.xz.
#
#   scripts/gpu-bundle.sh BUILD_DIR BUNDLE.tar.xz [NCCL_TESTS_BUILD_DIR [PERF_BINARY ...]]
#
# e.g. scripts/gpu-bundle.sh build /tmp/gpu-bundle.tar.xz nccl-tests/build all_reduce_perf all_gather_perf
# then, on the GPU machine: scripts/gpu-check.sh --bundle /tmp/gpu-bundle.tar.xz
# GPU_BUNDLE_KEEP_DEBUG=1 keeps the debug info (backtraces with lines, a larger bundle).
# The libraries come from the build machine: its glibc must not be newer than the GPU machine's.
set -euo pipefail
shopt -s nullglob  # no nccl-tests binaries: the loops below skip their folder

if [ $# -lt 2 ]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
build=$(cd "$1" && pwd)
bundle=$2
tests_dir=${3:-}
shift $(($# < 3 ? $# : 3))
perf=("$@")
[ -n "$tests_dir" ] && [ ${#perf[@]} -eq 0 ] && perf=(all_reduce_perf)

for f in "$build/bin/test_gpu" "$build/bin/gpu_perf" "$build/lib/libnccl.so.2"; do
  [ -e "$f" ] || { echo "gpu-bundle: $f is missing (configure with -DTUTTI_WITH_CUDA=ON and build tutti test_gpu gpu_perf)" >&2; exit 1; }
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/nccl-tests"

cp "$build/bin/test_gpu" "$build/bin/gpu_perf" "$stage/bin/"
# The device API's kernels on the cuda backend, where the build made them (target test_devapi_gpu).
[ -e "$build/bin/test_devapi_gpu" ] && cp "$build/bin/test_devapi_gpu" "$stage/bin/"
real=$(readlink -f "$build/lib/libnccl.so.2")
cp "$real" "$stage/lib/"
ln -s "$(basename "$real")" "$stage/lib/libnccl.so.2"
ln -s libnccl.so.2 "$stage/lib/libnccl.so"
cp "$build"/lib/libtutti-*.so "$stage/lib/"
for p in "${perf[@]}"; do cp "$tests_dir/$p" "$stage/nccl-tests/"; done

# The libraries the binaries load that a bare GPU machine may lack: everything but glibc, the compiler's
# runtime (the GPU machine's own is newer or equal) and the driver, which must be the machine's.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libnccl\.so)'
for f in "$stage"/bin/* "$stage"/lib/*.so* "$stage"/nccl-tests/*; do
  [ -L "$f" ] && continue
  LD_LIBRARY_PATH="$stage/lib" ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    [ -e "$stage/lib/$name" ] || cp -L "$path" "$stage/lib/$name"
  done
done
[ "${GPU_BUNDLE_KEEP_DEBUG:-0}" = 1 ] || find "$stage" -type f \( -name '*.so*' -o -path '*/bin/*' -o -path '*/nccl-tests/*' \) -exec strip --strip-debug {} +
{
  echo "built on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ), $(ldd --version | head -1)"
  echo "commit $(git -C "$build/.." rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$stage/BUNDLE"
tar -C "$stage" -cJf "$bundle" .
echo "gpu-bundle: $bundle ($(du -h "$bundle" | cut -f1)): $(cd "$stage" && find . -type f | sort | tr '\n' ' ')"
