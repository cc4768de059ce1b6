#include "device/host/sym.h"

#include "comm/comm.h"
#include "device/host/det_reduce_copy.h"
#include "util/check.h"
#include "util/log.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

namespace tutti::host {

namespace {

// Passes barrier `block` with every rank: publishes this rank's next count in every rank's slot for it, then
// waits for every rank's count in its own slots.
ncclResult_t barrier(ncclComm* comm, const SymPeers& peers, int block, const WaitContext& wait,
                     const OpLabel& label, const char* when) {
  if (peers.local) return ncclSuccess;  // rows in this rank's memory, in order: nobody to wait for
  const int n = comm->nRanks, me = comm->rank;
  SyncSlot* mine = symSlot(peers.barrier[me], block, me, n);
  const uint64_t next = std::atomic_ref<uint64_t>(mine->value).load(std::memory_order_relaxed) + 1;
  for (int i = 1; i <= n; ++i) {  // this rank's own slot last: it remembers the count
    SyncSlot* s = symSlot(peers.barrier[(me + i) % n], block, me, n);
    publish(&s->value, &s->waiters, &s->seq, next, /*shared=*/true);
  }
  for (int i = 1; i < n; ++i) {
    const int p = (me + i) % n;
    SyncSlot* s = symSlot(peers.barrier[me], block, p, n);
    WaitContext w = wait;
    w.shared = true;
    if (comm->peers[p].pidHash != comm->peers[me].pidHash) w.peerGone = comm->bootstrap->peerGoneFlag(p);
    switch (waitAtLeast(&s->value, &s->waiters, &s->seq, nullptr, next, w)) {
      case WaitStatus::Ready: break;
      case WaitStatus::Aborted:
        TUTTI_INFO(NCCL_COLL, "rank {}: {} (opCount {}, block {}) aborted while waiting for rank {} {}", me,
                   label.opName, label.opCount, block, p, when);
        return ncclRemoteError;
      case WaitStatus::TimedOut: {
        if (label.failure) {
          int none = -1;
          label.failure->compare_exchange_strong(none, failureRecord(p, true));
        }
        const std::string arrived = label.whoArrived ? label.whoArrived(label.askCtx, label.opCount) : "";
        TUTTI_FAIL(ncclTimeout, "rank {}: {} on symmetric windows (opCount {}, block {}) timed out waiting for rank {} "
                   "{}{}", me, label.opName, label.opCount, block, p, when,
                   arrived.empty() ? fmt::format(": did rank {} call the same operation on the same windows?", p)
                                   : arrived);
      }
      case WaitStatus::PeerClosed:
        TUTTI_FAIL(ncclRemoteError, "rank {}: {} on symmetric windows (opCount {}, block {}): rank {} is gone", me,
                   label.opName, label.opCount, block, p);
    }
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t runSymmetric(ncclComm* comm, const CollPlan& plan, int block, const WaitContext& wait,
                          const OpLabel& label) {
  const SymPeers& peers = *plan.sym;
  const CollWork& w = plan.work[block];
  const int n = comm->nRanks, me = w.ringIx;  // the rank itself, 0 in a local step
  const size_t elt = plan.eltSize;
  TUTTI_CHECK(barrier(comm, peers, block, wait, label, "to start"));
  std::vector<const void*> in(n);
  std::vector<void*> out(n);
  switch (w.func) {
    case ncclFuncAllReduce: {
      size_t off = 0, cnt = 0;
      symSlice(w.chOffset, w.chCount, me, n, w.align, &off, &cnt);
      if (cnt == 0) break;
      for (int r = 0; r < n; ++r) {
        in[r] = peers.send[r] + off * elt;
        out[r] = peers.recv[r] + off * elt;
      }
      hostDetReduceCopy(plan.op, n, in.data(), n, out.data(), cnt);
      break;
    }
    case ncclFuncAllGather:
      for (int i = 0; i < n; ++i) {
        const int r = (me + i) % n;  // ranks read from different peers at once
        char* dst = peers.recv[me] + (static_cast<size_t>(r) * w.count + w.chOffset) * elt;
        const char* src = peers.send[r] + w.chOffset * elt;
        if (dst != src && w.chCount) std::memcpy(dst, src, w.chCount * elt);
      }
      break;
    case ncclFuncReduceScatter: {
      if (w.chCount == 0) break;
      for (int r = 0; r < n; ++r) in[r] = peers.send[r] + (static_cast<size_t>(me) * w.count + w.chOffset) * elt;
      void* dst = peers.recv[me] + w.chOffset * elt;
      hostDetReduceCopy(plan.op, n, in.data(), 1, &dst, w.chCount);
      break;
    }
    default:
      TUTTI_FAIL(ncclInternalError, "rank {}: {} has no symmetric form", me, funcName(w.func));
  }
  return barrier(comm, peers, block, wait, label, "to finish");
}

}  // namespace tutti::host
