#include "device/host/reduce_copy.h"

#include "device/host/det_reduce_copy.h"
#include "device/host/fold16_avx2.h"
#include "util/simd.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace tutti {

namespace {

// Elements per block of the general path: the accumulator (at most 4 KiB) stays in L1 while every source
// is folded into it.
constexpr size_t kBlockElems = 512;

// Unaligned element access. memcpy of sizeof(T) bytes compiles to one (vectorisable) unaligned load/store.
template <typename T>
inline T loadElem(const unsigned char* base, size_t i) {
  T v;
  std::memcpy(&v, base + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
inline void storeElem(unsigned char* base, size_t i, T v) {
  std::memcpy(base + i * sizeof(T), &v, sizeof(T));
}

// dst = (Pre ? preOp(a) : a) op b: the shape of recvReduceSend / recvReduceCopy, the hot case.
// dst may equal a or b exactly: each element is read before it is written.
template <typename T, typename Op, bool Pre, bool Post>
TUTTI_SIMD_CLONES
void reduceTwo(const Op& op, const unsigned char* a, const unsigned char* b, unsigned char* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    T x = loadElem<T>(a, i);
    if constexpr (Pre) x = op.preOp(x);
    T r = op.reduce(x, loadElem<T>(b, i));
    if constexpr (Post) r = op.postOp(r);
    storeElem<T>(dst, i, r);
  }
}

// Both results of dst0 = dst1 = (Pre ? preOp(a) : a) op b in one pass: recvReduceCopySend, the middle of
// every ring AllReduce, writes its result to the output and to the next rank's slot. Element-wise, so
// either destination may equal a or b exactly.
template <typename T, typename Op, bool Pre, bool Post>
TUTTI_SIMD_CLONES
void reduceTwoToTwo(const Op& op, const unsigned char* a, const unsigned char* b, unsigned char* dst0,
                    unsigned char* dst1, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    T x = loadElem<T>(a, i);
    if constexpr (Pre) x = op.preOp(x);
    T r = op.reduce(x, loadElem<T>(b, i));
    if constexpr (Post) r = op.postOp(r);
    storeElem<T>(dst0, i, r);
    storeElem<T>(dst1, i, r);
  }
}

// Any number of sources and destinations, block by block: acc = src0 (preOp), fold each further source
// into acc, postOp, then write acc to every destination. A destination equal to src[0] is safe because
// a block is fully read before it is written.
template <typename T, typename Op, bool Pre, bool Post>
TUTTI_SIMD_CLONES
void reduceGeneral(const Op& op, int nSrcs, const void* const* srcs, int nDsts, void* const* dsts, size_t count) {
  alignas(64) T acc[kBlockElems];
  for (size_t base = 0; base < count; base += kBlockElems) {
    const size_t n = std::min(kBlockElems, count - base);
    const size_t offset = base * sizeof(T);
    const auto* s0 = static_cast<const unsigned char*>(srcs[0]) + offset;
    for (size_t i = 0; i < n; ++i) {
      T x = loadElem<T>(s0, i);
      if constexpr (Pre) x = op.preOp(x);
      acc[i] = x;
    }
    for (int j = 1; j < nSrcs; ++j) {
      const auto* sj = static_cast<const unsigned char*>(srcs[j]) + offset;
      for (size_t i = 0; i < n; ++i) acc[i] = op.reduce(acc[i], loadElem<T>(sj, i));
    }
    if constexpr (Post) {
      for (size_t i = 0; i < n; ++i) acc[i] = op.postOp(acc[i]);
    }
    for (int d = 0; d < nDsts; ++d) std::memcpy(static_cast<unsigned char*>(dsts[d]) + offset, acc, n * sizeof(T));
  }
}

// N sources (3 to 8) into one destination in one pass, the sources folded in order as reduceGeneral folds them:
// every row is read once and the result written once, where reduceGeneral reads and writes its accumulator once per
// source. A one-hop tree's root, a direct reduction and a one-shot AllReduce fold n rows so. fp32, 4 rows of 16K
// elements in cache: 8.7 -> 3.9 us, 8 rows 15.4 -> 7.1 us. dst may equal srcs[0] exactly (each element is read before it
// is written).
template <typename T, typename Op, bool Pre, bool Post, int N>
TUTTI_SIMD_CLONES
void reduceRows(const Op& op, const void* const* srcs, void* dst, size_t count) {
  const unsigned char* s[N];
  for (int j = 0; j < N; ++j) s[j] = static_cast<const unsigned char*>(srcs[j]);
  auto* d = static_cast<unsigned char*>(dst);
#pragma GCC ivdep
  for (size_t i = 0; i < count; ++i) {
    T x = loadElem<T>(s[0], i);
    if constexpr (Pre) x = op.preOp(x);
#pragma GCC unroll 8
    for (int j = 1; j < N; ++j) x = op.reduce(x, loadElem<T>(s[j], i));
    if constexpr (Post) x = op.postOp(x);
    storeElem<T>(d, i, x);
  }
}

template <typename T, typename Op, bool Pre, bool Post>
bool runRows(const Op& op, int nSrcs, const void* const* srcs, void* dst, size_t count) {
  switch (nSrcs) {
    case 3: reduceRows<T, Op, Pre, Post, 3>(op, srcs, dst, count); return true;
    case 4: reduceRows<T, Op, Pre, Post, 4>(op, srcs, dst, count); return true;
    case 5: reduceRows<T, Op, Pre, Post, 5>(op, srcs, dst, count); return true;
    case 6: reduceRows<T, Op, Pre, Post, 6>(op, srcs, dst, count); return true;
    case 7: reduceRows<T, Op, Pre, Post, 7>(op, srcs, dst, count); return true;
    case 8: reduceRows<T, Op, Pre, Post, 8>(op, srcs, dst, count); return true;
    default: return false;
  }
}

template <typename T, typename Op, bool Pre, bool Post>
void runKernel(const Op& op, int nSrcs, const void* const* srcs, int nDsts, void* const* dsts, size_t count) {
  if constexpr ((std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) && std::is_same_v<Op, OpSum<T>>) {
    // fp16 and bf16 sums of 2 to 8 rows written out for AVX2 (fold16_avx2.h), the last count % 8 elements below.
    if (nSrcs <= 8 && nDsts <= 2) {
      const size_t done = std::is_same_v<T, Half> ? halfSumF16c(nSrcs, srcs, nDsts, dsts, count)
                                                  : bf16SumAvx2(nSrcs, srcs, nDsts, dsts, count);
      if (done == count) return;
      if (done > 0) {
        const void* s[8];
        void* d[2];
        for (int j = 0; j < nSrcs; ++j) s[j] = static_cast<const char*>(srcs[j]) + done * sizeof(T);
        for (int k = 0; k < nDsts; ++k) d[k] = static_cast<char*>(dsts[k]) + done * sizeof(T);
        return runKernel<T, Op, Pre, Post>(op, nSrcs, s, nDsts, d, count - done);
      }
    }
  }
  if (nSrcs == 2 && nDsts == 1) {
    reduceTwo<T, Op, Pre, Post>(op, static_cast<const unsigned char*>(srcs[0]),
                                static_cast<const unsigned char*>(srcs[1]), static_cast<unsigned char*>(dsts[0]),
                                count);
  } else if (nSrcs == 2 && nDsts == 2) {
    reduceTwoToTwo<T, Op, Pre, Post>(op, static_cast<const unsigned char*>(srcs[0]),
                                     static_cast<const unsigned char*>(srcs[1]), static_cast<unsigned char*>(dsts[0]),
                                     static_cast<unsigned char*>(dsts[1]), count);
  } else if (nDsts != 1 || !runRows<T, Op, Pre, Post>(op, nSrcs, srcs, dsts[0], count)) {
    reduceGeneral<T, Op, Pre, Post>(op, nSrcs, srcs, nDsts, dsts, count);
  }
}

}  // namespace

