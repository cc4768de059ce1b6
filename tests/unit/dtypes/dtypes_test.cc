// Conversions of the narrow floating types: exhaustive round trips, rounding of halfway cases, saturation.
#include "device/common/dtypes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

using namespace tutti;

namespace {

// Reference decoder written independently of dtypes.h: sign, exponent field, mantissa field.
double decodeRef(uint32_t code, int expBits, int mantBits, int bias) {
  const uint32_t sign = code >> (expBits + mantBits);
  const uint32_t exp = (code >> mantBits) & ((1u << expBits) - 1u);
  const uint32_t mant = code & ((1u << mantBits) - 1u);
  double mag = exp == 0 ? std::ldexp(double(mant), 1 - bias - mantBits)
                        : std::ldexp(1.0 + double(mant) / double(1u << mantBits), int(exp) - bias);
  return sign ? -mag : mag;
}

template <typename T, typename Code>
void expectRoundTrip(Code code, double expected, bool isNan, bool isInf) {
  const T v = T::fromBits(code);
  const float f = v.toFloat();
  if (isNan) {
    EXPECT_TRUE(std::isnan(f)) << std::hex << unsigned(code);
    EXPECT_TRUE(v.isNan());
    EXPECT_TRUE(T::fromFloat(f).isNan()) << std::hex << unsigned(code);
    return;
  }
  EXPECT_FALSE(v.isNan());
  if (isInf) {
    EXPECT_TRUE(std::isinf(f));
  } else {
    EXPECT_EQ(double(f), expected) << std::hex << unsigned(code);
  }
  // float -> T is the identity on every representable value (including infinities for half/bf16).
  if constexpr (sizeof(Code) == 2) {
    EXPECT_EQ(T::fromFloat(f).bits, code) << std::hex << unsigned(code);
  }
}

}  // namespace

TEST(Half, AllCodesRoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const uint32_t exp = (c >> 10) & 0x1f, mant = c & 0x3ff;
    expectRoundTrip<Half>(uint16_t(c), exp == 31 ? 0 : decodeRef(c, 5, 10, 15), exp == 31 && mant, exp == 31 && !mant);
  }
}

TEST(BFloat16, AllCodesRoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const uint32_t exp = (c >> 7) & 0xff, mant = c & 0x7f;
    expectRoundTrip<BFloat16>(uint16_t(c), exp == 255 ? 0 : decodeRef(c, 8, 7, 127), exp == 255 && mant,
                              exp == 255 && !mant);
  }
}

TEST(Float8E4M3, AllCodesRoundTrip) {
  for (uint32_t c = 0; c < 256; ++c) {
    const bool nan = (c & 0x7f) == 0x7f;
    expectRoundTrip<Float8E4M3>(uint8_t(c), nan ? 0 : decodeRef(c, 4, 3, 7), nan, false);
    if (!nan) {
      EXPECT_EQ(Float8E4M3::fromFloat(Float8E4M3::fromBits(uint8_t(c)).toFloat()).bits, c);
    }
  }
  EXPECT_EQ(Float8E4M3::fromBits(0x7e).toFloat(), 448.0f);
  EXPECT_EQ(Float8E4M3::fromBits(0x01).toFloat(), std::ldexp(1.0f, -9));
}

TEST(Float8E5M2, AllCodesRoundTrip) {
  for (uint32_t c = 0; c < 256; ++c) {
    const uint32_t exp = (c >> 2) & 0x1f, mant = c & 0x3;
    const bool nan = exp == 31 && mant, inf = exp == 31 && !mant;
    expectRoundTrip<Float8E5M2>(uint8_t(c), (nan || inf) ? 0 : decodeRef(c, 5, 2, 15), nan, inf);
    // Saturating narrowing maps infinity to the largest finite; everything else round-trips.
    const uint8_t back = Float8E5M2::fromFloat(Float8E5M2::fromBits(uint8_t(c)).toFloat()).bits;
    if (inf) {
      EXPECT_EQ(back, (c & 0x80) | 0x7b);
    } else if (!nan) {
      EXPECT_EQ(back, c);
    }
    if (!nan) {
      EXPECT_EQ(Float8E5M2::fromFloatNoSat(Float8E5M2::fromBits(uint8_t(c)).toFloat()).bits, c);
    }
  }
  EXPECT_EQ(Float8E5M2::fromBits(0x7b).toFloat(), 57344.0f);
}

// Every value strictly between two adjacent codes, and the midpoint, rounds to nearest / to even.
template <typename T>
void checkRoundingBetweenNeighbours(uint32_t lastFinitePositive) {
  for (uint32_t c = 0; c < lastFinitePositive; ++c) {
    const float lo = T::fromBits(decltype(T::bits)(c)).toFloat();
    const float hi = T::fromBits(decltype(T::bits)(c + 1)).toFloat();
    const float mid = float((double(lo) + double(hi)) / 2);  // exact: float has enough bits
    ASSERT_EQ(double(mid), (double(lo) + double(hi)) / 2);
    const uint32_t even = (c & 1u) ? c + 1 : c;
    EXPECT_EQ(T::fromFloat(mid).bits, even) << "tie between codes " << c << " and " << c + 1;
    EXPECT_EQ(T::fromFloat(std::nextafter(mid, lo)).bits, c);
    EXPECT_EQ(T::fromFloat(std::nextafter(mid, hi)).bits, c + 1);
    EXPECT_EQ(T::fromFloat(-std::nextafter(mid, hi)).bits, c + 1 + (1u << (8 * sizeof(T) - 1)));
  }
}

