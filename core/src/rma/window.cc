#include "rma/window.h"

#include "comm/comm.h"
#include "device/enqueue.h"
#include "device/host/wait.h"
#include "rma/net_rma.h"
#include "device/runtime.h"
#include "util/check.h"
#include "util/log.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace tutti::rma {

rt::Runtime* rmaRuntime(const ncclComm* comm) {
  rt::Runtime* rt = device::runtimeOf(comm);
  return rt ? rt : rt::simRuntime();
}

char* reach(ncclComm* comm, int peer, const BufferRecord& rec, bool* imported) {
  *imported = false;
  const tuttiPeerInfo_t& me = comm->peers[comm->rank];
  const tuttiPeerInfo_t& other = comm->peers[peer];
  if (peer == comm->rank || other.pidHash == me.pidHash) return reinterpret_cast<char*>(rec.addr);
  if (other.hostHash != me.hostHash || !rec.exportable) return nullptr;
  void* p = nullptr;
  if (rmaRuntime(comm)->importMem(rec.exp, &p) != ncclSuccess) {
    TUTTI_WARN("rank {}: cannot map rank {}'s buffer ({}); one-sided operations to it will fail", comm->rank, peer,
               lastErrorText());
    return nullptr;
  }
  *imported = true;
  return static_cast<char*>(p);
}

BufferRecord recordOf(rt::Runtime* rt, void* buff, size_t size, int flags) {
  BufferRecord rec{};
  rec.addr = reinterpret_cast<uintptr_t>(buff);
  rec.size = size;
  rec.flags = flags;
  rt::MemKind kind = rt::MemKind::Unknown;
  if (!buff || rt->pointerKind(buff, &kind) != ncclSuccess || kind != rt::MemKind::Device) return rec;
  rt::MemExport exp;
  LastErrorKeeper keep;  // memory that cannot be exported (mapped from a peer) is only "not shareable"
  if (rt->exportMem(buff, &exp) == ncclSuccess && exp.offset + size <= exp.bytes) {
    rec.exportable = 1;
    rec.exp = exp;
  }
  return rec;
}

CommRma::CommRma(ncclComm* comm)
    : comm_(comm), rt_(rmaRuntime(comm)), device_(comm->backend != Backend::Host) {}

ncclResult_t CommRma::setupSignals() {
  const int n = comm_->nRanks;
  const size_t slots = static_cast<size_t>(kContexts) * kSignalIndices * n;
  // The signal counters, then the barrier slots of symmetric collectives ([block][source], sym.h; only where
  // they can run).
  const size_t symSlots = n <= kSymMaxRanks ? static_cast<size_t>(kSymMaxBlocks) * n : 0;
  const size_t blockBytes = (slots + symSlots) * sizeof(SignalSlot);
  void* block = nullptr;
  TUTTI_CHECK(rt_->alloc(&block, blockBytes, /*shareable=*/true));
  local_ = static_cast<SignalSlot*>(block);
  TUTTI_CHECK(rt_->memset(block, 0, blockBytes));
  void* word = nullptr;
  TUTTI_CHECK(rt_->hostAlloc(&word, sizeof(uint32_t)));
  abortWord_ = static_cast<uint32_t*>(word);
  *abortWord_ = 0;
  comm_->rmaAbortWord.store(abortWord_, std::memory_order_release);
  if (comm_->abortFlag.load(std::memory_order_acquire)) __atomic_store_n(abortWord_, 1u, __ATOMIC_RELEASE);
  if (device_) {
    void* counts = nullptr;
    TUTTI_CHECK(rt_->alloc(&counts, slots * sizeof(uint64_t), /*shareable=*/false));
    devConsumed_ = static_cast<uint64_t*>(counts);
    TUTTI_CHECK(rt_->memset(counts, 0, slots * sizeof(uint64_t)));
  }
  consumed_ = std::make_unique<std::atomic<uint64_t>[]>(slots);
  sendMutex_ = std::make_unique<std::mutex[]>(n);
  std::vector<BufferRecord> recs(n);
  recs[comm_->rank] = recordOf(rt_, block, blockBytes, 0);
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
  int lsaFirst = 0, lsaSize = 0;
  lsaRange(comm_, &lsaFirst, &lsaSize);
  symBarriers_ = lsaSize == n && n <= kSymMaxRanks;
  for (int p = 0; p < n; ++p) symBarriers_ = symBarriers_ && remote_[p];
  // Ranks of other hosts: over the network.
  TUTTI_CHECK(NetRma::create(comm_, this, device_ ? rt_ : nullptr, &net_));
  return ncclSuccess;
}

bool CommRma::viaNetwork(int peer) const { return net_ && net_->reaches(peer); }

bool CommRma::signalReachable(int peer) const {
  return peer >= 0 && peer < static_cast<int>(remote_.size()) && (remote_[peer] || viaNetwork(peer));
}