void hostReduceCopy(const ResolvedRedOp& op, int nSrcs, const void* const* srcs, int nDsts, void* const* dsts,
                    size_t count, bool preOpFirstSrc, bool postOp) {
  if (count == 0 || nDsts <= 0 || nSrcs <= 0) return;
  if (op.detPair) [[unlikely]] {
    if (nSrcs > 1) return hostDetReduceCopy(op, nSrcs, srcs, nDsts, dsts, count, nullptr);
    const size_t bytes = count * dataTypeSize(op.datatype);
    for (int d = 0; d < nDsts; ++d)
      if (dsts[d] != srcs[0]) std::memcpy(dsts[d], srcs[0], bytes);
    return;
  }
  dispatchDataType(op.datatype, [&](auto tag) {
    using T = typename decltype(tag)::Type;
    dispatchRedOp<T>(op, [&](const auto& fn) {
      using Op = std::decay_t<decltype(fn)>;
      const bool pre = Op::kHasPreOp && preOpFirstSrc;
      const bool post = Op::kHasPostOp && postOp;
      if (nSrcs == 1 && !pre && !post) {  // plain copy
        for (int d = 0; d < nDsts; ++d)
          if (dsts[d] != srcs[0]) std::memcpy(dsts[d], srcs[0], count * sizeof(T));
        return;
      }
      if constexpr (Op::kHasPreOp) {
        if (pre) return runKernel<T, Op, true, false>(fn, nSrcs, srcs, nDsts, dsts, count);
      }
      if constexpr (Op::kHasPostOp) {
        if (post) return runKernel<T, Op, false, true>(fn, nSrcs, srcs, nDsts, dsts, count);
      }
      runKernel<T, Op, false, false>(fn, nSrcs, srcs, nDsts, dsts, count);
    });
  });
}

}  // namespace tutti