TEST(Rounding, HalfwayCasesGoToEven) {
  checkRoundingBetweenNeighbours<Half>(0x7bff);
  checkRoundingBetweenNeighbours<BFloat16>(0x7f7f);
  checkRoundingBetweenNeighbours<Float8E4M3>(0x7e);
  checkRoundingBetweenNeighbours<Float8E5M2>(0x7b);
}

TEST(Rounding, TinyValuesUnderflowToSignedZero) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(Half::fromFloat(tiny).bits, 0);
  EXPECT_EQ(Half::fromFloat(-tiny).bits, 0x8000);
  EXPECT_EQ(Float8E4M3::fromFloat(std::ldexp(1.0f, -10)).bits, 0);  // exactly half the smallest: even = 0
  EXPECT_EQ(Float8E4M3::fromFloat(std::nextafter(std::ldexp(1.0f, -10), 1.0f)).bits, 1);
  EXPECT_EQ(Float8E5M2::fromFloat(-std::ldexp(1.0f, -17)).bits, 0x80);
  EXPECT_EQ(BFloat16::fromFloat(tiny).bits, 0);  // bf16 has float's range: rounds within subnormals
}

TEST(Saturation, OverflowBehaviour) {
  const float inf = std::numeric_limits<float>::infinity();
  // Half and bfloat16 follow IEEE: overflow rounds to infinity at max + half ulp.
  EXPECT_EQ(Half::fromFloat(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Half::fromFloat(65519.99f).bits, 0x7bff);
  EXPECT_EQ(Half::fromFloat(65520.0f).bits, 0x7c00);
  EXPECT_EQ(Half::fromFloat(-1e30f).bits, 0xfc00);
  EXPECT_EQ(BFloat16::fromFloat(std::numeric_limits<float>::max()).bits, 0x7f80);
  EXPECT_EQ(BFloat16::fromFloat(-inf).bits, 0xff80);
  // fp8 saturates to the largest finite, infinities included.
  EXPECT_EQ(Float8E4M3::fromFloat(464.0f).bits, 0x7e);  // tie between 448 and "512": even is 448
  EXPECT_EQ(Float8E4M3::fromFloat(1e6f).bits, 0x7e);
  EXPECT_EQ(Float8E4M3::fromFloat(-inf).bits, 0xfe);
  EXPECT_EQ(Float8E5M2::fromFloat(inf).bits, 0x7b);
  EXPECT_EQ(Float8E5M2::fromFloat(-1e9f).bits, 0xfb);
  // Non-saturating: e4m3 has no infinity, so NaN; e5m2 gives infinity from max + half ulp on.
  EXPECT_EQ(Float8E4M3::fromFloatNoSat(std::nextafter(464.0f, inf)).bits, 0x7f);
  EXPECT_EQ(Float8E4M3::fromFloatNoSat(464.0f).bits, 0x7e);
  EXPECT_EQ(Float8E5M2::fromFloatNoSat(61440.0f).bits, 0x7c);
  EXPECT_EQ(Float8E5M2::fromFloatNoSat(std::nextafter(61440.0f, 0.0f)).bits, 0x7b);
  EXPECT_EQ(Float8E5M2::fromFloatNoSat(-inf).bits, 0xfc);
}

TEST(Nan, StaysNanEverywhere) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(Half::fromFloat(nan).isNan());
  EXPECT_TRUE(Half::fromFloat(-nan).isNan());
  EXPECT_TRUE(BFloat16::fromFloat(nan).isNan());
  EXPECT_TRUE(BFloat16::fromFloat(std::numeric_limits<float>::signaling_NaN()).isNan());
  EXPECT_EQ(Float8E4M3::fromFloat(nan).bits & 0x7f, 0x7f);
  EXPECT_TRUE(Float8E5M2::fromFloat(nan).isNan());
  // A NaN whose payload sits only in the low mantissa bits must not collapse to infinity.
  EXPECT_TRUE(Half::fromFloat(tutti::bitsFloat(0x7f800001u)).isNan());
  EXPECT_TRUE(BFloat16::fromFloat(tutti::bitsFloat(0x7f800001u)).isNan());
  EXPECT_TRUE(Float8E5M2::fromFloat(tutti::bitsFloat(0x7f800001u)).isNan());
}

TEST(DataTypes, SizesNamesAndDispatch) {
  EXPECT_EQ(dataTypeSize(ncclInt8), 1u);
  EXPECT_EQ(dataTypeSize(ncclFloat16), 2u);
  EXPECT_EQ(dataTypeSize(ncclBfloat16), 2u);
  EXPECT_EQ(dataTypeSize(ncclFloat32), 4u);
  EXPECT_EQ(dataTypeSize(ncclUint64), 8u);
  EXPECT_EQ(dataTypeSize(ncclFloat8e5m2), 1u);
  EXPECT_EQ(dataTypeSize(ncclDataType_t(12)), 0u);
  EXPECT_EQ(dataTypeSize(ncclDataType_t(-1)), 0u);
  EXPECT_STREQ(dataTypeName(ncclFloat8e4m3), "ncclFloat8e4m3");
  EXPECT_STREQ(dataTypeName(ncclDataType_t(99)), "invalid");
  for (int d = 0; d < ncclNumTypes; ++d) {
    const size_t size = dispatchDataType(ncclDataType_t(d), [](auto tag) { return sizeof(typename decltype(tag)::Type); });
    EXPECT_EQ(size, dataTypeSize(ncclDataType_t(d))) << d;
  }
  bool called = false;
  EXPECT_EQ(dispatchDataType(ncclNumTypes, [&](auto) { called = true; return 7; }), 0);
  EXPECT_FALSE(called);
  static_assert(std::is_same_v<DataType<ncclFloat16>, Half> && std::is_same_v<DataType<ncclInt64>, int64_t>);
}