char* CommRma::netTarget(uint32_t serial, uint64_t offset, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(windowsMutex_);
  auto it = buffers_.find(serial);
  if (it == buffers_.end() || offset > it->second.second || bytes > it->second.second - offset) return nullptr;
  return it->second.first + offset;
}

uint64_t* CommRma::localSignalWord(int source) const {
  return &local_[slotIndex(source, 0, 0, comm_->nRanks)].value;
}

void CommRma::netSignal(int source) {
  // Only this rank's network service writes the counters of ranks of other hosts (device backends: through
  // the runtime, net_rma.cc).
  SignalSlot* slot = local_ + slotIndex(source, 0, 0, comm_->nRanks);
  const uint64_t next = std::atomic_ref<uint64_t>(slot->value).load(std::memory_order_relaxed) + 1;
  host::publish(&slot->value, &slot->waiters, &slot->seq, next, /*shared=*/true);
}

ncclResult_t CommRma::registerWindow(void* buff, size_t size, int flags, ncclWindow_t* out) {
  const int n = comm_->nRanks;
  std::vector<BufferRecord> recs(n);
  recs[comm_->rank] = recordOf(rt_, buff, size, flags);
  uint32_t serial = 0;
  {
    std::lock_guard<std::mutex> lock(windowsMutex_);
    serial = nextSerial_++;
    buffers_[serial] = {static_cast<char*>(buff), size};
  }
  // Until the window is made, a failure forgets the buffer again.
  bool made = false;
  struct Forget {
    CommRma* self;
    uint32_t serial;
    const bool& made;
    ~Forget() {
      if (made) return;
      std::lock_guard<std::mutex> lock(self->windowsMutex_);
      self->buffers_.erase(serial);
    }
  } forget{this, serial, made};
  TUTTI_CHECK(comm_->bootstrap->allGather(recs.data(), sizeof(BufferRecord)));
  for (int p = 0; p < n; ++p)
    if ((recs[p].flags & NCCL_WIN_COLL_SYMMETRIC) != (flags & NCCL_WIN_COLL_SYMMETRIC))
      TUTTI_FAIL(ncclInvalidUsage, "ncclCommWindowRegister: rank {} registers with NCCL_WIN_COLL_SYMMETRIC {} but "
                 "rank {} {}: every rank must pass the same flags", comm_->rank,
                 (flags & NCCL_WIN_COLL_SYMMETRIC) ? "set" : "unset", p,
                 (recs[p].flags & NCCL_WIN_COLL_SYMMETRIC) ? "sets it" : "does not");
  auto state = std::make_unique<WindowState>();
  const size_t baseAt = (sizeof(ncclWindow_vidmem) + 63) / 64 * 64;
  const size_t sizeAt = baseAt + n * sizeof(char*);
  TUTTI_CHECK(rt_->hostAlloc(&state->block, sizeAt + n * sizeof(size_t)));
  auto* win = new (state->block) ncclWindow_vidmem{};
  auto* base = new (static_cast<char*>(state->block) + baseAt) char*[n]();
  auto* sizes = new (static_cast<char*>(state->block) + sizeAt) size_t[n]();
  state->imported.assign(n, 0);
  for (int p = 0; p < n; ++p) {
    bool imported = false;
    sizes[p] = recs[p].size;
    base[p] = recs[p].size ? reach(comm_, p, recs[p], &imported) : nullptr;
    state->imported[p] = imported;
  }
  win->magic = kWindowMagic;
  win->comm = comm_;
  win->userPtr = buff;
  win->size = size;
  win->flags = flags;
  win->rank = comm_->rank;
  win->nRanks = n;
  lsaRange(comm_, &win->lsaFirst, &win->lsaSize);
  win->peerBase = base;
  win->peerSize = sizes;
  // Symmetric collectives need every rank to reach every buffer; whether they can is decided from the records
  // (the same on every rank), then checked against what this rank mapped.
  if (flags & NCCL_WIN_COLL_SYMMETRIC) {
    int lsaFirst = 0, lsaSize = 0;
    lsaRange(comm_, &lsaFirst, &lsaSize);
    bool oneProcess = true, allShareable = true;
    for (int p = 0; p < n; ++p) {
      oneProcess = oneProcess && comm_->peers[p].pidHash == comm_->peers[0].pidHash;
      allShareable = allShareable && recs[p].exportable;
    }
    // On a GPU a buffer of this process is reachable by its kernels only if it is device memory: the shareable
    // kind (ncclMemAlloc) is the one every rank can tell apart.
    const bool reachable = allShareable || (oneProcess && comm_->backend != Backend::Cuda);
    state->symmetric = lsaSize == n && n <= kSymMaxRanks && size > 0 && reachable;
    for (int p = 0; p < n && state->symmetric; ++p) {
      if (base[p]) continue;
      TUTTI_WARN("rank {}: rank {}'s buffer of a symmetric window could not be mapped; collectives on it will wait "
                 "for this rank in vain", comm_->rank, p);
      state->symmetric = false;
    }
  }
  win->internal = state.release();
  {
    std::lock_guard<std::mutex> lock(windowsMutex_);
    static_cast<WindowState*>(win->internal)->serial = serial;
    windows_.insert(win);
    made = true;
  }
  *out = win;
  return ncclSuccess;
}

