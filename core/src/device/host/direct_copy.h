// Single-copy collectives inside one host (plan kAlgoDirect, host backend): each rank reads what it needs straight from
// the owners' user buffers, with process_vm_readv (cross memory attach) when the owner is another process of this host,
// or memcpy when it is a thread of this process. A ring copies every byte twice per hop (into the FIFO, out of it);
// this copies it once, and a rank's reads do not wait on any other rank's copies.
//
// AllGather, Broadcast and AlltoAll, per call, over channel 0's collective connections to every peer (Simple, one slot
// each way, so a single thread never blocks on them; channel 0's collectives run in order on one thread, so these
// messages never interleave with a ring's, and point-to-point calls of the same group use connections of their own):
//   1. every owner (AllGather, AlltoAll: every rank; Broadcast: the root) sends each reader a descriptor: its buffer's
//      address and size, and its pid;
//   2. every reader receives the descriptors, reads the blocks into its output, and sends each owner a "done";
//   3. every owner waits for the "done" of each reader before returning: its buffer is not touched after that.
// In-place AlltoAll: an owner's buffer is also where it writes what it reads, so it offers a copy of its input
// (comm->directStaging) instead.
//
// AllReduce and ReduceScatter (a direct reduce-scatter): rank j owns slice j (AllReduce: the count cut into n slices of
// 64-byte multiples, the last ones shorter or empty; ReduceScatter: block j).
//   1. every rank sends every peer a descriptor: its input's and output's addresses, the count, its pid and its
//      PreMulSum scalar;
//   2. every rank reads slice j of each peer's input (a chunk at a time into comm->directStaging; a thread's input
//      in place) and folds the n rows into slice j of its output;
//   3. AllReduce: it writes that slice into every peer's output (process_vm_writev; memcpy for a thread); then it
//      sends every peer a "reduced";
//   4. every rank returns once each peer said "reduced": no peer reads its input or writes its output any more.
// In place is safe: slice p of a rank's buffer is read only by rank p (step 2), which writes it only after (step 3).
// The fold: hostDetReduceCopy over the rows in rank order (the fixed order) on a deterministic communicator, else
// hostReduceCopy with this rank's row first (Sum, Prod, Min, Max; every rank gets slice j's bits from rank j alone).
// The address never outlives the call. A peer that dies mid-call closes its connections, which fails the waits.
// Whether the ranks can read one another is probed once, when the communicator is created (directProbe).
#pragma once

#include "device/host/prims.h"
#include "device/host/wait.h"

#include "device/common/reduce_ops.h"

#include <nccl.h>

#include <cstddef>

struct ncclComm;

namespace tutti {

// Ranks a direct reduction takes at most (its per-call state is on the stack).
inline constexpr int kDirectReduceMaxRanks = 64;

struct DirectCopy {
  ncclFunc_t func = ncclFuncAllGather;  // AllGather, Broadcast, AlltoAll, AllReduce or ReduceScatter
  int root = 0;                         // Broadcast
  const char* input = nullptr;          // AllGather: this rank's block; Broadcast: the root's buffer; AlltoAll:
                                        // nRanks blocks, block p for rank p
  char* output = nullptr;               // AllGather, AlltoAll: nRanks blocks, block p from rank p; Broadcast: the
                                        // buffer
  size_t bytes = 0;                     // AllGather, AlltoAll: bytes per block; Broadcast: bytes in all
  // AllReduce, ReduceScatter: elements (AllReduce: the buffer; ReduceScatter: one block), their size, the op, and
  // whether the fold is the fixed order of a deterministic communicator.
  size_t count = 0;
  size_t esize = 1;
  ResolvedRedOp op{};
  bool det = false;
};

// At communicator creation (host backend, ranks on one host): whether every rank can read every other rank's memory
// (same process, or cross memory attach into a process of the same pid namespace) and reaches it through shm or p2p
// (ranks left only the network keep to it: no single copy under NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1).
// Collective: two bootstrap all-gathers when some peer is another process of this host, none otherwise. Sets
// comm->directOk.
ncclResult_t directProbe(ncclComm* comm);

// Whether a collective of `bytes` in all (AllGather, AlltoAll: the output; ReduceScatter: the input) takes the direct
// path: directOk, the default tuner alone in the chain (comm->corePaths), and at least the communicator's minimum for
// that collective (comm->directMinGather / directMinBcast / directMinAlltoAll / directMinReduce /
// directMinReduceScatter, or directMinDetReduce / directMinDetReduceScatter for a deterministic reduction, and
// directMinDetPairReduce for a deterministic AllReduce that detPairPath (comm/det_coll.h) lets take any path;
// TUTTI_DIRECT_MIN_BYTES, TUTTI_DET_DIRECT_MIN_BYTES). A reduction off the fixed order also needs an op without a
// PreMulSum scalar (preMul: Avg or a user's PreMulSum). Depends only on the communicator and the call's arguments that
// every rank passes alike, so every rank decides alike.
bool directWanted(const ncclComm* comm, ncclFunc_t func, size_t bytes, bool det = false, bool preMul = false,
                  bool detPair = false);

namespace host {

ncclResult_t runDirectCopy(ncclComm* comm, const DirectCopy& d, const WaitContext& wait, const OpLabel& label);

}  // namespace host
}  // namespace tutti
