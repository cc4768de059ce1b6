// One user call, as recorded between ncclGroupStart and ncclGroupEnd.
#pragma once

#include <nccl.h>
#include <tutti/common.h>

#include "comm/profiler.h"

#include <cstddef>
#include <memory>

namespace tutti {

struct CollPlan;

struct Task {
  ncclFunc_t func = ncclFuncAllReduce;  // ncclFuncSend / ncclFuncRecv for point-to-point
  ncclComm* comm = nullptr;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;        // elements as the user passed them (per-rank block for AllGather/ReduceScatter)
  ncclDataType_t datatype = ncclInt8;
  ncclRedOp_t op = ncclSum;
  int root = 0;            // Broadcast/Reduce root; Send/Recv peer
  cudaStream_t stream = nullptr;
  // Profiling only (null otherwise): the API call's event (CollApi / P2pApi) and the Coll / P2p event.
  ProfRef api;
  ProfRef prof;
  // Set: the collective runs this plan as it is instead of being planned (the local step of a deterministic
  // reduction, comm/det_coll.h). The plan's own task leaves it unset.
  std::shared_ptr<const CollPlan> plan;
  // A step of another call (the data movement of a deterministic reduction): NCCL_ALGO / NCCL_PROTO, which
  // the user set for calls of their own, do not restrict it.
  bool internal = false;
};

const char* funcName(ncclFunc_t func);

}  // namespace tutti
