// One-shot collectives of small buffers on the host backend (plan kAlgoOneShot): every rank sends its message to
// every peer at once over channel 0's collective connections (Simple, one slot each, its own PreMulSum scalar applied
// as it is copied in), then reads the peers' messages straight from the slots. AllReduce: the whole input to every
// peer, then the n rows reduced in rank order, 0 to n-1; ReduceScatter: block p of the input to rank p, then the n
// rows of this rank's block reduced in rank order; AllGather: the block to every peer; Broadcast: the root's buffer
// to every peer; AlltoAll: block p to rank p. One step on the critical path where the ring takes n-1 or 2(n-1) and the tree two per level, for up
// to n - 1 times the ring's bytes per rank (AllReduce, Broadcast): worth it for a few KiB (TUTTI_ONESHOT_MAX_BYTES),
// or on 2 ranks, where the bytes are the ring's, as they are for AllGather, ReduceScatter and AlltoAll on any number
// of ranks (TUTTI_ONESHOT_GATHER_MAX_BYTES, TUTTI_ONESHOT_ALLTOALL_MAX_BYTES: up to hundreds of KiB where the ranks
// outnumber the cores and each of the ring's steps waits for a peer's turn). Every rank folds the same rows in the
// same order, so every rank gets the same bits. On network ends that take user buffers (TUTTI_NET_ZERO_COPY_MIN_BYTES)
// a message that needs no scalar leaves from the input, and an AllGather, Broadcast or AlltoAll message lands in the
// output, as a ring step does.
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
  // log2 n steps (doublingWanted; AllReduce: logAllReduce) rather than one message to every peer.
  bool doubling = false;
};

// Whether a collective of `bytes` in all (AllGather: the output; ReduceScatter, AlltoAll: the input) takes the one-shot
// path:
// host backend, the default tuner alone in the chain (comm->corePaths), 2 to kOneShotMaxRanks ranks, 1 byte to
// comm->oneShotMaxBytes (AllGather, ReduceScatter: or comm->oneShotGatherMaxBytes if that is larger), and within one
// Simple slot.
// An AlltoAll, whose messages are the peers' blocks (no more bytes than the grouped sends), up to
// comm->oneShotAlltoAllMaxBytes if that is larger, its blocks within a slot.
bool oneShotWanted(const ncclComm* comm, ncclFunc_t func, size_t bytes);

inline constexpr int kOneShotMaxRanks = 8;

// Whether a collective of `bytes` on the one-shot plan takes log2 n steps of one message each way instead of one
// message to every peer (plan kAlgoDoubling; from comm->doublingMinRanks ranks and comm->doublingMinBytes, except
// AllReduce, which logAllReduce decides):
// AllReduce by recursive doubling, halving then doubling, or up and down a binomial tree (logAllReduce);
// AllGather by recursive doubling, ReduceScatter by recursive halving (4 or 8 ranks, up to
// comm->gatherDoublingMaxBytes and comm->halvingMaxBytes; deterministic: comm->detHalvingMaxBytes);
// Broadcast down a binomial tree (up to comm->binomialBcastMaxBytes);
// AlltoAll by Bruck's algorithm (any rank count, up to comm->bruckMaxBytes of input): ceil(log2 n) messages of about
// n / 2 blocks each.
// Fewer messages for the cores and the sockets to carry, more steps in a row.
bool doublingWanted(const ncclComm* comm, ncclFunc_t func, size_t bytes, bool det);

// How an AllReduce of `bytes` on the one-shot plan runs when not by one message to every peer (doublingWanted is
// true for all but kNone). Host backend, 2 to kOneShotMaxRanks ranks, the messages within one Simple slot:
// - kTree: reduced up a binomial tree to rank 0, then broadcast down it (from 3 ranks, comm->treeAllReduceMinBytes to
//   comm->treeAllReduceMaxBytes, or up to comm->oneHopTreeAllReduceMaxBytes, whose rows go to rank 0 in one hop; a
//   deterministic call: comm->detTreeAllReduceMinBytes to comm->detTreeAllReduceMaxBytes, in one hop): n - 1 messages
//   each way in all, where recursive doubling sends n log2 n, for twice its hops in a row;
// - kDoubling: recursive doubling from comm->doublingMinRanks ranks, comm->doublingMinBytes to comm->doublingMaxBytes
//   (a deterministic call: a power of two of ranks, up to comm->detDoublingMaxBytes, taken before the tree);
// - kHalvingDoubling: past that, on 4 or 8 ranks, recursive halving then doubling, up to
//   comm->halvingDoublingMaxBytes (not deterministic).
// - kScatterGather: a deterministic call from comm->detScatterGatherMinBytes to comm->detScatterGatherMaxBytes, 3 to
//   8 ranks, a multiple of 8n bytes (every datatype's count divides by n): a one-shot ReduceScatter, rank p folding
//   block p of every row in the fixed order, then a one-shot AllGather of the blocks (taken before the tree); past a
//   Simple slot a rank, up to comm->detScatterGatherRoundsMaxBytes, both in rounds of a slot a rank.
enum class LogAllReduce { kNone, kTree, kDoubling, kHalvingDoubling, kScatterGather };
LogAllReduce logAllReduce(const ncclComm* comm, size_t bytes, bool det);

// Whether a ReduceScatter of `bytes` of input on the one-shot plan goes up and down the binomial tree (doublingWanted
// includes it): host backend, from comm->doublingMinRanks (at least 3) to kOneShotMaxRanks ranks, up to
// comm->treeReduceScatterMaxBytes (a deterministic call: comm->detTreeReduceScatterMinBytes to
// comm->detTreeReduceScatterMaxBytes, where the deterministic halving does not apply), within one Simple slot. The whole input is reduced up to rank 0 (a deterministic call: sent
// raw to rank 0 in one hop, which folds in the fixed order) and each subtree's blocks come back down: 2(n - 1)
// messages in all.
bool treeReduceScatterWanted(const ncclComm* comm, size_t bytes, bool det);

inline bool oneShotFunc(ncclFunc_t f) {
  return f == ncclFuncAllReduce || f == ncclFuncReduceScatter || f == ncclFuncAllGather || f == ncclFuncBroadcast ||
         f == ncclFuncAlltoAll;
}

namespace host {

ncclResult_t runOneShot(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label);

}  // namespace host
}  // namespace tutti
