// The deterministic reduction order (device/common/det_reduce.h): the tree's shape, the accumulator's
// single rounding, each op, and the host reference against a separately written recursive model.
#include "device/common/det_reduce.h"
#include "device/host/det_reduce_copy.h"
#include "device/host/det_sum_simd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace tutti;

namespace {

std::string foldString(int n) {
  return detTreeFold<std::string>(
      n, [](int r) { return std::to_string(r); },
      [](const std::string& a, const std::string& b) { return "(" + a + "+" + b + ")"; });
}

TEST(DetTree, ShapeFollowsTheBinaryDigitsOfN) {
  EXPECT_EQ(foldString(1), "0");
  EXPECT_EQ(foldString(2), "(0+1)");
  EXPECT_EQ(foldString(3), "((0+1)+2)");
  EXPECT_EQ(foldString(4), "((0+1)+(2+3))");
  EXPECT_EQ(foldString(5), "(((0+1)+(2+3))+4)");
  EXPECT_EQ(foldString(6), "(((0+1)+(2+3))+(4+5))");
  EXPECT_EQ(foldString(7), "(((0+1)+(2+3))+((4+5)+6))");
  EXPECT_EQ(foldString(8), "(((0+1)+(2+3))+((4+5)+(6+7)))");
  EXPECT_EQ(foldString(11), "((((0+1)+(2+3))+((4+5)+(6+7)))+((8+9)+10))");
}

// Depth of the fold and the ranks it visits, in order, for every n up to 2048.
TEST(DetTree, EveryRankOnceInOrderAndLogarithmicDepth) {
  struct Node {
    int first, last, depth;
  };
  for (int n = 1; n <= 2048; ++n) {
    bool adjacent = true;  // every combine joins neighbouring rank ranges, lower ranks on the left
    const Node root = detTreeFold<Node>(
        n, [](int r) { return Node{r, r, 0}; },
        [&](Node a, Node b) {
          adjacent = adjacent && a.last + 1 == b.first;
          return Node{a.first, b.last, 1 + std::max(a.depth, b.depth)};
        });
    ASSERT_TRUE(adjacent) << "n=" << n;
    ASSERT_EQ(root.first, 0);
    ASSERT_EQ(root.last, n - 1);
    int ceilLog2 = 0;
    while ((1 << ceilLog2) < n) ++ceilLog2;
    ASSERT_LE(root.depth, ceilLog2) << "n=" << n;
  }
}

ResolvedRedOp builtin(ncclRedOp_t op, ncclDataType_t d, int n) {
  ResolvedRedOp r;
  EXPECT_TRUE(resolveBuiltinRedOp(op, d, n, &r));
  return r;
}

template <typename T>
std::vector<T> reduce(const std::vector<std::vector<T>>& in, const ResolvedRedOp& r) {
  std::vector<const void*> p;
  for (const auto& v : in) p.push_back(v.data());
  std::vector<T> out(in[0].size());
  EXPECT_EQ(detReduceReference(p.data(), int(p.size()), out.data(), out.size(), r), ncclSuccess);
  return out;
}

TEST(DetReduce, FollowsTheTreeNotTheRankSequence) {
  // (1e17 + 1) + (-1e17 + 1): each pair rounds to +-1e17 in double, so 0; left to right gives 1.
  const std::vector<std::vector<double>> in{{1e17}, {1.0}, {-1e17}, {1.0}};
  const double sequential = ((1e17 + 1.0) + -1e17) + 1.0;
  ASSERT_EQ(sequential, 1.0);
  EXPECT_EQ(reduce(in, builtin(ncclSum, ncclFloat64, 4))[0], 0.0);
  // The same with fp32 inputs, which accumulate in double: 2^60 and 1 do not fit one double.
  const float big = 1152921504606846976.0f;  // 2^60
  EXPECT_EQ(reduce<float>({{big}, {1.0f}, {-big}, {1.0f}}, builtin(ncclSum, ncclFloat32, 4))[0], 0.0f);
}

TEST(DetReduce, HalfTypesAccumulateInFloatAndRoundOnce) {
  // 2048 + 1 + 1 + 1: half rounds 2049 back to 2048 at every step; float keeps 2051, rounded once.
  const Half one = Half::fromFloat(1.0f), big = Half::fromFloat(2048.0f);
  const std::vector<std::vector<Half>> in{{big}, {one}, {one}, {one}};
  const Half once = Half::fromFloat(2051.0f);
  const Half stepwise = Half::fromFloat(Half::fromFloat(Half::fromFloat(2049.0f).toFloat() + 2.0f).toFloat());
  ASSERT_NE(once.bits, stepwise.bits);
  EXPECT_EQ(reduce(in, builtin(ncclSum, ncclFloat16, 4))[0].bits, once.bits);
  const std::vector<std::vector<BFloat16>> bin{{BFloat16::fromFloat(256.0f)}, {BFloat16::fromFloat(1.0f)},
                                               {BFloat16::fromFloat(1.0f)}, {BFloat16::fromFloat(1.0f)}};
  EXPECT_EQ(reduce(bin, builtin(ncclSum, ncclBfloat16, 4))[0].bits, BFloat16::fromFloat(259.0f).bits);
  // fp32 accumulates in double: 2^24 + 1 + 1 is 2^24 + 2, where float steps would stay at 2^24.
  const float f24 = 16777216.0f;
  ASSERT_EQ(f24 + 1.0f, f24);
  EXPECT_EQ(reduce<float>({{f24}, {1.0f}, {1.0f}}, builtin(ncclSum, ncclFloat32, 3))[0], 16777218.0f);
}

TEST(DetReduce, AvgPreMulSumAndIntegers) {
  // Floating Avg: the sum divided by n in the accumulator.
  EXPECT_EQ(reduce<float>({{1.0f}, {2.0f}, {4.0f}}, builtin(ncclAvg, ncclFloat32, 3))[0], 7.0f / 3.0f);
  // Integer Avg truncates toward zero.
  EXPECT_EQ(reduce<int32_t>({{-7}, {0}, {0}}, builtin(ncclAvg, ncclInt32, 3))[0], -2);
  EXPECT_EQ(reduce<uint32_t>({{1}, {2}, {4}}, builtin(ncclAvg, ncclUint32, 3))[0], 2u);
  // Integers wrap.
  EXPECT_EQ(reduce<uint8_t>({{200}, {100}}, builtin(ncclSum, ncclUint8, 2))[0], 44);
  EXPECT_EQ(reduce<int8_t>({{16}, {16}}, builtin(ncclProd, ncclInt8, 2))[0], 0);
  // PreMulSum: each input times the scalar (widened), then the sum.
  ResolvedRedOp pm;
  pm.kind = RedOpKind::PreMulSum;
  pm.datatype = ncclFloat16;
  pm.op = ncclRedOp_t(ncclNumOps);
  pm.nRanks = 2;
  pm.scalarBits = scalarBitsOf(Half::fromFloat(0.5f));
  EXPECT_EQ(reduce<Half>({{Half::fromFloat(1.0f)}, {Half::fromFloat(3.0f)}}, pm)[0].bits, Half::fromFloat(2.0f).bits);
  // Min / Max, NaN ignored.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(reduce<float>({{3.0f}, {nan}, {-1.0f}}, builtin(ncclMax, ncclFloat32, 3))[0], 3.0f);
  EXPECT_EQ(reduce<float>({{3.0f}, {nan}, {-1.0f}}, builtin(ncclMin, ncclFloat32, 3))[0], -1.0f);
}

TEST(DetReduce, RejectsBadArgumentsAndAllowsAliasing) {
  std::vector<float> a{1, 2, 3}, b{10, 20, 30};
  const void* in[2] = {a.data(), b.data()};
  const ResolvedRedOp sum = builtin(ncclSum, ncclFloat32, 2);
  EXPECT_EQ(detReduceReference(in, 2, a.data(), 3, sum), ncclSuccess);  // out is input 0
  EXPECT_EQ(a, (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(detReduceReference(in, 0, a.data(), 3, sum), ncclInvalidArgument);
  EXPECT_EQ(detReduceReference(nullptr, 2, a.data(), 3, sum), ncclInvalidArgument);
  EXPECT_EQ(detReduceReference(in, 2, nullptr, 3, sum), ncclInvalidArgument);
  EXPECT_EQ(detReduceReference(nullptr, 2, nullptr, 0, sum), ncclSuccess);
  ResolvedRedOp bad = sum;
  bad.datatype = ncclDataType_t(ncclNumTypes);
  EXPECT_EQ(detReduceReference(in, 2, a.data(), 3, bad), ncclInvalidArgument);
}

// ---- A second model of the same order, written top-down: blocks from the binary digits of n, each a
// perfect tree split in halves, folded from the last block backwards; arithmetic in double for fp64 and
// float otherwise, one narrowing at the end.
template <typename A, typename F>
A perfect(int first, int size, const F& leaf, const std::function<A(A, A)>& op) {
  if (size == 1) return leaf(first);
  return op(perfect<A>(first, size / 2, leaf, op), perfect<A>(first + size / 2, size / 2, leaf, op));
}
template <typename A, typename F>
A model(int n, const F& leaf, const std::function<A(A, A)>& op) {
  std::vector<A> blocks;
  int first = 0;
  for (int bit = 30; bit >= 0; --bit) {
    if (n & (1 << bit)) {
      blocks.push_back(perfect<A>(first, 1 << bit, leaf, op));
      first += 1 << bit;
    }
  }
  A acc = blocks.back();
  for (int i = int(blocks.size()) - 2; i >= 0; --i) acc = op(blocks[i], acc);
  return acc;
}

template <typename T>
T randomValue(std::mt19937_64& rng) {
  if constexpr (std::is_integral_v<T>) {
    return T(rng());
  } else {
    // Wide exponent range, both signs: the sums cancel and round.
    std::uniform_real_distribution<double> mant(-1.0, 1.0);
    const int maxExp = std::is_same_v<T, double> ? 60 : (std::is_same_v<T, float> ? 30 : 6);
    std::uniform_int_distribution<int> e(-maxExp, maxExp);
    return fromCompute<T>(std::ldexp(mant(rng), e(rng)));
  }
}

template <typename T>
bool sameBits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename T>
void checkAgainstModel(ncclDataType_t d) {
  using A = DetAcc<T>;
  std::mt19937_64 rng(1234 + int(d));
  for (int n = 1; n <= 17; ++n) {
    for (ncclRedOp_t o : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}) {
      const ResolvedRedOp r = builtin(o, d, n);
      constexpr size_t kCount = 257;
      std::vector<std::vector<T>> in(n, std::vector<T>(kCount));
      for (auto& v : in)
        for (auto& x : v) x = randomValue<T>(rng);
      const std::vector<T> got = reduce(in, r);
      for (size_t e = 0; e < kCount; ++e) {
        auto leaf = [&](int k) { return A(toCompute(in[k][e])); };
        std::function<A(A, A)> op;
        switch (o) {
          case ncclProd: op = [](A a, A b) { return wrapMul<A>(a, b); }; break;
          case ncclMax: op = [](A a, A b) { return OpMinMax<A, true>{}.reduce(a, b); }; break;
          case ncclMin: op = [](A a, A b) { return OpMinMax<A, false>{}.reduce(a, b); }; break;
          default: op = [](A a, A b) { return wrapAdd<A>(a, b); }; break;
        }
        A acc = model<A>(n, leaf, op);
        T want;
        if constexpr (IsFloatingType<T>) {
          want = fromCompute<T>(o == ncclAvg ? acc / A(n) : acc);
        } else {
          want = o == ncclAvg ? T(acc / T(n)) : acc;
        }
        ASSERT_TRUE(sameBits(got[e], want)) << "datatype " << int(d) << " op " << int(o) << " n=" << n
                                            << " element " << e;
      }
    }
  }
}

// The host backend's chunked, vectorised form against the reference, element by element: counts across
// several chunks, unaligned buffers, an output that is an input, several outputs, PreMulSum.
template <typename T>
void checkHostForm(ncclDataType_t d) {
  std::mt19937_64 rng(99 + int(d));
  for (int n : {1, 2, 3, 4, 5, 7, 8, 13, 16, 17}) {
    for (int o = 0; o <= int(ncclNumOps); ++o) {  // ncclNumOps: a PreMulSum
      ResolvedRedOp r;
      if (o < int(ncclNumOps)) {
        r = builtin(ncclRedOp_t(o), d, n);
      } else {
        r.kind = RedOpKind::PreMulSum;
        r.datatype = d;
        r.op = ncclRedOp_t(ncclNumOps);
        r.nRanks = n;
        r.scalarBits = scalarBitsOf(randomValue<T>(rng));
      }
      constexpr size_t kCount = 1100;
      std::vector<std::vector<char>> in(n, std::vector<char>((kCount + 1) * sizeof(T)));
      std::vector<const void*> src(n);
      for (int k = 0; k < n; ++k) {
        for (size_t e = 0; e < kCount; ++e) {
          const T v = randomValue<T>(rng);
          std::memcpy(in[k].data() + 1 + e * sizeof(T), &v, sizeof(T));  // one byte off alignment
        }
        src[k] = in[k].data() + 1;
      }
      std::vector<T> want(kCount);
      ASSERT_EQ(detReduceReference(src.data(), n, want.data(), kCount, r), ncclSuccess);
      // One output (the unrolled form for fp32 / fp64 sums of up to 8 inputs), per-rank scalars for a PreMulSum.
      std::vector<T> single(kCount), scalars(n);
      for (int k = 0; k < n; ++k) scalars[k] = randomValue<T>(rng);
      const bool perRank = r.kind == RedOpKind::PreMulSum;
      void* one[1] = {single.data()};
      hostDetReduceCopy(r, n, src.data(), 1, one, kCount, perRank ? scalars.data() : nullptr);
      std::vector<T> wantOne(kCount);
      ASSERT_EQ(detReduceReference(src.data(), n, wantOne.data(), kCount, r, perRank ? scalars.data() : nullptr),
                ncclSuccess);
      for (size_t e = 0; e < kCount; ++e)
        ASSERT_TRUE(sameBits(single[e], wantOne[e])) << "one output: datatype " << int(d) << " op " << o << " n=" << n
                                                     << " element " << e;
      {  // one output that is input 0 (unaligned)
        std::vector<char> first = in[0];
        std::vector<const void*> src2 = src;
        src2[0] = first.data() + 1;
        void* self[1] = {first.data() + 1};
        hostDetReduceCopy(r, n, src2.data(), 1, self, kCount, perRank ? scalars.data() : nullptr);
        for (size_t e = 0; e < kCount; ++e) {
          T got;
          std::memcpy(&got, first.data() + 1 + e * sizeof(T), sizeof(T));
          ASSERT_TRUE(sameBits(got, wantOne[e])) << "in place: datatype " << int(d) << " op " << o << " n=" << n
                                                 << " element " << e;
        }
      }
      std::vector<T> other(kCount);
      void* dst[2] = {in[0].data() + 1, other.data()};  // in place into input 0, and a second output
      hostDetReduceCopy(r, n, src.data(), 2, dst, kCount);
      for (size_t e = 0; e < kCount; ++e) {
        T got;
        std::memcpy(&got, in[0].data() + 1 + e * sizeof(T), sizeof(T));
        ASSERT_TRUE(sameBits(got, want[e]) && sameBits(other[e], want[e]))
            << "datatype " << int(d) << " op " << o << " n=" << n << " element " << e;
      }
    }
  }
}

// Two fp32 inputs summed in fp32 (the host form's shortcut) against the reference's widen-add-round, over every
// kind of bit pattern: random words (NaNs with payloads, infinities, subnormals, both zeros), pairs that overflow,
// cancel exactly or differ in exponent by 0 to 60, into one output and into two.
TEST(DetReduce, TwoFloatSumsMatchTheReferenceOnEveryBitPattern) {
  std::mt19937_64 rng(2024);
  constexpr size_t kCount = 1 << 20;
  std::vector<float> a(kCount), b(kCount);
  auto bits = [](uint32_t u) { return __builtin_bit_cast(float, u); };
  for (size_t i = 0; i < kCount; ++i) {
    const uint32_t u = uint32_t(rng()), v = uint32_t(rng());
    switch (i % 4) {
      case 0: a[i] = bits(u); b[i] = bits(v); break;                                     // any words
      case 1: a[i] = bits((u & 0x80000000u) | 0x7f000000u | (u & 0x7fffff));             // near FLT_MAX
              b[i] = bits((v & 0x80000000u) | 0x7f000000u | (v & 0x7fffff)); break;
      case 2: a[i] = bits(u); b[i] = -a[i]; break;                                       // exact cancellation
      default: {                                                                         // exponents 0-60 apart
        const uint32_t e = 1 + (u >> 8) % 200, d = (v >> 8) % 61;
        a[i] = bits((u & 0x807fffffu) | (e + d < 255 ? (e + d) << 23 : e << 23));
        b[i] = bits((v & 0x807fffffu) | (e << 23));
      }
    }
  }
  const void* in[2] = {a.data(), b.data()};
  for (ncclRedOp_t op : {ncclSum, ncclAvg}) {
    const ResolvedRedOp r = builtin(op, ncclFloat32, 2);
    std::vector<float> want(kCount), one(kCount), two0(kCount), two1(kCount);
    ASSERT_EQ(detReduceReference(in, 2, want.data(), kCount, r), ncclSuccess);
    void* o1[1] = {one.data()};
    hostDetReduceCopy(r, 2, in, 1, o1, kCount);
    void* o2[2] = {two0.data(), two1.data()};
    hostDetReduceCopy(r, 2, in, 2, o2, kCount);
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_TRUE(sameBits(one[i], want[i]) && sameBits(two0[i], want[i]) && sameBits(two1[i], want[i]))
          << "op " << int(op) << " element " << i << ": " << a[i] << " + " << b[i] << " gave " << one[i] << ", want "
          << want[i];
    }
  }
}

// fp32 sums of 3 to 8 rows (written out with AVX-512 or AVX2 where the CPU has them, each width checked) against the reference's widen-add-round,
// over every kind of bit pattern: any words (NaNs with payloads, infinities, subnormals, both zeros), rows near
// FLT_MAX that overflow, rows that cancel; Sum, Avg and a PreMulSum with a scalar per rank; a count that leaves a
// remainder past the last full vector, rows off alignment.
TEST(DetReduce, FloatSumsOfThreeToEightRowsMatchTheReferenceOnEveryBitPattern) {
  std::mt19937_64 rng(2026);
  constexpr size_t kCount = (1 << 16) + 3;
  auto bits = [](uint32_t u) { return __builtin_bit_cast(float, u); };
  for (int n = 3; n <= 8; ++n) {
    std::vector<std::vector<char>> rows(n, std::vector<char>((kCount + 1) * sizeof(float)));
    std::vector<const void*> in(n);
    for (size_t i = 0; i < kCount; ++i) {
      for (int k = 0; k < n; ++k) {
        const uint32_t u = uint32_t(rng());
        float v;
        switch (i % 4) {
          case 0: v = bits(u); break;                                                // any word
          case 1: v = bits((u & 0x80000000u) | 0x7f000000u | (u & 0x7fffff)); break;  // near FLT_MAX
          case 2: v = k % 2 ? -bits(0x3f800000u | (u & 0x7fffff)) : bits(0x3f800000u | (u & 0x7fffff)); break;
          default: v = bits((u & 0x807fffffu) | ((1 + (u >> 8) % 254) << 23));     // exponents far apart
        }
        std::memcpy(rows[k].data() + 1 + i * sizeof(float), &v, sizeof v);
      }
    }
    for (int k = 0; k < n; ++k) in[k] = rows[k].data() + 1;
    std::vector<float> scalars(n);
    for (float& s : scalars) s = bits(0x3e000000u | (uint32_t(rng()) & 0x80ffffffu));  // 2^-3 .. 2^-2, either sign
    for (int o = 0; o < 3; ++o) {
      ResolvedRedOp r = builtin(o == 1 ? ncclAvg : ncclSum, ncclFloat32, n);
      if (o == 2) {
        r.kind = RedOpKind::PreMulSum;
        r.op = ncclRedOp_t(ncclNumOps);
      }
      const void* sc = o == 2 ? scalars.data() : nullptr;
      std::vector<float> want(kCount), got(kCount);
      ASSERT_EQ(detReduceReference(in.data(), n, want.data(), kCount, r, sc), ncclSuccess);
      void* out[1] = {got.data()};
      hostDetReduceCopy(r, n, in.data(), 1, out, kCount, sc);
      for (size_t i = 0; i < kCount; ++i)
        ASSERT_TRUE(sameBits(got[i], want[i])) << "n=" << n << " op " << o << " element " << i << ": got " << got[i]
                                               << ", want " << want[i];
      // Each vector width the CPU has, not only the widest one the host form picks.
      std::vector<double> wide(n);
      for (int k = 0; k < n; ++k) wide[k] = scalars[k];
      // 4 lanes with the first level on fused multiply-adds (where the CPU has FMA) and with adds only; 8 lanes with
      // and without prefetching the rows (16: with).
      for (int form : {4, -4, 8, 16}) {
        const int lanes = form < 0 ? -form : std::min(form, 8);
        if (lanes > detSumFloatLanes()) continue;
        std::vector<float> part(kCount);
        const size_t done = detSumFloatSimd(n, o == 2, o == 1, in.data(), part.data(), kCount, wide.data(), lanes,
                                            form > 0, form == 16);
        ASSERT_EQ(done, kCount / lanes * lanes) << "lanes " << lanes;
        for (size_t i = 0; i < done; ++i)
          ASSERT_TRUE(sameBits(part[i], want[i])) << "n=" << n << " op " << o << " lanes " << lanes
                                                  << (form > 0 ? "" : " (adds only)")
                                                  << (form == 16 ? " (prefetch)" : "") << " element " << i
                                                  << ": got " << part[i] << ", want " << want[i];
      }
    }
  }
}

// fp32 sums of 2 rows (AVX-512 where the CPU has it, 32 floats a step) against the reference's widen-add-round, over
// every kind of bit pattern (any words with NaN payloads, overflow near FLT_MAX, cancellation, exponents far apart):
// into one output and into two (a ring step's), out of place and in place over either row, a remainder past the
// last full step, rows off alignment.
TEST(DetReduce, FloatSumsOfTwoRowsMatchTheReferenceOnEveryBitPattern) {
  std::mt19937_64 rng(2030);
  constexpr size_t kCount = (1 << 14) + 29;
  auto bits = [](uint32_t u) { return __builtin_bit_cast(float, u); };
  std::vector<std::vector<char>> rows(2, std::vector<char>((kCount + 1) * sizeof(float)));
  size_t nans = 0;
  for (size_t i = 0; i < kCount; ++i) {
    for (int k = 0; k < 2; ++k) {
      const uint32_t u = uint32_t(rng());
      float v;
      switch (i % 4) {
        case 0: v = bits(u); break;
        case 1: v = bits((u & 0x80000000u) | 0x7f000000u | (u & 0x7fffff)); break;
        case 2: v = k ? -bits(0x3f800000u | (u & 0x7fffff)) : bits(0x3f800000u | (u & 0x7fffff)); break;
        default: v = bits((u & 0x807fffffu) | ((1 + (u >> 8) % 254) << 23));
      }
      nans += v != v;
      std::memcpy(rows[k].data() + 1 + i * sizeof(float), &v, sizeof v);
    }
  }
  ASSERT_GT(nans, 0u);
  const void* in[2] = {rows[0].data() + 1, rows[1].data() + 1};
  const ResolvedRedOp r = builtin(ncclSum, ncclFloat32, 2);
  std::vector<float> want(kCount);
  ASSERT_EQ(detReduceReference(in, 2, want.data(), kCount, r, nullptr), ncclSuccess);
  auto expectWant = [&](const void* got, const char* what) {
    for (size_t i = 0; i < kCount; ++i) {
      float g;
      std::memcpy(&g, static_cast<const char*>(got) + i * sizeof(float), sizeof g);
      ASSERT_TRUE(sameBits(g, want[i])) << what << " element " << i << ": got " << g << ", want " << want[i];
    }
  };
  std::vector<float> a(kCount), b(kCount);
  void* two[2] = {a.data(), b.data()};
  hostDetReduceCopy(r, 2, in, 2, two, kCount, nullptr);
  expectWant(a.data(), "two outputs, the first:");
  expectWant(b.data(), "two outputs, the second:");
  for (int over = 0; over < 2; ++over) {  // in place over row 0, then over row 1
    std::vector<char> copy[2] = {rows[0], rows[1]};
    const void* inPlace[2] = {copy[0].data() + 1, copy[1].data() + 1};
    void* out[1] = {copy[over].data() + 1};
    hostDetReduceCopy(r, 2, inPlace, 1, out, kCount, nullptr);
    expectWant(out[0], over ? "in place over row 1:" : "in place over row 0:");
  }
  if (detSumFloatLanes() == 8) {
    // The AVX-512 form alone, its output at every offset within a 64-byte line (its first elements up to the line's
    // end, then whole steps, then masked ones), counts around its steps; nothing written past the count.
    std::vector<float> part(kCount + 64);
    for (size_t off = 0; off < 16; ++off) {
      for (size_t count : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(17), size_t(31), size_t(32),
                           size_t(33), size_t(63), kCount - off}) {
        std::fill(part.begin(), part.end(), 7.0f);
        void* out[1] = {part.data() + off};
        ASSERT_EQ(detSumFloatPair(in, 1, out, count), count);
        for (size_t i = 0; i < part.size(); ++i) {
          const bool inside = i >= off && i < off + count;
          ASSERT_TRUE(inside ? sameBits(part[i], want[i - off]) : part[i] == 7.0f)
              << "AVX-512 form, output offset " << off << ", count " << count << ", element " << i << ": got "
              << part[i];
        }
      }
    }
  } else {
    void* out[1] = {a.data()};
    EXPECT_EQ(detSumFloatPair(in, 1, out, kCount), 0u);
  }
}

