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
// the target rank's signal block, one cache line per (source rank), written only by that source. The copy
// happens before the counter's release, so a waiter that sees the count sees the data, as NCCL guarantees.
//   - host backend: the block is memfd memory mapped by every rank of the host, so the counters are ordinary
//     atomics and waiters sleep on futexes (device/host/wait.h); the operations run on host streams.
//   - device backends (sim, cuda; rma/device_ops.cc): the block is device memory of the runtime, exported to
//     the host's other processes; on the caller's stream a put is a device copy, a signal a one-thread kernel
//     (an atomic add after a system fence) and a wait a kernel polling the counters (rma/rma_kernels.h), so
//     the operations keep stream order, join graph captures, and the sim runs what a GPU runs. The window
//     descriptors live in pinned memory: device code (nccl_device/ptr.h) reads them.
#pragma once

#include <nccl.h>
#include <nccl_device/core.h>

#include "device/common/sym.h"
#include "device/runtime.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

struct ncclComm;

namespace tutti::rma {

// NCCL 2.30 accepts only signal index 0 and context 0 ("must be set to 0 for now").
inline constexpr int kSignalIndices = 1;
inline constexpr int kContexts = 1;

// One counter of a signal block (device/common/sym.h): the futex pair of device/host/wait.h, padded to a cache
// line so sources do not share lines. The block ends with the barrier slots of symmetric collectives.
using SignalSlot = SyncSlot;

// The library's side of a window (ncclWindow_vidmem::internal). The window and the arrays its public part
// points to (peerBase: by rank, the peer's buffer as mapped here, null when unreachable; peerSize: bytes the
// peer registered) are one block of the runtime's pinned memory, so kernels can read them.
struct WindowState {
  void* block = nullptr;          // ncclWindow_vidmem, char* base[nRanks], size_t size[nRanks]
  std::vector<uint8_t> imported;  // by rank: mapped by this window (closed with it)
  // Registered with NCCL_WIN_COLL_SYMMETRIC and reachable by every rank from every rank (one host; one
  // process, or every buffer shareable): collectives on it may run symmetric (device/common/sym.h). Decided
  // from what every rank knows alike, so all ranks agree.
  bool symmetric = false;
  uint32_t serial = 0;            // registrations are collective: the same number on every rank (net_rma.h)
};

// What every rank tells the others about one of its buffers (a window, a signal block, a device
// communicator's resource block), through allGather.
struct BufferRecord {
  uint64_t addr;
  uint64_t size;
  int32_t flags;
  int32_t exportable;  // `exp` is valid: the buffer is inside memory another process of this host can map
  rt::MemExport exp;
};
// The record of [buff, buff + size) of this rank: exportable when it lies inside one shareable allocation.
BufferRecord recordOf(rt::Runtime* rt, void* buff, size_t size, int flags);
// Where `peer`'s buffer is for this process: as it is (same process), mapped from its export (*imported set;
// close it with rt::simRuntime()->closeImport), or null. Never fails: a buffer that cannot be reached is left
// null, and an operation that needs it says so.
char* reach(ncclComm* comm, int peer, const BufferRecord& rec, bool* imported);

// The LSA team of `comm` (ranks that reach each other's memory by load/store, nccl_device/core.h): the ranks
// of this host, as a contiguous run of ranks around this one.
void lsaRange(const ncclComm* comm, int* first, int* size);

// The runtime one-sided memory of `comm` comes from: its backend's (the sim runtime's for the host backend:
// memfd pages another process can map).
rt::Runtime* rmaRuntime(const ncclComm* comm);

}  // namespace tutti::rma

namespace tutti::rma {

inline constexpr uint64_t kWindowMagic = 0x7475747469576e64ull;  // "tuttiWnd"

struct DevCommState;  // rma/devcomm.cc
class NetRma;         // rma/net_rma.h
struct OpDone;        // rma/device_ops.cc
// Releases a device communicator's memory (the resource blocks it made and mapped).
void freeDevComm(DevCommState* state);

// A communicator's one-sided state, made by its first window registration or device communicator
// (collective).
class CommRma {
 public:
  explicit CommRma(ncclComm* comm);
  ~CommRma();  // releases windows and device communicators never released, and the signal blocks
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

