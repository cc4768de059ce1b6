// hostReduceCopy for every (datatype x op) against a straightforward element-by-element reference.
#include "device/host/reduce_copy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using namespace tutti;

namespace {

constexpr int kRanks = 3;  // communicator size the ops are resolved for (avg divides by it)

enum class TestOp { Sum, Prod, Max, Min, Avg, PreMulHost, PreMulDevice };
const char* testOpName(TestOp op) {
  constexpr const char* kNames[] = {"sum", "prod", "max", "min", "avg", "premul-host", "premul-device"};
  return kNames[int(op)];
}

// ---- reference arithmetic, one element at a time --------------------------------------------------
template <typename T>
double toDouble(T v) {
  if constexpr (IsLowPrecisionFloat<T>) return v.toFloat();
  else return double(v);
}
template <typename T>
T fromDouble(double v) {
  if constexpr (IsLowPrecisionFloat<T>) return T::fromFloat(float(v));
  else return T(v);
}
template <typename T>
T refAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) return T(uint64_t(a) + uint64_t(b));  // modular
  else return fromDouble<T>(toDouble(a) + toDouble(b));
}
template <typename T>
T refMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) return T(uint64_t(a) * uint64_t(b));
  else return fromDouble<T>(toDouble(a) * toDouble(b));
}
template <typename T>
T refReduce(TestOp op, T a, T b) {
  switch (op) {
    case TestOp::Prod: return refMul(a, b);
    case TestOp::Max: return toDouble(a) >= toDouble(b) ? a : b;
    case TestOp::Min: return toDouble(a) <= toDouble(b) ? a : b;
    default: return refAdd(a, b);
  }
}
template <typename T>
bool sameValue(T a, T b) {
  if constexpr (IsLowPrecisionFloat<T>) return a.bits == b.bits;
  else if constexpr (std::is_floating_point_v<T>) return a == b || (std::isnan(a) && std::isnan(b));
  else return a == b;
}
template <typename T>
std::string show(T v) {
  if constexpr (IsLowPrecisionFloat<T>) return std::to_string(v.toFloat()) + " bits " + std::to_string(v.bits);
  else return std::to_string(v);
}

// Small values so sums and products stay mostly in range; some fp8/int products still overflow/wrap,
// which the reference models too.
template <typename T>
T randomValue(std::mt19937& rng) {
  if constexpr (std::is_integral_v<T>) return T(rng());
  else return fromDouble<T>(double(int(rng() % 64) - 32) / 8.0);
}

template <typename T>
struct Case {
  TestOp op;
  int nSrcs, nDsts;
  size_t count;
  size_t misalign;  // bytes added to every buffer's address
  bool inPlace;     // dst[0] is src[0]
};