// fp16 sums of 2 to 8 rows (F16C where the CPU has it) against the reference, over every kind of bit pattern: any
// 16-bit words (NaNs with payloads, infinities, subnormals, both zeros), rows near the largest finite value that
// overflow, rows that cancel; Sum, Avg and a PreMulSum with a scalar per rank; a remainder past the last full
// vector, rows off alignment.
TEST(DetReduce, HalfSumsOfTwoToEightRowsMatchTheReferenceOnEveryBitPattern) {
  std::mt19937_64 rng(2028);
  constexpr size_t kCount = (1 << 14) + 5;
  for (int n = 2; n <= 8; ++n) {
    std::vector<std::vector<char>> rows(n, std::vector<char>((kCount + 1) * sizeof(Half)));
    std::vector<const void*> in(n);
    for (size_t i = 0; i < kCount; ++i) {
      for (int k = 0; k < n; ++k) {
        const uint16_t u = uint16_t(rng());
        uint16_t b;
        switch (i % 4) {
          case 0: b = u; break;                                                        // any word
          case 1: b = uint16_t((u & 0x8000u) | 0x7800u | (u & 0x3ffu)); break;           // near 65504
          case 2: b = uint16_t((k % 2 ? 0x8000u : 0u) | 0x3c00u | (u & 0x3ffu)); break;  // cancelling
          default: b = uint16_t((u & 0x83ffu) | ((u >> 3) % 31) << 10);                 // exponents far apart
        }
        std::memcpy(rows[k].data() + 1 + i * sizeof(Half), &b, sizeof b);
      }
    }
    for (int k = 0; k < n; ++k) in[k] = rows[k].data() + 1;
    std::vector<Half> scalars(n);
    for (Half& s : scalars) s = Half::fromBits(uint16_t(0x3000u | (uint16_t(rng()) & 0x83ffu)));  // 2^-3 .. 2^-2, either sign
    for (int o = 0; o < 3; ++o) {
      ResolvedRedOp r = builtin(o == 1 ? ncclAvg : ncclSum, ncclFloat16, n);
      if (o == 2) {
        r.kind = RedOpKind::PreMulSum;
        r.op = ncclRedOp_t(ncclNumOps);
      }
      const void* sc = o == 2 ? scalars.data() : nullptr;
      std::vector<Half> want(kCount), got(kCount);
      ASSERT_EQ(detReduceReference(in.data(), n, want.data(), kCount, r, sc), ncclSuccess);
      void* out[1] = {got.data()};
      hostDetReduceCopy(r, n, in.data(), 1, out, kCount, sc);
      for (size_t i = 0; i < kCount; ++i)
        ASSERT_EQ(got[i].bits, want[i].bits) << "n=" << n << " op " << o << " element " << i;
    }
  }
}

