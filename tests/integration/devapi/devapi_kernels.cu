// devapi_kernels.h compiled by nvcc (sm_80, sm_90): the device API's headers and the kernels written against
// them build for the GPU as they do for the emulator, and the launchers below let the GPU test
// (devapi_gpu_test.cc, compiled by the host compiler) run them on device communicators of the cuda backend.
#include "devapi_kernels.h"
#include "devapi_launch.h"

__global__ void allReduceLsaKernel(KernelArgs a) { allReduceLsa(a); }
__global__ void alltoAllGinKernel(KernelArgs a) { alltoAllGin(a); }
__global__ void barrierWithTimeoutKernel(TimeoutArgs a) { barrierWithTimeout(a); }
__global__ void llAlltoAllKernel(LlArgs a) { llAlltoAll(a); }
__global__ void ginBarrierRoundKernel(LlArgs a) { ginBarrierRound(a); }

cudaError_t launchAllReduceLsa(const KernelArgs& a, int grid, int block, cudaStream_t s) {
  allReduceLsaKernel<<<grid, block, 0, s>>>(a);
  return cudaGetLastError();
}
cudaError_t launchAlltoAllGin(const KernelArgs& a, int grid, int block, cudaStream_t s) {
  alltoAllGinKernel<<<grid, block, 0, s>>>(a);
  return cudaGetLastError();
}
cudaError_t launchBarrierWithTimeout(const TimeoutArgs& a, int block, cudaStream_t s) {
  barrierWithTimeoutKernel<<<1, block, 0, s>>>(a);
  return cudaGetLastError();
}
cudaError_t launchLlAlltoAll(const LlArgs& a, int grid, int block, cudaStream_t s) {
  llAlltoAllKernel<<<grid, block, 0, s>>>(a);
  return cudaGetLastError();
}
cudaError_t launchGinBarrierRound(const LlArgs& a, int grid, int block, cudaStream_t s) {
  ginBarrierRoundKernel<<<grid, block, 0, s>>>(a);
  return cudaGetLastError();
}
// CUDA loads a kernel at its first launch by default, and a load may wait for the kernels already running: a
// rank's first launch would then wait for another rank's kernel that spins for this one. Loaded up front.
cudaError_t loadDevapiKernels() {
  cudaFuncAttributes attr;
  for (const void* fn : {reinterpret_cast<const void*>(&allReduceLsaKernel), reinterpret_cast<const void*>(&alltoAllGinKernel),
                         reinterpret_cast<const void*>(&barrierWithTimeoutKernel),
                         reinterpret_cast<const void*>(&llAlltoAllKernel),
                         reinterpret_cast<const void*>(&ginBarrierRoundKernel)})
    if (cudaError_t e = cudaFuncGetAttributes(&attr, fn); e != cudaSuccess) return e;
  return cudaSuccess;
}
