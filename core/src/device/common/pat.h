// PAT (NCCL_ALGO_PAT): AllGather and ReduceScatter in ceil(log2 k) steps instead of the ring's k - 1, for
// latency-bound sizes at one rank per node. Written once over a primitives type, like ring.h; our own
// log-step schedule (a Bruck-style exchange with every block kept at its final place):
//
// AllGather, step d = 0 .. D-1 (distance s = 2^d): rank r holds blocks [r, r + s) (mod k). It sends them to
// rank r - s and receives [r + s, r + s + c) from rank r + s, with c = min(s, k - s) blocks. After the last
// step it holds all k blocks. A block goes straight to its place in the output (block b at b * count), so
// no rotation is needed, and block r enters the output at step 0 (copied from the input as it is sent).
//
// ReduceScatter is the same schedule run backwards with every edge reversed: step d = D-1 .. 0, rank r sends
// to rank r + s its partial sums of blocks [r + s, r + s + c) and receives from rank r - s partial sums of
// blocks [r, r + c), which it adds to its own. Block r + j (j >= 1) is received at the steps d with
// j < c(d), all of them before the step floor(log2 j) that sends it on; partial sums wait in scratch memory
// until then. Block r accumulates in the output, where the last step (d = 0) applies the post-op. The scratch
// holds k blocks of one segment (CollWork::scratchSeg elements of the channel's share): the channel runs all
// D steps over one segment, then over the next, so a call of any size needs only a bounded scratch (device
// backends make it when the communicator is created; nothing is allocated during a call).
//
// Every step cuts each block's channel share into chunks of one FIFO slot and alternates one send and one
// receive per chunk, in the same order on every rank, so a sender is never more than the FIFO's depth
// ahead of its receiver and no step can deadlock.
//
// `dim(d, body)` makes the primitives of step d (receiving from the step's source, sending to its target;
// see patPeers), calls body(prims) and finishes them; it returns body's result. The primitives take
// setBuffers(input, output) and recvReduceInto(fromOutput, in, out, n, postOp) besides ring.h's set.
#pragma once

#include "device/common/work.h"