TEST(DetReduce, HostFormMatchesTheReference) {
  checkHostForm<int8_t>(ncclInt8);
  checkHostForm<uint8_t>(ncclUint8);
  checkHostForm<int32_t>(ncclInt32);
  checkHostForm<uint32_t>(ncclUint32);
  checkHostForm<int64_t>(ncclInt64);
  checkHostForm<uint64_t>(ncclUint64);
  checkHostForm<Half>(ncclFloat16);
  checkHostForm<float>(ncclFloat32);
  checkHostForm<double>(ncclFloat64);
  checkHostForm<BFloat16>(ncclBfloat16);
  checkHostForm<Float8E4M3>(ncclFloat8e4m3);
  checkHostForm<Float8E5M2>(ncclFloat8e5m2);
}

TEST(DetReduce, EveryTypeAndOpMatchesTheTopDownModel) {
  checkAgainstModel<int8_t>(ncclInt8);
  checkAgainstModel<uint8_t>(ncclUint8);
  checkAgainstModel<int32_t>(ncclInt32);
  checkAgainstModel<uint32_t>(ncclUint32);
  checkAgainstModel<int64_t>(ncclInt64);
  checkAgainstModel<uint64_t>(ncclUint64);
  checkAgainstModel<Half>(ncclFloat16);
  checkAgainstModel<float>(ncclFloat32);
  checkAgainstModel<double>(ncclFloat64);
  checkAgainstModel<BFloat16>(ncclBfloat16);
  checkAgainstModel<Float8E4M3>(ncclFloat8e4m3);
  checkAgainstModel<Float8E5M2>(ncclFloat8e5m2);
}

}  // namespace
