#include "device/host/det_exchange.h"

#include "comm/comm.h"
#include "device/common/protocols.h"
#include "device/host/det_reduce_copy.h"
#include "util/check.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace tutti::host {
namespace {

// This rank's point-to-point connection ends with every peer (null at its own rank).
ncclResult_t peerConns(ncclComm* comm, const DetExchange& x, bool isSend, std::vector<HostConn*>* out) {
  out->assign(x.nRanks, nullptr);
  for (int p = 0; p < x.nRanks; ++p) {
    if (p == x.rank) continue;
    Connection* c = commFindConnection(comm, 0, kConnP2p, p, isSend);
    if (!c)
      TUTTI_FAIL(ncclInternalError, "rank {}: deterministic exchange: no point-to-point connection {} rank {}",
                 x.rank, isSend ? "to" : "from", p);
    (*out)[p] = &c->host;
  }
  return ncclSuccess;
}

// Elements per step: x.stepElems, at most a Simple slot's worth (every connection of a communicator has the same
// geometry).
size_t stepElems(const DetExchange& x, const std::vector<HostConn*>& conns) {
  const HostConn* any = conns[(x.rank + 1) % x.nRanks];
  return std::max<size_t>(1, std::min(x.stepElems, HostPrims::slotDataBytes(any->conn, TUTTI_PROTO_SIMPLE) / x.esize));
}

uint64_t stepsOf(size_t elems, size_t per) { return (elems + per - 1) / per; }

const void* ownScalar(const DetExchange& x) { return x.scalarPtr ? x.scalarPtr : &x.scalarBits; }

// Sends this rank's steps to every peer. A slice's steps that a network end may send from the user's buffers
// (userBufferStep) leave from the input, not copied into the FIFO; *fromUser then says so, and the exchange waits
// for them (waitUserSends) before it ends. Nothing it writes could still be on its way out: its own slice is not
// sent, a peer's slice of the output (in place) is written only after that peer reduced it, and so after the peer
// received what this rank sent of it. The tail, which every rank reduces into its own output, is copied.
ncclResult_t sendAll(ncclComm* comm, const DetExchange& x, const WaitContext& wait, const OpLabel& label,
                     bool* fromUser) {
  const int n = x.nRanks, r = x.rank;
  const size_t es = x.esize;
  std::vector<HostConn*> conns;
  TUTTI_CHECK(peerConns(comm, x, true, &conns));
  ResolvedRedOp copy{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copy);  // byte copy
  auto sendStep = [&](int to, const void* src, size_t bytes, bool user) {
    HostPrims prims(nullptr, conns[to], src, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    prims.useSlotRing(kDetSlotRing);
    prims.useUserBuffers(false, user);
    TUTTI_CHECK(prims.send(0, bytes));
    *fromUser |= prims.sentFromUser();
    return ncclSuccess;
  };
  if (x.rankScaled) {
    for (int d = 1; d < n; ++d) TUTTI_CHECK(sendStep((r + d) % n, ownScalar(x), es, false));
  }
  const size_t per = stepElems(x, conns);
  for (size_t at = 0; at < x.q; at += per) {
    const size_t m = std::min(per, x.q - at);
    for (int d = 1; d < n; ++d) {
      const int to = (r + d) % n;
      TUTTI_CHECK(sendStep(to, x.input + (size_t(to) * x.sliceStride + at) * es, m * es, true));
    }
  }
  for (size_t at = 0; at < x.tail; at += per) {
    const size_t m = std::min(per, x.tail - at);
    for (int d = 1; d < n; ++d) TUTTI_CHECK(sendStep((r + d) % n, x.input + (x.tailAt + at) * es, m * es, false));
  }
  return ncclSuccess;
}

// Waits until every step sendAll posted has left (the network ends' isends completed): the input is the caller's
// again.
ncclResult_t waitUserSends(ncclComm* comm, const DetExchange& x, const WaitContext& wait, const OpLabel& label) {
  std::vector<HostConn*> conns;
  TUTTI_CHECK(peerConns(comm, x, true, &conns));
  ResolvedRedOp copy{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copy);
  for (int p = 0; p < x.nRanks; ++p) {
    if (p == x.rank || !conns[p]->userBufferMinBytes) continue;
    HostPrims prims(nullptr, conns[p], nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    TUTTI_CHECK(prims.waitSent(/*all=*/true));
  }
  return ncclSuccess;
}

// Receives and reduces the peers' steps; with `sendFirst` (one thread), sends this rank's first, once the receives
// are announced (a network proxy then posts them while the sends go out).
ncclResult_t receiveAndReduce(ncclComm* comm, const DetExchange& x, const WaitContext& wait, const OpLabel& label,
                              bool sendFirst) {
  const int n = x.nRanks, r = x.rank;
  const size_t es = x.esize;
  std::vector<HostConn*> conns;
  TUTTI_CHECK(peerConns(comm, x, false, &conns));
  const size_t per = stepElems(x, conns);
  const uint64_t steps = (x.rankScaled ? 1 : 0) + stepsOf(x.q, per) + stepsOf(x.tail, per);
  ResolvedRedOp copy{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copy);
  // Each step needs every peer's: one spin budget polls them all (pollAll), then a peer still missing is slept on
  // at once. Waiting on each peer in turn would spend up to n - 1 budgets per step, yielding the core every few
  // polls, which ranks that outnumber the cores pay for in context switches.
  WaitContext sleepAtOnce = wait;
  sleepAtOnce.spinCount = 0;
  sleepAtOnce.driveSpinCount = 0;
  std::vector<std::unique_ptr<HostPrims>> prims(n);
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    announceRecvSteps(conns[p], steps);
    prims[p] = std::make_unique<HostPrims>(conns[p], nullptr, nullptr, nullptr, 1, copy, sleepAtOnce, label,
                                           TUTTI_PROTO_SIMPLE);
    prims[p]->useSlotRing(kDetSlotRing);
  }
  auto pollAll = [&] {
    SpinPacer pacer(wait.spinCount);
    for (int i = 0;; ++i) {
      bool all = true;
      for (int p = 0; p < n && all; ++p) all = p == r || prims[p]->recvReady();
      if (all || i >= wait.spinCount) return;
      pacer.pause();
    }
  };
  bool fromUser = false;
  if (sendFirst) TUTTI_CHECK(sendAll(comm, x, wait, label, &fromUser));
  // Peers in the order they send to this rank (rank - 1 first, as each sender starts with its next rank).
  auto eachPeer = [&](auto&& fn) -> ncclResult_t {
    for (int d = 1; d < n; ++d) TUTTI_CHECK(fn((r + n - d) % n));
    return ncclSuccess;
  };
  std::vector<char> scalars;
  if (x.rankScaled) {
    scalars.resize(size_t(n) * es);
    std::memcpy(scalars.data() + size_t(r) * es, ownScalar(x), es);
    pollAll();
    TUTTI_CHECK(eachPeer([&](int p) -> ncclResult_t {
      const char* data = nullptr;
      TUTTI_CHECK(prims[p]->recvPeek(es, &data));
      std::memcpy(scalars.data() + size_t(p) * es, data, es);
      prims[p]->recvRelease();
      return ncclSuccess;
    }));
  }
  std::vector<const void*> rows(n);
  // `len` elements whose own row starts at input element ownAt, reduced into out (null: dropped).
  auto segment = [&](size_t len, size_t ownAt, char* out) -> ncclResult_t {
    for (size_t at = 0; at < len; at += per) {
      const size_t m = std::min(per, len - at);
      pollAll();
      TUTTI_CHECK(eachPeer([&](int p) -> ncclResult_t {
        const char* data = nullptr;
        TUTTI_CHECK(prims[p]->recvPeek(m * es, &data));
        rows[p] = data;
        return ncclSuccess;
      }));
      rows[r] = x.input + (ownAt + at) * es;
      if (out) {
        void* dst = out + at * es;
        hostDetReduceCopy(x.op, n, rows.data(), 1, &dst, m, x.rankScaled ? scalars.data() : nullptr);
      }
      for (int p = 0; p < n; ++p)
        if (p != r) prims[p]->recvRelease();
    }
    return ncclSuccess;
  };
  TUTTI_CHECK(segment(x.q, size_t(r) * x.sliceStride, x.sliceOut));
  TUTTI_CHECK(segment(x.tail, x.tailAt, x.tailOut));
  return fromUser ? waitUserSends(comm, x, wait, label) : ncclSuccess;
}

// Channels other than 0, with reducedBefore: until channel 0 has reduced (it fails on its own after a timeout,
// and signals then too), or the communicator aborts.
ncclResult_t waitReduced(const DetExchange& x, const WaitContext& wait) {
  static const uint32_t kOpen = 0;
  WaitContext w = wait;
  w.timeoutNs = 0;
  w.shared = false;
  w.peerGone = nullptr;
  w.warnNs = 0;
  const WaitStatus st = waitAtLeast(&x.reduced, &x.reducedWaiters, &x.reducedSeq, &kOpen, 1, w);
  return st == WaitStatus::Ready && !x.reduceFailed.load(std::memory_order_acquire) ? ncclSuccess : ncclRemoteError;
}

}  // namespace

ncclResult_t runDetExchange(ncclComm* comm, const DetExchange& x, int channel, const WaitContext& wait,
                            const OpLabel& label) {
  if (channel == 0) {
    ncclResult_t res = ncclSuccess;
    if (x.nRanks > 1) res = receiveAndReduce(comm, x, wait, label, x.oneThread);
    if (x.reducedBefore) {
      if (res != ncclSuccess) x.reduceFailed.store(true, std::memory_order_release);
      publish(&x.reduced, &x.reducedWaiters, &x.reducedSeq, 1, false);
    }
    return res;
  }
  if (channel == 1 && x.nRanks > 1 && !x.oneThread) {
    bool fromUser = false;
    TUTTI_CHECK(sendAll(comm, x, wait, label, &fromUser));
    if (fromUser) TUTTI_CHECK(waitUserSends(comm, x, wait, label));
  }
  return x.reducedBefore ? waitReduced(x, wait) : ncclSuccess;
}

}  // namespace tutti::host
