#include "device/host/prims_simple.h"

#include "device/host/reduce_copy.h"
#include "util/check.h"

#include <atomic>

namespace tutti::host {

HostSimplePrims::HostSimplePrims(HostConn* recv, HostConn* send, const void* input, void* output,
                                 size_t eltSize, const ResolvedRedOp& op, const WaitContext& wait,
                                 const OpLabel& label)
    : recv_(recv), send_(send), input_(static_cast<const char*>(input)), output_(static_cast<char*>(output)),
      eltSize_(eltSize), op_(op), wait_(wait), label_(label) {
  // Both directions of a channel use the same slot geometry (NCCL_BUFFSIZE / NCCL_STEPS).
  const HostConn* c = send_ ? send_ : recv_;
  slotBytes_ = c ? c->conn.buffSizes[TUTTI_PROTO_SIMPLE] / TUTTI_STEPS : 0;
  slotBytes_ -= slotBytes_ % eltSize_;
}

ncclResult_t HostSimplePrims::waitFailed(WaitStatus st, bool sending, uint64_t step) const {
  const HostConn* c = sending ? send_ : recv_;
  const char* what = sending ? "a free slot towards" : "data from";
  switch (st) {
    case WaitStatus::Aborted:
      // A consequence, not a cause: the error that aborted the communicator was reported where it happened.
      TUTTI_INFO(NCCL_COLL | NCCL_P2P, "rank {}: {} (opCount {}, channel {}) aborted while waiting for {} rank {}",
                 label_.rank, label_.opName, label_.opCount, label_.channel, what, c->peer);
      return ncclRemoteError;
    case WaitStatus::TimedOut:
      TUTTI_FAIL(ncclTimeout,
                 "rank {}: {} (opCount {}, channel {}) timed out waiting for {} rank {} (step {}): did rank {} "
                 "call the same operation?",
                 label_.rank, label_.opName, label_.opCount, label_.channel, what, c->peer, step, c->peer);
    case WaitStatus::PeerClosed:
      TUTTI_FAIL(ncclRemoteError, "rank {}: {} (opCount {}, channel {}): rank {} closed the connection or died",
                 label_.rank, label_.opName, label_.opCount, label_.channel, c->peer);
    default:
      return ncclSuccess;
  }
}

ncclResult_t HostSimplePrims::run(unsigned mode, size_t in, size_t out, size_t n, bool postOp) {
  const size_t slotElems = slotBytes_ / eltSize_;
  size_t done = 0;
  // A zero-element call still makes one (empty) step on each connection it uses.
  do {
    const size_t elems = minSize(slotElems, n - done);
    const void* srcs[2];
    void* dsts[2];
    int nSrcs = 0, nDsts = 0;
    if (mode & kSrcInput) srcs[nSrcs++] = input_ + (in + done) * eltSize_;
    if (mode & kDstOutput) dsts[nDsts++] = output_ + (out + done) * eltSize_;

    uint64_t rstep = 0;
    if (mode & kRecv) {
      tuttiConnCtrl_t* ctrl = recv_->conn.ctrl;
      rstep = recv_->step;
      WaitContext w = wait_;
      w.shared = recv_->conn.shared != 0;
      w.peerPid = recv_->peerPid;
      WaitStatus st = waitAtLeast(&ctrl->tail, &ctrl->tailWaiters, &ctrl->tailSeq, &ctrl->senderClosed,
                                  rstep + 1, w);
      if (st != WaitStatus::Ready) return waitFailed(st, false, rstep);
      const int slot = static_cast<int>(rstep % TUTTI_STEPS);
      const int64_t got = std::atomic_ref<int64_t>(ctrl->sizes[slot]).load(std::memory_order_relaxed);
      if (got != static_cast<int64_t>(elems * eltSize_)) {
        TUTTI_FAIL(ncclInvalidUsage,
                   "rank {}: {} (opCount {}, channel {}): rank {} sent {} bytes where {} were expected "
                   "(mismatched calls across ranks?)",
                   label_.rank, label_.opName, label_.opCount, label_.channel, recv_->peer, got, elems * eltSize_);
      }
      srcs[nSrcs++] = static_cast<const char*>(recv_->conn.buffs[TUTTI_PROTO_SIMPLE]) + slot * slotBytes_;
    }
    uint64_t sstep = 0;
    if (mode & kSend) {
      tuttiConnCtrl_t* ctrl = send_->conn.ctrl;
      sstep = send_->step;
      if (sstep + 1 > TUTTI_STEPS) {
        WaitContext w = wait_;
        w.shared = send_->conn.shared != 0;
        w.peerPid = send_->peerPid;
        WaitStatus st = waitAtLeast(&ctrl->head, &ctrl->headWaiters, &ctrl->headSeq, &ctrl->receiverClosed,
                                    sstep + 1 - TUTTI_STEPS, w);
        if (st != WaitStatus::Ready) return waitFailed(st, true, sstep);
      }
      const int slot = static_cast<int>(sstep % TUTTI_STEPS);
      dsts[nDsts++] = static_cast<char*>(send_->conn.buffs[TUTTI_PROTO_SIMPLE]) + slot * slotBytes_;
    }

    if (elems > 0) {
      // The rank's own input enters the reduction through the pre-op (premulsum scalar), unless it is
      // only being forwarded (no source from the input).
      hostReduceCopy(op_, nSrcs, srcs, nDsts, dsts, elems, (mode & kSrcInput) != 0, postOp);
    }

    if (mode & kSend) {
      tuttiConnCtrl_t* ctrl = send_->conn.ctrl;
      const int slot = static_cast<int>(sstep % TUTTI_STEPS);
      std::atomic_ref<int64_t>(ctrl->sizes[slot]).store(static_cast<int64_t>(elems * eltSize_),
                                                        std::memory_order_relaxed);
      publish(&ctrl->tail, &ctrl->tailWaiters, &ctrl->tailSeq, ++send_->step, send_->conn.shared);
    }
    if (mode & kRecv) {
      tuttiConnCtrl_t* ctrl = recv_->conn.ctrl;
      publish(&ctrl->head, &ctrl->headWaiters, &ctrl->headSeq, ++recv_->step, recv_->conn.shared);
    }
    done += elems;
  } while (done < n);
  return ncclSuccess;
}

void announceRecvSteps(HostConn* conn, uint64_t steps) {
  if (conn && conn->conn.ctrl && steps) std::atomic_ref<uint64_t>(conn->conn.ctrl->recvWanted).fetch_add(steps);
}

ncclResult_t HostSimplePrims::localCopy(size_t in, size_t out, size_t n) {
  if (n == 0) return ncclSuccess;
  const void* src = input_ + in * eltSize_;
  void* dst = output_ + out * eltSize_;
  hostReduceCopy(op_, 1, &src, 1, &dst, n, true, true);
  return ncclSuccess;
}

}  // namespace tutti::host