void CommRma::releaseWindow(ncclWindow_vidmem* win) {
  auto* state = static_cast<WindowState*>(win->internal);
  for (size_t p = 0; p < state->imported.size(); ++p)
    if (state->imported[p] && rt_->closeImport(win->peerBase[p]) != ncclSuccess)
      TUTTI_WARN("rank {}: cannot unmap rank {}'s window buffer: {}", comm_->rank, p, lastErrorText());
  win->magic = 0;
  if (rt_->hostFree(state->block) != ncclSuccess)
    TUTTI_WARN("rank {}: cannot free a window descriptor: {}", comm_->rank, lastErrorText());
  delete state;
}

bool CommRma::symmetricPeers(const void* sendbuff, size_t sendBytes, const void* recvbuff, size_t recvBytes,
                             SymPeers* out) {
  if (!symBarriers_) return false;
  const int n = comm_->nRanks;
  std::lock_guard<std::mutex> lock(windowsMutex_);
  // The symmetric window holding [p, p + bytes) on this rank, and the range on every rank: its offset.
  auto find = [&](const void* p, size_t bytes, const ncclWindow_vidmem** win, size_t* offset) {
    const auto at = reinterpret_cast<uintptr_t>(p);
    for (const ncclWindow_vidmem* w : windows_) {
      if (!static_cast<const WindowState*>(w->internal)->symmetric) continue;
      const auto base = reinterpret_cast<uintptr_t>(w->userPtr);
      if (at < base || at - base > w->size || bytes > w->size - (at - base)) continue;
      bool fits = true;
      for (int r = 0; r < n && fits; ++r) fits = w->peerSize[r] >= at - base + bytes;
      if (!fits) continue;
      *win = w;
      *offset = at - base;
      return true;
    }
    return false;
  };
  const ncclWindow_vidmem *sw = nullptr, *rw = nullptr;
  size_t so = 0, ro = 0;
  if (!find(sendbuff, sendBytes, &sw, &so) || !find(recvbuff, recvBytes, &rw, &ro)) return false;
  const size_t symBase = static_cast<size_t>(kContexts) * kSignalIndices * n;
  for (int r = 0; r < n; ++r) {
    out->send[r] = sw->peerBase[r] + so;
    out->recv[r] = rw->peerBase[r] + ro;
    out->barrier[r] = remote_[r] + symBase;
  }
  return true;
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
    buffers_.erase(static_cast<WindowState*>(win->internal)->serial);
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
  net_.reset();  // the network service first: it writes into windows and signal counters
  for (ncclWindow_vidmem* w : windows_) releaseWindow(w);
  windows_.clear();
  for (DevCommState* d : devComms_) freeDevComm(d);
  devComms_.clear();
  for (size_t p = 0; p < remote_.size(); ++p)
    if (remoteImported_[p] && rt_->closeImport(remote_[p]) != ncclSuccess)
      TUTTI_WARN("rank {}: cannot unmap rank {}'s signal block: {}", comm_->rank, p, lastErrorText());
  if (local_ && rt_->free(local_) != ncclSuccess)
    TUTTI_WARN("rank {}: cannot free the signal block: {}", comm_->rank, lastErrorText());
  if (devConsumed_ && rt_->free(devConsumed_) != ncclSuccess)
    TUTTI_WARN("rank {}: cannot free the signal counts: {}", comm_->rank, lastErrorText());
  if (abortWord_) {
    comm_->rmaAbortWord.store(nullptr, std::memory_order_release);
    if (rt_->hostFree(abortWord_) != ncclSuccess)
      TUTTI_WARN("rank {}: cannot free the abort word: {}", comm_->rank, lastErrorText());
  }
}

void lsaRange(const ncclComm* comm, int* first, int* size) {
  int lo = comm->rank, hi = comm->rank;
  const uint64_t host = comm->peers[comm->rank].hostHash;
  while (lo > 0 && comm->peers[lo - 1].hostHash == host) --lo;
  while (hi + 1 < comm->nRanks && comm->peers[hi + 1].hostHash == host) ++hi;
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
  if (viaNetwork(peer))
    return net_->send(peer, static_cast<WindowState*>(win->internal)->serial, offset, src, bytes);
  if (bytes > 0) std::memmove(win->peerBase[peer] + offset, src, bytes);  // a put to itself may overlap
  return signal(peer, sigIdx, ctx);
}

ncclResult_t CommRma::signal(int peer, int sigIdx, int ctx) {
  if (viaNetwork(peer)) return net_->send(peer, NetRma::kNoWindow, 0, nullptr, 0);
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
