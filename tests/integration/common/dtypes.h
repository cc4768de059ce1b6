// Element types as the tests see them: size, name, and conversions between a stored element and a host
// value. The half / bfloat16 / fp8 codecs are written here on purpose, independently of the library's,
// so a shared bug cannot make a wrong result look right.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace tutti::itest {

inline constexpr ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                               ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                               ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

// Inline: the reference checks call these for every element they write or check.
inline size_t typeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}
const char* typeName(ncclDataType_t type);
inline bool isFloatType(ncclDataType_t type) {
  return type == ncclFloat16 || type == ncclFloat32 || type == ncclFloat64 || type == ncclBfloat16 ||
         type == ncclFloat8e4m3 || type == ncclFloat8e5m2;
}
inline bool isSignedInt(ncclDataType_t type) { return type == ncclInt8 || type == ncclInt32 || type == ncclInt64; }
// Relative spacing of the type at 1.0 (2^-mantissaBits); 0 for integer types.
double typeEpsilon(ncclDataType_t type);

// Encoding of a small IEEE-like float: `expBits` exponent bits, `manBits` stored mantissa bits.
// `ieeeSpecials` = false is OCP fp8 e4m3 ("fn"): no infinities, only exponent=all-ones + mantissa=all-ones
// is NaN, so the top binade holds finite values.
struct MiniFloat {
  int expBits;
  int manBits;
  bool ieeeSpecials;
};
inline constexpr MiniFloat kHalfFormat{5, 10, true};
inline constexpr MiniFloat kBf16Format{8, 7, true};
inline constexpr MiniFloat kE4m3Format{4, 3, false};
inline constexpr MiniFloat kE5m2Format{5, 2, true};

// Round-to-nearest-even; values beyond the largest finite saturate to it (tests never need overflow).
uint32_t encodeMiniFloat(double v, MiniFloat f);
double decodeMiniFloat(uint32_t bits, MiniFloat f);

// Integer elements travel as 64-bit two's-complement patterns; store truncates to the type's width.
void storeInt(ncclDataType_t type, void* base, size_t idx, uint64_t v);
// Loads and sign- or zero-extends to 64 bits according to the type.
uint64_t loadInt(ncclDataType_t type, const void* base, size_t idx);
// Truncates then extends, i.e. what storeInt followed by loadInt gives.
uint64_t normaliseInt(ncclDataType_t type, uint64_t v);

// Floating elements: store rounds to the type (nearest even), load is exact.
void storeFloat(ncclDataType_t type, void* base, size_t idx, double v);
double loadFloat(ncclDataType_t type, const void* base, size_t idx);
// The value `v` becomes once stored in `type`.
double roundToType(ncclDataType_t type, double v);

// Stores the integer `v` as an element of any type (exact for the small values the tests use).
void storeValue(ncclDataType_t type, void* base, size_t idx, int64_t v);
// Printable element for failure messages.
std::string elementString(ncclDataType_t type, const void* base, size_t idx);

}  // namespace tutti::itest
