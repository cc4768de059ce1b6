// Symmetric collectives: AllReduce, AllGather and ReduceScatter whose send and receive buffers lie in windows
// registered with NCCL_WIN_COLL_SYMMETRIC (ncclCommWindowRegister), on a communicator whose ranks all reach
// each other's memory (one host). Each rank reads and writes its peers' buffers directly, at the same offset
// in the same window: no FIFO, no transport, no copy through a staging buffer (zero-copy).
//
//   AllReduce      rank r owns slice r of every block's share; it reduces that slice of every rank's input
//                  and stores the result into every rank's output;
//   AllGather      rank r copies every rank's input into its own output (block p from rank p);
//   ReduceScatter  rank r reduces block r of every rank's input into its own output.
// Reductions follow the deterministic order (det_reduce.h): an element's bits depend only on the ranks'
// inputs for it, so they are the same whatever rank, block or backend computed them, and ReduceScatter's
// equal the matching slice of AllReduce's.
//
// A barrier over the ranks opens and closes each block's share: before it no rank reads an input its owner
// has not reached yet (stream order) or writes an output still in use; after it every rank is done with the
// others' buffers, so the call may return. In-place calls need no care beyond that: the only reader of a
// slice of input a rank overwrites is that rank, and it reads the slice before writing it.
//
// The barrier slots of rank r's block: slot (b, s) is written only by rank s (block b) and holds how many
// barriers that block has passed. Block b of rank s arrives by storing its next count into slot (b, s) of
// every rank, then waits until its own slots (b, *) all hold it. Its own slot in its own block remembers the
// count, so the kernels keep no host-side sequence and a replayed CUDA graph stays in step.
//
// Both backends run this: the host backend on its channel threads (device/host/sym.cc), the sim and cuda
// backends in the collective kernel (device/kernels/sym.h).
#pragma once

#include "device/common/work.h"

#include <cstddef>
#include <cstdint>

namespace tutti {

// A counter a peer publishes and this rank waits on: the host backend's futex triple (device/host/wait.h),
// padded to a cache line so writers do not share lines. Signals of one-sided operations use it too.
struct alignas(64) SyncSlot {
  uint64_t value;
  uint32_t waiters;
  uint32_t seq;
};

// Most ranks and blocks a symmetric collective takes (the kernel keeps its peers' addresses in shared memory).
inline constexpr int kSymMaxRanks = 64;
inline constexpr int kSymMaxBlocks = 16;

// Slot (block, source) of a rank's barrier block.
TUTTI_HOST_DEVICE inline SyncSlot* symSlot(SyncSlot* ranksBlock, int block, int source, int nRanks) {
  return ranksBlock + static_cast<size_t>(block) * nRanks + source;
}

// Where one symmetric collective finds its peers, by rank, as mapped in this process. Launch memory: the
// window tables are copied, so a window deregistered after the call was queued leaves it intact.
struct SymPeers {
  char* send[kSymMaxRanks];      // the input of rank p (its window base plus the call's offset)
  char* recv[kSymMaxRanks];      // the output of rank p
  SyncSlot* barrier[kSymMaxRanks];  // the barrier block of rank p
  // A deterministic reduction's local step (comm/det_coll.h): a ReduceScatter of one block (ringIx 0) whose
  // "ranks' inputs" are rows in this rank's own memory (send[p] = rank p's row), into recv[0]; no barrier.
  bool local;
  // Local steps with a user's PreMulSum, whose scalar may differ from rank to rank: `scalars` (not null) holds
  // rank p's scalar at scalars + p * eltSize, in this rank's memory, and input p is scaled by it (else every
  // input takes the op's). With storeScalar the step only writes this rank's own scalar (the op's) to recv[0],
  // the device memory the exchange sends it from.
  const char* scalars;
  bool storeScalar;
};

// The slice of [begin, begin + n) rank r of `nRanks` owns in a symmetric AllReduce: near-equal parts,
// multiples of `align` elements except the last.
TUTTI_HOST_DEVICE inline void symSlice(size_t begin, size_t n, int r, int nRanks, size_t align, size_t* off,
                                       size_t* cnt) {
  const size_t per = alignUp(divUp(n, static_cast<size_t>(nRanks)), align);
  const size_t lo = minSize(n, per * static_cast<size_t>(r));
  *off = begin + lo;
  *cnt = minSize(per, n - lo);
}

}  // namespace tutti
