// One channel's share of one collective, as both backends execute it. Plain data: the host backend
// passes it by reference, the CUDA backend copies it into the kernel argument.
#pragma once

#include <tutti/common.h>

#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define TUTTI_HOST_DEVICE __host__ __device__
#else
#define TUTTI_HOST_DEVICE
#endif

namespace tutti {

struct CollWork {
  ncclFunc_t func;
  int nRanks;
  int ringIx;        // this rank's position in the channel's ring (PAT: the rank itself)
  int rootIx;        // ring position of the root (Broadcast / Reduce)
  // Counts are in elements: bytes for AllGather / Broadcast, datatype elements for reductions.
  size_t count;      // AllReduce/Broadcast/Reduce: whole buffer; AllGather/ReduceScatter: per-rank block
  size_t chOffset;   // start of this channel's share (within the buffer, or within each block)
  size_t chCount;    // elements of this channel's share
  size_t chunkCount; // elements per step (one FIFO slot at most)
  size_t align;      // chunk sizes are rounded to this many elements (vector-friendly offsets)
  int inPlace;       // send buffer is (the right part of) the receive buffer
  const int* ringRanks;  // ring position -> rank (AllGather / ReduceScatter blocks are indexed by rank)
  // PAT ReduceScatter: this channel's partial sums (pat.h). The channel's share runs in segments of scratchSeg
  // elements per block, one after another; a segment's partial sums of block b start at element b * scratchStride.
  void* scratch;
  size_t scratchStride;
  size_t scratchSeg;
};

TUTTI_HOST_DEVICE inline size_t divUp(size_t a, size_t b) { return (a + b - 1) / b; }
TUTTI_HOST_DEVICE inline size_t alignUp(size_t a, size_t b) { return divUp(a, b) * b; }
TUTTI_HOST_DEVICE inline size_t minSize(size_t a, size_t b) { return a < b ? a : b; }
TUTTI_HOST_DEVICE inline int modRanks(int r, int n) { return r >= n ? r - n : r; }

}  // namespace tutti
