// C entry points of one-sided communication: windows (ncclCommWindowRegister, ncclCommWindowDeregister,
// ncclWinGetUserPtr) and signals (ncclPutSignal, ncclSignal, ncclWaitSignal). See rma/window.h for how
// they work.
//
// Registration is collective and, inside ncclGroupStart/End, runs at the group end with the other ranks'
// registrations (one thread may register for several ranks, as with ncclCommInitAll). Deregistration is
// local. The operations are queued in stream order. On the host backend they run when the host stream
// (tutti.h) reaches them, or before the call returns with no stream. On the device backends they are device
// copies and kernels on the caller's stream (rma/device_ops.cc; the sim's null stream runs them at once).
// Inside a group they are issued at its end, puts and signals before waits.
#include "api/api.h"
#include "api/argcheck.h"
#include "comm/comm.h"
#include "comm/group.h"
#include "device/common/dtypes.h"
#include "device/host/stream.h"
#include "rma/window.h"

#include <memory>
#include <vector>

using namespace tutti;

namespace {

ncclResult_t checkUsable(ncclComm_t comm, const char* call) {
  TUTTI_CHECK(argCheckComm(comm, call));
  return commCheckUsable(comm, call);
}

// The state of a communicator that has registered a window; an error naming `call` otherwise.
ncclResult_t rmaOf(ncclComm_t comm, const char* call, rma::CommRma** out) {
  {
    std::lock_guard<std::mutex> lock(comm->rmaMutex);
    *out = comm->rma.get();
  }
  if (!*out)
    TUTTI_FAIL(ncclInvalidUsage, "{}: rank {} has no window: register one with ncclCommWindowRegister first", call,
               comm->rank);
  return ncclSuccess;
}

ncclResult_t checkStream(const char* call, ncclComm_t comm, cudaStream_t stream) {
  if (comm->backend == Backend::Cuda) return ncclSuccess;  // the CUDA runtime checks its streams
  if (stream && !host::HostStream::fromHandle(stream))
    TUTTI_FAIL(ncclInvalidArgument, "{}: rank {}: stream {} is not a host stream created with tuttiStreamCreate (the "
               "{} backend runs without CUDA streams)", call, comm->rank, static_cast<void*>(stream),
               backendName(comm->backend));
  return ncclSuccess;
}

// NCCL 2.30 takes signal index 0, context 0 and flags 0 only.
ncclResult_t checkSignalId(const char* call, int sigIdx, int ctx) {
  if (sigIdx < 0 || sigIdx >= rma::kSignalIndices)
    TUTTI_FAIL(ncclInvalidArgument, "{}: sigIdx {} is not supported (must be 0)", call, sigIdx);
  if (ctx < 0 || ctx >= rma::kContexts) TUTTI_FAIL(ncclInvalidArgument, "{}: ctx {} is not supported (must be 0)", call, ctx);
  return ncclSuccess;
}

// What ncclPutSignal and ncclSignal check alike: signal id, flags, the target `peer` (in range and reachable)
// and the stream; *out is the communicator's one-sided state.
ncclResult_t checkSignalTarget(const char* call, ncclComm_t comm, int peer, int sigIdx, int ctx, unsigned flags,
                               cudaStream_t stream, rma::CommRma** out) {
  TUTTI_CHECK(checkSignalId(call, sigIdx, ctx));
  if (flags != 0) TUTTI_FAIL(ncclInvalidArgument, "{}: flags {:#x} must be 0", call, flags);
  TUTTI_CHECK(argCheckPeer(peer, comm->nRanks, call));
  TUTTI_CHECK(checkStream(call, comm, stream));
  TUTTI_CHECK(rmaOf(comm, call, out));
  if (!(*out)->signalReachable(peer))
    TUTTI_FAIL(ncclInvalidUsage, "{}: rank {} cannot reach rank {}'s signals: on the {} backend one-sided operations "
               "reach ranks of this host only (load/store); the host backend also reaches other hosts", call,
               comm->rank, peer, backendName(comm->backend));
  return ncclSuccess;
}

// Runs `op` in `stream`'s order (now when there is none); queued work keeps the communicator alive.
ncclResult_t runInStreamOrder(ncclComm_t comm, cudaStream_t stream, host::WorkItem op) {
  if (!stream) return op();
  auto alive = std::make_shared<CommOpsGuard>(comm);
  host::HostStream::fromHandle(stream)->enqueue([op = std::move(op), alive]() mutable {
    const ncclResult_t res = op();
    alive.reset();
    return res;
  });
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
         int winFlags) {
  return apiGuard("ncclCommWindowRegister", [&]() -> ncclResult_t {
    constexpr const char* kCall = "ncclCommWindowRegister";
    TUTTI_CHECK(checkUsable(comm, kCall));
    TUTTI_CHECK(argCheckPtr(win, "win", kCall));
    if (size > 0) TUTTI_CHECK(argCheckPtr(buff, "buff", kCall));
    if (winFlags & ~(NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING))
      TUTTI_FAIL(ncclInvalidArgument, "{}: unknown winFlags bits {:#x}", kCall,
                 winFlags & ~(NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING));
    // *win is written when the registration is done (at the group end inside a group, as in NCCL).
    return groupAddInitJob([comm, buff, size, win, winFlags]() -> ncclResult_t {
      CommOpsGuard busy(comm);
      rma::CommRma* rma = nullptr;
      TUTTI_CHECK(rma::commRma(comm, &rma));
      return rma->registerWindow(buff, size, winFlags, win);
    });
  });
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  return apiGuard("ncclCommWindowDeregister", [&]() -> ncclResult_t {
    constexpr const char* kCall = "ncclCommWindowDeregister";
    TUTTI_CHECK(argCheckComm(comm, kCall));
    rma::CommRma* rma = nullptr;
    TUTTI_CHECK(rmaOf(comm, kCall, &rma));
    return rma->deregisterWindow(win, kCall);
  });
}

NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  return apiGuard("ncclWinGetUserPtr", [&]() -> ncclResult_t {
    constexpr const char* kCall = "ncclWinGetUserPtr";
    TUTTI_CHECK(argCheckComm(comm, kCall));
    TUTTI_CHECK(argCheckPtr(outUserPtr, "outUserPtr", kCall));
    rma::CommRma* rma = nullptr;
    TUTTI_CHECK(rmaOf(comm, kCall, &rma));
    ncclWindow_vidmem* w = nullptr;
    TUTTI_CHECK(rma->findWindow(win, kCall, &w));
    *outUserPtr = w->userPtr;
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclPutSignal, const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
         cudaStream_t stream) {
  return apiGuard("ncclPutSignal", [&]() -> ncclResult_t {
    constexpr const char* kCall = "ncclPutSignal";
    TUTTI_CHECK(checkUsable(comm, kCall));
    TUTTI_CHECK(argCheckDataType(datatype, kCall));
    size_t bytes = 0;
    TUTTI_CHECK(argCheckBytes(count, datatype, 1, kCall, &bytes));
    if (bytes > 0) TUTTI_CHECK(argCheckPtr(localbuff, "localbuff", kCall));
    rma::CommRma* rma = nullptr;
    TUTTI_CHECK(checkSignalTarget(kCall, comm, peer, sigIdx, ctx, flags, stream, &rma));
    ncclWindow_vidmem* win = nullptr;
    TUTTI_CHECK(rma->findWindow(peerWin, kCall, &win));
    const size_t targetSize = win->peerSize[peer];
    if (peerWinOffset > targetSize || bytes > targetSize - peerWinOffset)
      TUTTI_FAIL(ncclInvalidArgument, "{}: {} bytes at offset {} do not fit in rank {}'s {}-byte window", kCall, bytes,
                 peerWinOffset, peer, targetSize);
    if (bytes > 0 && !win->peerBase[peer] && !rma->viaNetwork(peer))
      TUTTI_FAIL(ncclInvalidUsage, "{}: rank {} cannot write into rank {}'s window: its buffer is in another process "
                 "and was not allocated with ncclMemAlloc (or is on another host)", kCall, comm->rank, peer);
    return groupAddRmaOp(false, [=]() -> ncclResult_t {
      if (comm->backend != Backend::Host) return rma->devPut(localbuff, bytes, peer, win, peerWinOffset, stream);
      return runInStreamOrder(comm, stream,
                              [=] { return rma->put(localbuff, bytes, peer, win, peerWinOffset, sigIdx, ctx); });
    });
  });
}

NCCL_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
         cudaStream_t stream) {
  return apiGuard("ncclSignal", [&]() -> ncclResult_t {
    constexpr const char* kCall = "ncclSignal";
    TUTTI_CHECK(checkUsable(comm, kCall));
    rma::CommRma* rma = nullptr;
    TUTTI_CHECK(checkSignalTarget(kCall, comm, peer, sigIdx, ctx, flags, stream, &rma));
    return groupAddRmaOp(false, [=]() -> ncclResult_t {
      if (comm->backend != Backend::Host) return rma->devSignal(peer, stream);
      return runInStreamOrder(comm, stream, [=] { return rma->signal(peer, sigIdx, ctx); });
    });
  });
}

NCCL_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
         cudaStream_t stream) {
  return apiGuard("ncclWaitSignal", [&]() -> ncclResult_t {
    constexpr const char* kCall = "ncclWaitSignal";
    TUTTI_CHECK(checkUsable(comm, kCall));
    if (nDesc < 0) TUTTI_FAIL(ncclInvalidArgument, "{}: nDesc {} must be >= 0", kCall, nDesc);
    if (nDesc > 0) TUTTI_CHECK(argCheckPtr(signalDescs, "signalDescs", kCall));
    TUTTI_CHECK(checkStream(kCall, comm, stream));
    std::vector<ncclWaitSignalDesc_t> descs(signalDescs, signalDescs + nDesc);
    for (int i = 0; i < nDesc; ++i) {
      const ncclWaitSignalDesc_t& d = descs[i];
      if (d.peer < 0 || d.peer >= comm->nRanks)
        TUTTI_FAIL(ncclInvalidArgument, "{}: signalDescs[{}].peer {} is out of range (0..{})", kCall, i, d.peer,
                   comm->nRanks - 1);
      if (d.opCnt < 0) TUTTI_FAIL(ncclInvalidArgument, "{}: signalDescs[{}].opCnt {} is negative", kCall, i, d.opCnt);
      TUTTI_CHECK(checkSignalId(kCall, d.sigIdx, d.ctx));
    }
    rma::CommRma* rma = nullptr;
    TUTTI_CHECK(rmaOf(comm, kCall, &rma));
    // A rank that cannot reach this one's signals (another host) can never send one: refuse rather than wait.
    for (const ncclWaitSignalDesc_t& d : descs)
      if (d.opCnt > 0 && !rma->signalReachable(d.peer))
        TUTTI_FAIL(ncclInvalidUsage, "{}: rank {} waits for signals from rank {}, which cannot reach it: on the {} "
                   "backend one-sided operations reach ranks of this host only (load/store)", kCall, comm->rank,
                   d.peer, backendName(comm->backend));
    if (descs.empty()) return ncclSuccess;
    return groupAddRmaOp(true, [=]() -> ncclResult_t {
      if (comm->backend != Backend::Host) return rma->devWait(descs, stream, kCall);
      return runInStreamOrder(comm, stream, [=]() -> ncclResult_t {
        for (const ncclWaitSignalDesc_t& d : descs) TUTTI_CHECK(rma->wait(d, kCall));
        return ncclSuccess;
      });
    });
  });
}
