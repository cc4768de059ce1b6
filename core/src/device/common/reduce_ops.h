// Reduction operators with NCCL's semantics, shared by the host and CUDA backends.
//
//   Sum / Prod   integers wrap (computed in the unsigned type); floating types round once per operation.
//   Max / Min    floating types ignore a NaN operand (fmax/fmin: the other operand wins; both NaN -> NaN).
//   PreMulSum    each rank's own input is multiplied by a scalar of the datatype (preOp), then summed.
//   Avg          floating types: PreMulSum with scalar 1/nRanks rounded to the datatype;
//                integers: Sum, then the final value divided by nRanks (SumPostDiv; signed values
//                truncate toward zero).
// Half and bfloat16 are computed in float and fp8 in float with saturating narrowing; float has enough
// extra precision that the single rounding gives the result NCCL's native half/bf16/fp8 arithmetic does.
// fp8 results always saturate to finite (an e5m2 infinity becomes the largest finite), as CUDA's fp8
// constructors NCCL uses do.
#pragma once

#include "device/common/dtypes.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#if !defined(__CUDA_ARCH__)
#include <mutex>
#include <vector>
#endif

namespace tutti {

enum class RedOpKind : uint8_t { Sum, Prod, Max, Min, PreMulSum, SumPostDiv };

// A reduction resolved for one call: what to compute and its argument. Plain data, copied into plans.
struct ResolvedRedOp {
  RedOpKind kind = RedOpKind::Sum;
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t op = ncclSum;  // the handle the user passed (logs, profiler)
  // PreMulSum scalar: its bytes in the datatype's representation, in the low bytes of scalarBits
  // (memcpy layout), or, when scalarIsPtr, read from scalarPtr at execution time (ncclScalarDevice).
  bool scalarIsPtr = false;
  // A deterministic reduction of two ranks on the host backend (comm/det_coll.h, detPairPath): every reduction of
  // the plan combines two ranks' raw inputs once, so hostReduceCopy folds them in the fixed order
  // (hostDetReduceCopy: commutative for two inputs) and copies without the pre- or post-op.
  bool detPair = false;
  uint64_t scalarBits = 0;
  const void* scalarPtr = nullptr;
  int nRanks = 1;  // SumPostDiv divisor
};

// The scalar of a PreMulSum op as a T (reads scalarPtr now when the scalar lives in "device" memory).
template <typename T>
TUTTI_HOST_DEVICE inline T redOpScalar(const ResolvedRedOp& op) {
  T v{};
  if (op.scalarIsPtr) std::memcpy(&v, op.scalarPtr, sizeof(T));
  else std::memcpy(&v, &op.scalarBits, sizeof(T));
  return v;
}

// Bits of `value` converted to datatype T, in ResolvedRedOp::scalarBits layout.
template <typename T>
TUTTI_HOST_DEVICE inline uint64_t scalarBitsOf(T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

// ---- Element functions -------------------------------------------------------------------------------
// Each functor: reduce(a, b); preOp(a) and postOp(a) with kHasPreOp / kHasPostOp telling whether they are
// the identity (so loops can skip them at compile time).

template <typename T>
TUTTI_HOST_DEVICE constexpr T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(U(a) + U(b)));
  } else {
    return fromCompute<T>(toCompute(a) + toCompute(b));
  }
}
template <typename T>
TUTTI_HOST_DEVICE constexpr T wrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    // uint8 promotes to int; 255*255 still fits, so the product never overflows a signed type.
    return T(U(U(a) * U(b)));
  } else {
    return fromCompute<T>(toCompute(a) * toCompute(b));
  }
}

template <typename T>
struct OpIdentityPrePost {
  static constexpr bool kHasPreOp = false;
  static constexpr bool kHasPostOp = false;
  TUTTI_HOST_DEVICE constexpr T preOp(T a) const { return a; }
  TUTTI_HOST_DEVICE constexpr T postOp(T a) const { return a; }
};

template <typename T>
struct OpSum : OpIdentityPrePost<T> {
  TUTTI_HOST_DEVICE constexpr T reduce(T a, T b) const { return wrapAdd(a, b); }
};

template <typename T>
struct OpProd : OpIdentityPrePost<T> {
  TUTTI_HOST_DEVICE constexpr T reduce(T a, T b) const { return wrapMul(a, b); }
};

// IsMax: max, else min.
template <typename T, bool IsMax>
struct OpMinMax : OpIdentityPrePost<T> {
  TUTTI_HOST_DEVICE constexpr T reduce(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return IsMax ? (a > b ? a : b) : (a < b ? a : b);
    } else {
      const auto x = toCompute(a), y = toCompute(b);
      // x wins when it is strictly better or y is NaN; otherwise y (which is also the result when x is NaN).
      const bool takeX = (IsMax ? x > y : x < y) || y != y;
      if constexpr (std::is_same_v<T, Float8E4M3> || std::is_same_v<T, Float8E5M2>) {
        return T::fromFloat(takeX ? x : y);  // re-encoded with saturation, as NCCL's fp8 max/min
      } else {
        return takeX ? a : b;
      }
    }
  }
};

template <typename T>
struct OpPreMulSum {
  static constexpr bool kHasPreOp = true;
  static constexpr bool kHasPostOp = false;
  T scalar;
  TUTTI_HOST_DEVICE constexpr T reduce(T a, T b) const { return wrapAdd(a, b); }
  TUTTI_HOST_DEVICE constexpr T preOp(T a) const { return wrapMul(a, scalar); }
  TUTTI_HOST_DEVICE constexpr T postOp(T a) const { return a; }
};

