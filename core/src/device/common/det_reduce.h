// The fixed reduction order of deterministic reductions: element i of the result is a function of the n
// ranks' input bits for element i, n, the datatype and the op alone. Every backend and algorithm that
// claims determinism computes it through detReduceElement (host loops, the sim emulator and CUDA kernels
// alike), and detReduceReference gives the same bits on the host from n arrays.
//
// Order (detTreeFold): the ranks are cut into blocks by the binary digits of n, largest first (n = 7:
// ranks 0-3, 4-5, 6); each block is a perfect binary tree over its ranks in order, ((x0+x1)+(x2+x3)); the
// block results combine from the last one backwards, B0 + (B1 + B2). A rank's value joins the tree as
// soon as it is known, keeping at most log2(n) + 1 partial results, so a reducer can walk the inputs once.
//
// Arithmetic: each input is widened exactly to the accumulator (double for fp64 and fp32, float for the half
// and fp8 types), the tree runs in the accumulator and the result is narrowed once (fp8 saturating, as
// everywhere else); a NaN result is always the same quiet NaN (detNan). Sum, Prod, Max, Min combine; PreMulSum multiplies each input by the scalar (widened)
// first; floating Avg divides the sum by n in the accumulator; integer Avg divides the wrapped sum by n,
// truncating toward zero. Integers wrap (unsigned arithmetic), so their order never mattered.
#pragma once

#include "device/common/dtypes.h"
#include "device/common/reduce_ops.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tutti {

// Partial results of a fold over at most 2^31 ranks.
inline constexpr int kDetTreeMaxDepth = 32;

// Folds leaf(0) .. leaf(n - 1) (n >= 1) with combine(lower ranks, higher ranks) in the order above.
template <typename V, typename Leaf, typename Combine>
TUTTI_HOST_DEVICE V detTreeFold(int n, Leaf&& leaf, Combine&& combine) {
  V stack[kDetTreeMaxDepth];
  int depth = 0;
  for (int r = 0; r < n; ++r) {
    V v = leaf(r);
    // Each trailing 1 bit of r closes a perfect subtree that ends at rank r.
    for (unsigned k = unsigned(r); k & 1u; k >>= 1) v = combine(stack[--depth], v);
    stack[depth++] = v;
  }
  V acc = stack[--depth];
  while (depth > 0) acc = combine(stack[--depth], acc);
  return acc;
}

// The accumulator of T: double for fp64 and fp32, float for the half and fp8 types, T itself for integers.
template <typename T>
using DetAcc = std::conditional_t<std::is_same_v<T, double> || std::is_same_v<T, float>, double,
                                  std::conditional_t<IsFloatingType<T>, float, T>>;

// One deterministic reduction, resolved for element type T.
template <typename T>
struct DetOp {
  RedOpKind kind = RedOpKind::Sum;
  DetAcc<T> scalar{};  // PreMulSum: the scalar, widened
  bool average = false;  // floating Avg: divide the sum by n
  int nRanks = 1;        // Avg divisor (SumPostDiv for integers)
};

// A PreMulSum scalar of type T, widened to the accumulator (exactly).
template <typename T>
TUTTI_HOST_DEVICE inline DetAcc<T> detScalarOf(T s) {
  if constexpr (IsFloatingType<T>) return DetAcc<T>(toCompute(s));
  else return s;
}

// PreMulSum's scalar for row k, widened: the k-th value of type T at rankScalars (every rank's own scalar, laid out
// in rank order, at any alignment) where given, else the op's one.
template <typename T>
TUTTI_HOST_DEVICE inline DetAcc<T> detRowScalar(const DetOp<T>& op, const void* rankScalars, int k) {
  if (!rankScalars) return op.scalar;
  T s;
  std::memcpy(&s, static_cast<const char*>(rankScalars) + static_cast<size_t>(k) * sizeof(T), sizeof(T));
  return detScalarOf<T>(s);
}

