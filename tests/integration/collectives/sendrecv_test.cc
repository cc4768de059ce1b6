// ncclSend / ncclRecv patterns, one thread per rank, every rank's calls in one group: ring shifts, an
// all-to-all through grouped send/recv, every-pair exchanges, self-sends and zero-byte messages.
#include "dtypes.h"
#include "p2p_case.h"

#include <gtest/gtest.h>

namespace tutti::itest {
namespace {

// 0 and 1 are edge cases, 7 is odd, 1023 is a few lines, 1<<18 + 3 spans several slots.
constexpr size_t kCounts[] = {0, 1, 7, 1023, (size_t{1} << 18) + 3};
constexpr ncclDataType_t kTypes[] = {ncclInt8, ncclFloat16, ncclFloat64};

struct P2pParam {
  P2pPattern pattern;
  int nranks;
};

void PrintTo(const P2pParam& p, std::ostream* os) { *os << patternName(p.pattern) << "_k" << p.nranks; }

CaseList p2pCases(P2pPattern pattern, int nranks) {
  CaseList cases;
  uint32_t seed = 500;
  std::vector<int> shifts = {1};
  if (pattern == P2pPattern::kRingShift && nranks > 2) shifts = {1, nranks - 1, 2};
  for (int shift : shifts) {
    for (ncclDataType_t type : kTypes) {
      for (size_t count : kCounts) {
        // The largest messages only for one type: the all-pairs patterns move k^2 of them.
        if (count > 1023 && type != ncclFloat16) continue;
        P2pSpec s;
        s.pattern = pattern;
        s.shift = shift;
        s.type = type;
        s.count = count;
        s.seed = seed++;
        cases.push_back(std::make_unique<P2pCase>(s, nranks));
      }
    }
  }
  return cases;
}

class SendRecv : public testing::TestWithParam<P2pParam> {};

TEST_P(SendRecv, Pattern) {
  const P2pParam p = GetParam();
  CommSet comms(p.nranks, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  CaseList cases = p2pCases(p.pattern, p.nranks);
  Report report;
  runCases(comms, Drive::kThreads, cases, report);
  reportFailures(report);
}

std::vector<P2pParam> p2pParams() {
  std::vector<P2pParam> params;
  for (P2pPattern pattern :
       {P2pPattern::kRingShift, P2pPattern::kAllToAll, P2pPattern::kAllPairs, P2pPattern::kSelf}) {
    for (int k : {1, 2, 3, 5, 8}) {
      if (pattern == P2pPattern::kAllPairs && k == 1) continue;  // no other rank to talk to
      params.push_back({pattern, k});
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Threads, SendRecv, testing::ValuesIn(p2pParams()),
                         [](const testing::TestParamInfo<P2pParam>& info) {
                           return std::string(patternName(info.param.pattern)) + "_k" +
                                  std::to_string(info.param.nranks);
                         });

// One ungrouped send and its receive on two of four ranks while the other two make no call: a
// point-to-point exchange involves only the two peers.
TEST(SendRecvPairs, OnlyTwoOfFourRanksTalk) {
  CommSet comms(4, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  Report report;
  constexpr size_t kCount = 4099;
  runPerRank(
      comms,
      [&](int rank, ncclComm_t comm) {
        std::vector<int32_t> buf(kCount);
        if (rank == 1) {
          for (size_t i = 0; i < kCount; ++i) buf[i] = static_cast<int32_t>(i * 7 + 1);
          report.ok(ncclSend(buf.data(), kCount, ncclInt32, 3, comm, cudaStream_t{}), "ncclSend 1->3", comm);
        } else if (rank == 3) {
          report.ok(ncclRecv(buf.data(), kCount, ncclInt32, 1, comm, cudaStream_t{}), "ncclRecv 3<-1", comm);
          for (size_t i = 0; i < kCount; ++i) {
            if (buf[i] != static_cast<int32_t>(i * 7 + 1)) {
              report.fail("rank 3 received a wrong element at " + std::to_string(i));
              break;
            }
          }
        }
      },
      report, "send/recv between ranks 1 and 3");
  reportFailures(report);
}

}  // namespace
}  // namespace tutti::itest
