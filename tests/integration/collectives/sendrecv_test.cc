// ncclSend / ncclRecv patterns, one thread per rank, every rank's calls in one group: ring shifts, an
// all-to-all through grouped send/recv, every-pair exchanges, self-sends and zero-byte messages; and groups whose
// messages to one peer vary in number and size from one group to the next, so that the slots a connection's steps
// cycle through (as many as a group makes on it, up to the FIFO's) change between groups and are shared by several
// messages within one.
#include "dtypes.h"
#include "harness.h"
#include "p2p_case.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

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

// 3 ranks as threads (p2p transport), slots of 8 KiB (NCCL_BUFFSIZE 64 KiB): each group sends 1 to 3 messages of 0
// to 40 KiB to each neighbour, both ways round the ring, and receives theirs: 1 to 15 steps a connection, so that its
// ring of slots grows, shrinks and stays between groups, and a group's messages share it. Every byte is checked.
TEST(SendRecvSlotRings, MessagesOfMixedSizesInAndAcrossGroups) {
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");
  constexpr int kRanks = 3, kGroups = 60;
  CommSet comms(kRanks, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  Report report;
  // The messages rank `from` sends rank `to` in group g: counts of bytes, the same on both ends.
  auto sizes = [](int g, int from, int to) {
    uint32_t x = static_cast<uint32_t>(g * 7919 + from * 131 + to * 17 + 1);
    auto next = [&x] {
      x = x * 1103515245u + 12345u;
      return x >> 8;
    };
    std::vector<size_t> out(1 + next() % 3);
    for (size_t& s : out) s = next() % 5 == 0 ? 0 : next() % (40 * 1024 + 1);
    return out;
  };
  auto byteOf = [](int g, int from, int msg, size_t i) {
    return static_cast<uint8_t>(g * 31 + from * 7 + msg * 3 + i * 13 + (i >> 9));
  };
  runPerRank(
      comms,
      [&](int rank, ncclComm_t comm) {
        const int peers[2] = {(rank + 1) % kRanks, (rank + kRanks - 1) % kRanks};
        for (int g = 0; g < kGroups; ++g) {
          std::vector<std::vector<uint8_t>> out, in;
          std::vector<std::pair<int, int>> inFrom;  // (peer, message) of each receive buffer
          for (int peer : peers) {
            const std::vector<size_t> mine = sizes(g, rank, peer), theirs = sizes(g, peer, rank);
            for (size_t m = 0; m < mine.size(); ++m) {
              out.emplace_back(mine[m]);
              for (size_t i = 0; i < mine[m]; ++i) out.back()[i] = byteOf(g, rank, static_cast<int>(m), i);
            }
            for (size_t m = 0; m < theirs.size(); ++m) {
              in.emplace_back(theirs[m], uint8_t{0xee});
              inFrom.push_back({peer, static_cast<int>(m)});
            }
          }
          bool ok = report.ok(ncclGroupStart(), "ncclGroupStart", comm);
          size_t o = 0, r = 0;
          for (int peer : peers) {
            for (size_t m = 0; m < sizes(g, rank, peer).size(); ++m, ++o)
              ok = ok && report.ok(ncclSend(out[o].data(), out[o].size(), ncclUint8, peer, comm, cudaStream_t{}),
                                   "ncclSend", comm);
            for (size_t m = 0; m < sizes(g, peer, rank).size(); ++m, ++r)
              ok = ok && report.ok(ncclRecv(in[r].data(), in[r].size(), ncclUint8, peer, comm, cudaStream_t{}),
                                   "ncclRecv", comm);
          }
          ok = report.ok(ncclGroupEnd(), "ncclGroupEnd", comm) && ok;
          if (!ok) return;
          for (size_t k = 0; k < in.size(); ++k) {
            const auto [peer, m] = inFrom[k];
            for (size_t i = 0; i < in[k].size(); ++i) {
              if (in[k][i] != byteOf(g, peer, m, i)) {
                report.fail("group " + std::to_string(g) + ": rank " + std::to_string(rank) + ", message " +
                            std::to_string(m) + " of " + std::to_string(in[k].size()) + " bytes from rank " +
                            std::to_string(peer) + " differs at byte " + std::to_string(i));
                return;
              }
            }
          }
        }
      },
      report, "groups of mixed sizes");
  reportFailures(report);
}

}  // namespace
}  // namespace tutti::itest
