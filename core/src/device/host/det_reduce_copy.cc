#include "device/host/det_reduce_copy.h"

#include "device/common/det_reduce.h"
#include "device/host/det_sum_simd.h"
#include "device/host/fold16_avx2.h"
#include "util/simd.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace tutti {

namespace {

// Elements per chunk: one accumulator row per open subtree stays in L1.
constexpr size_t kDetChunk = 512;

// out[i] = lo[i] (op) hi[i]; out may be lo. Inlined into the vectorised callers.
template <typename A>
inline void combineRow(RedOpKind kind, const A* lo, const A* hi, A* out, size_t c) {
  switch (kind) {
    case RedOpKind::Prod:
      for (size_t i = 0; i < c; ++i) out[i] = wrapMul<A>(lo[i], hi[i]);
      break;
    case RedOpKind::Max:
      for (size_t i = 0; i < c; ++i) out[i] = OpMinMax<A, true>{}.reduce(lo[i], hi[i]);
      break;
    case RedOpKind::Min:
      for (size_t i = 0; i < c; ++i) out[i] = OpMinMax<A, false>{}.reduce(lo[i], hi[i]);
      break;
    default:
      for (size_t i = 0; i < c; ++i) out[i] = wrapAdd<A>(lo[i], hi[i]);
      break;
  }
}

// lo[i] = combine(lo[i], leaf i of src): a leaf that closes a subtree at once is folded in as it is loaded.
template <typename T, typename A, typename Combine>
void foldLeaf(const DetOp<T>& op, A scalar, A* lo, const char* src, size_t c, Combine&& combine) {
  if (op.kind == RedOpKind::PreMulSum) {
    for (size_t i = 0; i < c; ++i) {
      T x;
      std::memcpy(&x, src + i * sizeof(T), sizeof(T));
      lo[i] = combine(lo[i], wrapMul<A>(A(toCompute(x)), scalar));
    }
    return;
  }
  for (size_t i = 0; i < c; ++i) {
    T x;
    std::memcpy(&x, src + i * sizeof(T), sizeof(T));
    lo[i] = combine(lo[i], A(toCompute(x)));
  }
}

template <typename T, typename A>
void foldLeafOp(const DetOp<T>& op, A scalar, A* lo, const char* src, size_t c) {
  switch (op.kind) {
    case RedOpKind::Prod: return foldLeaf<T>(op, scalar, lo, src, c, [](A a, A b) { return wrapMul<A>(a, b); });
    case RedOpKind::Max:
      return foldLeaf<T>(op, scalar, lo, src, c, [](A a, A b) { return OpMinMax<A, true>{}.reduce(a, b); });
    case RedOpKind::Min:
      return foldLeaf<T>(op, scalar, lo, src, c, [](A a, A b) { return OpMinMax<A, false>{}.reduce(a, b); });
    default: return foldLeaf<T>(op, scalar, lo, src, c, [](A a, A b) { return wrapAdd<A>(a, b); });
  }
}

template <typename T>
TUTTI_SIMD_CLONES
void detReduceChunks(const DetOp<T>& op, int n, const void* const* in, int nOut, void* const* out, size_t count,
                     const void* rankScalars) {
  using A = DetAcc<T>;
  thread_local std::vector<A> scalars;
  scalars.assign(rankScalars ? n : 0, A{});
  for (int k = 0; k < static_cast<int>(scalars.size()); ++k) scalars[k] = detRowScalar<T>(op, rankScalars, k);
  auto scalarOf = [&](int r) { return rankScalars ? scalars[r] : op.scalar; };
  int depth = 1;  // rows the fold keeps open at most: floor(log2 n) + 1
  while ((1 << depth) <= n) ++depth;
  thread_local std::vector<A> rows;
  if (rows.size() < static_cast<size_t>(depth) * kDetChunk) rows.resize(static_cast<size_t>(depth) * kDetChunk);
  auto row = [&](int s) { return rows.data() + static_cast<size_t>(s) * kDetChunk; };
  thread_local std::vector<T> result;
  if (result.size() < kDetChunk) result.resize(kDetChunk);
  // The accumulator is the result as it is (integers): stored straight from the fold. Floating results go
  // through detNarrow, which also makes every NaN the same one.
  constexpr bool kSameType = std::is_same_v<T, A> && !IsFloatingType<T>;
  const bool direct = kSameType && op.kind != RedOpKind::SumPostDiv;
  for (size_t base = 0; base < count; base += kDetChunk) {
    const size_t c = std::min(kDetChunk, count - base);
    int top = 0;  // open rows, as detTreeFold's stack
    for (int r = 0; r < n; ++r) {
      const char* src = static_cast<const char*>(in[r]) + base * sizeof(T);
      if ((r & 1) == 0) {  // opens a row
        A* v = row(top++);
        for (size_t i = 0; i < c; ++i) {
          T x;
          std::memcpy(&x, src + i * sizeof(T), sizeof(T));
          v[i] = A(toCompute(x));
        }
        if (op.kind == RedOpKind::PreMulSum) {
          const A scalar = scalarOf(r);
          for (size_t i = 0; i < c; ++i) v[i] = wrapMul<A>(v[i], scalar);
        }
        continue;
      }
      foldLeafOp(op, scalarOf(r), row(top - 1), src, c);  // odd rank: closes the pair on top at once
      int cur = top - 1;
      for (unsigned k = unsigned(r) >> 1; k & 1u; k >>= 1) {
        combineRow(op.kind, row(cur - 1), row(cur), row(cur - 1), c);
        --cur;
      }
      top = cur + 1;
    }
    for (int s = top - 2; s >= 0; --s) combineRow(op.kind, row(s), row(s + 1), row(s), c);
    const A* acc = row(0);
    const void* res = acc;
    if (!direct) {
      T* narrowed = result.data();
      if constexpr (IsFloatingType<T>) {
        if (op.average) {
          for (size_t i = 0; i < c; ++i) narrowed[i] = detNarrow<T>(acc[i] / A(n));
        } else {
          for (size_t i = 0; i < c; ++i) narrowed[i] = detNarrow<T>(acc[i]);
        }
      } else if (op.kind == RedOpKind::SumPostDiv) {
        for (size_t i = 0; i < c; ++i) narrowed[i] = T(acc[i] / T(op.nRanks));
      } else {
        for (size_t i = 0; i < c; ++i) narrowed[i] = T(acc[i]);
      }
      res = narrowed;
    }
    for (int d = 0; d < nOut; ++d) std::memcpy(static_cast<char*>(out[d]) + base * sizeof(T), res, c * sizeof(T));
  }
}

// detNarrow without its branch, for fp32, fp64 and bf16, as the result's bits: loops that call it stay vectorised (with
// the branch they ran one element at a time). A NaN becomes detNan by a bit mask; bf16 rounds to nearest even on the
// 16 bits it drops, as BFloat16::fromFloat does for a number.
template <typename T>
using DetBits = std::conditional_t<sizeof(T) == 8, uint64_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;

// `bits`, or detNan's when `nan`.
template <typename T>
inline DetBits<T> nanMasked(DetBits<T> bits, bool nan) {
  using U = DetBits<T>;
  const U nanMask = static_cast<U>(-static_cast<int64_t>(nan));
  return static_cast<U>((bits & static_cast<U>(~nanMask)) | (__builtin_bit_cast(U, detNan<T>()) & nanMask));
}

template <typename T>
inline DetBits<T> narrowBits(DetAcc<T> acc) {
  using U = DetBits<T>;
  U bits;
  if constexpr (std::is_same_v<T, BFloat16>) {
    const uint32_t u = floatBits(acc);
    bits = U((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  } else {
    bits = __builtin_bit_cast(U, T(acc));
  }
  return nanMasked<T>(bits, acc != acc);
}

// The tree of det_reduce.h unrolled at compile time for N inputs: perfect<Lo, Size> is the perfect subtree
// over ranks [Lo, Lo + Size), blocks<Lo, Rem> the blocks of the binary digits of Rem from rank Lo, largest
// first, combined from the last backwards (B0 + (B1 + B2)).
template <int Lo, int Size, typename A, typename Leaf>
inline A perfectSum(const Leaf& leaf) {
  if constexpr (Size == 1) return leaf(Lo);
  else return perfectSum<Lo, Size / 2, A>(leaf) + perfectSum<Lo + Size / 2, Size / 2, A>(leaf);
}
template <int Lo, int Rem, typename A, typename Leaf>
inline A blockSum(const Leaf& leaf) {
  constexpr int kBlock = 1 << (31 - __builtin_clz(unsigned(Rem)));
  if constexpr (kBlock == Rem) return perfectSum<Lo, kBlock, A>(leaf);
  else return perfectSum<Lo, kBlock, A>(leaf) + blockSum<Lo + kBlock, Rem - kBlock, A>(leaf);
}

// Sum, Avg and PreMulSum of N float, double or bfloat16 inputs into one or two outputs (a ring step writes its output
// and the next rank's slot), element by element with the tree inlined (the compiler vectorises the loop; an output
// equal to an input is read before it is written at each index). scalars: N widened scalars (PreMulSum) or null.
template <typename T, int N, bool kScaled, bool kAverage, bool kTwoOut>
TUTTI_SIMD_CLONES
void detSumFixed(const void* const* in, void* const* out, size_t count, const DetAcc<T>* scalars) {
  using A = DetAcc<T>;
  const char* src[N];
  for (int k = 0; k < N; ++k) src[k] = static_cast<const char*>(in[k]);
  char* dst = static_cast<char*>(out[0]);
  char* dst2 = kTwoOut ? static_cast<char*>(out[1]) : nullptr;
  A scale[N] = {};
  if constexpr (kScaled)
    for (int k = 0; k < N; ++k) scale[k] = scalars[k];
#pragma GCC ivdep
  for (size_t i = 0; i < count; ++i) {
    auto leaf = [&](int r) {
      T x;
      std::memcpy(&x, src[r] + i * sizeof(T), sizeof(T));
      if constexpr (kScaled) return A(toCompute(x)) * scale[r];
      else return A(toCompute(x));
    };
    // Two fp32 inputs summed: fp32's own addition gives the same bits as widening to double, adding and rounding
    // once (double has more than twice fp32's precision plus two bits, so rounding twice rounds as once; the
    // double sum of two floats never overflows, and its rounding overflows exactly where fp32's does). Half the
    // conversions, twice the lanes.
    constexpr bool kFloatPair = std::is_same_v<T, float> && N == 2 && !kScaled && !kAverage;
    DetBits<T> y;
    if constexpr (kFloatPair) {
      T x0, x1;
      std::memcpy(&x0, src[0] + i * sizeof(T), sizeof(T));
      std::memcpy(&x1, src[1] + i * sizeof(T), sizeof(T));
      const T sum = x0 + x1;
      y = nanMasked<T>(__builtin_bit_cast(DetBits<T>, sum), sum != sum);
    } else {
      A acc = blockSum<0, N, A>(leaf);
      if constexpr (kAverage) acc = acc / A(N);
      y = narrowBits<T>(acc);
    }
    std::memcpy(dst + i * sizeof(T), &y, sizeof(T));
    if constexpr (kTwoOut) std::memcpy(dst2 + i * sizeof(T), &y, sizeof(T));
  }
}

template <typename T, int N, bool kTwoOut>
bool detSumFixedOp(const DetOp<T>& op, const void* const* in, void* const* out, size_t count,
                   const void* rankScalars, bool coldRows) {
  using A = DetAcc<T>;
  if constexpr (std::is_same_v<T, float> && N == 2) {
    // AVX-512 where the CPU has it (det_sum_simd.h).
    if (op.kind == RedOpKind::Sum && !op.average && detSumFloatPair(in, kTwoOut ? 2 : 1, out, count) == count)
      return true;
  }
  if constexpr (std::is_same_v<T, float> && N >= 3 && !kTwoOut) {
    // Written out for AVX-512 or AVX2 (det_sum_simd.h) where the CPU has it; the last count % 8 or 4 elements here.
    const double* sc = nullptr;
    A scalars[N];
    if (op.kind == RedOpKind::PreMulSum) {
      for (int k = 0; k < N; ++k) scalars[k] = detRowScalar<T>(op, rankScalars, k);
      sc = scalars;
    }
    const bool sum = op.kind == RedOpKind::Sum;
    if (sum || op.kind == RedOpKind::PreMulSum) {
      const size_t done = detSumFloatSimd(N, !sum, sum && op.average, in, out[0], count, sc, 0, true, coldRows);
      if (done > 0) {
        if (done == count) return true;
        const void* rest[N];
        for (int k = 0; k < N; ++k) rest[k] = static_cast<const char*>(in[k]) + done * sizeof(T);
        void* restOut = static_cast<char*>(out[0]) + done * sizeof(T);
        return detSumFixedOp<T, N, kTwoOut>(op, rest, &restOut, count - done, rankScalars, false);
      }
    }
  }
  if (op.kind == RedOpKind::Sum) {
    if (op.average) detSumFixed<T, N, false, true, kTwoOut>(in, out, count, nullptr);
    else detSumFixed<T, N, false, false, kTwoOut>(in, out, count, nullptr);
    return true;
  }
  if (op.kind != RedOpKind::PreMulSum) return false;
  A scalars[N];
  for (int k = 0; k < N; ++k) scalars[k] = detRowScalar<T>(op, rankScalars, k);
  detSumFixed<T, N, true, false, kTwoOut>(in, out, count, scalars);
  return true;
}

// fp16 Sum, Avg and PreMulSum of 2 to 8 rows into one output with F16C (fold16_avx2.h); the last count % 8 elements
// through the general fold. False where it does not apply.
bool detSumHalf(const DetOp<Half>& op, int n, const void* const* in, void* out, size_t count, const void* rankScalars) {
  if (n < 2 || n > 8 || (op.kind != RedOpKind::Sum && op.kind != RedOpKind::PreMulSum)) return false;
  float scalars[8];
  const float* sc = nullptr;
  if (op.kind == RedOpKind::PreMulSum) {
    for (int k = 0; k < n; ++k) scalars[k] = detRowScalar<Half>(op, rankScalars, k);
    sc = scalars;
  }
  const bool sum = op.kind == RedOpKind::Sum;
  const size_t done = detSumHalfF16c(n, !sum, sum && op.average, in, out, count, sc);
  if (done == 0) return false;
  if (done < count) {
    const void* rest[8];
    for (int k = 0; k < n; ++k) rest[k] = static_cast<const char*>(in[k]) + done * sizeof(Half);
    void* restOut = static_cast<char*>(out) + done * sizeof(Half);
    detReduceChunks<Half>(op, n, rest, 1, &restOut, count - done, rankScalars);
  }
  return true;
}

// The unrolled form where it applies (fp32, fp64 and bf16 sums of 2 to 8 inputs into one output, of 2 into two
// outputs; fp16 with F16C into one), else false.
template <typename T>
bool detSumFast(const DetOp<T>& op, int n, const void* const* in, int nOut, void* const* out, size_t count,
                const void* rankScalars, bool coldRows) {
  if constexpr (std::is_same_v<T, Half>) return nOut == 1 && detSumHalf(op, n, in, out[0], count, rankScalars);
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, BFloat16>) {
    if (nOut == 2 && n == 2) return detSumFixedOp<T, 2, true>(op, in, out, count, rankScalars, coldRows);
    if (nOut != 1) return false;
    switch (n) {
      case 2: return detSumFixedOp<T, 2, false>(op, in, out, count, rankScalars, coldRows);
      case 3: return detSumFixedOp<T, 3, false>(op, in, out, count, rankScalars, coldRows);
      case 4: return detSumFixedOp<T, 4, false>(op, in, out, count, rankScalars, coldRows);
      case 5: return detSumFixedOp<T, 5, false>(op, in, out, count, rankScalars, coldRows);
      case 6: return detSumFixedOp<T, 6, false>(op, in, out, count, rankScalars, coldRows);
      case 7: return detSumFixedOp<T, 7, false>(op, in, out, count, rankScalars, coldRows);
      case 8: return detSumFixedOp<T, 8, false>(op, in, out, count, rankScalars, coldRows);
      default: return false;
    }
  }
  return false;
}

}  // namespace

namespace {

// Typed views of the partial-result rows when their addresses allow (the scratch rows and the FIFO slots always
// do), so the loops below vectorise; else element by element through memcpy.
template <typename V>
bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(V) == 0;
}

template <typename T, typename A>
TUTTI_SIMD_CLONES void leafRow(const DetOp<T>& op, const T* in, A* acc, size_t count) {
  if (op.kind == RedOpKind::PreMulSum) {
    const A s = op.scalar;
    for (size_t i = 0; i < count; ++i) acc[i] = wrapMul<A>(A(toCompute(in[i])), s);
  } else {
    for (size_t i = 0; i < count; ++i) acc[i] = A(toCompute(in[i]));
  }
}

template <typename A>
TUTTI_SIMD_CLONES void combineRowSimd(RedOpKind kind, const A* lo, const A* hi, A* out, size_t c) {
  combineRow(kind, lo, hi, out, c);
}

// fp32, fp64 and bf16 rows narrowed through narrowBits (the branch of detNarrow made this the largest cost of a
// deterministic doubling or tree call after its copies).
template <typename T, typename A, bool kAverage>
inline void narrowRowMasked(int n, const A* acc, T* out, size_t count) {
#pragma GCC ivdep
  for (size_t i = 0; i < count; ++i) {
    const DetBits<T> bits = narrowBits<T>(kAverage ? acc[i] / A(n) : acc[i]);
    std::memcpy(out + i, &bits, sizeof(T));
  }
}

template <typename T, typename A>
TUTTI_SIMD_CLONES void finishRow(const DetOp<T>& op, int n, const A* acc, T* out, size_t count) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, BFloat16>) {
    if (op.average) narrowRowMasked<T, A, true>(n, acc, out, count);
    else narrowRowMasked<T, A, false>(n, acc, out, count);
  } else if constexpr (IsFloatingType<T>) {
    if (op.average) {
      for (size_t i = 0; i < count; ++i) out[i] = detNarrow<T>(acc[i] / A(n));
    } else {
      for (size_t i = 0; i < count; ++i) out[i] = detNarrow<T>(acc[i]);
    }
  } else if (op.kind == RedOpKind::SumPostDiv) {
    for (size_t i = 0; i < count; ++i) out[i] = T(acc[i] / T(op.nRanks));
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = T(acc[i]);
  }
}

}  // namespace

