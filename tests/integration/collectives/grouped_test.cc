// ncclCommInitAll + one thread driving every rank inside ncclGroupStart/End, the way a single-process
// multi-device application uses NCCL. A slice of the matrix: all collectives and datatypes, a few ops.
#include "coll_case.h"
#include "dtypes.h"
#include "p2p_case.h"

#include <gtest/gtest.h>

namespace tutti::itest {
namespace {

struct GroupParam {
  Coll coll;
  int nranks;
};

void PrintTo(const GroupParam& p, std::ostream* os) { *os << collName(p.coll) << "_k" << p.nranks; }

class GroupedInitAll : public testing::TestWithParam<GroupParam> {};

TEST_P(GroupedInitAll, Slice) {
  const GroupParam p = GetParam();
  CommSet comms(p.nranks, InitMode::kInitAll);
  ASSERT_TRUE(comms.ok()) << comms.error();
  CaseList cases;
  uint32_t index = 0;
  for (ncclDataType_t type : kAllTypes) {
    for (OpKind op : {OpKind::kSum, OpKind::kMin, OpKind::kAvg, OpKind::kPreMulDevice}) {
      if (!isReduction(p.coll) && op != OpKind::kSum) continue;
      for (size_t count : {size_t{0}, size_t{7}, size_t{1023}}) {
        CollSpec s;
        s.coll = p.coll;
        s.type = type;
        s.op = op;
        s.count = count;
        s.inPlace = index % 2 == 1;
        s.root = index % 4 < 2 ? 0 : p.nranks - 1;
        s.sendOffset = index % 8;
        s.recvOffset = (index + 5) % 8;
        s.seed = 2000 + index++;
        cases.push_back(std::make_unique<CollCase>(s, p.nranks));
      }
    }
  }
  Report report;
  runCases(comms, Drive::kGroup, cases, report);
  reportFailures(report);
}

std::vector<GroupParam> groupParams() {
  std::vector<GroupParam> params;
  for (Coll c : kAllColls) {
    for (int k : {1, 3, 4, 8}) params.push_back({c, k});
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(OneThread, GroupedInitAll, testing::ValuesIn(groupParams()),
                         [](const testing::TestParamInfo<GroupParam>& info) {
                           return std::string(collName(info.param.coll)) + "_k" +
                                  std::to_string(info.param.nranks);
                         });

// Point-to-point from one thread: every rank's sends and receives (each in its own nested group) inside
// one outer group.
TEST(GroupedInitAll, SendRecvPatterns) {
  for (int k : {2, 5}) {
    CommSet comms(k, InitMode::kInitAll);
    ASSERT_TRUE(comms.ok()) << comms.error();
    CaseList cases;
    uint32_t seed = 3000;
    for (P2pPattern pattern :
         {P2pPattern::kRingShift, P2pPattern::kAllToAll, P2pPattern::kAllPairs, P2pPattern::kSelf}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{4097}}) {
        P2pSpec s;
        s.pattern = pattern;
        s.type = ncclFloat32;
        s.count = count;
        s.seed = seed++;
        cases.push_back(std::make_unique<P2pCase>(s, k));
      }
    }
    Report report;
    runCases(comms, Drive::kGroup, cases, report);
    reportFailures(report);
  }
}

// Several collectives of one rank in one group must all complete at group end, in order.
TEST(GroupedInitAll, ManyCollectivesInOneGroup) {
  constexpr int k = 4;
  constexpr size_t n = 517;
  CommSet comms(k, InitMode::kInitAll);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::vector<float>> in(k, std::vector<float>(n)), sum(k, std::vector<float>(n, -1)),
      gathered(k, std::vector<float>(n * k, -1));
  for (int r = 0; r < k; ++r) {
    for (size_t i = 0; i < n; ++i) in[r][i] = static_cast<float>((r + 1) * (i % 5));
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < k; ++r) {
    EXPECT_EQ(
        ncclAllReduce(in[r].data(), sum[r].data(), n, ncclFloat32, ncclSum, comms.comm(r), cudaStream_t{}),
        ncclSuccess);
    EXPECT_EQ(ncclAllGather(in[r].data(), gathered[r].data(), n, ncclFloat32, comms.comm(r), cudaStream_t{}),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < k; ++r) {
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(sum[r][i], static_cast<float>(10 * (i % 5))) << "rank " << r << " element " << i;
      for (int src = 0; src < k; ++src) {
        ASSERT_EQ(gathered[r][src * n + i], in[src][i])
            << "rank " << r << " from " << src << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace tutti::itest