template <typename T>
void runCase(ncclDataType_t dt, const Case<T>& c, RedOpTable& table, std::mt19937& rng) {
  SCOPED_TRACE(std::string(dataTypeName(dt)) + " " + testOpName(c.op) + " nSrcs " + std::to_string(c.nSrcs) +
               " nDsts " + std::to_string(c.nDsts) + " count " + std::to_string(c.count) + " misalign " +
               std::to_string(c.misalign) + (c.inPlace ? " in-place" : ""));
  const size_t bytes = c.count * sizeof(T) + 16;
  std::vector<std::vector<unsigned char>> srcStore(c.nSrcs, std::vector<unsigned char>(bytes));
  std::vector<std::vector<unsigned char>> dstStore(c.nDsts, std::vector<unsigned char>(bytes, 0xa5));
  std::vector<std::vector<T>> in(c.nSrcs, std::vector<T>(c.count));
  std::vector<const void*> srcs(c.nSrcs);
  std::vector<void*> dsts(c.nDsts);
  for (int j = 0; j < c.nSrcs; ++j) {
    for (auto& v : in[j]) v = randomValue<T>(rng);
    srcs[j] = srcStore[j].data() + c.misalign;
    // count 0: in[j].data() may be null, which memcpy must not get even for 0 bytes.
    if (c.count > 0) std::memcpy(srcStore[j].data() + c.misalign, in[j].data(), c.count * sizeof(T));
  }
  for (int d = 0; d < c.nDsts; ++d) dsts[d] = dstStore[d].data() + c.misalign;
  if (c.inPlace) dsts[0] = const_cast<void*>(srcs[0]);

  // Resolve the op as the engine would.
  ResolvedRedOp op;
  T scalar = fromDouble<T>(std::is_integral_v<T> ? 3.0 : 0.75);
  T deviceScalar = fromDouble<T>(1.0);
  ncclRedOp_t handle = ncclSum;
  switch (c.op) {
    case TestOp::Sum: handle = ncclSum; break;
    case TestOp::Prod: handle = ncclProd; break;
    case TestOp::Max: handle = ncclMax; break;
    case TestOp::Min: handle = ncclMin; break;
    case TestOp::Avg: handle = ncclAvg; break;
    case TestOp::PreMulHost:
      ASSERT_EQ(table.createPreMulSum(&handle, &scalar, dt, ncclScalarHostImmediate), ncclSuccess);
      break;
    case TestOp::PreMulDevice:
      ASSERT_EQ(table.createPreMulSum(&handle, &deviceScalar, dt, ncclScalarDevice), ncclSuccess);
      break;
  }
  ASSERT_EQ(table.resolve(handle, dt, &op), ncclSuccess);
  if (c.op == TestOp::PreMulHost) scalar = fromDouble<T>(5.0);  // already copied: must not matter
  if (c.op == TestOp::PreMulDevice) deviceScalar = fromDouble<T>(std::is_integral_v<T> ? 3.0 : 0.75);  // read at run time
  const T effScalar = fromDouble<T>(std::is_integral_v<T> ? 3.0 : 0.75);

  hostReduceCopy(op, c.nSrcs, srcs.data(), c.nDsts, dsts.data(), c.count, /*preOpFirstSrc=*/true, /*postOp=*/true);
  if (c.op == TestOp::PreMulHost || c.op == TestOp::PreMulDevice) {
    ASSERT_EQ(table.destroy(handle), ncclSuccess);
  }

  // Reference.
  const bool avgFloat = c.op == TestOp::Avg && IsFloatingType<T>;
  const bool avgInt = c.op == TestOp::Avg && !IsFloatingType<T>;
  T avgScalar{};
  if constexpr (std::is_same_v<T, double>) avgScalar = 1.0 / kRanks;
  else if constexpr (IsFloatingType<T>) avgScalar = fromDouble<T>(float(1.0 / kRanks));
  for (size_t i = 0; i < c.count; ++i) {
    T acc = in[0][i];
    if (c.op == TestOp::PreMulHost || c.op == TestOp::PreMulDevice) acc = refMul(acc, effScalar);
    if (avgFloat) acc = refMul(acc, avgScalar);
    for (int j = 1; j < c.nSrcs; ++j) acc = refReduce(c.op, acc, in[j][i]);
    if constexpr (std::is_integral_v<T>) {
      if (avgInt) acc = T(acc / T(kRanks));  // truncation toward zero
    }
    for (int d = 0; d < c.nDsts; ++d) {
      T got;
      std::memcpy(&got, static_cast<unsigned char*>(dsts[d]) + i * sizeof(T), sizeof(T));
      ASSERT_TRUE(sameValue(got, acc)) << "element " << i << " dst " << d << ": got " << show(got) << ", want "
                                       << show(acc);
    }
  }
  // Nothing written past the end.
  for (int d = 0; d < c.nDsts; ++d) {
    if (c.inPlace && d == 0) continue;
    const unsigned char* end = static_cast<unsigned char*>(dsts[d]) + c.count * sizeof(T);
    for (size_t k = 0; k < bytes - c.misalign - c.count * sizeof(T); ++k) ASSERT_EQ(end[k], 0xa5);
  }
}

}  // namespace

