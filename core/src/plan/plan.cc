#include "plan/plan.h"

#include "comm/comm.h"
#include "comm/det_coll.h"
#include "device/common/protocols.h"
#include "device/host/direct_copy.h"
#include "device/host/oneshot.h"
#include "plan/tuning.h"
#include "plugin/params.h"
#include "rma/window.h"
#include "util/check.h"

#include <algorithm>

namespace tutti {

namespace {

// Symmetric (sym.h) when TUTTI_SYM_ENABLE allows, the collective is one of AllReduce, AllGather and
// ReduceScatter with something to move, its op the same on every rank (a user's PreMulSum scalar may differ
// from rank to rank, and each rank's own input must be scaled by its own), and both buffers lie in symmetric
// windows (rma/window.h). Every input of the decision is the same on every rank of a matching call.
bool planSymmetric(ncclComm* comm, const Task& task, CollPlan* plan, size_t count) {
  if (task.func != ncclFuncAllReduce && task.func != ncclFuncAllGather && task.func != ncclFuncReduceScatter)
    return false;
  if (count == 0 || comm->nRanks < 2 || !comm->rma) return false;
  if (task.func != ncclFuncAllGather && static_cast<int>(task.op) >= static_cast<int>(ncclNumOps)) return false;
  if (paramInt("TUTTI_SYM_ENABLE") == 0) return false;
  const int k = comm->nRanks;
  const size_t bytes = count * plan->eltSize;
  const size_t sendBytes = task.func == ncclFuncReduceScatter ? bytes * k : bytes;
  const size_t recvBytes = task.func == ncclFuncAllGather ? bytes * k : bytes;
  SymPeers found{};  // on the stack: most calls do not qualify, and only a hit allocates
  {
    std::lock_guard<std::mutex> lock(comm->rmaMutex);
    if (!comm->rma || !comm->rma->symmetricPeers(task.sendbuff, sendBytes, task.recvbuff, recvBytes, &found))
      return false;
  }
  auto peers = std::make_shared<SymPeers>(found);
  // In-place AllGather: every rank's input is its own block of its output, at an offset that differs from rank
  // to rank (ranks are assumed alike in this, as in the offsets).
  if (task.func == ncclFuncAllGather &&
      static_cast<const char*>(task.sendbuff) == static_cast<const char*>(task.recvbuff) + comm->rank * bytes)
    for (int r = 0; r < k; ++r) peers->send[r] = peers->recv[r] + r * bytes;
  const size_t total = task.func == ncclFuncAllReduce ? bytes : bytes * k;
  plan->nBytes = total;
  plan->decider = "symmetric windows";
  plan->sym = std::move(peers);
  symmetricBlocks(comm, task.func, count, comm->rank, task.sendbuff == task.recvbuff, plan);
  return true;
}

}  // namespace

void symmetricBlocks(const ncclComm* comm, ncclFunc_t func, size_t count, int ringIx, bool inPlace, CollPlan* plan) {
  const int nb = static_cast<int>(std::clamp<size_t>(divUp(plan->nBytes, kMinBytesPerChannel), 1,
                                                     std::min(comm->nChannels, kSymMaxBlocks)));
  const size_t align = std::max<size_t>(1, 64 / plan->eltSize);
  const size_t perBlock = alignUp(divUp(count, nb), align);
  plan->algorithm = kAlgoSymmetric;
  plan->protocol = TUTTI_PROTO_SIMPLE;
  for (int b = 0; b < nb; ++b) {
    CollWork w{};
    w.func = func;
    w.nRanks = comm->nRanks;
    w.ringIx = ringIx;
    w.count = count;
    w.chOffset = std::min(count, perBlock * b);
    w.chCount = std::min(perBlock, count - w.chOffset);
    w.chunkCount = w.chCount;
    w.align = align;
    w.inPlace = inPlace;
    plan->work.push_back(w);
  }
}

namespace {

// Completes the plan of one of the core's own paths (no tuner; one channel of Simple slots) into *out.
ncclResult_t planCorePath(CollPlan* plan, int algorithm, size_t totalBytes, CollPlan* out) {
  plan->algorithm = algorithm;
  plan->protocol = NCCL_PROTO_SIMPLE;
  plan->nBytes = totalBytes;
  plan->decider = kCoreDecider;
  plan->work.resize(1);
  *out = std::move(*plan);
  return ncclSuccess;
}

}  // namespace

CorePaths corePaths(const ncclComm* comm, const Task& task, bool preMul) {
  CorePaths p;
  const bool blockWise =
      task.func == ncclFuncAllGather || task.func == ncclFuncReduceScatter || task.func == ncclFuncAlltoAll;
  p.totalBytes = task.count * dataTypeSize(task.datatype) * (blockWise ? static_cast<size_t>(comm->nRanks) : 1);
  if (task.internal) return p;
  const bool det = detReduces(task);
  p.det = det;
  const bool userOp = static_cast<int>(task.op) >= static_cast<int>(ncclNumOps);
  if (oneShotFunc(task.func) && !(det && userOp)) {
    p.doubling = doublingWanted(comm, task.func, p.totalBytes, det);
    p.oneShot = p.doubling || oneShotWanted(comm, task.func, p.totalBytes);
  }
  p.direct = directWanted(comm, task.func, p.totalBytes, det, preMul, det && detPairPath(task));
  // Ranks as threads: from comm->directOverOneShot bytes an AllReduce reads the peers' inputs in place rather than
  // sending them whole (comm.cc), and a Broadcast or AlltoAll does wherever it may (one copy where the one-shot,
  // the binomial tree and Bruck's algorithm make two or more: 8 threads, 256 KiB, Broadcast 941 -> 130 us,
  // AlltoAll 929 -> 136).
  const bool readsInPlace = task.func == ncclFuncAllReduce ? p.totalBytes >= comm->directOverOneShot
                                                           : task.func == ncclFuncBroadcast ||
                                                                 task.func == ncclFuncAlltoAll;
  if (p.oneShot && p.direct && comm->directOverOneShot && readsInPlace) p.oneShot = false;
  // Ranks as processes: an AllGather, Broadcast or (on 2 ranks) AlltoAll past its single-copy threshold reads the
  // peers' buffers (cross memory attach, one copy) rather than taking the one-shot plan's two (comm.cc,
  // directCopiesFirst).
  const bool copies = task.func == ncclFuncAllGather || task.func == ncclFuncBroadcast ||
                      (task.func == ncclFuncAlltoAll && comm->nRanks == 2);
  if (p.oneShot && p.direct && comm->directCopiesFirst && copies) p.oneShot = false;
  return p;
}

ncclResult_t planCollective(ncclComm* comm, const Task& task, CollPlan* out, bool allowDirect) {
  const int k = comm->nRanks;
  const size_t typeSize = dataTypeSize(task.datatype);
  const bool byteWise =
      task.func == ncclFuncAllGather || task.func == ncclFuncBroadcast || task.func == ncclFuncAlltoAll;
  CollPlan plan;
  plan.task = task;
  plan.eltSize = byteWise ? 1 : typeSize;
  const size_t count = byteWise ? task.count * typeSize : task.count;
  if (byteWise) {
    resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &plan.op);  // plain copy
  } else {
    TUTTI_CHECK(comm->redOps->resolve(task.op, task.datatype, &plan.op, funcName(task.func)));
  }
  // A deterministic reduction here takes the one-shot or the direct path, which fold in the fixed order
  // (detOnCorePath); the symmetric kernels do not.
  const bool det = detReduces(task);
  if (!det && planSymmetric(comm, task, &plan, count)) {
    *out = std::move(plan);
    return ncclSuccess;
  }

