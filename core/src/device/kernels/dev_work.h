// What a kernel launch carries: the connection table, the work items and where each block reports how it
// ended. Plain data shared by the host side that fills it (sim and cuda launchers) and the kernels.
//
// Like NCCL's work batches, the items travel in the kernel argument itself (kMaxLaunchWork of them, under
// the 4 KB argument limit); a longer list becomes several launches, run one after the other.
#pragma once

#include "device/common/reduce_ops.h"
#include "device/common/sym.h"
#include "device/common/tree.h"
#include "device/common/work.h"

#include <tutti/transport.h>

#include <cstddef>
#include <cstdint>

namespace tutti::dev {

// One end of a connection as a kernel uses it.
struct DevConn {
  char* buffs[TUTTI_NUM_PROTOCOLS];       // send end: the receiver's FIFOs; receive end: its own
  size_t slotBytes[TUTTI_NUM_PROTOCOLS];  // buffer size / NCCL_STEPS
  char* landing;                          // proxied receive end: slot 0 of the landing area (every protocol)
  size_t landingStride;
  tuttiConnCtrl_t* ctrl;
  uint64_t* step;                         // the connection's step count, kept across launches
  uint32_t flags;                         // TUTTI_CONN_*
  int peer;
};

enum class WorkKind : uint8_t { Ring, Tree, Send, Recv, Pat, Sym };

inline constexpr int kNoConn = -1;

// One block's share of one operation. Connection fields are indices into KernelArgs::conns.
struct DevWork {
  CollWork coll;         // Ring, Pat: as the host backend; Tree: chOffset/chCount/chunkCount; Send/Recv: count = bytes
  ResolvedRedOp op;      // datatype = the kernel instance's type
  const void* sendbuff;
  void* recvbuff;
  uint64_t opCount;      // for error reports
  WorkKind kind;
  uint8_t proto;         // TUTTI_PROTO_*
  uint8_t eltSize;       // bytes per element of the offsets
  uint8_t block;         // which block of the launch runs it
  int16_t channel;       // for error reports
  int8_t nChildren;      // Tree
  int8_t isRoot;         // Tree: no parent
  int16_t recvConn;      // Ring: from the predecessor; Recv: from the peer; Tree: from the parent
  int16_t sendConn;      // Ring: to the successor; Send: to the peer; Tree: to the parent
  int16_t childRecv[kTreeMaxArity];
  int16_t childSend[kTreeMaxArity];
  const int16_t* patConns;  // Pat: per step d, the receive then the send connection (launch memory)
  const SymPeers* sym;      // Sym: every rank's buffers and barrier block (launch memory, device/common/sym.h)
};

// Why a block stopped early (DevStatus::reason).
enum class StopReason : int32_t {
  None = 0,
  Aborted,      // the host raised the abort word
  TimedOut,     // a wait outlasted KernelArgs::timeoutNs
  PeerClosed,   // the other end marked the connection closed (value in `detail`)
  Mismatch,     // the slot holds another size or protocol than this rank expected (sizes in detail/detail2)
  Incomplete,   // the slot was published but a line flag is still missing
  BadWork,      // a work item the kernel cannot run (corrupt launch)
  Unsupported,  // the kernel instance is not built for this GPU (fp8 reductions below sm_90)
};

struct DevStatus {
  StopReason reason;
  int32_t work;       // index of the work item
  int32_t peer;
  int32_t sending;    // 1: waiting for a free slot towards peer; 0: for data from it
  uint64_t step;
  int64_t detail;     // PeerClosed: the closed word; Mismatch: bytes the peer sent
  int64_t detail2;    // Mismatch: the peer's protocol (-1: unknown, a proxied slot's wire size in detail)
  int64_t want;       // Mismatch: what this rank expected (data bytes)
};

// A wait of one work item that outlasted KernelArgs::warnNs (TUTTI_WAIT_WARN), written once per item by the
// first thread to claim it; the host reports it while the kernel goes on waiting.
struct DevSlowWait {
  uint32_t claimed;   // threads that found the wait slow (the first one writes the record)
  uint32_t ready;     // 1 once the fields below are written (release)
  int32_t peer;
  int32_t sending;    // 1: waiting for a free slot towards peer; 0: for data from it
  uint64_t step;
  uint64_t waitedNs;
};

inline constexpr int kMaxLaunchWork = 16;
inline constexpr int kMaxLaunchBlocks = 64;

struct KernelArgs {
  DevConn* conns;
  DevStatus* status;           // one per block
  const uint32_t* abortWord;   // nonzero: every wait ends (Aborted)
  uint64_t timeoutNs;          // 0: wait forever
  uint64_t warnNs;             // 0: never report slow waits; else slowWaits has one record per work item
  DevSlowWait* slowWaits;
  uint64_t* workTimes;         // null, or per work item its start and end on the device clock (profiler)
  int32_t nWork;
  int32_t nBlocks;
  const DevWork* moreWork;     // items kMaxLaunchWork.. (device memory), when nWork exceeds the argument's room
  DevWork work[kMaxLaunchWork];
};

TUTTI_HOST_DEVICE inline const DevWork& workAt(const KernelArgs& a, int i) {
  return i < kMaxLaunchWork ? a.work[i] : a.moreWork[i - kMaxLaunchWork];
}
static_assert(sizeof(KernelArgs) <= 4096, "a kernel argument is limited to 4 KB");

}  // namespace tutti::dev
