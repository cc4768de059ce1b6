#!/usr/bin/env bash
# The GPU check: build with CUDA, run the ctest label `gpu` (the collectives on `device: cuda` with CUDA
# memory, user streams and CUDA graphs, 1-4 ranks on one GPU), measure (tests/gpu/gpu_perf.cc: copy bandwidth,
# per-hop latency of LL / LL128 / Simple, send/recv and AllReduce busbw as a fraction of the copy bandwidth),
# and keep what it printed under benchmarks/results/gpu/<GPU name>/.
#
#   scripts/gpu-check.sh          on a machine with a GPU (the CUDA toolkit at /usr/local/cuda)
#   scripts/gpu-check.sh --sim    the same steps on the sim backend (TUTTI_GPU_CHECK_SIM=1), on any machine
#
# Environment: GPU_CHECK_BUILD (build folder; default build-gpu, or build with --sim), GPU_CHECK_JOBS
# (default: every core). The exit status is 1 when a step failed; a test that could not run (no GPU) counts as
# a failure here, unlike in the main ctest run where it is skipped with its reason.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
sim=0
[ "${1:-}" = "--sim" ] && sim=1
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

cuda_flag=-DTUTTI_WITH_CUDA=ON
step configure cmake -S "$root" -B "$build" "$cuda_flag" || exit 1
step build cmake --build "$build" -j"$jobs" --target tutti test_gpu gpu_perf || exit 1
# --no-tests=error: an empty label is a failure; a skipped test is too (it means the GPU was not usable).
step ctest-gpu ctest --test-dir "$build" -L gpu --no-tests=error --output-on-failure -j1 --timeout 300
# On a GPU nothing may be skipped (a skip means the GPU was not usable); --sim skips what needs real CUDA memory.
if [ "$sim" = 0 ] && grep -qE "\(Skipped\)|Not Run" "$log"; then
  echo "gpu-check: some gpu tests were skipped (no usable GPU?)" | tee -a "$log"
  failed=1
fi
# The figures, measured in this run: copy bandwidth, per-hop latency, busbw as a fraction of the copy bandwidth
# (with --sim the same steps at tiny sizes, no figures).
step gpu-perf "$build/bin/gpu_perf" -o "$out/gpu_perf.md"
echo "==> gpu-check: $([ "$failed" = 0 ] && echo passed || echo FAILED); log: ${log#$root/}" | tee -a "$log"
exit "$failed"
