// The GPU kernel instances, by datatype (the build's kernel matrix, kernel_types.h), for the launcher.
#pragma once

#include <nccl.h>

namespace tutti::cuda {

// The kernel for `type` (a __global__ function taking dev::KernelArgs), or null when the build left it out.
const void* cudaKernelFor(ncclDataType_t type);

}  // namespace tutti::cuda
