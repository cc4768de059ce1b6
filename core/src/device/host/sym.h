// The host backend's symmetric collectives (device/common/sym.h): one block's share, run on the channel
// thread of that block.
#pragma once

#include "device/host/prims.h"
#include "device/host/wait.h"
#include "plan/plan.h"

struct ncclComm;

namespace tutti::host {

ncclResult_t runSymmetric(ncclComm* comm, const CollPlan& plan, int block, const WaitContext& wait,
                          const OpLabel& label);

}  // namespace tutti::host
