// reduceCopy: the kernels' one data-moving loop, run by every thread of a block together.
//   dst[d][i] = postOp( preOp?(src[0][i]) op src[1][i] op ... )  for d < nDsts, i < n
// 16-byte packs when every pointer is 16-byte aligned (the common case: user buffers and FIFO slots),
// else one element at a time through byte copies (the unaligned fallback: a user buffer may even be
// misaligned for its datatype). Threads take packs round robin, so neighbouring threads touch neighbouring
// 16 bytes (coalesced on a GPU). A destination may equal src[0] exactly (in place).
#pragma once

#include "device/common/reduce_ops.h"
#include "device/simt/simt.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tutti::dev {

inline constexpr int kMaxSrcs = 5;  // input, output (tree root's broadcast) and up to 3 receive slots
inline constexpr int kMaxDsts = 4;  // output and up to 3 send slots

// Aligned: plain element accesses; otherwise byte copies (a pointer may be misaligned for T).
template <typename T, bool Aligned>
TUTTI_DEVICE T loadElem(const T* p, size_t i) {
  if constexpr (Aligned) return p[i];
  T v;
  memcpy(&v, reinterpret_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T, bool Aligned>
TUTTI_DEVICE void storeElem(T* p, size_t i, T v) {
  if constexpr (Aligned) p[i] = v;
  else memcpy(reinterpret_cast<char*>(p) + i * sizeof(T), &v, sizeof(T));
}

template <typename T, typename Op, bool Pre, bool Post, bool Aligned>
TUTTI_DEVICE T reduceElem(const Op& op, int nSrcs, const T* const* srcs, size_t i) {
  T acc = loadElem<T, Aligned>(srcs[0], i);
  if constexpr (Pre) acc = op.preOp(acc);
  for (int s = 1; s < nSrcs; ++s) acc = op.reduce(acc, loadElem<T, Aligned>(srcs[s], i));
  if constexpr (Post) acc = op.postOp(acc);
  return acc;
}

// 16 bytes moved as one load or store (a 16-byte vector access on a GPU).
struct alignas(16) Pack16 {
  uint64_t lo, hi;
};

inline constexpr int kUnroll = 4;  // packs in flight per thread in reduceCopy's aligned loop

// Packs p, p + nt, ..., p + (U - 1) nt: dst[d] = postOp(preOp?(src[0]) op src[1] op ...), element by element within
// each pack as reduceElem does.
template <typename T, typename Op, bool Pre, bool Post, int U>
TUTTI_DEVICE void reducePacks(const Op& op, int nSrcs, const Pack16* const* s16, int nDsts, Pack16* const* d16,
                              size_t p, int nt) {
  constexpr int kPack = 16 / sizeof(T);
  T acc[U][kPack];
  Pack16 raw[U];
  for (int u = 0; u < U; ++u) raw[u] = s16[0][p + size_t(u) * nt];
  for (int u = 0; u < U; ++u) {
    memcpy(acc[u], &raw[u], 16);
    if constexpr (Pre)
      for (int j = 0; j < kPack; ++j) acc[u][j] = op.preOp(acc[u][j]);
  }
  for (int s = 1; s < nSrcs; ++s) {
    for (int u = 0; u < U; ++u) raw[u] = s16[s][p + size_t(u) * nt];
    for (int u = 0; u < U; ++u) {
      T x[kPack];
      memcpy(x, &raw[u], 16);
      for (int j = 0; j < kPack; ++j) acc[u][j] = op.reduce(acc[u][j], x[j]);
    }
  }
  if constexpr (Post)
    for (int u = 0; u < U; ++u)
      for (int j = 0; j < kPack; ++j) acc[u][j] = op.postOp(acc[u][j]);
  for (int u = 0; u < U; ++u) memcpy(&raw[u], acc[u], 16);
  for (int d = 0; d < nDsts; ++d)
    for (int u = 0; u < U; ++u) d16[d][p + size_t(u) * nt] = raw[u];
}

template <typename T, typename Op, bool Pre, bool Post>
TUTTI_DEVICE void reduceCopyImpl(const Op& op, int nSrcs, const T* const* srcs, int nDsts, T* const* dsts,
                                 size_t n) {
  const int tid = simt::tid(), nt = simt::nthreads();
  constexpr size_t kPack = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
  uintptr_t misaligned = 0;
  for (int s = 0; s < nSrcs; ++s) misaligned |= reinterpret_cast<uintptr_t>(srcs[s]);
  for (int d = 0; d < nDsts; ++d) misaligned |= reinterpret_cast<uintptr_t>(dsts[d]);
  size_t head = 0;
  if ((misaligned & 15) == 0 && sizeof(T) <= 16 && 16 % sizeof(T) == 0) {
    const size_t packs = n / kPack;
    const Pack16* s16[kMaxSrcs];
    Pack16* d16[kMaxDsts];
    for (int s = 0; s < nSrcs; ++s) s16[s] = reinterpret_cast<const Pack16*>(srcs[s]);
    for (int d = 0; d < nDsts; ++d) d16[d] = reinterpret_cast<Pack16*>(dsts[d]);
    size_t p = tid;
    // kUnroll packs a thread at a time, every load of a source issued before its values are used: a block keeps
    // that many 16-byte loads in flight per thread, which is what its bandwidth depends on.
    for (; p + (kUnroll - 1) * size_t(nt) < packs; p += kUnroll * size_t(nt))
      reducePacks<T, Op, Pre, Post, kUnroll>(op, nSrcs, s16, nDsts, d16, p, nt);
    for (; p < packs; p += nt) reducePacks<T, Op, Pre, Post, 1>(op, nSrcs, s16, nDsts, d16, p, nt);
    head = packs * kPack;
  }
  for (size_t i = head + tid; i < n; i += nt) {
    const T v = reduceElem<T, Op, Pre, Post, false>(op, nSrcs, srcs, i);
    for (int d = 0; d < nDsts; ++d) storeElem<T, false>(dsts[d], i, v);
  }
}

// The entry point: dispatches the op's pre/post steps once per call.
template <typename T, typename Op>
TUTTI_DEVICE void reduceCopy(const Op& op, int nSrcs, const void* const* srcs, int nDsts, void* const* dsts, size_t n,
                             bool pre, bool post) {
  if (n == 0 || nDsts == 0) return;
  const T* s[kMaxSrcs];
  T* d[kMaxDsts];
  for (int i = 0; i < nSrcs; ++i) s[i] = static_cast<const T*>(srcs[i]);
  for (int i = 0; i < nDsts; ++i) d[i] = static_cast<T*>(dsts[i]);
  if constexpr (Op::kHasPreOp) {
    if (pre) return reduceCopyImpl<T, Op, true, false>(op, nSrcs, s, nDsts, d, n);
  }
  if constexpr (Op::kHasPostOp) {
    if (post) return reduceCopyImpl<T, Op, false, true>(op, nSrcs, s, nDsts, d, n);
  }
  reduceCopyImpl<T, Op, false, false>(op, nSrcs, s, nDsts, d, n);
}

}  // namespace tutti::dev