TEST(HostReduceCopy, EveryTypeAndOpAgainstReference) {
  std::mt19937 rng(12345);
  RedOpTable table(kRanks);
  const TestOp ops[] = {TestOp::Sum, TestOp::Prod, TestOp::Max, TestOp::Min, TestOp::Avg, TestOp::PreMulHost,
                        TestOp::PreMulDevice};
  const size_t counts[] = {0, 1, 7, 513, 4099};
  for (int d = 0; d < ncclNumTypes; ++d) {
    const auto dt = ncclDataType_t(d);
    dispatchDataType(dt, [&](auto tag) {
      using T = typename decltype(tag)::Type;
      for (TestOp op : ops)
        for (int nSrcs : {1, 2, 3, 4, 5, 8})  // 3 to 8: the one-pass fold of n rows
          for (int nDsts = 1; nDsts <= 2; ++nDsts)
            for (size_t count : counts)
              for (size_t misalign : {size_t(0), size_t(1), size_t(3)})
                for (bool inPlace : {false, true}) {
                  if (inPlace && misalign == 3) continue;  // keep the matrix small; in-place covered at 0 and 1
                  runCase<T>(dt, Case<T>{op, nSrcs, nDsts, count, misalign, inPlace}, table, rng);
                  if (::testing::Test::HasFatalFailure()) return;
                }
    });
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(table.liveCount(), 0);
}

// 16-bit float words of every kind for row k, element i (fp16 or bf16 layouts): any word (NaNs with payloads,
// infinities, subnormals, both zeros), near the largest finite value (sums overflow), near 1 with the sign
// alternating by row (sums cancel), exponents far apart.
template <typename T>
uint16_t sixteenBitPattern(size_t i, int k, uint16_t u) {
  constexpr bool kHalf = std::is_same_v<T, Half>;
  constexpr uint16_t kMant = kHalf ? 0x3ffu : 0x7fu, kOne = kHalf ? 0x3c00u : 0x3f80u;
  constexpr uint16_t kNearMax = kHalf ? 0x7800u : 0x7f00u;
  constexpr int kShift = kHalf ? 10 : 7, kExps = kHalf ? 31 : 255;
  switch (i % 4) {
    case 0: return u;
    case 1: return uint16_t((u & 0x8000u) | kNearMax | (u & kMant));
    case 2: return uint16_t((k % 2 ? 0x8000u : 0u) | kOne | (u & kMant));
    default: return uint16_t((u & (0x8000u | kMant)) | ((u >> 3) % kExps) << kShift);
  }
}

// fp16 and bf16 sums of 2 to 8 rows (written out for AVX2 where the CPU has it) against the step-by-step reference
// over every kind of bit pattern (sixteenBitPattern); one and two outputs, rows off alignment, a count that leaves a
// remainder past the last full vector. A NaN result may carry either operand's payload: any NaN matches a NaN.
template <typename T>
void checkSixteenBitSums(ncclDataType_t dt) {
  SCOPED_TRACE(dataTypeName(dt));
  std::mt19937 rng(2027);
  constexpr size_t kCount = (1 << 13) + 5;
  RedOpTable table(kRanks);
  ResolvedRedOp op;
  ASSERT_EQ(table.resolve(ncclSum, dt, &op), ncclSuccess);
  for (int n = 2; n <= 8; ++n) {
    std::vector<std::vector<T>> in(n, std::vector<T>(kCount));
    std::vector<std::vector<unsigned char>> store(n, std::vector<unsigned char>((kCount + 1) * sizeof(T)));
    std::vector<const void*> srcs(n);
    for (size_t i = 0; i < kCount; ++i)
      for (int k = 0; k < n; ++k) in[k][i] = T::fromBits(sixteenBitPattern<T>(i, k, uint16_t(rng())));
    for (int k = 0; k < n; ++k) {
      std::memcpy(store[k].data() + 1, in[k].data(), kCount * sizeof(T));
      srcs[k] = store[k].data() + 1;
    }
    for (int nDsts = 1; nDsts <= 2; ++nDsts) {
      std::vector<std::vector<unsigned char>> out(nDsts, std::vector<unsigned char>((kCount + 1) * sizeof(T)));
      std::vector<void*> dsts(nDsts);
      for (int d = 0; d < nDsts; ++d) dsts[d] = out[d].data() + 1;
      hostReduceCopy(op, n, srcs.data(), nDsts, dsts.data(), kCount, /*preOpFirstSrc=*/true, /*postOp=*/true);
      for (size_t i = 0; i < kCount; ++i) {
        T want = in[0][i];
        for (int k = 1; k < n; ++k) want = refAdd(want, in[k][i]);
        for (int d = 0; d < nDsts; ++d) {
          T got;
          std::memcpy(&got, out[d].data() + 1 + i * sizeof(T), sizeof got);
          ASSERT_TRUE(got.bits == want.bits || (got.isNan() && want.isNan()))
              << "n=" << n << " nDsts " << nDsts << " element " << i << ": got bits " << got.bits << ", want "
              << want.bits;
        }
      }
    }
  }
}

TEST(HostReduceCopy, SixteenBitFloatSumsOfTwoToEightRowsMatchTheReferenceOnEveryBitPattern) {
  checkSixteenBitSums<Half>(ncclFloat16);
  if (HasFatalFailure()) return;
  checkSixteenBitSums<BFloat16>(ncclBfloat16);
}

TEST(HostReduceCopy, PreOpAndPostOpOnlyWhenAsked) {
  RedOpTable table(4);
  float scalar = 2.0f;
  ncclRedOp_t handle;
  ASSERT_EQ(table.createPreMulSum(&handle, &scalar, ncclFloat32, ncclScalarHostImmediate), ncclSuccess);
  ResolvedRedOp op;
  ASSERT_EQ(table.resolve(handle, ncclFloat32, &op), ncclSuccess);
  const float a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
  float out[3];
  const void* srcs[2] = {a, b};
  void* dsts[1] = {out};
  hostReduceCopy(op, 2, srcs, 1, dsts, 3, /*preOpFirstSrc=*/false, false);
  EXPECT_EQ(out[2], 33.0f);  // plain sum: partials from peers are already premultiplied
  hostReduceCopy(op, 2, srcs, 1, dsts, 3, /*preOpFirstSrc=*/true, false);
  EXPECT_EQ(out[2], 36.0f);
  hostReduceCopy(op, 1, srcs, 1, dsts, 3, true, false);  // copy with preOp (send of own data)
  EXPECT_EQ(out[1], 4.0f);

  ResolvedRedOp avg;
  ASSERT_TRUE(resolveBuiltinRedOp(ncclAvg, ncclInt32, 4, &avg));
  EXPECT_EQ(avg.kind, RedOpKind::SumPostDiv);
  const int32_t x[2] = {-7, 9}, y[2] = {0, 0};
  int32_t r[2];
  const void* isrcs[2] = {x, y};
  void* idsts[1] = {r};
  hostReduceCopy(avg, 2, isrcs, 1, idsts, 2, true, /*postOp=*/false);
  EXPECT_EQ(r[0], -7);
  hostReduceCopy(avg, 2, isrcs, 1, idsts, 2, true, /*postOp=*/true);
  EXPECT_EQ(r[0], -1);  // -7/4 truncates toward zero
  EXPECT_EQ(r[1], 2);
}

TEST(HostReduceCopy, NanAndSaturationSemantics) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  ResolvedRedOp maxOp, minOp, sumOp;
  ASSERT_TRUE(resolveBuiltinRedOp(ncclMax, ncclFloat32, 2, &maxOp));
  ASSERT_TRUE(resolveBuiltinRedOp(ncclMin, ncclFloat32, 2, &minOp));
  const float a[3] = {nan, 1.0f, nan}, b[3] = {2.0f, nan, nan};
  float out[3];
  const void* srcs[2] = {a, b};
  void* dsts[1] = {out};
  hostReduceCopy(maxOp, 2, srcs, 1, dsts, 3, false, false);
  EXPECT_EQ(out[0], 2.0f);  // a NaN operand is ignored, as fmaxf does
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_TRUE(std::isnan(out[2]));
  hostReduceCopy(minOp, 2, srcs, 1, dsts, 3, false, false);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 1.0f);

  // fp8 e5m2: results saturate to the largest finite, even from an infinite input.
  ASSERT_TRUE(resolveBuiltinRedOp(ncclSum, ncclFloat8e5m2, 2, &sumOp));
  const Float8E5M2 p[2] = {Float8E5M2::fromBits(0x7b), Float8E5M2::fromFloatNoSat(inf)};
  const Float8E5M2 q[2] = {Float8E5M2::fromBits(0x7b), Float8E5M2::fromFloat(1.0f)};
  Float8E5M2 r[2];
  const void* fsrcs[2] = {p, q};
  void* fdsts[1] = {r};
  hostReduceCopy(sumOp, 2, fsrcs, 1, fdsts, 2, false, false);
  EXPECT_EQ(r[0].bits, 0x7b);
  EXPECT_EQ(r[1].bits, 0x7b);
  // Half follows IEEE: overflow gives infinity.
  ResolvedRedOp hsum;
  ASSERT_TRUE(resolveBuiltinRedOp(ncclSum, ncclFloat16, 2, &hsum));
  const Half h1[1] = {Half::fromFloat(65504.0f)};
  Half hr[1];
  const void* hsrcs[2] = {h1, h1};
  void* hdsts[1] = {hr};
  hostReduceCopy(hsum, 2, hsrcs, 1, hdsts, 1, false, false);
  EXPECT_EQ(hr[0].bits, 0x7c00);
}

