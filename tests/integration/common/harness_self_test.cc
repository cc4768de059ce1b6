// The harness's own generators and codecs: the lookups that keep large cases fast give what the general code gives,
// and the checks built on them still fail when they should.
#include "dtypes.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace tutti::itest {
namespace {

TEST(HarnessCodecs, KnownEncodings) {
  EXPECT_EQ(encodeMiniFloat(1.0, kHalfFormat), 0x3c00u);
  EXPECT_EQ(encodeMiniFloat(-2.0, kHalfFormat), 0xc000u);
  EXPECT_EQ(encodeMiniFloat(1.0, kBf16Format), 0x3f80u);
  EXPECT_EQ(encodeMiniFloat(-100.0, kBf16Format), 0xc2c8u);
  EXPECT_EQ(encodeMiniFloat(1.0, kE4m3Format), 0x38u);
  EXPECT_EQ(encodeMiniFloat(448.0, kE4m3Format), 0x7eu);  // e4m3's largest finite
  EXPECT_EQ(encodeMiniFloat(1.0, kE5m2Format), 0x3cu);
  EXPECT_EQ(encodeMiniFloat(-0.0, kBf16Format), 0x8000u);  // the sign of zero survives
  EXPECT_EQ(encodeMiniFloat(0.5, kHalfFormat), 0x3800u);   // not an integer: the general path
  EXPECT_EQ(decodeMiniFloat(0x3f80u, kBf16Format), 1.0);
  EXPECT_EQ(decodeMiniFloat(0x7eu, kE4m3Format), 448.0);
  EXPECT_TRUE(std::isnan(decodeMiniFloat(0x7fu, kE4m3Format)));
  EXPECT_TRUE(std::isinf(decodeMiniFloat(0x7c00u, kHalfFormat)));
}

TEST(HarnessCodecs, EveryPatternRoundTrips) {
  for (MiniFloat f : {kHalfFormat, kBf16Format, kE4m3Format, kE5m2Format}) {
    const uint32_t patterns = 1u << (1 + f.expBits + f.manBits);
    for (uint32_t b = 0; b < patterns; ++b) {
      const double v = decodeMiniFloat(b, f);
      if (std::isnan(v) || std::isinf(v)) continue;  // the encoder saturates infinities (tests never overflow)
      ASSERT_EQ(encodeMiniFloat(v, f), b) << "format e" << f.expBits << "m" << f.manBits << " pattern " << b;
    }
  }
}

TEST(HarnessReference, MovementBytesMatchTheByteFunction) {
  for (size_t first : {size_t{0}, size_t{3}, size_t{8}, size_t{13}}) {
    std::vector<unsigned char> run(37);
    movementBytes(2, first, run.size(), 99, run.data());
    for (size_t i = 0; i < run.size(); ++i) ASSERT_EQ(run[i], movementByte(2, first + i, 99)) << first << "+" << i;
  }
  // Neighbouring bytes and ranks differ somewhere: a misplaced run is seen.
  std::vector<unsigned char> a(64), b(64), c(64);
  movementBytes(0, 0, 64, 7, a.data());
  movementBytes(0, 1, 64, 7, b.data());
  movementBytes(1, 0, 64, 7, c.data());
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
}

TEST(HarnessReference, InputsStayInTheirRanges) {
  for (size_t i = 0; i < 4096; ++i) {
    const int64_t sum = reductionInput(ncclFloat32, OpKind::kSum, 3, i, 5);
    EXPECT_TRUE(sum >= -4 && sum <= 4) << sum;
    const int64_t prod = reductionInput(ncclInt32, OpKind::kProd, 1, i, 5);
    EXPECT_TRUE(prod == 1 || prod == -1 || prod == 2) << prod;
  }
}

TEST(HarnessReference, GuardsCatchWritesOnEitherSide) {
  for (int side : {-1, 1}) {
    GuardedBuffer g(100, 3);
    std::string why;
    ASSERT_TRUE(g.guardsIntact(&why)) << why;
    g.data()[side < 0 ? -1 : 100] = 0;
    EXPECT_FALSE(g.guardsIntact(&why));
    EXPECT_NE(why.find(side < 0 ? "offset -1" : "offset 100"), std::string::npos) << why;
  }
  GuardedBuffer empty(0, 5);
  std::string why;
  EXPECT_TRUE(empty.guardsIntact(&why)) << why;
  empty.data()[0] = 1;  // an empty area: its first byte is a guard
  EXPECT_FALSE(empty.guardsIntact(&why));
}

}  // namespace
}  // namespace tutti::itest
