#!/usr/bin/env bash
# The GPU check: build with CUDA, run the ctest label `gpu` (the collectives on `device: cuda` with CUDA
# memory, user streams and CUDA graphs, 1-4 ranks on one GPU), measure (tests/gpu/gpu_perf.cc: copy bandwidth,
# per-hop latency of LL / LL128 / Simple, send/recv and AllReduce busbw as a fraction of the copy bandwidth),
# and keep what it printed under benchmarks/results/gpu/<GPU name>/.
#
#   scripts/gpu-check.sh          on a machine with a GPU (the CUDA toolkit at /usr/local/cuda)
#   scripts/gpu-check.sh --sim    the same steps on the sim backend (TUTTI_GPU_CHECK_SIM=1), on any machine
#   scripts/gpu-check.sh --bundle B.tar.xz
#                                 on a GPU machine that cannot build Tutti: runs the binaries that
#                                 scripts/gpu-bundle.sh packed elsewhere (test_gpu directly, without ctest)
#
# NVIDIA's nccl-tests, built against Tutti, run last when there are any: the bundle's, or those named by
# GPU_CHECK_NCCL_TESTS (a folder of *_perf binaries). Each runs on one GPU (-g 1) with its data check, and a
# wrong value ("#wrong" above 0, "Out of bounds values" not 0) fails the check.
#
# Environment: GPU_CHECK_BUILD (build folder; default build-gpu, or build with --sim), GPU_CHECK_JOBS
# (default: every core). The exit status is 1 when a step failed; a test that could not run (no GPU) counts as
# a failure here, unlike in the main ctest run where it is skipped with its reason.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
sim=0
bundle=
case "${1:-}" in
  --sim) sim=1 ;;
  --bundle) bundle=$(readlink -f "${2:?--bundle needs the file scripts/gpu-bundle.sh made}") ;;
esac
nccl_tests=${GPU_CHECK_NCCL_TESTS:-}
jobs=${GPU_CHECK_JOBS:-$(nproc)}
build=${GPU_CHECK_BUILD:-$root/$([ "$sim" = 1 ] && echo build || echo build-gpu)}

if [ "$sim" = 1 ]; then
  name=sim
  export TUTTI_GPU_CHECK_SIM=1
else
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' /' '__')
  if [ -z "$name" ]; then
    echo "gpu-check: no GPU found (nvidia-smi reports none); scripts/gpu-check.sh --sim runs the steps on the CPU" >&2
    exit 1
  fi
fi
out=$root/benchmarks/results/gpu/$name
mkdir -p "$out"
log=$out/gpu-check.log
: >"$log"
failed=0

step() {
  local what=$1 start rc
  shift
  echo "==> $what: $*" | tee -a "$log"
  start=$(date +%s)
  "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  echo "==> $what: $(($(date +%s) - start)) s, exit $rc" | tee -a "$log"
  [ "$rc" -eq 0 ] || failed=1
  return "$rc"
}

{
  echo "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) cores, commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
  if [ "$sim" = 1 ]; then echo "backend: sim (TUTTI_GPU_CHECK_SIM=1)"; else nvidia-smi -L; fi
} | tee -a "$log"

if [ -n "$bundle" ]; then
  # Prebuilt: unpack, and let the binaries find the bundle's libnccl, plugins and libraries.
  build=$(mktemp -d)
  trap 'rm -rf "$build"' EXIT
  step unpack tar -C "$build" -xJf "$bundle" || exit 1
  cat "$build/BUNDLE" | tee -a "$log"
  export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" TUTTI_PLUGIN_PATH="$build/lib"
  if ldd "$build"/bin/* "$build"/lib/*.so* "$build"/nccl-tests/* 2>/dev/null | grep -q "not found"; then
    ldd "$build"/bin/* "$build"/lib/*.so* "$build"/nccl-tests/* 2>&1 | grep -E "^/|not found" | tee -a "$log"
    echo "gpu-check: the bundle lacks a library this machine does not have" | tee -a "$log"
    exit 1
  fi
  [ -z "$nccl_tests" ] && [ -n "$(ls -A "$build/nccl-tests" 2>/dev/null)" ] && nccl_tests=$build/nccl-tests
  # One process per test, each with its own time limit, so a hang costs one test and not the rest.
  for bin in test_gpu test_devapi_gpu; do
    [ -x "$build/bin/$bin" ] || continue
    tests=$("$build/bin/$bin" --gtest_list_tests | awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}')
    for t in $tests; do
      step "$bin $t" timeout 45 "$build/bin/$bin" --gtest_color=no --gtest_filter="$t"
    done
  done
else
  cuda_flag=-DTUTTI_WITH_CUDA=ON
  # Full device optimisation: the figures below are measured on these kernels.
  step configure cmake -S "$root" -B "$build" "$cuda_flag" -DTUTTI_CUDA_FAST_COMPILE=0 || exit 1
  step build cmake --build "$build" -j"$jobs" --target tutti test_gpu test_devapi_gpu gpu_perf || exit 1
  # --no-tests=error: an empty label is a failure; a skipped test is too (it means the GPU was not usable).
  step ctest-gpu ctest --test-dir "$build" -L gpu --no-tests=error --output-on-failure -j1 --timeout 300
fi
# On a GPU nothing may be skipped (a skip means the GPU was not usable); --sim skips what needs real CUDA memory.
if [ "$sim" = 0 ] && grep -qE "\(Skipped\)|Not Run|\[  SKIPPED \]" "$log"; then
  echo "gpu-check: some gpu tests were skipped (no usable GPU?)" | tee -a "$log"
  failed=1
fi
# The figures, measured in this run: copy bandwidth, per-hop latency, busbw as a fraction of the copy bandwidth
# (with --sim the same steps at tiny sizes, no figures).
step gpu-perf timeout 150 "$build/bin/gpu_perf" -o "$out/gpu_perf.md"
# nccl-tests on this GPU, with their data check (-c 1): every size must come out with #wrong = 0.
if [ "$sim" = 0 ] && [ -n "$nccl_tests" ]; then
  for bin in "$nccl_tests"/*_perf; do
    name=$(basename "$bin")
    sizes=(-b 8 -e 64M -f 4)
    [ "$name" = all_reduce_perf ] && sizes=(-b 8 -e 1G -f 2)
    if step "$name" timeout 60 "$bin" "${sizes[@]}" -g 1 -c 1 -n 20 -w 5; then
      grep -A200 "^==> $name:" "$log" | grep -q "Out of bounds values : 0 OK" ||
        { echo "gpu-check: $name reported wrong values" | tee -a "$log"; failed=1; }
    fi
  done
  grep -h "^==> .*_perf:\|Out of bounds\|Avg bus" "$log" >"$out/nccl-tests.txt" || true
fi
echo "==> gpu-check: $([ "$failed" = 0 ] && echo passed || echo FAILED); log: ${log#$root/}" | tee -a "$log"
exit "$failed"
