#include "device/sim/kernels.h"

#include "device/common/dtypes.h"
#include "kernel_types.h"

namespace tutti::dev {
template <typename T>
void tuttiKernelSim(const void* args);
#define TUTTI_DECLARE_SIM_KERNEL(d) extern template void tuttiKernelSim<DataType<d>>(const void*);
TUTTI_KERNEL_TYPES(TUTTI_DECLARE_SIM_KERNEL)
#undef TUTTI_DECLARE_SIM_KERNEL
}  // namespace tutti::dev

namespace tutti::sim {

SimKernelFn simKernelFor(ncclDataType_t type) {
  switch (type) {
#define TUTTI_SIM_KERNEL_CASE(d) \
  case d: return &dev::tuttiKernelSim<DataType<d>>;
    TUTTI_KERNEL_TYPES(TUTTI_SIM_KERNEL_CASE)
#undef TUTTI_SIM_KERNEL_CASE
    default: return nullptr;
  }
}

int simKernelCount() {
  int n = 0;
#define TUTTI_COUNT_KERNEL(d) ++n;
  TUTTI_KERNEL_TYPES(TUTTI_COUNT_KERNEL)
#undef TUTTI_COUNT_KERNEL
  return n;
}

const char* simKernelFilter() { return TUTTI_KERNEL_FILTER; }

bool available() { return simKernelCount() > 0; }

}  // namespace tutti::sim
