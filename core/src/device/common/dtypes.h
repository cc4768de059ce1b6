// Element types of ncclDataType_t, shared by the host and CUDA backends.
//
// The 16- and 8-bit floating types are storage types (just the bits) with exact widening to float and
// round-to-nearest-even narrowing from float:
//   Half       IEEE binary16: overflow rounds to infinity, NaN stays NaN (quiet).
//   BFloat16   upper half of a binary32: overflow rounds to infinity, NaN stays NaN (quiet).
//   Float8E4M3 "e4m3fn": bias 7, no infinities, largest finite 448, NaN is S.1111.111 (0x7f/0xff).
//   Float8E5M2 bias 15, IEEE-like: infinities (0x7c/0xfc) and NaNs (exponent 31, mantissa != 0).
// Narrowing to fp8 saturates by default: values beyond the largest finite (infinities included) become
// +-largest finite, which is what CUDA's __nv_fp8_* constructors (and therefore NCCL's fp8 reductions)
// do. fromFloatNoSat gives the non-saturating conversion (e4m3: NaN, e5m2: infinity).
//
// Everything is constexpr and TUTTI_HOST_DEVICE so kernels and constant tables can use it.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define TUTTI_HOST_DEVICE __host__ __device__
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#else
#define TUTTI_HOST_DEVICE
#endif

// Native conversions where the GPU has them: bfloat16 from sm_80, fp8 from sm_90 (one cvt instruction each).
// They round exactly as the portable code below (to nearest even; fp8 saturating to the largest finite), so
// every backend computes the same bits; NaN keeps the portable encoding (the instructions canonicalise it).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TUTTI_NATIVE_BF16 1
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TUTTI_NATIVE_FP8 1
#endif

namespace tutti {

TUTTI_HOST_DEVICE constexpr uint32_t floatBits(float f) { return __builtin_bit_cast(uint32_t, f); }
TUTTI_HOST_DEVICE constexpr float bitsFloat(uint32_t u) { return __builtin_bit_cast(float, u); }

namespace detail {

// Rounds the float with bits `x` (sign cleared, finite, >= the target's smallest normal) to a format with
// `mantBits` mantissa bits and exponent bias `bias`; returns the target's code without sign. The caller
// handles overflow. Ties go to even: adding (half-ulp - 1) plus the lowest kept bit carries exactly when
// the dropped bits exceed half, or equal half with an odd kept part.
TUTTI_HOST_DEVICE constexpr uint32_t roundNormal(uint32_t x, int mantBits, int bias) {
  const int shift = 23 - mantBits;
  const uint32_t rounded = x + ((1u << (shift - 1)) - 1u) + ((x >> shift) & 1u);
  return (rounded >> shift) - (uint32_t(127 - bias) << mantBits);
}

// Rounds |value| (bits `x`, finite, below the target's smallest normal) to a multiple of the target's
// smallest subnormal 2^(1 - bias - mantBits); the result may be the smallest normal's code (1 << mantBits).
TUTTI_HOST_DEVICE constexpr uint32_t roundSubnormal(uint32_t x, int mantBits, int bias) {
  const int exp = int(x >> 23);
  if (exp == 0) return 0;  // float zero or float subnormal: far below any target subnormal
  const uint32_t mant = (x & 0x7fffffu) | 0x800000u;  // value = mant * 2^(exp - 150)
  // value / 2^(1 - bias - mantBits) = mant * 2^(exp - 150 - 1 + bias + mantBits) = mant >> shift
  const int shift = 151 - bias - mantBits - exp;
  if (shift > 24) return 0;  // below half the smallest subnormal (mant < 2^24)
  const uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

}  // namespace detail

// ---- IEEE binary16 -----------------------------------------------------------------------------------
struct Half {
  uint16_t bits;

  TUTTI_HOST_DEVICE static constexpr Half fromBits(uint16_t b) { return Half{b}; }