  const bool preMul = !byteWise && plan.op.kind == RedOpKind::PreMulSum;  // Avg or a user's PreMulSum
  const CorePaths paths = corePaths(comm, task, preMul);
  const size_t totalBytes = paths.totalBytes;  // also for the channel-count decision below
  if (allowDirect && paths.oneShot) {
    auto s = std::make_shared<OneShot>();
    s->func = task.func;
    s->root = task.root;
    s->input = static_cast<const char*>(task.sendbuff);
    s->output = static_cast<char*>(task.recvbuff);
    s->count = count;
    s->esize = plan.eltSize;
    s->op = plan.op;
    s->det = det;
    s->doubling = paths.doubling;
    const int algo = s->doubling ? kAlgoDoubling : kAlgoOneShot;
    plan.oneShot = std::move(s);
    return planCorePath(&plan, algo, totalBytes, out);
  }
  if (allowDirect && paths.direct) {
    auto d = std::make_shared<DirectCopy>();
    d->func = task.func;
    d->root = task.root;
    d->input = static_cast<const char*>(task.sendbuff);
    d->output = static_cast<char*>(task.recvbuff);
    d->bytes = count;  // byte-wise: AllGather's and AlltoAll's block, Broadcast's buffer
    d->count = count;  // AllReduce: the buffer; ReduceScatter: a block
    d->esize = plan.eltSize;
    d->op = plan.op;
    d->det = det;
    plan.direct = std::move(d);
    return planCorePath(&plan, kAlgoDirect, totalBytes, out);
  }
  if (det && !detPairPath(task))
    TUTTI_FAIL(ncclInternalError, "rank {}: deterministic {} of {} bytes planned off the one-shot and single-copy paths",
               comm->rank, funcName(task.func), totalBytes);
  plan.op.detPair = det;  // two ranks: every reduction folds both raw inputs in the fixed order
  // ncclAlltoAll records a collective only where it takes the one-shot or the direct path (grouped sends and
  // receives otherwise).
  if (task.func == ncclFuncAlltoAll)
    TUTTI_FAIL(ncclInternalError, "rank {}: AlltoAll of {} bytes planned off the one-shot and single-copy paths",
               comm->rank, totalBytes);
  int nc = static_cast<int>(std::clamp<size_t>(divUp(std::max<size_t>(totalBytes, 1), kMinBytesPerChannel),
                                               1, comm->collChannelCap));
  TuningDecision tuning;
  TUTTI_CHECK(tuningSelect(comm, task.func, totalBytes, nc, &tuning, !task.internal));
  plan.algorithm = tuning.algorithm;
  plan.protocol = tuning.protocol;
  plan.nBytes = totalBytes;
  plan.costUs = tuning.cost;
  plan.decider = std::move(tuning.decider);
  if (tuning.channelsFromTuner) nc = std::clamp(tuning.nChannels, 1, comm->nChannels);
  const size_t align = std::max<size_t>(1, 64 / plan.eltSize);
  const size_t perChannel = alignUp(divUp(count, nc), align);
  const size_t slotBytes = comm->buffSizes[plan.protocol] / TUTTI_STEPS;
  const size_t slotData = plan.protocol == TUTTI_PROTO_LL      ? llSlotData(slotBytes)
                          : plan.protocol == TUTTI_PROTO_LL128 ? ll128SlotData(slotBytes)
                                                               : slotBytes;
  size_t stepData = plan.algorithm == NCCL_ALGO_TREE && plan.protocol == TUTTI_PROTO_SIMPLE
                        ? treeChunkBytes(slotData, perChannel * plan.eltSize, comm->trees.depth)
                        : slotData;
  // Shorter steps for a ring AllReduce (and, within a node, ReduceScatter, AllGather and Broadcast) where its
  // receives, folds and sends overlap better and stay in cache (comm->ringStepMaxBytes, comm.cc); every rank plans
  // alike.
  const bool shortSteps = task.func == ncclFuncAllReduce ||
                          ((task.func == ncclFuncReduceScatter || task.func == ncclFuncAllGather ||
                            task.func == ncclFuncBroadcast) &&
                           comm->ringStepEveryRing);
  if (shortSteps && plan.algorithm == NCCL_ALGO_RING && plan.protocol == TUTTI_PROTO_SIMPLE &&
      comm->ringStepMaxBytes >= 64)
    stepData = std::min(stepData, comm->ringStepMaxBytes & ~size_t{63});
  const size_t slotElems = stepData / plan.eltSize;
  const size_t chunkCount = std::max<size_t>(align, slotElems - slotElems % align);

