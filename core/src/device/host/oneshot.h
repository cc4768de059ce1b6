// One-shot collectives of small buffers on the host backend (plan kAlgoOneShot): every rank sends its message to
// every peer at once over channel 0's collective connections (Simple, one slot each, its own PreMulSum scalar applied
// as it is copied in), then reads the peers' messages straight from the slots. AllReduce: the whole input to every
// peer, then the n rows reduced in rank order, 0 to n-1; ReduceScatter: block p of the input to rank p, then the n
// rows of this rank's block reduced in rank order; AllGather: the block to every peer; Broadcast: the root's buffer
// to every peer; AlltoAll: block p to rank p. One step on the critical path where the ring takes n-1 or 2(n-1) and the tree two per level, for up
// to n - 1 times the ring's bytes per rank: worth it only for a few KiB (TUTTI_ONESHOT_MAX_BYTES), or on 2 ranks,
// where the bytes are the ring's. Every rank folds the same rows in the same order, so every rank gets the same
// bits. On network ends that take user buffers (TUTTI_NET_ZERO_COPY_MIN_BYTES) a message that needs no scalar leaves
// from the input, and an AllGather, Broadcast or AlltoAll message lands in the output, as a ring step does.
// An AllReduce may take the same plan by recursive doubling instead (plan kAlgoDoubling, OneShot::doubling): log2 n
// steps of one message each way, folded as a balanced tree over rank order (every rank the same bits again). It
// sends (n - 1) / log2 n times fewer messages, which is what a call costs where each message is system calls on
// both sides (sockets) or where the ranks outnumber the cores.
#pragma once

#include "device/common/reduce_ops.h"
#include "device/host/prims.h"
#include "device/host/wait.h"

#include <nccl.h>

#include <cstddef>

struct ncclComm;

namespace tutti {

struct OneShot {
  ncclFunc_t func = ncclFuncAllReduce;  // AllReduce, ReduceScatter, AllGather, Broadcast or AlltoAll
  int root = 0;                         // Broadcast
  const char* input = nullptr;
  char* output = nullptr;
  size_t count = 0;  // elements of one message: AllReduce's and Broadcast's buffer, the other collectives' block
  size_t esize = 1;  // AllGather, Broadcast, AlltoAll: 1 (bytes)
  ResolvedRedOp op{};  // AllGather, Broadcast, AlltoAll: a byte copy
  // AllReduce, ReduceScatter of a deterministic communicator (comm/det_coll.h): the messages travel raw and the n
  // rows are folded by hostDetReduceCopy, the fixed order (a per-rank PreMulSum scalar cannot travel: not taken).
  bool det = false;
  // AllReduce by recursive doubling (doublingWanted) rather than one message to every peer.
  bool doubling = false;
};

// Whether a collective of `bytes` in all (AllGather: the output; ReduceScatter, AlltoAll: the input) takes the one-shot
// path:
// host backend, the default tuner alone in the chain (comm->corePaths), 2 to kOneShotMaxRanks ranks, 1 byte to
// comm->oneShotMaxBytes, and within one Simple slot.
// An AlltoAll, whose messages are the peers' blocks (no more bytes than the grouped sends), up to
// comm->oneShotAlltoAllMaxBytes if that is larger, its blocks within a slot.
bool oneShotWanted(const ncclComm* comm, ncclFunc_t func, size_t bytes);

inline constexpr int kOneShotMaxRanks = 8;

// Whether an AllReduce of `bytes` on the one-shot plan runs by recursive doubling instead (host backend,
// comm->doublingMinRanks to kOneShotMaxRanks ranks, up to comm->doublingMaxBytes, within one Simple slot; not a
// deterministic call): log2 of the rank count exchanges of the whole buffer, one peer each, where the one-shot
// sends n - 1 messages at once. Fewer messages for the cores and the sockets to carry, more steps in a row.
// An AllReduce past comm->doublingMaxBytes on 4 or 8 ranks takes recursive halving then doubling (a ReduceScatter, then
// an AllGather of the blocks: the ring's bytes in 2 log2 n messages) up to comm->halvingDoublingMaxBytes.
// An AlltoAll takes Bruck's algorithm (any rank count, up to comm->bruckMaxBytes of input): ceil(log2 n) messages of
// about n / 2 blocks each.
// `det`: a deterministic call (comm/det_coll.h), taken for AllReduce over a power of two of ranks only.
bool doublingWanted(const ncclComm* comm, ncclFunc_t func, size_t bytes, bool det);

inline bool oneShotFunc(ncclFunc_t f) {
  return f == ncclFuncAllReduce || f == ncclFuncReduceScatter || f == ncclFuncAllGather || f == ncclFuncBroadcast ||
         f == ncclFuncAlltoAll;
}

namespace host {

ncclResult_t runOneShot(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label);

}  // namespace host
}  // namespace tutti
