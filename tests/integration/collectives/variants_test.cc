// The collectives under configurations the matrix does not vary: several channels, a Simple buffer
// small enough to need many loops, two communicator sets driven at once, split communicators, and NULL
// for the buffers non-root ranks do not use.
#include "coll_case.h"
#include "dtypes.h"
#include "log_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tutti::itest {
namespace {

// A compact slice over every collective: reductions with three type/op pairs, counts around a
// channel/loop boundary, both placements, roots 0 and k-1.
CaseList sliceCases(int nranks, const std::vector<size_t>& counts, uint32_t seed) {
  CaseList cases;
  struct Pick {
    ncclDataType_t type;
    OpKind op;
  };
  const Pick picks[] = {{ncclFloat32, OpKind::kSum}, {ncclInt64, OpKind::kMax}, {ncclFloat16, OpKind::kAvg}};
  uint32_t index = 0;
  for (Coll coll : kAllColls) {
    for (const Pick& pick : picks) {
      if (!isReduction(coll) && pick.op != OpKind::kSum) continue;
      for (size_t count : counts) {
        for (bool inPlace : {false, true}) {
          if (inPlace && !supportsInPlace(coll)) continue;
          CollSpec s;
          s.coll = coll;
          s.type = pick.type;
          s.op = pick.op;
          s.count = count;
          s.inPlace = inPlace;
          s.root = index % 2 ? nranks - 1 : 0;
          s.sendOffset = index % 8;
          s.recvOffset = (index + 3) % 8;
          s.seed = seed + index++;
          cases.push_back(std::make_unique<CollCase>(s, nranks));
        }
      }
    }
  }
  return cases;
}

void runSlice(int nranks, const std::vector<size_t>& counts) {
  CommSet comms(nranks, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  CaseList cases = sliceCases(nranks, counts, 9000);
  Report report;
  runCases(comms, Drive::kThreads, cases, report, 240);
  reportFailures(report);
}

class Configured : public testing::TestWithParam<int> {};

// Four channels each get a part of every buffer; counts not divisible by 4 leave ragged parts.
TEST_P(Configured, FourChannels) {
  ScopedEnv minCh("NCCL_MIN_NCHANNELS", "4");
  ScopedEnv maxCh("NCCL_MAX_NCHANNELS", "4");
  runSlice(GetParam(), {1, 13, 4099, 100003});
}

// Ranks as threads of one process: every AllGather, Broadcast and AlltoAll of at least one byte, and every AllReduce
// and ReduceScatter whose op has no scalar, on the single-copy path (each rank copies the blocks straight from the
// other ranks' buffers; a reduction folds its slice from the peers' inputs and writes it into their outputs), with
// offsets, both placements and roots.
TEST_P(Configured, SingleCopyCollectives) {
  if (const char* device = std::getenv("TUTTI_DEVICE"); device && std::string(device) != "host")
    GTEST_SKIP() << "the single-copy path is the host backend's";
  ScopedEnv direct("TUTTI_DIRECT_MIN_BYTES", "1");
  runSlice(GetParam(), {1, 13, 4099, 100003});
}

// The single-copy path in groups whose point-to-point calls differ from rank to rank (only ranks 0 and 1 exchange a
// buffer; only rank 0 runs its AlltoAll in place): every rank still takes the same path for each collective, and
// every result is right, three calls in a row.
TEST_P(Configured, SingleCopyBesidePointToPointOnSomeRanks) {
  if (const char* device = std::getenv("TUTTI_DEVICE"); device && std::string(device) != "host")
    GTEST_SKIP() << "the single-copy path is the host backend's";
  ScopedEnv direct("TUTTI_DIRECT_MIN_BYTES", "1");
  const int k = GetParam();
  constexpr size_t kCount = 1000;
  CommSet comms(k, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  Report report;
  runPerRank(comms, [&](int r, ncclComm_t comm) {
    std::vector<int32_t> mine(kCount), gathered(kCount * k, -1), a2aIn(kCount * k), a2aOut(kCount * k, -1);
    std::vector<int32_t> msg(kCount), got(kCount, -1);
    for (int iter = 0; iter < 3; ++iter) {
      const int32_t base = iter * 1000000;
      for (size_t i = 0; i < kCount; ++i) {
        mine[i] = base + r * 10000 + static_cast<int32_t>(i);
        msg[i] = base - static_cast<int32_t>(i);
      }
      for (int p = 0; p < k; ++p)  // block p goes to rank p
        for (size_t i = 0; i < kCount; ++i) a2aIn[p * kCount + i] = base + r * 10000 + p * 100 + static_cast<int32_t>(i % 97);
      int32_t* a2aDst = r == 0 ? a2aIn.data() : a2aOut.data();
      // Two groups: an AllGather, then an AlltoAll, each beside a send from one of ranks 0 and 1 to the other.
      bool ok = report.ok(ncclGroupStart(), "ncclGroupStart", comm);
      ok = ok && report.ok(ncclAllGather(mine.data(), gathered.data(), kCount, ncclInt32, comm, nullptr),
                           "ncclAllGather", comm);
      if (r == 0) ok = ok && report.ok(ncclSend(msg.data(), kCount, ncclInt32, 1, comm, nullptr), "ncclSend", comm);
      if (r == 1) ok = ok && report.ok(ncclRecv(got.data(), kCount, ncclInt32, 0, comm, nullptr), "ncclRecv", comm);
      ok = report.ok(ncclGroupEnd(), "ncclGroupEnd", comm) && ok;
      ok = ok && report.ok(ncclGroupStart(), "ncclGroupStart", comm);
      if (r == 1) ok = ok && report.ok(ncclSend(msg.data(), kCount, ncclInt32, 0, comm, nullptr), "ncclSend", comm);
      if (r == 0) ok = ok && report.ok(ncclRecv(got.data(), kCount, ncclInt32, 1, comm, nullptr), "ncclRecv", comm);
      ok = ok && report.ok(ncclAlltoAll(a2aIn.data(), a2aDst, kCount, ncclInt32, comm, nullptr), "ncclAlltoAll",
                           comm);
      ok = report.ok(ncclGroupEnd(), "ncclGroupEnd", comm) && ok;
      if (!ok) return;
      size_t wrong = 0;
      for (int p = 0; p < k; ++p)
        for (size_t i = 0; i < kCount; ++i) {
          wrong += gathered[p * kCount + i] != base + p * 10000 + static_cast<int32_t>(i);
          wrong += a2aDst[p * kCount + i] != base + p * 10000 + r * 100 + static_cast<int32_t>(i % 97);
        }
      if (r <= 1)
        for (size_t i = 0; i < kCount; ++i) wrong += got[i] != base - static_cast<int32_t>(i);
      if (wrong)
        report.fail("rank " + std::to_string(r) + " iteration " + std::to_string(iter) + ": " +
                    std::to_string(wrong) + " wrong elements");
    }
  }, report, "single copy beside point-to-point");
  reportFailures(report);
}

// Every call up to half a Simple slot on the one-shot path itself, at every rank count: none of the plan's log2 n
// variants (recursive doubling, Bruck, the binomial trees).
struct OneShotOnly {
  ScopedEnv oneShot{"TUTTI_ONESHOT_MAX_BYTES", "262144"};
  ScopedEnv noDoubling{"TUTTI_DOUBLING_MAX_BYTES", "0"};
  ScopedEnv noBruck{"TUTTI_BRUCK_MAX_BYTES", "0"}, noBinomial{"TUTTI_BINOMIAL_BCAST_MAX_BYTES", "0"};
  ScopedEnv noTree{"TUTTI_TREE_ALLREDUCE_MAX_BYTES", "0"}, noTreeRs{"TUTTI_TREE_REDUCESCATTER_MAX_BYTES", "0"};
};

// Every AllReduce, ReduceScatter, AllGather, Broadcast and AlltoAll up to half a Simple slot on the one-shot path
// (each rank sends its messages to every peer at once and folds the n rows in rank order), with the slice's types,
// ops, counts, offsets, roots and both placements.
TEST_P(Configured, OneShotCollectives) {
  if (const char* device = std::getenv("TUTTI_DEVICE"); device && std::string(device) != "host")
    GTEST_SKIP() << "the one-shot path is the host backend's";
  OneShotOnly oneShotOnly;
  runSlice(GetParam(), {1, 13, 4099, 30001});
}

// A one-shot call outside a group runs on the calling thread without a launch (comm/group.cc, tryLoneOneShot); inside
// a group it is planned and launched. The two send the same messages: here even ranks group their calls and odd ranks
// do not, for each one-shot collective (AlltoAll included), five rounds.
TEST_P(Configured, OneShotLoneAndGroupedCallsMeet) {
  if (const char* device = std::getenv("TUTTI_DEVICE"); device && std::string(device) != "host")
    GTEST_SKIP() << "the one-shot path is the host backend's";
  OneShotOnly oneShotOnly;
  const int k = GetParam();
  constexpr size_t kCount = 257;
  CommSet comms(k, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  Report report;
  runPerRank(comms, [&](int r, ncclComm_t comm) {
    std::vector<int32_t> in(kCount * k), out(kCount * k);
    for (int round = 0; round < 5; ++round) {
      auto call = [&](const char* name, auto&& body) {
        const bool grouped = r % 2 == 0;
        bool ok = !grouped || report.ok(ncclGroupStart(), "ncclGroupStart", comm);
        ok = ok && report.ok(body(), name, comm);
        if (grouped) ok = report.ok(ncclGroupEnd(), "ncclGroupEnd", comm) && ok;
        return ok;
      };
      for (size_t i = 0; i < in.size(); ++i) in[i] = round * 100000 + r * 1000 + static_cast<int32_t>(i % 1000);
      size_t wrong = 0;
      std::fill(out.begin(), out.end(), -1);
      if (!call("ncclAllReduce", [&] { return ncclAllReduce(in.data(), out.data(), kCount, ncclInt32, ncclSum, comm, nullptr); }))
        return;
      for (size_t i = 0; i < kCount; ++i) {
        int32_t want = 0;
        for (int p = 0; p < k; ++p) want += round * 100000 + p * 1000 + static_cast<int32_t>(i % 1000);
        wrong += out[i] != want;
      }
      std::fill(out.begin(), out.end(), -1);
      if (!call("ncclReduceScatter", [&] { return ncclReduceScatter(in.data(), out.data(), kCount, ncclInt32, ncclSum, comm, nullptr); }))
        return;
      for (size_t i = 0; i < kCount; ++i) {
        int32_t want = 0;
        const size_t e = r * kCount + i;
        for (int p = 0; p < k; ++p) want += round * 100000 + p * 1000 + static_cast<int32_t>(e % 1000);
        wrong += out[i] != want;
      }
      std::fill(out.begin(), out.end(), -1);
      if (!call("ncclAllGather", [&] { return ncclAllGather(in.data(), out.data(), kCount, ncclInt32, comm, nullptr); }))
        return;
      for (int p = 0; p < k; ++p)
        for (size_t i = 0; i < kCount; ++i)
          wrong += out[p * kCount + i] != round * 100000 + p * 1000 + static_cast<int32_t>(i % 1000);
      std::fill(out.begin(), out.end(), -1);
      const int root = round % k;
      if (!call("ncclBroadcast", [&] { return ncclBroadcast(in.data(), out.data(), kCount, ncclInt32, root, comm, nullptr); }))
        return;
      for (size_t i = 0; i < kCount; ++i) wrong += out[i] != round * 100000 + root * 1000 + static_cast<int32_t>(i % 1000);
      std::fill(out.begin(), out.end(), -1);
      if (!call("ncclAlltoAll", [&] { return ncclAlltoAll(in.data(), out.data(), kCount, ncclInt32, comm, nullptr); }))
        return;
      for (int p = 0; p < k; ++p)
        for (size_t i = 0; i < kCount; ++i)
          wrong += out[p * kCount + i] != round * 100000 + p * 1000 + static_cast<int32_t>((r * kCount + i) % 1000);
      if (wrong)
        report.fail("rank " + std::to_string(r) + " round " + std::to_string(round) + ": " + std::to_string(wrong) +
                    " wrong elements");
    }
  }, report, "lone and grouped one-shot calls");
  reportFailures(report);
}

// k ranks as threads each AllReduce (Sum) their own row of floats spread over 40 binades, where the order of additions
// changes the result: every rank must get rank 0's bits, and rank 0 the bits `want(in, i)` gives for element i (`order`
// names that fold in the messages).
using FoldOf = std::function<float(const std::vector<std::vector<float>>& in, size_t i)>;
void expectSumBits(int k, uint32_t seed, const FoldOf& want, const char* order) {
  constexpr size_t kCount = 4099;
  CommSet comms(k, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::vector<float>> in(k, std::vector<float>(kCount)), out(k, std::vector<float>(kCount, 0.0f));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (auto& row : in)
    for (float& x : row) x = std::ldexp(mantissa(rng), exponent(rng));
  Report report;
  runPerRank(comms, [&](int r, ncclComm_t comm) {
    report.ok(ncclAllReduce(in[r].data(), out[r].data(), kCount, ncclFloat32, ncclSum, comm, nullptr),
              "ncclAllReduce", comm);
  }, report, "AllReduce");
  reportFailures(report);
  size_t differ = 0, unlike = 0;
  for (size_t i = 0; i < kCount; ++i) {
    const float fold = want(in, i);
    for (int r = 1; r < k; ++r) differ += std::memcmp(&out[r][i], &out[0][i], sizeof(float)) != 0;
    unlike += std::memcmp(&out[0][i], &fold, sizeof(float)) != 0;
  }
  EXPECT_EQ(differ, 0u) << "elements where a rank's result differs from rank 0's";
  EXPECT_EQ(unlike, 0u) << "elements that are not the " << order;
}

// The one-shot path folds rank 0's row, then rank 1's, and so on, on every rank: every rank gets the same bits, the
// bits of that fold, even where the order of additions changes the result (values spread over 40 binades).
TEST_P(Configured, OneShotGivesEveryRankTheSameBits) {
  if (const char* device = std::getenv("TUTTI_DEVICE"); device && std::string(device) != "host")
    GTEST_SKIP() << "the one-shot path is the host backend's";
  OneShotOnly oneShotOnly;
  const int k = GetParam();
  expectSumBits(k, 11, [k](const std::vector<std::vector<float>>& in, size_t i) {
    float fold = in[0][i];
    for (int r = 1; r < k; ++r) fold += in[r][i];
    return fold;
  }, "rank-order fold");
}

// Recursive doubling (device/host/oneshot.h, OneShot::doubling) for every AllReduce up to half a Simple slot, at
// every rank count from 2 to 8: powers of two, and the others, whose first ranks pair up before and after.
class Doubling : public testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (const char* device = std::getenv("TUTTI_DEVICE"); device && std::string(device) != "host")
      GTEST_SKIP() << "recursive doubling is the host backend's";
  }
  ScopedEnv max_{"TUTTI_DOUBLING_MAX_BYTES", "262144"};
  ScopedEnv minBytes_{"TUTTI_DOUBLING_MIN_BYTES", "1"};
  ScopedEnv minRanks_{"TUTTI_DOUBLING_MIN_RANKS", "2"};
  ScopedEnv gather_{"TUTTI_DOUBLING_GATHER_MAX_BYTES", "1048576"};
  ScopedEnv halving_{"TUTTI_HALVING_MAX_BYTES", "1048576"};
  ScopedEnv bruck_{"TUTTI_BRUCK_MAX_BYTES", "1048576"};
  ScopedEnv binomial_{"TUTTI_BINOMIAL_BCAST_MAX_BYTES", "524288"};
  // The binomial trees, which come ahead of doubling and halving where their defaults reach, only where a test asks.
  ScopedEnv tree_{"TUTTI_TREE_ALLREDUCE_MAX_BYTES", "0"};
  ScopedEnv treeRs_{"TUTTI_TREE_REDUCESCATTER_MAX_BYTES", "0"};
  // Nor the one-shot, which comes ahead of them within a node on 4 and 8 ranks for small calls.
  ScopedEnv first_{"TUTTI_ONESHOT_FIRST_MAX_BYTES", "0"};
};

// Case `index` of a list: in place every other case, buffers off their alignment by up to 7 bytes.
CollSpec variedSpec(Coll coll, ncclDataType_t type, size_t count, int root, uint32_t seedBase, uint32_t index) {
  CollSpec s;
  s.coll = coll;
  s.type = type;
  s.count = count;
  s.root = root;
  s.inPlace = index % 2 == 1;
  s.sendOffset = index % 8;
  s.recvOffset = (index + 3) % 8;
  s.seed = seedBase + index;
  return s;
}

// AllReduce cases for every op over `types` and `counts`, alternately in place, unaligned.
CaseList allReduceCases(int k, std::initializer_list<ncclDataType_t> types, std::initializer_list<size_t> counts,
                        uint32_t seed) {
  CaseList cases;
  uint32_t index = 0;
  for (OpKind op : kAllOps)
    for (ncclDataType_t type : types)
      for (size_t count : counts) {
        CollSpec s = variedSpec(Coll::kAllReduce, type, count, 0, seed, index++);
        s.op = op;
        cases.push_back(std::make_unique<CollCase>(s, k));
      }
  return cases;
}

// Runs `cases` on k ranks as threads of this process.
void runThreadCases(int k, CaseList cases) {
  CommSet comms(k, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  Report report;
  runCases(comms, Drive::kThreads, cases, report, 240);
  reportFailures(report);
}

// AllReduce by recursive halving then doubling (past TUTTI_DOUBLING_MAX_BYTES, 4 or 8 ranks, a count that divides by
// the ranks; the others take the ring): every op and three types, in place and not, unaligned.
TEST_P(Doubling, AllReduceByHalvingThenDoubling) {
  const int k = GetParam();
  if (k != 4 && k != 8) GTEST_SKIP() << "powers of two from 4 ranks";
  ScopedEnv small("TUTTI_DOUBLING_MAX_BYTES", "64");
  ScopedEnv large("TUTTI_HALVING_DOUBLING_MAX_BYTES", "1048576");
  runThreadCases(k, allReduceCases(k, {ncclInt32, ncclBfloat16, ncclFloat64},
                                      {size_t{8} * 1024, size_t{24} * 1024 + 8, size_t{4099}}, 7500));
}

// Every op (PreMulSum with the scalar on the host and on the device included) on integer, half and single
// precision data, counts 1 to 30001, unaligned buffers, in place and not.
void runEveryOpAndType(int k, uint32_t seed) {
  runThreadCases(k, allReduceCases(k, {ncclInt32, ncclFloat16, ncclFloat32},
                                      {size_t{1}, size_t{13}, size_t{4099}, size_t{30001}}, seed));
}

TEST_P(Doubling, AllReduceEveryOpAndType) { runEveryOpAndType(GetParam(), 7100); }

// The same up a binomial tree to rank 0 and back down (3 to 8 ranks).
TEST_P(Doubling, AllReduceUpAndDownTheTree) {
  if (GetParam() < 3) GTEST_SKIP() << "from 3 ranks";
  ScopedEnv tree("TUTTI_TREE_ALLREDUCE_MAX_BYTES", "262144"), treeMin("TUTTI_TREE_ALLREDUCE_MIN_BYTES", "1");
  runEveryOpAndType(GetParam(), 7300);
}

// The same with the way up in one hop: every rank's row to rank 0, which reduces them all (PreMulSum, whose rows would
// arrive unscaled, still folds up the tree).
TEST_P(Doubling, AllReduceUpTheTreeInOneHop) {
  if (GetParam() < 3) GTEST_SKIP() << "from 3 ranks";
  ScopedEnv oneHop("TUTTI_TREE_ALLREDUCE_ONE_HOP_MAX_BYTES", "262144");
  runEveryOpAndType(GetParam(), 7400);
}

// The tree's root folds rank r + m's partial result after rank r's, the smallest subtree first: a perfect tree over
// each block of ranks given by the binary digits of n, joined from the last block backwards. Every rank gets the root's
// bits, which are that fold's in the datatype, even where the order of additions changes the result.
TEST_P(Doubling, TreeAllReduceFoldsInTheBinomialOrder) {
  const int k = GetParam();
  if (k < 3) GTEST_SKIP() << "from 3 ranks";
  ScopedEnv tree("TUTTI_TREE_ALLREDUCE_MAX_BYTES", "262144"), treeMin("TUTTI_TREE_ALLREDUCE_MIN_BYTES", "1");
  int top = 1;
  while (top < k) top *= 2;
  expectSumBits(k, 12, [k, top](const std::vector<std::vector<float>>& in, size_t i) {
    // fold(s, m): ranks s to s + m - 1 that exist, as rank s of the tree folds them.
    std::function<float(int, int)> fold = [&](int s, int m) -> float {
      if (m == 1) return in[s][i];
      const float lo = fold(s, m / 2);
      return s + m / 2 < k ? lo + fold(s + m / 2, m / 2) : lo;
    };
    return fold(0, top);
  }, "binomial tree's fold");
}

// AllGather of fp16 and ReduceScatter of every op on int32 / fp32, blocks of `counts` elements, unaligned, in place and
// not, on k ranks as threads.
void runGatherScatterCases(int k, std::initializer_list<size_t> counts, uint32_t seed) {
  CommSet comms(k, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  CaseList cases;
  uint32_t index = 0;
  for (size_t count : counts) {
    for (bool inPlace : {false, true}) {
      CollSpec g;
      g.coll = Coll::kAllGather;
      g.type = ncclFloat16;
      g.count = count;
      g.inPlace = inPlace;
      g.sendOffset = index % 8;
      g.recvOffset = (index + 5) % 8;
      g.seed = seed + index++;
      cases.push_back(std::make_unique<CollCase>(g, k));
      for (OpKind op : kAllOps) {
        CollSpec rs = g;
        rs.coll = Coll::kReduceScatter;
        rs.type = index % 2 ? ncclFloat32 : ncclInt32;
        rs.op = op;
        rs.seed = seed + index++;
        rs.sendOffset = index % 8;
        cases.push_back(std::make_unique<CollCase>(rs, k));
      }
    }
  }
  Report report;
  runCases(comms, Drive::kThreads, cases, report, 240);
  reportFailures(report);
}

// AllGather by recursive doubling and ReduceScatter by recursive halving on 4 and 8 ranks (other counts take the
// usual paths): every op on ReduceScatter, blocks of 1 to 30001 elements, unaligned, in place and not.
TEST_P(Doubling, AllGatherAndReduceScatter) {
  const int k = GetParam();
  if (k != 4 && k != 8) GTEST_SKIP() << "powers of two from 4 ranks";
  runGatherScatterCases(k, {size_t{1}, size_t{13}, size_t{4099}, size_t{30001}}, 7300);
}

// ReduceScatter up and down the binomial tree, 3 to 8 ranks (the whole input within a slot: blocks up to 10001
// elements), beside AllGather by recursive doubling.
TEST_P(Doubling, ReduceScatterUpAndDownTheTree) {
  const int k = GetParam();
  if (k < 3) GTEST_SKIP() << "from 3 ranks";
  ScopedEnv scatter("TUTTI_TREE_REDUCESCATTER_MAX_BYTES", "524288");
  runGatherScatterCases(k, {size_t{1}, size_t{13}, size_t{4099}, size_t{10001}}, 7700);
}

// AlltoAll by Bruck's algorithm at every rank count (ceil(log2 n) steps; blocks j with bit k set move at step k):
// blocks of 1 to 30001 elements of three sizes, unaligned, in place and not.
TEST_P(Doubling, AlltoAllByBruck) {
  const int k = GetParam();
  CaseList cases;
  uint32_t index = 0;
  for (ncclDataType_t type : {ncclInt8, ncclFloat16, ncclFloat64})
    for (size_t count : {size_t{1}, size_t{13}, size_t{4099}})
      cases.push_back(std::make_unique<CollCase>(variedSpec(Coll::kAlltoAll, type, count, 0, 7700, index++), k));
  CollSpec big;
  big.coll = Coll::kAlltoAll;
  big.type = ncclInt32;
  big.count = 30001 / static_cast<size_t>(k);
  big.seed = 7800;
  cases.push_back(std::make_unique<CollCase>(big, k));
  runThreadCases(k, std::move(cases));
}

// Broadcast down a binomial tree from every root at every rank count: 1 to 4099 elements of three sizes,
// unaligned, in place and not.
TEST_P(Doubling, BroadcastByBinomialTree) {
  const int k = GetParam();
  CaseList cases;
  uint32_t index = 0;
  for (int root = 0; root < k; ++root)
    for (ncclDataType_t type : {ncclInt8, ncclFloat32, ncclFloat64})
      for (size_t count : {size_t{1}, size_t{13}, size_t{4099}})
        cases.push_back(std::make_unique<CollCase>(variedSpec(Coll::kBroadcast, type, count, root, 7900, index++), k));
  runThreadCases(k, std::move(cases));
}

// Every rank gets the bits of one balanced tree over rank order: the pairs (0, 1), (2, 3), ... of the ranks past the
// largest power of two p folded first, then p partial results folded pairwise, lower one first, level by level.
// Sums and products of values spread over 40 binades, where the order of the operations changes the result.
TEST_P(Doubling, EveryRankGetsTheTreeBits) {
  const int k = GetParam();
  constexpr size_t kCount = 4099;
  CommSet comms(k, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::vector<float>> in(k, std::vector<float>(kCount));
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (auto& row : in)
    for (float& x : row) x = std::ldexp(mantissa(rng), exponent(rng));
  int pow2 = 1;
  while (pow2 * 2 <= k) pow2 *= 2;
  const int extra = k - pow2;
  for (ncclRedOp_t op : {ncclSum, ncclProd}) {
    auto fold = [&](float a, float b) { return op == ncclSum ? a + b : a * b; };
    std::vector<std::vector<float>> out(k, std::vector<float>(kCount, 0.0f));
    Report report;
    runPerRank(comms, [&](int r, ncclComm_t comm) {
      report.ok(ncclAllReduce(in[r].data(), out[r].data(), kCount, ncclFloat32, op, comm, nullptr), "ncclAllReduce",
                comm);
    }, report, "AllReduce");
    reportFailures(report);
    size_t differ = 0, unlikeTree = 0, unlikeRankOrder = 0;
    for (size_t i = 0; i < kCount; ++i) {
      std::vector<float> level(pow2);
      for (int v = 0; v < pow2; ++v) level[v] = v < extra ? fold(in[2 * v][i], in[2 * v + 1][i]) : in[v + extra][i];
      for (int width = pow2; width > 1; width /= 2)
        for (int v = 0; v < width / 2; ++v) level[v] = fold(level[2 * v], level[2 * v + 1]);
      float rankOrder = in[0][i];
      for (int r = 1; r < k; ++r) rankOrder = fold(rankOrder, in[r][i]);
      for (int r = 0; r < k; ++r) differ += std::memcmp(&out[r][i], &out[0][i], sizeof(float)) != 0;
      unlikeTree += std::memcmp(&out[0][i], &level[0], sizeof(float)) != 0;
      unlikeRankOrder += std::memcmp(&out[0][i], &rankOrder, sizeof(float)) != 0;
    }
    EXPECT_EQ(differ, 0u) << "elements where a rank's result differs from rank 0's (op " << op << ")";
    EXPECT_EQ(unlikeTree, 0u) << "elements that are not the tree's fold (op " << op << ")";
    // The data is chosen so that the order shows: from 4 ranks on, the tree is not the rank-order fold.
    if (k >= 4) {
      EXPECT_GT(unlikeRankOrder, 0u) << "the data does not tell the two orders apart (op " << op << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Doubling, testing::Values(2, 3, 4, 5, 6, 7, 8),
                         [](const testing::TestParamInfo<int>& info) {
                           return "k" + std::to_string(info.param);
                         });

// A 64 KiB Simple buffer (8 KiB slots) makes a 400 KB message take several loops per channel.
TEST_P(Configured, SmallBufferManyLoops) {
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");
  runSlice(GetParam(), {8191, 100003});
}

TEST_P(Configured, FourChannelsSmallBuffer) {
  ScopedEnv minCh("NCCL_MIN_NCHANNELS", "4");
  ScopedEnv maxCh("NCCL_MAX_NCHANNELS", "4");
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");
  runSlice(GetParam(), {100003});
}

// PAT for AllGather and ReduceScatter (the other collectives keep the tuner's choice) on four channels with
// many loops each: ragged channel shares of every block, chunks cut per slot (also under the sanitizers,
// which skip the forced @pat variants of the matrix).
TEST_P(Configured, PatFourChannelsSmallBuffer) {
  ScopedEnv algo("NCCL_ALGO", "allgather:pat;reducescatter:pat");
  ScopedEnv minCh("NCCL_MIN_NCHANNELS", "4");
  ScopedEnv maxCh("NCCL_MAX_NCHANNELS", "4");
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");
  runSlice(GetParam(), {13, 100003});
}

// AllGather as grouped sends and receives (TUTTI_ALLGATHER_SENDS_MIN_BYTES; by default over the network from 6 ranks
// and 2 MiB, here from the first byte on any transport): blocks of 1 to 30001 elements of three sizes, unaligned, in
// place and not, the data checked; no call runs as an AllGather collective (the COLL log has none). On 8 ranks of the
// host backend, the default over net-socket too.
TEST_P(Configured, AllGatherAsGroupedSends) {
  const int k = GetParam();
  ScopedEnv sends("TUTTI_ALLGATHER_SENDS_MIN_BYTES", "1");
  LogFile log("COLL");
  CaseList cases;
  uint32_t index = 0;
  for (ncclDataType_t type : {ncclInt8, ncclFloat16, ncclFloat64})
    for (size_t count : {size_t{1}, size_t{13}, size_t{4099}, size_t{30001}})
      for (int twice = 0; twice < 2; ++twice)  // in place and not
        cases.push_back(std::make_unique<CollCase>(variedSpec(Coll::kAllGather, type, count, 0, 8100, index++), k));
  runThreadCases(k, std::move(cases));
  EXPECT_EQ(log.count("AllGather: opCount"), 0u);
  // The same call with the setting off is an AllGather collective on every rank.
  ScopedEnv off("TUTTI_ALLGATHER_SENDS_MIN_BYTES", "0");
  CaseList one;
  one.push_back(std::make_unique<CollCase>(variedSpec(Coll::kAllGather, ncclInt8, 4099, 0, 8200, 0), k));
  runThreadCases(k, std::move(one));
  EXPECT_EQ(log.count("AllGather: opCount"), static_cast<size_t>(k));
  const char* device = std::getenv("TUTTI_DEVICE");
  if (k < 8 || (device && std::string(device) != "host")) return;
  // Over net-socket the host backend's default takes it from 4 ranks and 2 MiB of output: 8 blocks of 75001 int32, in
  // place and not.
  ScopedEnv unset("TUTTI_ALLGATHER_SENDS_MIN_BYTES", "-1");
  ScopedEnv p2p("NCCL_P2P_DISABLE", "1"), shm("NCCL_SHM_DISABLE", "1"), lo("NCCL_SOCKET_IFNAME", "lo");
  CaseList net;
  for (uint32_t i = 0; i < 2; ++i)
    net.push_back(std::make_unique<CollCase>(variedSpec(Coll::kAllGather, ncclInt32, 75001, 0, 8300, i), k));
  runThreadCases(k, std::move(net));
  EXPECT_EQ(log.count("AllGather: opCount"), static_cast<size_t>(k));
}

INSTANTIATE_TEST_SUITE_P(Ranks, Configured, testing::Values(2, 3, 8),
                         [](const testing::TestParamInfo<int>& info) {
                           return "k" + std::to_string(info.param);
                         });

// Two independent communicator sets driven at the same time by different threads: communicators must
// not share state that mixes their traffic.
TEST(TwoCommunicators, DrivenConcurrently) {
  CommSet a(4, InitMode::kInitRank);
  CommSet b(3, InitMode::kInitRank);
  ASSERT_TRUE(a.ok()) << a.error();
  ASSERT_TRUE(b.ok()) << b.error();
  CaseList casesA = sliceCases(4, {7, 4099}, 100);
  CaseList casesB = sliceCases(3, {7, 4099}, 200);
  Report reportA, reportB;
  std::thread ta([&] { runCases(a, Drive::kThreads, casesA, reportA); });
  std::thread tb([&] { runCases(b, Drive::kThreads, casesB, reportB); });
  ta.join();
  tb.join();
  reportFailures(reportA);
  reportFailures(reportB);
}

// The same rank threads alternate between two communicators over the same ranks.
TEST(TwoCommunicators, SameRanksInterleaved) {
  CommSet a(3, InitMode::kInitRank);
  CommSet b(3, InitMode::kInitRank);
  ASSERT_TRUE(a.ok()) << a.error();
  ASSERT_TRUE(b.ok()) << b.error();
  Report report;
  runPerRank(
      a,
      [&](int rank, ncclComm_t commA) {
        ncclComm_t commB = b.comm(rank);
        for (int iter = 0; iter < 20; ++iter) {
          ncclComm_t comm = iter % 2 ? commA : commB;
          int32_t in = rank + 1 + iter, out = -1;
          if (!report.ok(ncclAllReduce(&in, &out, 1, ncclInt32, ncclSum, comm, cudaStream_t{}),
                         "ncclAllReduce", comm)) {
            return;
          }
          if (out != 6 + 3 * iter)
            report.fail("iteration " + std::to_string(iter) + ": sum " + std::to_string(out));
        }
      },
      report, "interleaved communicators");
  reportFailures(report);
}

struct SplitResult {
  ncclComm_t comm = nullptr;
  int count = -1;
  int rank = -1;
};

// Splits 8 ranks by color (even / odd) with keys reversed, so new rank order is the reverse of the old.
TEST(Split, EvenOddReversedKeys) {
  constexpr int k = 8;
  CommSet parent(k, InitMode::kInitRank);
  ASSERT_TRUE(parent.ok()) << parent.error();
  std::vector<SplitResult> out(k);
  Report report;
  runPerRank(
      parent,
      [&](int rank, ncclComm_t comm) {
        SplitResult& r = out[rank];
        if (!report.ok(ncclCommSplit(comm, rank % 2, k - 1 - rank, &r.comm, nullptr), "ncclCommSplit", comm))
          return;
        report.ok(ncclCommCount(r.comm, &r.count), "ncclCommCount", r.comm);
        report.ok(ncclCommUserRank(r.comm, &r.rank), "ncclCommUserRank", r.comm);
      },
      report, "ncclCommSplit");
  reportFailures(report);
  ASSERT_FALSE(HasFailure());

  std::vector<ncclComm_t> even(k / 2), odd(k / 2);
  for (int rank = 0; rank < k; ++rank) {
    // Keys k-1-rank: among the 4 ranks of a color, the highest old rank gets new rank 0.
    const int want = (k - 1 - rank) / 2;
    EXPECT_EQ(out[rank].count, k / 2) << "old rank " << rank;
    EXPECT_EQ(out[rank].rank, want) << "old rank " << rank;
    if (want >= 0 && want < k / 2) (rank % 2 ? odd : even)[want] = out[rank].comm;
  }
  CommSet evenSet(even), oddSet(odd);
  ASSERT_FALSE(HasFailure());
  CaseList evenCases = sliceCases(k / 2, {7, 4099}, 300);
  CaseList oddCases = sliceCases(k / 2, {7, 4099}, 400);
  Report evenReport, oddReport;
  std::thread te([&] { runCases(evenSet, Drive::kThreads, evenCases, evenReport); });
  std::thread to([&] { runCases(oddSet, Drive::kThreads, oddCases, oddReport); });
  te.join();
  to.join();
  reportFailures(evenReport);
  reportFailures(oddReport);
}

// Ranks passing NCCL_SPLIT_NOCOLOR get a NULL communicator; the others form one without them.
TEST(Split, NoColorGivesNull) {
  constexpr int k = 5;
  CommSet parent(k, InitMode::kInitRank);
  ASSERT_TRUE(parent.ok()) << parent.error();
  std::vector<SplitResult> out(k);
  Report report;
  runPerRank(
      parent,
      [&](int rank, ncclComm_t comm) {
        SplitResult& r = out[rank];
        r.comm = reinterpret_cast<ncclComm_t>(&r);  // must be overwritten with NULL for NOCOLOR ranks
        const int color = (rank == 1 || rank == 3) ? NCCL_SPLIT_NOCOLOR : 7;
        if (!report.ok(ncclCommSplit(comm, color, rank, &r.comm, nullptr), "ncclCommSplit", comm)) return;
        if (r.comm == nullptr) return;
        report.ok(ncclCommCount(r.comm, &r.count), "ncclCommCount", r.comm);
        report.ok(ncclCommUserRank(r.comm, &r.rank), "ncclCommUserRank", r.comm);
      },
      report, "ncclCommSplit with NCCL_SPLIT_NOCOLOR");
  reportFailures(report);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(out[1].comm, nullptr);
  EXPECT_EQ(out[3].comm, nullptr);
  const int kept[] = {0, 2, 4};
  std::vector<ncclComm_t> comms;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[kept[i]].count, 3);
    EXPECT_EQ(out[kept[i]].rank, i);
    comms.push_back(out[kept[i]].comm);
  }
  CommSet child(comms);
  ASSERT_FALSE(HasFailure());
  CaseList cases = sliceCases(3, {1023}, 500);
  Report childReport;
  runCases(child, Drive::kThreads, cases, childReport);
  reportFailures(childReport);
}

// NCCL uses recvbuff only on the root for Reduce / Gather and sendbuff only on the root for Broadcast /
// Scatter; applications pass NULL elsewhere and that must work.
TEST(RootOnlyBuffers, NullOnNonRootRanks) {
  constexpr int k = 4;
  CommSet comms(k, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  CaseList cases;
  uint32_t seed = 600;
  for (Coll coll : {Coll::kReduce, Coll::kGather, Coll::kBroadcast, Coll::kScatter}) {
    for (int root : {0, k - 1}) {
      CollSpec s;
      s.coll = coll;
      s.type = ncclFloat32;
      s.count = 1031;
      s.root = root;
      s.nullUnusedOnNonRoot = true;
      s.seed = seed++;
      cases.push_back(std::make_unique<CollCase>(s, k));
    }
  }
  Report report;
  runCases(comms, Drive::kThreads, cases, report);
  reportFailures(report);
}

}  // namespace
}  // namespace tutti::itest