  TUTTI_HOST_DEVICE static constexpr Half fromFloat(float f) {
    const uint32_t u = floatBits(f);
    const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    const uint32_t x = u & 0x7fffffffu;
    if (x > 0x7f800000u) return Half{uint16_t(sign | 0x7e00u | ((x >> 13) & 0x3ffu))};  // quiet NaN
    if (x >= 0x477ff000u) return Half{uint16_t(sign | 0x7c00u)};  // >= 65520 (and inf): infinity
    if (x < 0x38800000u) return Half{uint16_t(sign | detail::roundSubnormal(x, 10, 15))};  // < 2^-14
    return Half{uint16_t(sign | detail::roundNormal(x, 10, 15))};
  }

  TUTTI_HOST_DEVICE constexpr float toFloat() const {
    const uint32_t sign = uint32_t(bits & 0x8000u) << 16;
    const uint32_t exp = (bits >> 10) & 0x1fu;
    const uint32_t mant = bits & 0x3ffu;
    if (exp == 0x1f) return bitsFloat(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
      const float v = float(mant) * 5.9604644775390625e-8f;
      return sign ? -v : v;
    }
    return bitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  }
  TUTTI_HOST_DEVICE constexpr bool isNan() const { return (bits & 0x7fffu) > 0x7c00u; }
};

// ---- bfloat16 ----------------------------------------------------------------------------------------
struct BFloat16 {
  uint16_t bits;

  TUTTI_HOST_DEVICE static constexpr BFloat16 fromBits(uint16_t b) { return BFloat16{b}; }

  TUTTI_HOST_DEVICE static constexpr BFloat16 fromFloat(float f) {
#ifdef TUTTI_NATIVE_BF16
    if (f == f) return BFloat16{__bfloat16_as_ushort(__float2bfloat16_rn(f))};
#endif
    const uint32_t u = floatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{uint16_t((u >> 16) | 0x40u)};  // quiet NaN
    // Round to nearest even on the dropped 16 bits; overflow carries into infinity as IEEE requires.
    return BFloat16{uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
  }
  TUTTI_HOST_DEVICE constexpr float toFloat() const { return bitsFloat(uint32_t(bits) << 16); }
  TUTTI_HOST_DEVICE constexpr bool isNan() const { return (bits & 0x7fffu) > 0x7f80u; }
};

// ---- fp8 ---------------------------------------------------------------------------------------------
// Shared conversion code for both fp8 formats. Params: MantBits, Bias, MaxCode (largest finite, no sign),
// HasInf (e5m2) / NaN 0x7f only (e4m3).
template <int MantBits, int Bias, uint8_t MaxCode, bool HasInf>
struct Float8 {
  static constexpr int kMantBits = MantBits;
  static constexpr int kBias = Bias;
  uint8_t bits;

  TUTTI_HOST_DEVICE static constexpr Float8 fromBits(uint8_t b) { return Float8{b}; }

  // Saturating narrowing: beyond-range finite values and infinities become +-largest finite.
  TUTTI_HOST_DEVICE static constexpr Float8 fromFloat(float f) {
#ifdef TUTTI_NATIVE_FP8
    if (f == f) return Float8{__nv_cvt_float_to_fp8(f, __NV_SATFINITE, HasInf ? __NV_E5M2 : __NV_E4M3)};
#endif
    return convert(f, true);
  }
  // Non-saturating: overflow gives infinity (e5m2) or NaN (e4m3).
  TUTTI_HOST_DEVICE static constexpr Float8 fromFloatNoSat(float f) { return convert(f, false); }

  TUTTI_HOST_DEVICE constexpr float toFloat() const {
#ifdef TUTTI_NATIVE_FP8
    if (!isNan()) return __half2float(__half(__nv_cvt_fp8_to_halfraw(bits, HasInf ? __NV_E5M2 : __NV_E4M3)));
#endif
    const uint32_t sign = uint32_t(bits & 0x80u) << 24;
    const uint32_t exp = (bits & 0x7fu) >> MantBits;
    const uint32_t mant = bits & ((1u << MantBits) - 1u);
    if (isNan()) return bitsFloat(sign | 0x7fc00000u | (mant << (23 - MantBits)));
    if (HasInf && exp == kExpMax) return bitsFloat(sign | 0x7f800000u);
    if (exp == 0) {  // zero or subnormal: mant * 2^(1 - Bias - MantBits), exact in float
      const float v = float(mant) * bitsFloat(uint32_t(127 + 1 - Bias - MantBits) << 23);
      return sign ? -v : v;
    }
    return bitsFloat(sign | ((exp + 127u - Bias) << 23) | (mant << (23 - MantBits)));
  }