  // The host backend's operations, run in stream order (rma/rma_api.cc queues them).
  ncclResult_t put(const void* src, size_t bytes, int peer, ncclWindow_vidmem* win, size_t offset, int sigIdx,
                   int ctx);
  ncclResult_t signal(int peer, int sigIdx, int ctx);
  ncclResult_t wait(const ncclWaitSignalDesc_t& desc, const char* call);
  // The device backends' (rma/device_ops.cc): queued on `stream` (the sim's null stream runs them now, and a
  // wait's failure is then returned; queued, it fails the communicator, as a failed kernel does).
  ncclResult_t devPut(const void* src, size_t bytes, int peer, ncclWindow_vidmem* win, size_t offset,
                      rt::Stream stream);
  ncclResult_t devSignal(int peer, rt::Stream stream);
  ncclResult_t devWait(const std::vector<ncclWaitSignalDesc_t>& descs, rt::Stream stream, const char* call);

  // A word in the runtime's pinned memory, raised when the communicator is aborted or revoked: device-side
  // waits (wait kernels, device communicators' barriers) give up on it.
  uint32_t* abortWord() const { return abortWord_; }
  rt::Runtime* runtime() const { return rt_; }

  // Device communicators made on this communicator, released with it if never destroyed.
  void keepDevComm(DevCommState* state);
  bool dropDevComm(DevCommState* state);  // false when `state` is not a live one of this communicator

  // Symmetric collectives (device/common/sym.h): whether [sendbuff, + sendBytes) and [recvbuff, + recvBytes)
  // lie in symmetric windows of this communicator whose buffers on every rank hold the same range; if so,
  // *out gets every rank's input, output and barrier block. The answer is the same on every rank when the
  // call is (the same offsets in the same windows).
  bool symmetricPeers(const void* sendbuff, size_t sendBytes, const void* recvbuff, size_t recvBytes,
                      SymPeers* out);

  // Whether this rank can signal `peer`: its signal block is mapped here, or (host backend) it is a rank of
  // another host reached over the network (net_rma.h).
  bool signalReachable(int peer) const;
  // Whether puts to `peer` go over the network.
  bool viaNetwork(int peer) const;

  // The network service's side (net_rma.h): where `bytes` at `offset` of this rank's window `serial` are
  // (null: no such window, or out of its bounds), and the signal of `source` delivered.
  char* netTarget(uint32_t serial, uint64_t offset, uint64_t bytes);
  void netSignal(int source);                 // host backend
  uint64_t* localSignalWord(int source) const;  // device backends: the counter, in device memory

 private:
  static size_t slotIndex(int source, int sigIdx, int ctx, int nRanks) {
    return (static_cast<size_t>(ctx) * kSignalIndices + static_cast<size_t>(sigIdx)) * nRanks + source;
  }
  void releaseWindow(ncclWindow_vidmem* win);
  ncclResult_t launchWait(const ncclWaitSignalDesc_t* descs, int n, rt::Stream stream, const char* call);
  ncclResult_t devNetSend(int peer, uint32_t window, uint64_t offset, const void* src, size_t bytes,
                          rt::Stream stream);
  ncclResult_t afterOp(rt::Stream stream, OpDone* done);

  ncclComm* comm_;
  rt::Runtime* rt_;
  bool device_;                         // sim or cuda backend: the operations run on the runtime's streams
  uint32_t* abortWord_ = nullptr;       // pinned
  uint64_t* devConsumed_ = nullptr;     // device backends: signals consumed per slot, advanced by wait kernels
  SignalSlot* local_ = nullptr;         // this rank's block: [ctx][sigIdx][source], then [symBlock][source]
  std::vector<SignalSlot*> remote_;     // each peer's block as mapped here (own block for this rank)
  std::vector<bool> remoteImported_;
  bool symBarriers_ = false;            // every rank's block is mapped here and all ranks share this host
  // Per source peer: signals consumed by waits so far ([ctx][sigIdx][peer]).
  std::unique_ptr<std::atomic<uint64_t>[]> consumed_;
  // Per target peer: serializes this rank's signals to it, so the counter only grows even when several
  // streams of this rank signal the same peer at once.
  std::unique_ptr<std::mutex[]> sendMutex_;
  std::mutex windowsMutex_;
  std::unordered_set<ncclWindow_vidmem*> windows_;
  std::unordered_set<DevCommState*> devComms_;  // guarded by windowsMutex_
  uint32_t nextSerial_ = 0;                      // guarded by windowsMutex_
  // This rank's buffer of each window by serial, from before the registration's exchange (a peer may put
  // into it as soon as its own registration returns) until deregistration. Guarded by windowsMutex_.
  std::map<uint32_t, std::pair<char*, size_t>> buffers_;
  std::unique_ptr<NetRma> net_;                  // ranks of other hosts (host backend), or null
};

struct CommRmaDeleter {
  void operator()(CommRma* rma) const;
};

// The communicator's one-sided state, made (collectively) on first use. Every rank must call it at the same
// point: window registration does.
ncclResult_t commRma(ncclComm* comm, CommRma** out);

}  // namespace tutti::rma