size_t hostDetAccSize(ncclDataType_t type) {
  return dispatchDataType(type, [](auto tag) -> size_t { return sizeof(DetAcc<typename decltype(tag)::Type>); });
}


namespace {

// One operand of a fold: a rank's raw row, widened (and scaled) as it is loaded, or a row of partial results.
struct DetOperand {
  const void* row;
  bool raw;
};

// out = lo (op) hi, a chunk at a time; rows at any alignment (typed views where they allow), out may be an operand's
// row of partial results.
template <typename T>
void foldOperands(const DetOp<T>& d, DetOperand lo, DetOperand hi, void* out, size_t count) {
  using A = DetAcc<T>;
  for (size_t base = 0; base < count; base += kDetChunk) {
    const size_t c = std::min(kDetChunk, count - base);
    A loBuf[kDetChunk], hiBuf[kDetChunk];
    auto load = [&](DetOperand o, A* buf) -> const A* {
      const char* at = static_cast<const char*>(o.row) + base * (o.raw ? sizeof(T) : sizeof(A));
      if (!o.raw) {
        if (aligned<A>(at)) return reinterpret_cast<const A*>(at);
        std::memcpy(buf, at, c * sizeof(A));
        return buf;
      }
      if (aligned<T>(at)) {
        leafRow(d, reinterpret_cast<const T*>(at), buf, c);
      } else {
        T x[kDetChunk];
        std::memcpy(x, at, c * sizeof(T));
        leafRow(d, x, buf, c);
      }
      return buf;
    };
    const A* l = load(lo, loBuf);
    const A* h = load(hi, hiBuf);
    char* outAt = static_cast<char*>(out) + base * sizeof(A);
    if (aligned<A>(outAt)) {
      combineRowSimd(d.kind, l, h, reinterpret_cast<A*>(outAt), c);
    } else {
      combineRowSimd(d.kind, l, h, loBuf, c);
      std::memcpy(outAt, loBuf, c * sizeof(A));
    }
  }
}

}  // namespace