  TUTTI_HOST_DEVICE constexpr bool isNan() const {
    if constexpr (HasInf) return ((bits & 0x7fu) >> MantBits) == kExpMax && (bits & ((1u << MantBits) - 1u));
    else return (bits & 0x7fu) == 0x7fu;
  }

 private:
  static constexpr uint32_t kExpMax = (0x7fu >> MantBits);  // all-ones exponent field
  // Float bits of the largest finite value and of the smallest normal.
  static constexpr uint32_t kMaxFloatBits =
      (uint32_t((MaxCode >> MantBits) + 127 - Bias) << 23) | (uint32_t(MaxCode & ((1u << MantBits) - 1u)) << (23 - MantBits));
  static constexpr uint32_t kMinNormalFloatBits = uint32_t(1 + 127 - Bias) << 23;
  // Values at or above this (float bits) round past the largest finite: largest finite + half an ulp,
  // which rounds up (overflows) only when the largest finite code is odd (ties to even).
  static constexpr uint32_t kOverflowFloatBits = kMaxFloatBits + (1u << (22 - MantBits)) + ((MaxCode & 1u) ? 0u : 1u);

  TUTTI_HOST_DEVICE static constexpr Float8 convert(float f, bool saturate) {
    const uint32_t u = floatBits(f);
    const uint8_t sign = uint8_t((u >> 24) & 0x80u);
    const uint32_t x = u & 0x7fffffffu;
    if (x > 0x7f800000u) {  // NaN
      if constexpr (HasInf) return Float8{uint8_t(sign | (kExpMax << MantBits) | (1u << (MantBits - 1)) | ((x >> (23 - MantBits)) & ((1u << MantBits) - 1u)))};
      else return Float8{uint8_t(sign | 0x7fu)};
    }
    if (x >= kOverflowFloatBits) {
      if (saturate) return Float8{uint8_t(sign | MaxCode)};
      if constexpr (HasInf) return Float8{uint8_t(sign | (kExpMax << MantBits))};
      else return Float8{uint8_t(sign | 0x7fu)};
    }
    if (x < kMinNormalFloatBits) return Float8{uint8_t(sign | detail::roundSubnormal(x, MantBits, Bias))};
    return Float8{uint8_t(sign | detail::roundNormal(x, MantBits, Bias))};
  }
};

using Float8E4M3 = Float8<3, 7, 0x7e, false>;
using Float8E5M2 = Float8<2, 15, 0x7b, true>;

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2 && sizeof(Float8E4M3) == 1 && sizeof(Float8E5M2) == 1);
static_assert(std::is_trivially_copyable_v<Half> && std::is_trivially_copyable_v<Float8E4M3>);

// ---- Widening / narrowing for every element type ------------------------------------------------------
// IsLowPrecisionFloat: stored as bits, computed in float (exact widening; one rounding per operation
// gives the same result as computing in the type itself, float having more than 2p+2 bits).
template <typename T>
inline constexpr bool IsLowPrecisionFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> ||
                                            std::is_same_v<T, Float8E4M3> || std::is_same_v<T, Float8E5M2>;
template <typename T>
inline constexpr bool IsFloatingType = IsLowPrecisionFloat<T> || std::is_floating_point_v<T>;

template <typename T>
TUTTI_HOST_DEVICE constexpr auto toCompute(T v) {
  if constexpr (IsLowPrecisionFloat<T>) return v.toFloat();
  else return v;
}
template <typename T, typename C>
TUTTI_HOST_DEVICE constexpr T fromCompute(C v) {
  if constexpr (IsLowPrecisionFloat<T>) return T::fromFloat(float(v));
  else return T(v);
}

// ---- ncclDataType_t -> C++ type -----------------------------------------------------------------------
template <ncclDataType_t D> struct DataTypeOf;
template <> struct DataTypeOf<ncclInt8> { using Type = int8_t; };
template <> struct DataTypeOf<ncclUint8> { using Type = uint8_t; };
template <> struct DataTypeOf<ncclInt32> { using Type = int32_t; };
template <> struct DataTypeOf<ncclUint32> { using Type = uint32_t; };
template <> struct DataTypeOf<ncclInt64> { using Type = int64_t; };
template <> struct DataTypeOf<ncclUint64> { using Type = uint64_t; };
template <> struct DataTypeOf<ncclFloat16> { using Type = Half; };
template <> struct DataTypeOf<ncclFloat32> { using Type = float; };
template <> struct DataTypeOf<ncclFloat64> { using Type = double; };
template <> struct DataTypeOf<ncclBfloat16> { using Type = BFloat16; };
template <> struct DataTypeOf<ncclFloat8e4m3> { using Type = Float8E4M3; };
template <> struct DataTypeOf<ncclFloat8e5m2> { using Type = Float8E5M2; };
template <ncclDataType_t D> using DataType = typename DataTypeOf<D>::Type;

TUTTI_HOST_DEVICE constexpr bool dataTypeValid(ncclDataType_t d) { return int(d) >= 0 && int(d) < int(ncclNumTypes); }

// Bytes per element; 0 for an invalid value.
TUTTI_HOST_DEVICE constexpr size_t dataTypeSize(ncclDataType_t d) {
  switch (d) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

// The oldest compute capability (major x 10 + minor) whose kernels reduce `d`, 0 for every one: fp8
// reductions need sm_90 (the kernels for older GPUs leave them out, as NCCL's do). Data movement of any type
// (AllGather, Broadcast, send/receive) runs everywhere.
TUTTI_HOST_DEVICE constexpr int minArchForReduction(ncclDataType_t d) {
  return d == ncclFloat8e4m3 || d == ncclFloat8e5m2 ? 90 : 0;
}

TUTTI_HOST_DEVICE constexpr bool dataTypeIsFloat(ncclDataType_t d) {
  return d == ncclFloat16 || d == ncclFloat32 || d == ncclFloat64 || d == ncclBfloat16 || d == ncclFloat8e4m3 ||
         d == ncclFloat8e5m2;
}
TUTTI_HOST_DEVICE constexpr bool dataTypeIsSigned(ncclDataType_t d) {
  return d == ncclInt8 || d == ncclInt32 || d == ncclInt64 || dataTypeIsFloat(d);
}

// NCCL's names ("ncclFloat32"...); "invalid" for out-of-range values.
constexpr const char* dataTypeName(ncclDataType_t d) {
  constexpr const char* kNames[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",    "ncclUint32",
                                    "ncclInt64",   "ncclUint64",  "ncclFloat16",  "ncclFloat32",
                                    "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return dataTypeValid(d) ? kNames[int(d)] : "invalid";
}

template <typename T>
struct TypeTag {
  using Type = T;
};

// Calls f(TypeTag<T>{}) with T the element type of d, once, and returns its result. For an invalid d
// f is not called and a value-initialised result is returned (callers validate datatypes first).
template <typename F>
TUTTI_HOST_DEVICE constexpr decltype(auto) dispatchDataType(ncclDataType_t d, F&& f) {
  using R = decltype(f(TypeTag<float>{}));
  switch (d) {
    case ncclInt8: return f(TypeTag<int8_t>{});
    case ncclUint8: return f(TypeTag<uint8_t>{});
    case ncclInt32: return f(TypeTag<int32_t>{});
    case ncclUint32: return f(TypeTag<uint32_t>{});
    case ncclInt64: return f(TypeTag<int64_t>{});
    case ncclUint64: return f(TypeTag<uint64_t>{});
    case ncclFloat16: return f(TypeTag<Half>{});
    case ncclFloat32: return f(TypeTag<float>{});
    case ncclFloat64: return f(TypeTag<double>{});
    case ncclBfloat16: return f(TypeTag<BFloat16>{});
    case ncclFloat8e4m3: return f(TypeTag<Float8E4M3>{});
    case ncclFloat8e5m2: return f(TypeTag<Float8E5M2>{});
    default:
      if constexpr (std::is_void_v<R>) return;
      else return R{};
  }
}

}  // namespace tutti
