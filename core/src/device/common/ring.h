// Ring algorithms, written once over a primitives type `P` (host: HostPrims; CUDA: the device
// primitives), as the step sequences of the NCCL paper (Tables V-IX). Every primitive takes element
// offsets into the user's input/output buffers and an element count (possibly 0: the step still happens
// so both ends of a connection count the same steps).
//
// P provides: send(in, n), recv(out, n), copySend(in, out, n), recvCopySend(out, n),
// recvReduceSend(in, n), recvReduceCopy(in, out, n), recvReduceCopySend(in, out, n),
// localCopy(in, out, n) (reduction pre/post-ops applied, no communication); each returns ncclResult_t.
#pragma once

#include "device/common/work.h"

namespace tutti {

#define TUTTI_RING_STEP(call)                       \
  do {                                              \
    ncclResult_t stepRes_ = (call);                 \
    if (stepRes_ != ncclSuccess) return stepRes_;   \
  } while (0)

// AllReduce = ReduceScatter then AllGather around the ring: 2k-1 steps per loop.
template <typename P>
TUTTI_HOST_DEVICE ncclResult_t ringAllReduce(P& p, const CollWork& w) {
  const int k = w.nRanks, ix = w.ringIx;
  if (k == 1) return p.localCopy(w.chOffset, w.chOffset, w.chCount);
  const size_t loopSize = static_cast<size_t>(k) * w.chunkCount;
  for (size_t done = 0; done < w.chCount; done += loopSize) {
    const size_t left = w.chCount - done;
    const size_t real = minSize(w.chunkCount, alignUp(divUp(left, k), w.align));
    auto off = [&](int chunk) { return w.chOffset + done + chunk * real; };
    auto len = [&](int chunk) {
      size_t start = chunk * real;
      return start >= left ? size_t{0} : minSize(real, left - start);
    };
    int chunk = modRanks(ix + k - 1, k);
    TUTTI_RING_STEP(p.send(off(chunk), len(chunk)));
    for (int j = 2; j < k; ++j) {
      chunk = modRanks(ix + k - j, k);
      TUTTI_RING_STEP(p.recvReduceSend(off(chunk), len(chunk)));
    }
    chunk = ix;
    TUTTI_RING_STEP(p.recvReduceCopySend(off(chunk), off(chunk), len(chunk)));
    for (int j = 1; j < k - 1; ++j) {
      chunk = modRanks(ix + k - j, k);
      TUTTI_RING_STEP(p.recvCopySend(off(chunk), len(chunk)));
    }
    chunk = modRanks(ix + 1, k);
    TUTTI_RING_STEP(p.recv(off(chunk), len(chunk)));
  }
  return ncclSuccess;
}

// AllGather: block b of the output belongs to ring position b; each step forwards one block.
template <typename P>
TUTTI_HOST_DEVICE ncclResult_t ringAllGather(P& p, const CollWork& w) {
  const int k = w.nRanks, ix = w.ringIx;
  for (size_t done = 0; done < w.chCount; done += w.chunkCount) {
    const size_t n = minSize(w.chunkCount, w.chCount - done);
    const size_t inOff = w.chOffset + done;
    auto blockOff = [&](int pos) { return static_cast<size_t>(w.ringRanks[pos]) * w.count + inOff; };
    if (k == 1) {
      TUTTI_RING_STEP(p.localCopy(inOff, blockOff(ix), n));
      continue;
    }
    TUTTI_RING_STEP(p.copySend(inOff, blockOff(ix), n));
    for (int j = 1; j < k - 1; ++j) TUTTI_RING_STEP(p.recvCopySend(blockOff(modRanks(ix + k - j, k)), n));
    TUTTI_RING_STEP(p.recv(blockOff(modRanks(ix + 1, k)), n));
  }
  return ncclSuccess;
}

// ReduceScatter: block b of the input is reduced into ring position b's output.
template <typename P>
TUTTI_HOST_DEVICE ncclResult_t ringReduceScatter(P& p, const CollWork& w) {
  const int k = w.nRanks, ix = w.ringIx;
  for (size_t done = 0; done < w.chCount; done += w.chunkCount) {
    const size_t n = minSize(w.chunkCount, w.chCount - done);
    const size_t outOff = w.chOffset + done;
    auto blockOff = [&](int pos) { return static_cast<size_t>(w.ringRanks[pos]) * w.count + outOff; };
    if (k == 1) {
      TUTTI_RING_STEP(p.localCopy(blockOff(ix), outOff, n));
      continue;
    }
    TUTTI_RING_STEP(p.send(blockOff(modRanks(ix + k - 1, k)), n));
    for (int j = 2; j < k; ++j) TUTTI_RING_STEP(p.recvReduceSend(blockOff(modRanks(ix + k - j, k)), n));
    TUTTI_RING_STEP(p.recvReduceCopy(blockOff(ix), outOff, n));
  }
  return ncclSuccess;
}

// Broadcast: a pipelined chain from the root along the ring.
template <typename P>
TUTTI_HOST_DEVICE ncclResult_t ringBroadcast(P& p, const CollWork& w) {
  const int k = w.nRanks;
  const int pos = modRanks(w.ringIx + k - w.rootIx, k);  // 0 = root, k-1 = end of the chain
  for (size_t done = 0; done < w.chCount; done += w.chunkCount) {
    const size_t n = minSize(w.chunkCount, w.chCount - done);
    const size_t off = w.chOffset + done;
    if (k == 1) TUTTI_RING_STEP(p.localCopy(off, off, n));
    else if (pos == 0) TUTTI_RING_STEP(w.inPlace ? p.send(off, n) : p.copySend(off, off, n));
    else if (pos == k - 1) TUTTI_RING_STEP(p.recv(off, n));
    else TUTTI_RING_STEP(p.recvCopySend(off, n));
  }
  return ncclSuccess;
}

// Reduce: a pipelined chain along the ring that ends at the root.
template <typename P>
TUTTI_HOST_DEVICE ncclResult_t ringReduce(P& p, const CollWork& w) {
  const int k = w.nRanks;
  const int pos = (w.ringIx + 2 * k - w.rootIx - 1) % k;  // 0 = first after root, k-1 = root
  for (size_t done = 0; done < w.chCount; done += w.chunkCount) {
    const size_t n = minSize(w.chunkCount, w.chCount - done);
    const size_t off = w.chOffset + done;
    if (k == 1) TUTTI_RING_STEP(p.localCopy(off, off, n));
    else if (pos == 0) TUTTI_RING_STEP(p.send(off, n));
    else if (pos == k - 1) TUTTI_RING_STEP(p.recvReduceCopy(off, off, n));
    else TUTTI_RING_STEP(p.recvReduceSend(off, n));
  }
  return ncclSuccess;
}

template <typename P>
TUTTI_HOST_DEVICE ncclResult_t runRingCollective(P& p, const CollWork& w) {
  switch (w.func) {
    case ncclFuncAllReduce: return ringAllReduce(p, w);
    case ncclFuncAllGather: return ringAllGather(p, w);
    case ncclFuncReduceScatter: return ringReduceScatter(p, w);
    case ncclFuncBroadcast: return ringBroadcast(p, w);
    case ncclFuncReduce: return ringReduce(p, w);
    default: return ncclInternalError;
  }
}

#undef TUTTI_RING_STEP

}  // namespace tutti