// Integer average: sum, then divide the final value by nRanks (truncating toward zero).
template <typename T>
struct OpSumPostDiv {
  static_assert(std::is_integral_v<T>, "SumPostDiv implements ncclAvg for integer types only");
  static constexpr bool kHasPreOp = false;
  static constexpr bool kHasPostOp = true;
  T divisor;
  TUTTI_HOST_DEVICE constexpr T reduce(T a, T b) const { return wrapAdd(a, b); }
  TUTTI_HOST_DEVICE constexpr T preOp(T a) const { return a; }
  TUTTI_HOST_DEVICE constexpr T postOp(T a) const { return T(a / divisor); }
};

// Resolves a built-in op (op < ncclNumOps) for datatype and a communicator of nRanks. Returns false for
// a user-op handle or an invalid datatype (the caller reports the error).
TUTTI_HOST_DEVICE inline bool resolveBuiltinRedOp(ncclRedOp_t op, ncclDataType_t datatype, int nRanks,
                                                  ResolvedRedOp* out) {
  if (!dataTypeValid(datatype) || int(op) < 0 || int(op) >= int(ncclNumOps) || nRanks < 1) return false;
  ResolvedRedOp r;
  r.datatype = datatype;
  r.op = op;
  r.nRanks = nRanks;
  switch (op) {
    case ncclSum: r.kind = RedOpKind::Sum; break;
    case ncclProd: r.kind = RedOpKind::Prod; break;
    case ncclMax: r.kind = RedOpKind::Max; break;
    case ncclMin: r.kind = RedOpKind::Min; break;
    default:  // ncclAvg
      if (dataTypeIsFloat(datatype)) {
        r.kind = RedOpKind::PreMulSum;
        // 1/nRanks in double, narrowed to the datatype (via float for the narrow types, as NCCL does).
        const double inv = 1.0 / nRanks;
        r.scalarBits = dispatchDataType(datatype, [&](auto tag) -> uint64_t {
          using T = typename decltype(tag)::Type;
          if constexpr (std::is_same_v<T, double>) return scalarBitsOf(inv);
          else if constexpr (IsFloatingType<T>) return scalarBitsOf(fromCompute<T>(float(inv)));
          else return 0;
        });
      } else {
        r.kind = RedOpKind::SumPostDiv;
      }
      break;
  }
  *out = r;
  return true;
}

// Calls f(op functor) for `op` with element type T, dispatching on op.kind once.
template <typename T, typename F>
TUTTI_HOST_DEVICE decltype(auto) dispatchRedOp(const ResolvedRedOp& op, F&& f) {
  switch (op.kind) {
    case RedOpKind::Prod: return f(OpProd<T>{});
    case RedOpKind::Max: return f(OpMinMax<T, true>{});
    case RedOpKind::Min: return f(OpMinMax<T, false>{});
    case RedOpKind::PreMulSum: return f(OpPreMulSum<T>{redOpScalar<T>(op)});
    case RedOpKind::SumPostDiv:
      if constexpr (std::is_integral_v<T>) return f(OpSumPostDiv<T>{T(op.nRanks)});
      else return f(OpSum<T>{});  // not produced by the resolvers for floating types
    case RedOpKind::Sum:
    default: return f(OpSum<T>{});
  }
}

#if !defined(__CUDA_ARCH__)
// User-created reduction operators of one communicator (ncclRedOpCreatePreMulSum / ncclRedOpDestroy).
// Handles are ncclNumOps + (generation << 16 | slot): a destroyed handle stays invalid even after its
// slot is reused. Thread-safe; resolve() is called for every reduction and takes one uncontended lock.
class RedOpTable {
 public:
  explicit RedOpTable(int nRanks) : nRanks_(nRanks) {}

  // New PreMulSum op for `datatype`. HostImmediate: *scalar is read now; Device: the pointer is kept and
  // read at execution time. Fails with ncclInvalidArgument for a null op/scalar, a bad datatype or
  // residence, and ncclInternalError when the handle space is exhausted.
  ncclResult_t createPreMulSum(ncclRedOp_t* op, const void* scalar, ncclDataType_t datatype,
                               ncclScalarResidence_t residence);
  // ncclInvalidArgument for built-in ops, unknown or already destroyed handles.
  ncclResult_t destroy(ncclRedOp_t op);
  // Built-in or user op -> resolved op for this datatype. ncclInvalidArgument for an out-of-range or
  // unknown/destroyed handle, or a user op created for another datatype. `call` names the entry point.
  ncclResult_t resolve(ncclRedOp_t op, ncclDataType_t datatype, ResolvedRedOp* out,
                       const char* call = "reduction") const;
  int liveCount() const;
  int nRanks() const { return nRanks_; }

  static constexpr int kMaxSlots = 1 << 16;

 private:
  struct Slot {
    bool live = false;
    uint32_t generation = 0;  // bumped on destroy
    ResolvedRedOp op;
  };
  static constexpr uint32_t kGenerationMask = (1u << 14) - 1;  // keeps handles below 2^30

  int nRanks_;
  mutable std::mutex mutex_;
  std::vector<Slot> slots_;
  std::vector<int> freeSlots_;
};
#endif

}  // namespace tutti
