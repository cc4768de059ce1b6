// Turns a collective task into per-channel work: the channel partition (chOffset, chCount), the chunk
// size mapped onto the protocol's FIFO slots (chunkCount), and the ring positions. Depends only on the
// call's arguments and the communicator's geometry, so every rank slices a collective identically.
#pragma once

#include "comm/task.h"
#include "device/common/reduce_ops.h"
#include "device/common/sym.h"
#include "device/common/work.h"

#include <memory>

#include <string>
#include <vector>

namespace tutti {

// CollPlan::algorithm of a symmetric collective (device/common/sym.h): not one of the tuner's algorithms; taken
// before the tuner is asked, when the buffers lie in symmetric windows.
inline constexpr int kAlgoSymmetric = 100;
// A deterministic reduction's fused exchange on the host backend (device/host/det_exchange.h): every rank sends
// each peer its slice point-to-point, and reduces the slices it receives in the fixed order straight from the
// connections' slots. Channel 0 sends, channel 1 receives and reduces.
inline constexpr int kAlgoDetExchange = 101;
// A single-copy AllGather or Broadcast on the host backend (device/host/direct_copy.h): each rank reads the blocks
// it needs straight from the other ranks' buffers; a single-copy AlltoAll likewise. One channel.
inline constexpr int kAlgoDirect = 102;
// CollPlan::decider of the paths the core takes by itself (one-shot, single copy).
inline constexpr const char* kCoreDecider = "core";
// A small AllReduce on the host backend as one exchange of whole inputs (device/host/oneshot.h). One channel.
inline constexpr int kAlgoOneShot = 103;
// A small AllReduce on the host backend by recursive doubling (device/host/oneshot.h, OneShot::doubling): log2 n
// exchanges of the whole buffer with one peer each. One channel.
inline constexpr int kAlgoDoubling = 104;
// How the logs name a deterministic AllReduce that the one-shot plan runs as a one-shot ReduceScatter then a one-shot
// AllGather (device/host/oneshot.h, LogAllReduce::kScatterGather); plans carry kAlgoDoubling.
inline constexpr int kAlgoScatterGather = 105;

struct DetExchange;
struct DirectCopy;
struct OneShot;

struct CollPlan {
  Task task;
  ResolvedRedOp op{};     // byte-wise collectives carry a plain copy op
  size_t eltSize = 1;     // bytes per plan element (1 for AllGather / Broadcast)
  uint64_t opCount = 0;
  int algorithm = 1;      // NCCL_ALGO_RING
  int protocol = 2;       // NCCL_PROTO_SIMPLE
  size_t nBytes = 0;      // the size the tuner chain was asked about
  float costUs = 0;       // the chain's estimate for (algorithm, protocol), microseconds
  std::string decider;    // the tuner whose cost made the choice ("core" when none changed it)
  std::vector<CollWork> work;  // one per channel used
  std::shared_ptr<const SymPeers> sym;  // kAlgoSymmetric: every rank's buffers and barrier block
  std::shared_ptr<const DetExchange> detx;  // kAlgoDetExchange: what this rank sends and reduces
  std::shared_ptr<const DirectCopy> direct;  // kAlgoDirect: the buffers
  std::shared_ptr<const OneShot> oneShot;    // kAlgoOneShot: the buffers and the op
  bool local = false;  // a deterministic reduction's local step (sym->local): this rank alone, not call-checked
};

// Minimum bytes a channel is given before another channel is used.
inline constexpr size_t kMinBytesPerChannel = 256 * 1024;

// Smallest chunk a tree step is cut to, and how many chunks per link of depth a channel's share should
// make (see treeChunkBytes).
inline constexpr size_t kTreeMinChunkBytes = 32 * 1024;
inline constexpr size_t kTreeChunksPerDepth = 4;

// Bytes per step of a tree AllReduce with Simple: a chunk climbs `depth` links and comes back down before
// the tree runs at full rate, so a share of few slot-sized chunks runs nearly serially (a 64 KiB share on
// a 2-deep tree is one chunk passed along 4 links in turn). The slot is halved, not below
// kTreeMinChunkBytes, until the share makes kTreeChunksPerDepth chunks per link of depth. The default
// tuner's cost model mirrors this rule (plugins/tuner-default/model.cc).
inline size_t treeChunkBytes(size_t slotBytes, size_t shareBytes, int depth) {
  size_t chunk = slotBytes;
  const size_t want = kTreeChunksPerDepth * static_cast<size_t>(depth > 0 ? depth : 1);
  while (chunk / 2 >= kTreeMinChunkBytes && shareBytes < want * chunk) chunk /= 2;
  return chunk;
}

// Which of the core's own paths (host backend) a collective may take, decided from what every rank passes alike:
// the one-shot path (device/host/oneshot.h) and the direct path (device/host/direct_copy.h), and the bytes
// both decide on (every rank's block for AllGather, ReduceScatter and AlltoAll). planCollective, a lone call's
// shortcut and the routing of deterministic reductions (comm/det_coll.h) all ask this, so they agree. A
// deterministic reduction with a user's PreMulSum stays off the one-shot path (its per-rank scalars do not
// travel). `preMul`: the op resolves to a PreMulSum (a floating Avg, or a user's), which keeps a
// non-deterministic reduction off the direct path. Internal steps take neither.
struct CorePaths {
  size_t totalBytes = 0;
  bool oneShot = false;
  bool direct = false;
  bool det = false;       // detReduces(task)
  bool doubling = false;  // the one-shot path's logarithmic form (doublingWanted), where oneShot
};
CorePaths corePaths(const ncclComm* comm, const Task& task, bool preMul);

// `allowDirect` false keeps the collective off the single-copy and one-shot paths (kAlgoDirect, kAlgoOneShot): the
// tuner chain's plan alone (simulate.cc).
ncclResult_t planCollective(ncclComm* comm, const Task& task, CollPlan* out, bool allowDirect = true);

// A symmetric plan's work (sym.h): `count` elements cut into blocks of whole 64-byte lines, as many as
// plan->nBytes fills at kMinBytesPerChannel each (at most the channels and kSymMaxBlocks); sets the
// algorithm and protocol. ringIx is the rank itself, or 0 for a deterministic reduction's local step.
void symmetricBlocks(const ncclComm* comm, ncclFunc_t func, size_t count, int ringIx, bool inPlace, CollPlan* plan);

}  // namespace tutti