// Builds the DetOp of a resolved op. A floating ncclAvg resolves to PreMulSum with 1/n; the deterministic
// order divides the sum by n instead (one rounding fewer), so it is recognised by the op handle.
template <typename T>
TUTTI_HOST_DEVICE inline DetOp<T> detOpOf(const ResolvedRedOp& r) {
  DetOp<T> d;
  d.nRanks = r.nRanks;
  d.kind = r.kind;
  if constexpr (IsFloatingType<T>) {
    if (r.kind == RedOpKind::PreMulSum && r.op == ncclAvg) {
      d.kind = RedOpKind::Sum;
      d.average = true;
    } else if (r.kind == RedOpKind::PreMulSum) {
      d.scalar = detScalarOf<T>(redOpScalar<T>(r));
    }
  } else if (r.kind == RedOpKind::PreMulSum) {
    d.scalar = detScalarOf<T>(redOpScalar<T>(r));
  }
  return d;
}

template <typename T>
TUTTI_HOST_DEVICE inline DetAcc<T> detCombine(const DetOp<T>& op, DetAcc<T> a, DetAcc<T> b) {
  using A = DetAcc<T>;
  switch (op.kind) {
    case RedOpKind::Prod: return wrapMul<A>(a, b);
    case RedOpKind::Max: return OpMinMax<A, true>{}.reduce(a, b);
    case RedOpKind::Min: return OpMinMax<A, false>{}.reduce(a, b);
    default: return wrapAdd<A>(a, b);  // Sum, PreMulSum (after the leaf's multiply), SumPostDiv
  }
}

// The one NaN deterministic reductions give (positive, quiet, no payload). A NaN result's bits would otherwise
// depend on the order and the hardware: CPUs pass on the payload of one NaN operand (which one depends on the
// order), GPUs give a NaN of their own.
template <typename T>
TUTTI_HOST_DEVICE inline T detNan() {
  if constexpr (std::is_same_v<T, double>) return __builtin_bit_cast(double, uint64_t{0x7ff8000000000000ull});
  else if constexpr (std::is_same_v<T, float>) return bitsFloat(0x7fc00000u);
  else if constexpr (std::is_same_v<T, Half>) return Half::fromBits(0x7e00u);
  else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16::fromBits(0x7fc0u);
  else if constexpr (std::is_same_v<T, Float8E4M3>) return Float8E4M3::fromBits(0x7fu);
  else return Float8E5M2::fromBits(0x7eu);
}

// The accumulator narrowed to T once, any NaN as detNan (every fold narrows through this).
template <typename T, typename A>
TUTTI_HOST_DEVICE inline T detNarrow(A v) {
  return v != v ? detNan<T>() : fromCompute<T>(v);
}

// Element i of the deterministic reduction of n inputs; load(r) returns rank r's element as a T and, for
// PreMulSum, scaleOf(r) rank r's scalar, widened (a user's PreMulSum scalar may differ from rank to rank).
template <typename T, typename Load, typename Scale>
TUTTI_HOST_DEVICE inline T detReduceElementScaled(const DetOp<T>& op, int n, Load&& load, Scale&& scaleOf) {
  using A = DetAcc<T>;
  const A acc = detTreeFold<A>(
      n,
      [&](int r) {
        const A x = A(toCompute(load(r)));
        return op.kind == RedOpKind::PreMulSum ? wrapMul<A>(x, scaleOf(r)) : x;
      },
      [&](A a, A b) { return detCombine(op, a, b); });
  if constexpr (IsFloatingType<T>) {
    return detNarrow<T>(op.average ? acc / A(n) : acc);
  } else {
    return op.kind == RedOpKind::SumPostDiv ? T(acc / T(op.nRanks)) : acc;
  }
}

// The same with one scalar for every rank (op.scalar).
template <typename T, typename Load>
TUTTI_HOST_DEVICE inline T detReduceElement(const DetOp<T>& op, int n, Load&& load) {
  return detReduceElementScaled<T>(op, n, static_cast<Load&&>(load), [&](int) { return op.scalar; });
}

#if !defined(__CUDA_ARCH__)
// The deterministic reduction of n host arrays of `count` elements of r.datatype into out (which may be one
// of the inputs; any alignment). For a PreMulSum, rankScalars (when not null) holds n values of the datatype,
// input k's scalar at rankScalars + k * size; else every input takes r's scalar. ncclInvalidArgument for a bad
// datatype, n < 1 or a null pointer where count > 0.
ncclResult_t detReduceReference(const void* const* inputs, int n, void* out, size_t count,
                                const ResolvedRedOp& r, const void* rankScalars = nullptr);
#endif

}  // namespace tutti
