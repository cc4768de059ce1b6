// The sim and cuda backends' symmetric collectives (device/common/sym.h): one block's share of one call,
// run by every thread of the block. The block's copy of the peers' addresses is in shared memory.
#pragma once

#include "device/common/det_reduce.h"
#include "device/common/sym.h"
#include "device/kernels/dev_work.h"
#include "device/kernels/prims.h"
#include "device/kernels/reduce_copy.h"
#include "device/simt/simt.h"

#include <cstdint>

namespace tutti::dev {

// Barrier `block` over the ranks (sym.h); false when the block must stop (abort, timeout: recorded).
TUTTI_DEVICE bool symBarrier(const SymPeers& peers, int block, int me, int n, const WaitEnv& env) {
  if (peers.local) return !stopped(env);  // rows in this rank's memory, in stream order: nobody to wait for
  const int tid = simt::tid(), nt = simt::nthreads();
  SyncSlot* mine = symSlot(peers.barrier[me], block, me, n);
  const uint64_t next = simt::loadVolatile(&mine->value) + 1;
  simt::syncBlock();  // every thread read the count, and wrote its share of the data, before it is published
  for (int p = tid; p < n; p += nt) {
    simt::fenceSystem();
    simt::storeRelease(&symSlot(peers.barrier[p], block, me, n)->value, next);
  }
  for (int p = tid; p < n; p += nt) {
    if (p == me) continue;
    const uint64_t* slot = &symSlot(peers.barrier[me], block, p, n)->value;
    uint32_t polls = 0;
    uint64_t start = 0;
    while (simt::loadAcquire(slot) < next) {
      simt::spinPause();
      if ((++polls & 63) != 0) continue;
      if (stopped(env)) break;
      if (simt::loadAcquire32(env.abortWord) != 0) {
        recordStop(env, StopReason::Aborted, p, false, next);
        break;
      }
      if (env.timeoutNs) {
        const uint64_t now = simt::clockNs();
        if (start == 0) {
          start = now;
        } else if (now - start > env.timeoutNs) {
          recordStop(env, StopReason::TimedOut, p, false, next);
          break;
        }
      }
    }
  }
  simt::syncBlock();
  return !stopped(env);
}

// out[d][i] = the deterministic reduction (det_reduce.h) of in[0][i] .. in[nIn-1][i] for d < nOut, i < n; every
// input is some rank's own. in[s] = ins[s] + inAt bytes, likewise the outputs. scalars (PreMulSum, may be
// null): input s's scalar at scalars + s * sizeof(T), else the op's.
template <typename T, bool Aligned>
TUTTI_DEVICE void symReduce(const DetOp<T>& op, char* const* ins, size_t inAt, int nIn, char* const* outs,
                            size_t outAt, int nOut, size_t n, const char* scalars) {
  const int tid = simt::tid(), nt = simt::nthreads();
  for (size_t i = tid; i < n; i += nt) {
    auto load = [&](int s) { return loadElem<T, Aligned>(reinterpret_cast<const T*>(ins[s] + inAt), i); };
    const T v = scalars ? detReduceElementScaled<T>(op, nIn, load, [&](int s) {
      return detScalarOf<T>(loadElem<T, false>(reinterpret_cast<const T*>(scalars), static_cast<size_t>(s)));
    }) : detReduceElement<T>(op, nIn, load);
    for (int d = 0; d < nOut; ++d) storeElem<T, Aligned>(reinterpret_cast<T*>(outs[d] + outAt), i, v);
  }
}

template <typename T>
TUTTI_DEVICE void symReduceAny(const DetOp<T>& op, char* const* ins, size_t inAt, int nIn, char* const* outs,
                               size_t outAt, int nOut, size_t n, const char* scalars = nullptr) {
  uintptr_t bits = inAt | outAt;
  for (int s = 0; s < nIn; ++s) bits |= reinterpret_cast<uintptr_t>(ins[s]);
  for (int d = 0; d < nOut; ++d) bits |= reinterpret_cast<uintptr_t>(outs[d]);
  if (bits % alignof(T) == 0) symReduce<T, true>(op, ins, inAt, nIn, outs, outAt, nOut, n, scalars);
  else symReduce<T, false>(op, ins, inAt, nIn, outs, outAt, nOut, n, scalars);
}

// dst[0, bytes) = src[0, bytes): 16-byte words when both allow, else bytes.
TUTTI_DEVICE void symCopy(char* dst, const char* src, size_t bytes) {
  const int tid = simt::tid(), nt = simt::nthreads();
  if (dst == src || bytes == 0) return;
  size_t head = 0;
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
    const size_t words = bytes / 16;
    for (size_t i = tid; i < words; i += nt)
      reinterpret_cast<simt::U128*>(dst)[i] = reinterpret_cast<const simt::U128*>(src)[i];
    head = words * 16;
  }
  for (size_t i = head + tid; i < bytes; i += nt) dst[i] = src[i];
}

// One block's share of a symmetric collective; the reduction comes from the work's op (one instance per
// datatype, whatever the op).
template <typename T>
TUTTI_DEVICE_NOINLINE ncclResult_t runSymmetric(const SymPeers& peers, const DevWork& w, const WaitEnv& env) {
  const CollWork& c = w.coll;
  const DetOp<T> op = detOpOf<T>(w.op);
  const int n = c.nRanks, me = c.ringIx, block = w.block;
  const size_t elt = w.eltSize;
  if (peers.storeScalar) {
    if (simt::tid() == 0) storeElem<T, false>(reinterpret_cast<T*>(peers.recv[0]), 0, redOpScalar<T>(w.op));
    return stopped(env) ? ncclRemoteError : ncclSuccess;
  }
  if (!symBarrier(peers, block, me, n, env)) return ncclRemoteError;
  switch (c.func) {
    case ncclFuncAllReduce: {
      size_t off = 0, cnt = 0;
      symSlice(c.chOffset, c.chCount, me, n, c.align, &off, &cnt);
      symReduceAny<T>(op, peers.send, off * elt, n, peers.recv, off * elt, n, cnt);
      break;
    }
    case ncclFuncAllGather:
      for (int i = 0; i < n; ++i) {
        const int r = (me + i) % n;
        symCopy(peers.recv[me] + (static_cast<size_t>(r) * c.count + c.chOffset) * elt, peers.send[r] + c.chOffset * elt,
                c.chCount * elt);
      }
      break;
    case ncclFuncReduceScatter: {
      char* const out[1] = {peers.recv[me]};
      symReduceAny<T>(op, peers.send, (static_cast<size_t>(me) * c.count + c.chOffset) * elt, n, out,
                      c.chOffset * elt, 1, c.chCount, peers.scalars);
      break;
    }
    default:
      if (simt::tid() == 0) recordStop(env, StopReason::BadWork, -1, false, 0);
      return ncclInternalError;
  }
  return symBarrier(peers, block, me, n, env) ? ncclSuccess : ncclRemoteError;
}

}  // namespace tutti::dev
