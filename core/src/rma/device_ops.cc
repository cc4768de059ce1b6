// One-sided operations on the device backends (sim and cuda; rma/window.h): queued on the caller's stream as
// device copies and the kernels of rma/rma_kernels.h, each followed by a host function (OpDone) that checks
// how a wait ended and lets the communicator go. To a rank of another host, a put is a copy into pinned
// staging memory on the stream and a host function that sends it (net_rma.h).
#include "rma/window.h"

#include "comm/comm.h"
#include "device/enqueue.h"
#include "rma/kernel_fns.h"
#include "rma/net_rma.h"
#include "rma/rma_kernels.h"
#include "util/check.h"
#include "util/log.h"

#include <algorithm>
#include <memory>
#include <vector>

namespace tutti::rma {

// What the host function after an operation does. Queued work holds the communicator (as on host streams),
// so it is not freed under a kernel still writing a peer's counter. A captured operation's OpDone belongs to
// the graph and holds nothing: it runs at every replay.
struct OpDone {
  ncclComm* comm = nullptr;
  rt::Runtime* rt = nullptr;
  bool captured = false;
  std::unique_ptr<CommOpsGuard> alive;
  // A wait's: where its kernel says how it ended, and what it waited for (error messages).
  dev::WaitStatus* status = nullptr;
  std::vector<ncclWaitSignalDesc_t> descs;
  const char* call = nullptr;
  // A put or signal to a rank of another host (net_rma.h): sent by the host function, from `staging`
  // (pinned memory the stream copied the source into before it).
  NetRma* net = nullptr;
  int netPeer = -1;
  uint32_t window = 0;
  uint64_t offset = 0;
  void* staging = nullptr;
  size_t bytes = 0;
};

namespace {

const void* kernelFn(rt::Runtime* rt, bool signal) {
  if (rt == rt::simRuntime()) return signal ? simSignalKernel() : simWaitKernel();
#ifdef TUTTI_HAVE_CUDA_KERNELS
  return signal ? cudaSignalKernel() : cudaWaitKernel();
#else
  return nullptr;
#endif
}

ncclResult_t launch(rt::Runtime* rt, bool signal, const void* args, size_t bytes, rt::Stream s, int rank) {
  rt::KernelLaunch k;
  k.fn = kernelFn(rt, signal);
  if (!k.fn)
    TUTTI_FAIL(ncclInvalidUsage, "rank {}: this build has no {} kernels for one-sided operations", rank, rt->name());
  k.grid = 1;
  k.block = 32;
  k.args = args;
  k.argBytes = bytes;
  return rt->launchKernel(k, s);
}

// How a wait kernel ended, worded as the host backend words it.
ncclResult_t waitResult(const OpDone& d) {
  const dev::WaitStatus& st = *d.status;
  if (st.end == dev::WaitEnd::Done) return ncclSuccess;
  const int rank = d.comm->rank;
  if (st.desc < 0 || st.desc >= static_cast<int>(d.descs.size()))
    TUTTI_FAIL(ncclInternalError, "rank {}: {}: the wait kernel reports descriptor {} of {}", rank, d.call, st.desc,
               d.descs.size());
  const ncclWaitSignalDesc_t& w = d.descs[st.desc];
  if (st.end == dev::WaitEnd::Aborted)
    TUTTI_FAIL(ncclInvalidUsage, "rank {}: {}: aborted while waiting for signals from rank {}", rank, d.call, w.peer);
  TUTTI_FAIL(ncclTimeout, "rank {}: {}: timed out waiting for {} signal(s) from rank {} (sigIdx {}, ctx {}; {} arrived "
             "so far, {} consumed before)", rank, d.call, w.opCnt, w.peer, w.sigIdx, w.ctx, st.seen,
             st.target - static_cast<uint64_t>(w.opCnt));
}

void freeOpDone(void* arg) {
  auto* d = static_cast<OpDone*>(arg);
  if (d->status) device::pinnedPut(d->rt, d->status, sizeof(dev::WaitStatus));
  if (d->staging) device::pinnedPut(d->rt, d->staging, d->bytes);
  delete d;
}

// The host function: a failed wait fails the communicator, as a failed kernel does (the user's stream reports
// it where the runtime can: sim).
void opDone(void* arg) {
  auto* d = static_cast<OpDone*>(arg);
  logSetThreadRank(d->comm->rank);
  ncclResult_t res = ncclSuccess;
  if (d->net) res = d->net->send(d->netPeer, d->window, d->offset, d->staging, d->bytes);
  if (d->status) res = waitResult(*d);
  {
    if (res != ncclSuccess) {
      ncclResult_t expected = ncclSuccess;
      d->comm->asyncError.compare_exchange_strong(expected, res);
      commCancelOps(d->comm);
      d->rt->failCurrentWork(res);
    }
  }
  if (!d->captured) freeOpDone(d);
}

}  // namespace

ncclResult_t CommRma::afterOp(rt::Stream stream, OpDone* done) {
  std::unique_ptr<OpDone, void (*)(void*)> d(done, freeOpDone);
  d->comm = comm_;
  d->rt = rt_;
  rt::Capture cap = rt::Capture::None;
  uint64_t id = 0;
  if (stream) TUTTI_CHECK(rt_->captureStatus(stream, &cap, &id));
  d->captured = cap == rt::Capture::Active;
  if (!d->captured) d->alive = std::make_unique<CommOpsGuard>(comm_);
  TUTTI_CHECK(rt_->launchHostFunc(stream, opDone, d.get()));
  OpDone* queued = d.release();  // the host function frees it (or the graph, below)
  if (queued->captured) return rt_->keepWithCapture(stream, queued, freeOpDone);
  return ncclSuccess;
}

ncclResult_t CommRma::devNetSend(int peer, uint32_t window, uint64_t offset, const void* src, size_t bytes,
                                 rt::Stream stream) {
  auto d = std::unique_ptr<OpDone, void (*)(void*)>(new OpDone, freeOpDone);
  d->rt = rt_;
  d->net = net_.get();
  d->netPeer = peer;
  d->window = window;
  d->offset = offset;
  d->bytes = bytes;
  if (bytes > 0) {
    TUTTI_CHECK(device::pinnedGet(rt_, bytes, &d->staging));
    TUTTI_CHECK(rt_->memcpyAsync(d->staging, src, bytes, stream));
  }
  return afterOp(stream, d.release());
}

ncclResult_t CommRma::devSignal(int peer, rt::Stream stream) {
  if (viaNetwork(peer)) return devNetSend(peer, NetRma::kNoWindow, 0, nullptr, 0, stream);
  dev::SignalArgs a{&remote_[peer][slotIndex(comm_->rank, 0, 0, comm_->nRanks)].value};
  TUTTI_CHECK(launch(rt_, /*signal=*/true, &a, sizeof a, stream, comm_->rank));
  return afterOp(stream, new OpDone);
}

ncclResult_t CommRma::devPut(const void* src, size_t bytes, int peer, ncclWindow_vidmem* win, size_t offset,
                             rt::Stream stream) {
  if (viaNetwork(peer))
    return devNetSend(peer, static_cast<WindowState*>(win->internal)->serial, offset, src, bytes, stream);
  if (bytes > 0) TUTTI_CHECK(rt_->memcpyAsync(win->peerBase[peer] + offset, src, bytes, stream));
  return devSignal(peer, stream);
}

ncclResult_t CommRma::launchWait(const ncclWaitSignalDesc_t* descs, int n, rt::Stream stream, const char* call) {
  auto d = std::unique_ptr<OpDone, void (*)(void*)>(new OpDone, freeOpDone);
  d->comm = comm_;
  d->rt = rt_;
  d->call = call;
  d->descs.assign(descs, descs + n);
  void* status = nullptr;
  TUTTI_CHECK(device::pinnedGet(rt_, sizeof(dev::WaitStatus), &status));
  d->status = static_cast<dev::WaitStatus*>(status);
  *d->status = dev::WaitStatus{};
  dev::WaitArgs a{};
  a.abortWord = abortWord_;
  a.timeoutNs = static_cast<uint64_t>(std::max<int64_t>(comm_->timeoutNs, 0));
  a.status = d->status;
  a.n = n;
  for (int i = 0; i < n; ++i) {
    const size_t slot = slotIndex(descs[i].peer, descs[i].sigIdx, descs[i].ctx, comm_->nRanks);
    a.desc[i] = dev::WaitDesc{&local_[slot].value, devConsumed_ + slot, static_cast<uint64_t>(descs[i].opCnt)};
  }
  TUTTI_CHECK(launch(rt_, /*signal=*/false, &a, sizeof a, stream, comm_->rank));
  // The sim's null stream ran the kernel already: the call itself reports how it ended.
  if (!stream && rt_ == rt::simRuntime()) return waitResult(*d);
  return afterOp(stream, d.release());
}

ncclResult_t CommRma::devWait(const std::vector<ncclWaitSignalDesc_t>& descs, rt::Stream stream, const char* call) {
  for (size_t i = 0; i < descs.size(); i += dev::kMaxWaitDescs) {
    const int n = static_cast<int>(std::min<size_t>(dev::kMaxWaitDescs, descs.size() - i));
    TUTTI_CHECK(launchWait(descs.data() + i, n, stream, call));
  }
  return ncclSuccess;
}

}  // namespace tutti::rma
