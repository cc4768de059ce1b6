// Where the one-sided kernels (rma_kernels.h) are, for rt::KernelLaunch::fn: the emulator's entries (sim
// backend) and the GPU's __global__ functions (cuda backend). Null where the build left them out.
#pragma once

namespace tutti::rma {

const void* simSignalKernel();
const void* simWaitKernel();
#ifdef TUTTI_HAVE_CUDA_KERNELS
const void* cudaSignalKernel();
const void* cudaWaitKernel();
#endif

}  // namespace tutti::rma
