#include "plan/simulate.h"

#include "comm/comm.h"
#include "device/common/dtypes.h"
#include "plan/plan.h"
#include "plan/tuning.h"
#include "util/check.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tutti {

ncclResult_t simInfoCheck(const ncclSimInfo_t* info) {
  if (info == nullptr)
    TUTTI_FAIL(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo is NULL (pass a ncclSimInfo_t initialised "
               "with NCCL_SIM_INFO_INITIALIZER)");
  // The size is read first: a caller built against a smaller struct must not have fields past it read.
  const size_t need = offsetof(ncclSimInfo_t, estimatedTime) + sizeof(info->estimatedTime);
  if (info->size < need)
    TUTTI_FAIL(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo->size is {} bytes, at least {} needed (was it "
               "initialised with NCCL_SIM_INFO_INITIALIZER?)", info->size, need);
  if (info->magic != kSimInfoMagic)
    TUTTI_FAIL(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo->magic is {:#x}, expected {:#x}: initialise the "
               "struct with NCCL_SIM_INFO_INITIALIZER", info->magic, kSimInfoMagic);
  return ncclSuccess;
}

ncclResult_t simulateTasks(const Task* tasks, size_t nTasks, float* estimatedUs) {
  // Per communicator, in order of first appearance (groups hold few communicators).
  std::vector<std::pair<const ncclComm*, double>> perComm;
  for (size_t i = 0; i < nTasks; ++i) {
    const Task& t = tasks[i];
    // Point-to-point has no cost model; an AlltoAll is point-to-point unless it takes the single-copy path.
    if (t.func == ncclFuncSend || t.func == ncclFuncRecv || t.func == ncclFuncAlltoAll) continue;
    // The tuner chain's plan: the single-copy and one-shot paths (kAlgoDirect, kAlgoOneShot) have no cost model of
    // their own, and they are taken only where measured to beat it, so its time is the estimate's upper bound.
    CollPlan plan;
    TUTTI_CHECK(planCollective(t.comm, t, &plan, /*allowDirect=*/false));
    auto it = std::find_if(perComm.begin(), perComm.end(), [&](const auto& e) { return e.first == t.comm; });
    if (it == perComm.end()) it = perComm.insert(perComm.end(), {t.comm, 0.0});
    it->second += plan.costUs;
    TUTTI_INFO(NCCL_COLL, "{} simulated: count {} datatype {} bytes {} comm {} rank {} algo {} proto {} channels {} "
               "time {} us (decider {})", funcName(t.func), t.count, dataTypeName(t.datatype), plan.nBytes,
               static_cast<const void*>(t.comm), t.comm->rank, tunedAlgoName(plan.algorithm),
               tunedProtoName(plan.protocol), plan.work.size(), plan.costUs, plan.decider);
  }
  double total = 0;
  for (const auto& e : perComm) total = std::max(total, e.second);
  *estimatedUs = static_cast<float>(total);
  return ncclSuccess;
}

}  // namespace tutti
