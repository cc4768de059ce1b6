// The emulator's kernel instances, by datatype (the build's kernel matrix, kernel_types.h).
#pragma once

#include <nccl.h>

namespace tutti::sim {

using SimKernelFn = void (*)(const void* args);

// The instance for `type`, or null when this build left it out (TUTTI_KERNELS) or has no sim backend.
SimKernelFn simKernelFor(ncclDataType_t type);
int simKernelCount();
// Whether this build has the sim backend (its kernels compiled for the emulator).
bool available();
// The TUTTI_KERNELS value the build was configured with ("" = every datatype).
const char* simKernelFilter();

}  // namespace tutti::sim
