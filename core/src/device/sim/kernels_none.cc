// A build without the sim backend (TUTTI_WITH_SIM=OFF, e.g. the sanitizer builds): no kernel instances.
#include "device/sim/kernels.h"
#include "device/sim/launch.h"
#include "util/check.h"

namespace tutti::sim {

SimKernelFn simKernelFor(ncclDataType_t) { return nullptr; }
int simKernelCount() { return 0; }
const char* simKernelFilter() { return "(no sim backend: TUTTI_WITH_SIM=OFF)"; }

bool available() { return false; }

ncclResult_t launchItems(host::CommLaunch&, std::vector<host::WorkItem>*) {
  TUTTI_FAIL(ncclInvalidUsage, "this build has no sim backend (configured with TUTTI_WITH_SIM=OFF)");
}

}  // namespace tutti::sim
