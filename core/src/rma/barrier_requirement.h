// The resource requirement of nBarriers barriers of a team (ncclLsaBarrierCreateRequirement and
// ncclGinBarrierCreateRequirement): one buffer of ncclLsaBarrierBytes in each rank's resource block, whose
// offset ncclDevCommCreate writes into the handle. Both barriers share the layout (nccl_device/gin_barrier.h).
#pragma once

#include <nccl_device.h>

#include <cstring>

namespace tutti::rma {

template <typename Handle>
void fillBarrierRequirement(int nBarriers, int teamRanks, Handle* outHandle, ncclDevResourceRequirements_t* outReq) {
  std::memset(outReq, 0, sizeof *outReq);
  outReq->bufferSize = ncclLsaBarrierBytes(nBarriers, teamRanks);
  outReq->bufferAlign = 64;
  outReq->outBufferHandle = &outHandle->bufHandle;
  outHandle->bufHandle = 0;
  outHandle->nBarriers = nBarriers;
}

}  // namespace tutti::rma