TEST(RedOpTable, CreateDestroyResolveErrors) {
  RedOpTable table(2);
  double s = 0.5;
  ncclRedOp_t op;
  EXPECT_EQ(table.createPreMulSum(nullptr, &s, ncclFloat64, ncclScalarHostImmediate), ncclInvalidArgument);
  EXPECT_EQ(table.createPreMulSum(&op, nullptr, ncclFloat64, ncclScalarHostImmediate), ncclInvalidArgument);
  EXPECT_EQ(table.createPreMulSum(&op, &s, ncclNumTypes, ncclScalarHostImmediate), ncclInvalidArgument);
  EXPECT_EQ(table.createPreMulSum(&op, &s, ncclFloat64, ncclScalarResidence_t(7)), ncclInvalidArgument);
  ASSERT_EQ(table.createPreMulSum(&op, &s, ncclFloat64, ncclScalarHostImmediate), ncclSuccess);
  EXPECT_GE(int(op), int(ncclNumOps));
  ResolvedRedOp r;
  EXPECT_EQ(table.resolve(op, ncclFloat32, &r), ncclInvalidArgument);  // created for double
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclFloat64"), std::string::npos);
  ASSERT_EQ(table.resolve(op, ncclFloat64, &r), ncclSuccess);
  EXPECT_EQ(r.kind, RedOpKind::PreMulSum);
  EXPECT_EQ(redOpScalar<double>(r), 0.5);
  EXPECT_EQ(table.destroy(ncclSum), ncclInvalidArgument);
  ASSERT_EQ(table.destroy(op), ncclSuccess);
  EXPECT_EQ(table.destroy(op), ncclInvalidArgument);       // double destroy
  EXPECT_EQ(table.resolve(op, ncclFloat64, &r), ncclInvalidArgument);  // use after destroy
  ncclRedOp_t op2;
  ASSERT_EQ(table.createPreMulSum(&op2, &s, ncclFloat64, ncclScalarHostImmediate), ncclSuccess);
  EXPECT_NE(op2, op);  // slot reused, handle is not: the stale handle stays invalid
  EXPECT_EQ(table.resolve(op, ncclFloat64, &r), ncclInvalidArgument);
  EXPECT_EQ(table.resolve(ncclRedOp_t(-1), ncclFloat64, &r), ncclInvalidArgument);
  EXPECT_EQ(table.resolve(ncclRedOp_t(ncclNumOps + 1000), ncclFloat64, &r), ncclInvalidArgument);
  EXPECT_EQ(table.resolve(ncclAvg, ncclFloat64, &r), ncclSuccess);
  EXPECT_EQ(redOpScalar<double>(r), 0.5);  // avg on 2 ranks
  EXPECT_EQ(table.liveCount(), 1);
}
