// The launchers of devapi_kernels.cu, for host code (the GPU test).
#pragma once

#include <cuda_runtime.h>

#include "devapi_kernels.h"

cudaError_t launchAllReduceLsa(const KernelArgs& a, int grid, int block, cudaStream_t s);
cudaError_t launchAlltoAllGin(const KernelArgs& a, int grid, int block, cudaStream_t s);
cudaError_t launchBarrierWithTimeout(const TimeoutArgs& a, int block, cudaStream_t s);
cudaError_t launchLlAlltoAll(const LlArgs& a, int grid, int block, cudaStream_t s);
cudaError_t launchGinBarrierRound(const LlArgs& a, int grid, int block, cudaStream_t s);
// Loads the kernels above on the current device, before ranks that wait for one another launch them.
cudaError_t loadDevapiKernels();
