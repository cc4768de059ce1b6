// ncclCommInitAll + one thread driving every rank inside ncclGroupStart/End, the way a single-process
// multi-device application uses NCCL. A slice of the matrix: all collectives and datatypes, a few ops.
#include "coll_case.h"
#include "dtypes.h"
#include "harness.h"
#include "log_file.h"
#include "p2p_case.h"
#include "thread_ranks.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

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

// AlltoAll input of rank r: element i of block p tells where it came from.
int32_t a2aValue(int r, int p, size_t count, size_t i, int salt) {
  return static_cast<int32_t>(r * 1000003 + salt * 7919 + p * static_cast<int>(count) + static_cast<int>(i));
}

void fillAlltoAll(std::vector<int32_t>& buf, int r, int n, size_t count, int salt) {
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i) buf[p * count + i] = a2aValue(r, p, count, i, salt);
}

// "" or the first element of rank r's AlltoAll output that is not rank p's block r.
std::string checkAlltoAll(const std::vector<int32_t>& out, int r, int n, size_t count, int salt, const char* what) {
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i)
      if (out[p * count + i] != a2aValue(p, r, count, i, salt))
        return std::string(what) + ": block " + std::to_string(p) + " element " + std::to_string(i) + " is " +
               std::to_string(out[p * count + i]) + ", expected " + std::to_string(a2aValue(p, r, count, i, salt));
  return {};
}

// ReduceScatter input of rank r (int32 Sum is exact whatever the algorithm): element j is r + j % 7.
std::string runReduceScatter(ncclComm_t comm, int r, int n, size_t count) {
  std::vector<int32_t> in(count * n), out(count, -1);
  for (size_t j = 0; j < in.size(); ++j) in[j] = r + static_cast<int32_t>(j % 7);
  if (ncclReduceScatter(in.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr) != ncclSuccess)
    return std::string("ncclReduceScatter: ") + ncclGetLastError(comm);
  for (size_t i = 0; i < count; ++i) {
    const int32_t want = n * (n - 1) / 2 + n * static_cast<int32_t>((r * count + i) % 7);
    if (out[i] != want)
      return "ReduceScatter element " + std::to_string(i) + " is " + std::to_string(out[i]) + ", expected " +
             std::to_string(want);
  }
  return {};
}

// Two in-place AlltoAlls and a ReduceScatter (PAT, which keeps partial sums in the communicator's scratch) in one
// group: every staged copy of a launch is made before any of its sends, so each AlltoAll needs staging memory of
// its own, apart from the scratch the ReduceScatter writes meanwhile.
TEST(GroupedScratch, InPlaceAlltoAllsBesidePatReduceScatterInOneGroup) {
  constexpr int n = 3;
  constexpr size_t count = 5003;  // blocks of 20 KB: the grouped sends and receives, not the one-shot path
  ScopedEnv algo("NCCL_ALGO", "reducescatter:pat");
  ScopedEnv direct("TUTTI_DIRECT_MIN_BYTES", "0");
  const std::vector<std::string> failed = onThreadRanks(n, [&](ncclComm_t comm, int r) -> std::string {
    for (int round = 0; round < 2; ++round) {  // the second group reuses what the first one grew
      std::vector<int32_t> a(count * n), b(count * n), rsIn(count * n), rsOut(count, -1);
      fillAlltoAll(a, r, n, count, 1 + round);
      fillAlltoAll(b, r, n, count, 3 + round);
      for (size_t j = 0; j < rsIn.size(); ++j) rsIn[j] = r + static_cast<int32_t>(j % 7);
      if (ncclGroupStart() != ncclSuccess) return "ncclGroupStart";
      ncclResult_t res = ncclAlltoAll(a.data(), a.data(), count, ncclInt32, comm, nullptr);
      if (res == ncclSuccess) res = ncclReduceScatter(rsIn.data(), rsOut.data(), count, ncclInt32, ncclSum, comm, nullptr);
      if (res == ncclSuccess) res = ncclAlltoAll(b.data(), b.data(), count, ncclInt32, comm, nullptr);
      const ncclResult_t end = ncclGroupEnd();
      if (res != ncclSuccess || end != ncclSuccess) return std::string("group: ") + ncclGetLastError(comm);
      std::string e = checkAlltoAll(a, r, n, count, 1 + round, "first AlltoAll");
      if (e.empty()) e = checkAlltoAll(b, r, n, count, 3 + round, "second AlltoAll");
      for (size_t i = 0; i < count && e.empty(); ++i) {
        const int32_t want = n * (n - 1) / 2 + n * static_cast<int32_t>((r * count + i) % 7);
        if (rsOut[i] != want) e = "ReduceScatter element " + std::to_string(i) + " is " + std::to_string(rsOut[i]);
      }
      if (!e.empty()) return "group " + std::to_string(round) + ": " + e;
    }
    return {};
  });
  for (const std::string& f : failed) ADD_FAILURE() << f;
}

// Device backends make their scratch when the communicator is created and keep to it: a call that would need more
// runs in pieces (PAT ReduceScatter in segments of every block, an in-place AlltoAll outside a group in rounds of
// columns), so no call allocates device memory (cudaMalloc may wait on peers' spinning kernels; capture refuses
// it). 3 ranks, a scratch of about 16 KiB, two channels; the log shows the one allocation per rank made at init.
TEST(GroupedScratch, DeviceCallsKeepToTheScratchMadeAtInit) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (!dev || std::string(dev) != "sim") GTEST_SKIP() << "bounded scratch is for device backends (ctest suffix @sim)";
  constexpr int n = 3;
  ScopedEnv segment("TUTTI_DET_SEGMENT_BYTES", "16384"), oneShot("TUTTI_DET_ONESHOT_BYTES", "4096");
  ScopedEnv algo("NCCL_ALGO", "reducescatter:pat");
  ScopedEnv minCh("NCCL_MIN_NCHANNELS", "2"), maxCh("NCCL_MAX_NCHANNELS", "2");
  std::vector<std::string> failed;
  {
    LogFile log("ALLOC");
    failed = onThreadRanks(n, [&](ncclComm_t comm, int r) -> std::string {
      for (size_t count : {size_t{1}, size_t{1000}, size_t{12289}, size_t{40000}}) {
        std::string e = runReduceScatter(comm, r, n, count);
        if (!e.empty()) return "count " + std::to_string(count) + ": " + e;
        std::vector<int32_t> buf(count * n);
        fillAlltoAll(buf, r, n, count, 5);
        if (ncclAlltoAll(buf.data(), buf.data(), count, ncclInt32, comm, nullptr) != ncclSuccess)
          return std::string("ncclAlltoAll: ") + ncclGetLastError(comm);
        e = checkAlltoAll(buf, r, n, count, 5, "in-place AlltoAll");
        if (!e.empty()) return "count " + std::to_string(count) + ": " + e;
      }
      return {};
    });
    EXPECT_EQ(log.count("scratch memory of"), size_t{n}) << "a call allocated scratch memory";
    EXPECT_EQ(log.count("staging memory of"), size_t{0}) << "a call allocated staging memory";
  }
  for (const std::string& f : failed) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace tutti::itest
