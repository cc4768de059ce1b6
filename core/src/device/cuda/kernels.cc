#include "device/cuda/kernels.h"

#include "kernel_types.h"

namespace tutti::cuda {

#define TUTTI_DECLARE_KERNEL(d) const void* kernelOf_##d();
TUTTI_KERNEL_TYPES(TUTTI_DECLARE_KERNEL)
#undef TUTTI_DECLARE_KERNEL

const void* cudaKernelFor(ncclDataType_t type) {
  switch (type) {
#define TUTTI_KERNEL_CASE(d) \
  case d: return kernelOf_##d();
    TUTTI_KERNEL_TYPES(TUTTI_KERNEL_CASE)
#undef TUTTI_KERNEL_CASE
    default: return nullptr;
  }
}

}  // namespace tutti::cuda
