#include "rma/window.h"

#include "comm/comm.h"
#include "device/host/wait.h"
#include "device/runtime.h"
#include "util/check.h"
#include "util/log.h"

#include <algorithm>
#include <cstring>

namespace tutti::rma {

char* reach(ncclComm* comm, int peer, const BufferRecord& rec, bool* imported) {
  *imported = false;
  const tuttiPeerInfo_t& me = comm->peers[comm->rank];
  const tuttiPeerInfo_t& other = comm->peers[peer];
  if (peer == comm->rank || other.pidHash == me.pidHash) return reinterpret_cast<char*>(rec.addr);
  if (other.hostHash != me.hostHash || !rec.exportable) return nullptr;
  void* p = nullptr;
  if (rt::simRuntime()->importMem(rec.exp, &p) != ncclSuccess) {
    TUTTI_WARN("rank {}: cannot map rank {}'s buffer ({}); one-sided operations to it will fail", comm->rank, peer,
               lastErrorText());
    return nullptr;
  }
  *imported = true;
  return static_cast<char*>(p);
}

BufferRecord recordOf(void* buff, size_t size, int flags) {
  BufferRecord rec{};
  rec.addr = reinterpret_cast<uintptr_t>(buff);
  rec.size = size;
  rec.flags = flags;
  rt::MemKind kind = rt::MemKind::Unknown;
  if (!buff || rt::simRuntime()->pointerKind(buff, &kind) != ncclSuccess || kind != rt::MemKind::Device) return rec;
  rt::MemExport exp;
  LastErrorKeeper keep;  // memory that cannot be exported (mapped from a peer) is only "not shareable"
  if (rt::simRuntime()->exportMem(buff, &exp) == ncclSuccess && exp.offset + size <= exp.bytes) {
    rec.exportable = 1;
    rec.exp = exp;
  }
  return rec;
}

ncclResult_t CommRma::setupSignals() {
  const int n = comm_->nRanks;
  const size_t slots = static_cast<size_t>(kContexts) * kSignalIndices * n;
  void* block = nullptr;
  TUTTI_CHECK(rt::simRuntime()->alloc(&block, slots * sizeof(SignalSlot), /*shareable=*/true));
  std::memset(block, 0, slots * sizeof(SignalSlot));
  local_ = static_cast<SignalSlot*>(block);
  consumed_ = std::make_unique<std::atomic<uint64_t>[]>(slots);
  sendMutex_ = std::make_unique<std::mutex[]>(n);
  std::vector<BufferRecord> recs(n);
  recs[comm_->rank] = recordOf(block, slots * sizeof(SignalSlot), 0);
  TUTTI_CHECK(comm_->bootstrap->allGather(recs.data(), sizeof(BufferRecord)));
  remote_.assign(n, nullptr);
  remoteImported_.assign(n, false);
  for (int p = 0; p < n; ++p) {
    // As window buffers: a rank of this process signals into the block itself (one address for the counter,
    // which is also what thread checkers follow), another process of the host through a mapping of it.
    bool imported = false;
    remote_[p] = reinterpret_cast<SignalSlot*>(reach(comm_, p, recs[p], &imported));
    remoteImported_[p] = imported;
  }
  return ncclSuccess;
}

ncclResult_t CommRma::registerWindow(void* buff, size_t size, int flags, ncclWindow_t* out) {
  const int n = comm_->nRanks;
  std::vector<BufferRecord> recs(n);
  recs[comm_->rank] = recordOf(buff, size, flags);
  TUTTI_CHECK(comm_->bootstrap->allGather(recs.data(), sizeof(BufferRecord)));
  for (int p = 0; p < n; ++p)
    if ((recs[p].flags & NCCL_WIN_COLL_SYMMETRIC) != (flags & NCCL_WIN_COLL_SYMMETRIC))
      TUTTI_FAIL(ncclInvalidUsage, "ncclCommWindowRegister: rank {} registers with NCCL_WIN_COLL_SYMMETRIC {} but "
                 "rank {} {}: every rank must pass the same flags", comm_->rank,
                 (flags & NCCL_WIN_COLL_SYMMETRIC) ? "set" : "unset", p,
                 (recs[p].flags & NCCL_WIN_COLL_SYMMETRIC) ? "sets it" : "does not");
  auto state = std::make_unique<WindowState>();
  state->base.assign(n, nullptr);
  state->size.assign(n, 0);
  state->imported.assign(n, 0);
  for (int p = 0; p < n; ++p) {
    bool imported = false;
    state->size[p] = recs[p].size;
    state->base[p] = recs[p].size ? reach(comm_, p, recs[p], &imported) : nullptr;
    state->imported[p] = imported;
  }
  auto* win = new ncclWindow_vidmem{};
  win->magic = kWindowMagic;
  win->comm = comm_;
  win->userPtr = buff;
  win->size = size;
  win->flags = flags;
  win->rank = comm_->rank;
  win->nRanks = n;
  lsaRange(comm_, &win->lsaFirst, &win->lsaSize);
  win->peerBase = state->base.data();
  win->peerSize = state->size.data();
  win->internal = state.release();
  {
    std::lock_guard<std::mutex> lock(windowsMutex_);
    windows_.insert(win);
  }
  *out = win;
  return ncclSuccess;
}

void CommRma::releaseWindow(ncclWindow_vidmem* win) {
  auto* state = static_cast<WindowState*>(win->internal);
  for (size_t p = 0; p < state->base.size(); ++p)
    if (state->imported[p] && rt::simRuntime()->closeImport(state->base[p]) != ncclSuccess)
      TUTTI_WARN("rank {}: cannot unmap rank {}'s window buffer: {}", comm_->rank, p, lastErrorText());
  delete state;
  win->magic = 0;
  delete win;
}

ncclResult_t CommRma::findWindow(ncclWindow_t win, const char* call, ncclWindow_vidmem** out) {
  std::lock_guard<std::mutex> lock(windowsMutex_);
  if (!win || !windows_.count(win))
    TUTTI_FAIL(ncclInvalidArgument, "{}: window {} is not a live window of this communicator (rank {})", call,
               static_cast<void*>(win), comm_->rank);
  *out = win;
  return ncclSuccess;
}

ncclResult_t CommRma::deregisterWindow(ncclWindow_t win, const char* call) {
  {
    std::lock_guard<std::mutex> lock(windowsMutex_);
    if (!win || !windows_.erase(win))
      TUTTI_FAIL(ncclInvalidArgument, "{}: window {} is not a live window of this communicator (rank {})", call,
                 static_cast<void*>(win), comm_->rank);
  }
  releaseWindow(win);
  return ncclSuccess;
}

void CommRma::keepDevComm(DevCommState* state) {
  std::lock_guard<std::mutex> lock(windowsMutex_);
  devComms_.insert(state);
}

bool CommRma::dropDevComm(DevCommState* state) {
  std::lock_guard<std::mutex> lock(windowsMutex_);
  return devComms_.erase(state) > 0;
}

CommRma::~CommRma() {
  for (ncclWindow_vidmem* w : windows_) releaseWindow(w);
  windows_.clear();
  for (DevCommState* d : devComms_) freeDevComm(d);
  devComms_.clear();
  for (size_t p = 0; p < remote_.size(); ++p)
    if (remoteImported_[p] && rt::simRuntime()->closeImport(remote_[p]) != ncclSuccess)
      TUTTI_WARN("rank {}: cannot unmap rank {}'s signal block: {}", comm_->rank, p, lastErrorText());
  if (local_ && rt::simRuntime()->free(local_) != ncclSuccess)
    TUTTI_WARN("rank {}: cannot free the signal block: {}", comm_->rank, lastErrorText());
}

void lsaRange(const ncclComm* comm, int* first, int* size) {
  int lo = comm->rank, hi = comm->rank;
  if (comm->backend != Backend::Cuda) {
    const uint64_t host = comm->peers[comm->rank].hostHash;
    while (lo > 0 && comm->peers[lo - 1].hostHash == host) --lo;
    while (hi + 1 < comm->nRanks && comm->peers[hi + 1].hostHash == host) ++hi;
  }
  *first = lo;
  *size = hi - lo + 1;
}

void CommRmaDeleter::operator()(CommRma* rma) const { delete rma; }

ncclResult_t commRma(ncclComm* comm, CommRma** out) {
  std::lock_guard<std::mutex> lock(comm->rmaMutex);
  if (!comm->rma) {
    auto rma = std::unique_ptr<CommRma, CommRmaDeleter>(new CommRma(comm));
    TUTTI_CHECK(rma->setupSignals());
    comm->rma = std::move(rma);
  }
  *out = comm->rma.get();
  return ncclSuccess;
}

// ---- the operations ----

ncclResult_t CommRma::put(const void* src, size_t bytes, int peer, ncclWindow_vidmem* win, size_t offset,
                          int sigIdx, int ctx) {
  if (bytes > 0) std::memmove(win->peerBase[peer] + offset, src, bytes);  // a put to itself may overlap
  return signal(peer, sigIdx, ctx);
}

ncclResult_t CommRma::signal(int peer, int sigIdx, int ctx) {
  SignalSlot* slot = remote_[peer] + slotIndex(comm_->rank, sigIdx, ctx, comm_->nRanks);
  std::lock_guard<std::mutex> lock(sendMutex_[peer]);
  const uint64_t next = std::atomic_ref<uint64_t>(slot->value).load(std::memory_order_relaxed) + 1;
  host::publish(&slot->value, &slot->waiters, &slot->seq, next, /*shared=*/true);
  return ncclSuccess;
}

ncclResult_t CommRma::wait(const ncclWaitSignalDesc_t& d, const char* call) {
  const size_t i = slotIndex(d.peer, d.sigIdx, d.ctx, comm_->nRanks);
  SignalSlot* slot = local_ + i;
  const uint64_t target = consumed_[i].fetch_add(static_cast<uint64_t>(d.opCnt), std::memory_order_relaxed) + d.opCnt;
  host::WaitContext w = commWaitContext(comm_);
  w.shared = true;
  if (comm_->peers[d.peer].pidHash != comm_->peers[comm_->rank].pidHash)
    w.peerGone = comm_->bootstrap->peerGoneFlag(d.peer);
  switch (host::waitAtLeast(&slot->value, &slot->waiters, &slot->seq, nullptr, target, w)) {
    case host::WaitStatus::Ready: return ncclSuccess;
    case host::WaitStatus::Aborted:
      TUTTI_FAIL(ncclInvalidUsage, "rank {}: {}: aborted while waiting for signals from rank {}", comm_->rank, call,
                 d.peer);
    case host::WaitStatus::TimedOut:
      TUTTI_FAIL(ncclTimeout, "rank {}: {}: timed out waiting for {} signal(s) from rank {} (sigIdx {}, ctx {}; "
                 "{} arrived so far, {} consumed before)", comm_->rank, call, d.opCnt, d.peer, d.sigIdx, d.ctx,
                 std::atomic_ref<uint64_t>(slot->value).load(), target - d.opCnt);
    case host::WaitStatus::PeerClosed:
      TUTTI_FAIL(ncclRemoteError, "rank {}: {}: rank {} is gone while {} signal(s) from it were awaited", comm_->rank,
                 call, d.peer, d.opCnt);
  }
  return ncclInternalError;
}

}  // namespace tutti::rma