void hostDetCombine(const ResolvedRedOp& op, const void* lo, const void* hi, void* out, size_t count) {
  dispatchDataType(op.datatype, [&](auto tag) {
    using T = typename decltype(tag)::Type;
    foldOperands<T>(detOpOf<T>(op), DetOperand{lo, false}, DetOperand{hi, false}, out, count);
  });
}

void hostDetLeafPair(const ResolvedRedOp& op, const void* lo, const void* hi, void* out, size_t count) {
  dispatchDataType(op.datatype, [&](auto tag) {
    using T = typename decltype(tag)::Type;
    foldOperands<T>(detOpOf<T>(op), DetOperand{lo, true}, DetOperand{hi, true}, out, count);
  });
}

void hostDetFinish(const ResolvedRedOp& op, int n, const void* acc, void* out, size_t count) {
  dispatchDataType(op.datatype, [&](auto tag) {
    using T = typename decltype(tag)::Type;
    using A = DetAcc<T>;
    const DetOp<T> d = detOpOf<T>(op);
    if (aligned<A>(acc) && aligned<T>(out))
      return finishRow(d, n, static_cast<const A*>(acc), static_cast<T*>(out), count);
    for (size_t base = 0; base < count; base += kDetChunk) {
      const size_t c = std::min(kDetChunk, count - base);
      A a[kDetChunk];
      T x[kDetChunk];
      std::memcpy(a, static_cast<const char*>(acc) + base * sizeof(A), c * sizeof(A));
      finishRow(d, n, a, x, c);
      std::memcpy(static_cast<char*>(out) + base * sizeof(T), x, c * sizeof(T));
    }
  });
}

void hostDetReduceCopy(const ResolvedRedOp& op, int n, const void* const* in, int nOut, void* const* out,
                       size_t count, const void* rankScalars, bool coldRows) {
  if (count == 0 || n < 1 || nOut < 1) return;
  dispatchDataType(op.datatype, [&](auto tag) {
    using T = typename decltype(tag)::Type;
    const DetOp<T> d = detOpOf<T>(op);
    if (!detSumFast<T>(d, n, in, nOut, out, count, rankScalars, coldRows))
      detReduceChunks<T>(d, n, in, nOut, out, count, rankScalars);
  });
}

}  // namespace tutti
