#include "device/host/det_reduce_copy.h"

#include "device/common/det_reduce.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace tutti {

namespace {

// Elements per chunk: one accumulator row per open subtree stays in L1.
constexpr size_t kDetChunk = 512;

template <typename A>
void combineRows(RedOpKind kind, A* lo, const A* hi, size_t c) {
  switch (kind) {
    case RedOpKind::Prod:
      for (size_t i = 0; i < c; ++i) lo[i] = wrapMul<A>(lo[i], hi[i]);
      break;
    case RedOpKind::Max:
      for (size_t i = 0; i < c; ++i) lo[i] = OpMinMax<A, true>{}.reduce(lo[i], hi[i]);
      break;
    case RedOpKind::Min:
      for (size_t i = 0; i < c; ++i) lo[i] = OpMinMax<A, false>{}.reduce(lo[i], hi[i]);
      break;
    default:
      for (size_t i = 0; i < c; ++i) lo[i] = wrapAdd<A>(lo[i], hi[i]);
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
void detReduceChunks(const DetOp<T>& op, int n, const void* const* in, int nOut, void* const* out, size_t count,
                     const void* rankScalars) {
  using A = DetAcc<T>;
  thread_local std::vector<A> scalars;
  scalars.assign(rankScalars ? n : 0, A{});
  for (size_t k = 0; k < scalars.size(); ++k) {
    T s;
    std::memcpy(&s, static_cast<const char*>(rankScalars) + k * sizeof(T), sizeof(T));
    scalars[k] = detScalarOf<T>(s);
  }
  auto scalarOf = [&](int r) { return rankScalars ? scalars[r] : op.scalar; };
  int depth = 1;  // rows the fold keeps open at most: floor(log2 n) + 1
  while ((1 << depth) <= n) ++depth;
  thread_local std::vector<A> rows;
  if (rows.size() < static_cast<size_t>(depth) * kDetChunk) rows.resize(static_cast<size_t>(depth) * kDetChunk);
  auto row = [&](int s) { return rows.data() + static_cast<size_t>(s) * kDetChunk; };
  thread_local std::vector<T> result;
  if (result.size() < kDetChunk) result.resize(kDetChunk);
  // The accumulator is the result as it is: stored straight from the fold.
  constexpr bool kSameType = std::is_same_v<T, A>;
  const bool direct = kSameType && !op.average && op.kind != RedOpKind::SumPostDiv;
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
        combineRows(op.kind, row(cur - 1), row(cur), c);
        --cur;
      }
      top = cur + 1;
    }
    for (int s = top - 2; s >= 0; --s) combineRows(op.kind, row(s), row(s + 1), c);
    const A* acc = row(0);
    const void* res = acc;
    if (!direct) {
      T* narrowed = result.data();
      if constexpr (IsFloatingType<T>) {
        if (op.average) {
          for (size_t i = 0; i < c; ++i) narrowed[i] = fromCompute<T>(acc[i] / A(n));
        } else {
          for (size_t i = 0; i < c; ++i) narrowed[i] = fromCompute<T>(acc[i]);
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

}  // namespace

void hostDetReduceCopy(const ResolvedRedOp& op, int n, const void* const* in, int nOut, void* const* out,
                       size_t count, const void* rankScalars) {
  if (count == 0 || n < 1 || nOut < 1) return;
  dispatchDataType(op.datatype, [&](auto tag) {
    using T = typename decltype(tag)::Type;
    detReduceChunks<T>(detOpOf<T>(op), n, in, nOut, out, count, rankScalars);
  });
}

}  // namespace tutti