namespace tutti {

// Most steps a PAT collective takes (k up to 2^31 ranks).
inline constexpr int kPatMaxSteps = 31;

// Steps of PAT on k ranks: ceil(log2 k).
TUTTI_HOST_DEVICE inline int patSteps(int k) {
  int d = 0;
  while ((1 << d) < k) ++d;
  return d;
}

// Blocks exchanged at step d on k ranks.
TUTTI_HOST_DEVICE inline int patBlocks(int d, int k) {
  const int s = 1 << d;
  return s < k - s ? s : k - s;
}

// The peers of rank r at step d: AllGather receives from r + 2^d and sends to r - 2^d; ReduceScatter the
// other way round.
TUTTI_HOST_DEVICE inline void patPeers(ncclFunc_t func, int r, int d, int k, int* recvFrom, int* sendTo) {
  const int s = 1 << d;
  const int up = (r + s) % k, down = (r + k - s) % k;
  *recvFrom = func == ncclFuncAllGather ? up : down;
  *sendTo = func == ncclFuncAllGather ? down : up;
}

#define TUTTI_PAT_STEP(call)                      \
  do {                                            \
    ncclResult_t stepRes_ = (call);               \
    if (stepRes_ != ncclSuccess) return stepRes_; \
  } while (0)

template <typename Dim>
TUTTI_HOST_DEVICE ncclResult_t patAllGather(Dim& dim, const CollWork& w, const void* input, void* output) {
  const int k = w.nRanks, r = w.ringIx;
  auto blockOff = [&](int b, size_t at) { return static_cast<size_t>(b % k) * w.count + w.chOffset + at; };
  if (k == 1) {
    return dim(0, [&](auto& p) -> ncclResult_t {
      p.setBuffers(input, output);
      for (size_t at = 0; at < w.chCount; at += w.chunkCount)
        TUTTI_PAT_STEP(p.localCopy(w.chOffset + at, blockOff(r, at), minSize(w.chunkCount, w.chCount - at)));
      return ncclSuccess;
    });
  }
  const int steps = patSteps(k);
  for (int d = 0; d < steps; ++d) {
    const int s = 1 << d, c = patBlocks(d, k);
    TUTTI_PAT_STEP(dim(d, [&](auto& p) -> ncclResult_t {
      p.setBuffers(input, output);
      for (size_t at = 0; at < w.chCount; at += w.chunkCount) {
        const size_t n = minSize(w.chunkCount, w.chCount - at);
        for (int j = 0; j < c; ++j) {
          // Step 0 sends block r itself: from the input, copied into its output place on the way (in place,
          // input and output place are the same bytes).
          if (d == 0) TUTTI_PAT_STEP(p.copySend(w.chOffset + at, blockOff(r, at), n));
          else TUTTI_PAT_STEP(p.sendFromOutput(blockOff(r + j, at), n));
          TUTTI_PAT_STEP(p.recv(blockOff(r + s + j, at), n));
        }
      }
      return ncclSuccess;
    }));
  }
  return ncclSuccess;
}

template <typename Dim>
TUTTI_HOST_DEVICE ncclResult_t patReduceScatter(Dim& dim, const CollWork& w, const void* input, void* output) {
  const int k = w.nRanks, r = w.ringIx;
  auto blockOff = [&](int b, size_t at) { return static_cast<size_t>(b % k) * w.count + w.chOffset + at; };
  auto ownOff = [&](size_t at) { return w.chOffset + at; };
  if (k == 1) {
    return dim(0, [&](auto& p) -> ncclResult_t {
      p.setBuffers(input, output);
      for (size_t at = 0; at < w.chCount; at += w.chunkCount)
        TUTTI_PAT_STEP(p.localCopy(blockOff(r, at), ownOff(at), minSize(w.chunkCount, w.chCount - at)));
      return ncclSuccess;
    });
  }
  const int steps = patSteps(k);
  // Whether block r + j (1 <= j < k) has received a partial sum at a step before step d (a larger one).
  auto accumulated = [&](int j, int d) {
    for (int e = steps - 1; e > d; --e)
      if (j < patBlocks(e, k)) return true;
    return false;
  };
  const size_t seg = w.scratchSeg ? w.scratchSeg : w.chCount;
  for (size_t segAt = 0;; segAt += seg) {  // at least once: an empty share still takes its steps
    const size_t segEnd = minSize(w.chCount, segAt + seg);
    // Partial sums of block b in scratch, element `at` of the channel's share (within this segment).
    auto scratchOff = [&](int b, size_t at) { return static_cast<size_t>(b % k) * w.scratchStride + (at - segAt); };
    for (int d = steps - 1; d >= 0; --d) {
      const int s = 1 << d, c = patBlocks(d, k);
      TUTTI_PAT_STEP(dim(d, [&](auto& p) -> ncclResult_t {
        for (size_t at = segAt; at < segEnd; at += w.chunkCount) {
          const size_t n = minSize(w.chunkCount, segEnd - at);
          for (int j = 0; j < c; ++j) {
            // Send the partial sum of block r + s + j: from scratch where partial sums arrived for it, else
            // this rank's input alone (its pre-op applied on the way).
            p.setBuffers(input, w.scratch);
            if (accumulated(s + j, d)) TUTTI_PAT_STEP(p.sendFromOutput(scratchOff(r + s + j, at), n));
            else TUTTI_PAT_STEP(p.send(blockOff(r + s + j, at), n));
            // Receive a partial sum of block r + j and add it: block r in the output (post-op at the last
            // step), the others in scratch; the first partial of a block is added to this rank's input.
            const bool first = j == 0 ? d == steps - 1 : !accumulated(j, d);
            if (j == 0) {
              p.setBuffers(input, output);
              TUTTI_PAT_STEP(p.recvReduceInto(!first, blockOff(r, at), ownOff(at), n, d == 0));
            } else {
              TUTTI_PAT_STEP(p.recvReduceInto(!first, blockOff(r + j, at), scratchOff(r + j, at), n, false));
            }
          }
        }
        return ncclSuccess;
      }));
    }
    if (segEnd >= w.chCount) break;
  }
  return ncclSuccess;
}

template <typename Dim>
TUTTI_HOST_DEVICE ncclResult_t runPatCollective(Dim& dim, const CollWork& w, const void* input, void* output) {
  switch (w.func) {
    case ncclFuncAllGather: return patAllGather(dim, w, input, output);
    case ncclFuncReduceScatter: return patReduceScatter(dim, w, input, output);
    default: return ncclInternalError;
  }
}

#undef TUTTI_PAT_STEP

}  // namespace tutti
