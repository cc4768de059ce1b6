// One-sided communication: memory windows (ncclCommWindowRegister) and the signals of ncclPutSignal /
// ncclSignal / ncclWaitSignal.
//
// A window is registered by every rank of a communicator at once (a bootstrap allGather of each rank's
// buffer). Each rank's handle then holds, for every peer, where that peer's buffer is in this process:
//   - the peer is this rank, or a rank of this process: its buffer address as it is;
//   - a rank of another process of this host: the buffer's allocation mapped here, when the peer's buffer
//     came from ncclMemAlloc (a memfd-backed allocation that can be exported, device/runtime.h);
//   - otherwise (another host, or memory that cannot be shared): unreachable, and a put to it fails with a
//     message. One-sided operations over the network transport are not implemented.
// A put is a copy into the mapped peer buffer followed by a signal; a signal bumps a counter that lives in
// the target rank's signal block, one cache line per (source rank), written only by that source. The block
// is memfd memory mapped by every rank of the host, so the counters are ordinary atomics and waiters sleep
// on futexes (device/host/wait.h). The copy happens before the counter's release store, so a waiter that
// sees the count sees the data, as NCCL guarantees.
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

struct ncclComm;

namespace tutti::rma {

// NCCL 2.30 accepts only signal index 0 and context 0 ("must be set to 0 for now").
inline constexpr int kSignalIndices = 1;
inline constexpr int kContexts = 1;

// One counter of a signal block: the futex pair of device/host/wait.h, padded to a cache line so sources
// do not share lines.
struct alignas(64) SignalSlot {
  uint64_t value;
  uint32_t waiters;
  uint32_t seq;
};

struct PeerWindow {
  char* base = nullptr;  // the peer's buffer as mapped in this process; null when unreachable
  size_t size = 0;       // bytes the peer registered
  bool imported = false; // mapped by this window (closed with it)
};

}  // namespace tutti::rma

// ncclWindow_t (nccl.h declares the struct; Tutti defines it here).
struct ncclWindow_vidmem {
  uint64_t magic = 0;
  ncclComm* comm = nullptr;
  void* userPtr = nullptr;
  size_t size = 0;
  int flags = 0;
  std::vector<tutti::rma::PeerWindow> peers;  // by rank
};

namespace tutti::rma {

inline constexpr uint64_t kWindowMagic = 0x7475747469576e64ull;  // "tuttiWnd"

// A communicator's one-sided state, made by its first window registration (collective).
class CommRma {
 public:
  CommRma(ncclComm* comm) : comm_(comm) {}
  ~CommRma();  // releases windows never deregistered, and the signal blocks
  CommRma(const CommRma&) = delete;
  CommRma& operator=(const CommRma&) = delete;

  // Collective over the communicator: maps every reachable peer's signal block.
  ncclResult_t setupSignals();
  // Collective: registers [buff, buff + size) of every rank as one window.
  ncclResult_t registerWindow(void* buff, size_t size, int flags, ncclWindow_t* out);
  // Local: forgets the window and unmaps what it mapped.
  ncclResult_t deregisterWindow(ncclWindow_t win, const char* call);
  // The window if `win` is one of this communicator's live windows; an error naming `call` otherwise.
  ncclResult_t findWindow(ncclWindow_t win, const char* call, ncclWindow_vidmem** out);

  // The operations themselves, run in stream order (rma/rma_api.cc queues them).
  ncclResult_t put(const void* src, size_t bytes, int peer, ncclWindow_vidmem* win, size_t offset, int sigIdx,
                   int ctx);
  ncclResult_t signal(int peer, int sigIdx, int ctx);
  ncclResult_t wait(const ncclWaitSignalDesc_t& desc, const char* call);

  // Whether `peer`'s signal block is mapped here (false: another host, or its block could not be imported).
  bool signalReachable(int peer) const { return peer >= 0 && peer < static_cast<int>(remote_.size()) && remote_[peer]; }

 private:
  static size_t slotIndex(int source, int sigIdx, int ctx, int nRanks) {
    return (static_cast<size_t>(ctx) * kSignalIndices + static_cast<size_t>(sigIdx)) * nRanks + source;
  }
  void releaseWindow(ncclWindow_vidmem* win);

  ncclComm* comm_;
  SignalSlot* local_ = nullptr;         // this rank's block: [ctx][sigIdx][source]
  std::vector<SignalSlot*> remote_;     // each peer's block as mapped here (own block for this rank)
  std::vector<bool> remoteImported_;
  // Per source peer: signals consumed by waits so far ([ctx][sigIdx][peer]).
  std::unique_ptr<std::atomic<uint64_t>[]> consumed_;
  // Per target peer: serializes this rank's signals to it, so the counter only grows even when several
  // streams of this rank signal the same peer at once.
  std::unique_ptr<std::mutex[]> sendMutex_;
  std::mutex windowsMutex_;
  std::unordered_set<ncclWindow_vidmem*> windows_;
};

struct CommRmaDeleter {
  void operator()(CommRma* rma) const;
};

// The communicator's one-sided state, made (collectively) on first use. Every rank must call it at the same
// point: window registration does.
ncclResult_t commRma(ncclComm* comm, CommRma** out);

}  // namespace tutti::rma