  // PAT ReduceScatter keeps partial sums of every block in scratch memory (pat.h): k blocks of one segment per
  // channel. A segment is the channel's whole share on the host backend; device backends bound it by the scratch
  // made at init (comm->scratchAtInit), so the call allocates nothing.
  char* scratch = nullptr;
  size_t scratchSeg = 0;
  const bool pat = plan.algorithm == NCCL_ALGO_PAT;
  if (pat && task.func == ncclFuncReduceScatter && k > 1) {
    const size_t perRow = static_cast<size_t>(nc) * static_cast<size_t>(k) * plan.eltSize;  // bytes per element
    scratchSeg = std::max<size_t>(perChannel, 1);
    if (comm->scratchAtInit) scratchSeg = std::min(scratchSeg, std::max(align, comm->scratchAtInit / perRow / align * align));
    void* p = nullptr;
    TUTTI_CHECK(commScratch(comm, scratchSeg * perRow, &p));
    scratch = static_cast<char*>(p);
  }

  for (int c = 0; c < nc; ++c) {
    const ChannelRing& ring = comm->rings[c];
    CollWork w{};
    w.func = task.func;
    w.nRanks = k;
    w.ringIx = ring.index;
    w.rootIx = 0;
    for (int i = 0; i < k; ++i)
      if (ring.ranks[i] == task.root) w.rootIx = i;
    w.count = count;
    w.chOffset = std::min(count, perChannel * c);
    w.chCount = std::min(perChannel, count - w.chOffset);
    w.chunkCount = chunkCount;
    w.align = align;
    w.inPlace = task.sendbuff == task.recvbuff;
    w.ringRanks = pat ? nullptr : ring.ranks.data();
    if (pat) w.ringIx = comm->rank;  // PAT's peers are ranks at distances 2^d, not ring positions
    if (scratch) {  // channel c's partial sums: k blocks of one segment
      w.scratchSeg = scratchSeg;
      w.scratchStride = scratchSeg;
      w.scratch = scratch + static_cast<size_t>(c) * static_cast<size_t>(k) * scratchSeg * plan.eltSize;
    }
    plan.work.push_back(w);
  }
  *out = std::move(plan);
  return ncclSuccess;
}

}  // namespace tutti
