// A build without the sim backend (TUTTI_WITH_SIM=OFF, e.g. the sanitizer builds): no kernel instances.
#include "device/sim/kernels.h"

namespace tutti::sim {

SimKernelFn simKernelFor(ncclDataType_t) { return nullptr; }
int simKernelCount() { return 0; }
const char* simKernelFilter() { return "(no sim backend: TUTTI_WITH_SIM=OFF)"; }

bool available() { return false; }

}  // namespace tutti::sim
