// ncclGroupSimulateEnd: what a group would cost, decided exactly as a real launch decides it, without
// running anything.
#pragma once

#include <nccl.h>

#include "comm/task.h"

#include <cstddef>

namespace tutti {

// The magic NCCL_SIM_INFO_INITIALIZER writes; anything else is an uninitialised struct.
inline constexpr unsigned int kSimInfoMagic = 0x74685283;

// Checks a caller's ncclSimInfo_t: non-NULL, initialised with NCCL_SIM_INFO_INITIALIZER (magic) and large
// enough to hold estimatedTime. ncclInvalidArgument with a message otherwise.
ncclResult_t simInfoCheck(const ncclSimInfo_t* info);

// Plans every collective of `tasks` through its communicator's tuner chain (the same planCollective call
// a launch makes, so the same choice) and returns the predicted time of the group in microseconds: per
// communicator the sum of the chosen entries of the cost table, and over communicators the largest (they
// run concurrently). Point-to-point tasks have no cost model and add nothing. Nothing is connected or
// executed, no buffer is touched and no operation counter advances.
ncclResult_t simulateTasks(const Task* tasks, size_t nTasks, float* estimatedUs);

}  // namespace tutti
