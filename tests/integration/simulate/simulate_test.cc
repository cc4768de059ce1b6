// ncclGroupSimulateEnd with 2 ranks as threads: the estimate is the tuner chain's cost of the pair a real
// launch would pick, nothing runs, and the communicator stays usable. Every TEST is its own process
// (ctest), so the NCCL_* variables set here are read fresh.
#include "harness.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tutti::itest {
namespace {

constexpr int kRanks = 2;

std::string tempPath(const char* tag) {
  return ::testing::TempDir() + "tutti_simulate_" + tag + "_" + std::to_string(getpid());
}

// The value after `key` in a log line ("time 12.5 us" -> 12.5); NaN when absent.
double valueAfter(const std::string& line, const std::string& key) {
  size_t at = line.find(key);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(line.c_str() + at + key.size(), nullptr);
}

// Simulates a group of AllReduces (float sum, one per entry of `counts`) on every rank; returns each
// rank's estimate (NaN where the call failed, which is also reported).
std::vector<float> simulate(const CommSet& set, const std::vector<size_t>& counts, Report& report) {
  std::vector<float> est(set.size(), std::nanf(""));
  runPerRank(set, [&](int rank, ncclComm_t comm) {
    size_t most = 1;
    for (size_t c : counts) most = std::max(most, c);
    std::vector<float> send(most, 1.0f), recv(most, -7.0f);
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    if (!report.ok(ncclGroupStart(), "ncclGroupStart", comm)) return;
    for (size_t c : counts)
      if (!report.ok(ncclAllReduce(send.data(), recv.data(), c, ncclFloat, ncclSum, comm, nullptr), "ncclAllReduce",
                     comm))
        return;
    if (!report.ok(ncclGroupSimulateEnd(&info), "ncclGroupSimulateEnd", comm)) return;
    for (size_t i = 0; i < most; ++i) {
      if (recv[i] != -7.0f) {
        report.fail("rank " + std::to_string(rank) + ": the simulated group wrote recvbuff[" + std::to_string(i) + "]");
        return;
      }
    }
    est[rank] = info.estimatedTime;
  }, report, "simulate");
  return est;
}

// One real AllReduce of `count` floats, checked on every rank.
void realAllReduce(const CommSet& set, size_t count, Report& report) {
  runPerRank(set, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(count, static_cast<float>(rank + 1)), recv(count, 0.0f);
    if (!report.ok(ncclAllReduce(send.data(), recv.data(), count, ncclFloat, ncclSum, comm, nullptr), "ncclAllReduce",
                   comm))
      return;
    for (size_t i = 0; i < count; ++i) {
      if (recv[i] != 3.0f) {
        report.fail("rank " + std::to_string(rank) + ": element " + std::to_string(i) + " is " +
                    std::to_string(recv[i]) + " after a simulated group, expected 3");
        return;
      }
    }
  }, report, "AllReduce");
}

class Simulate : public ::testing::Test {
 protected:
  void SetUp() override { std::remove(logPath_.c_str()); }
  void TearDown() override { std::remove(logPath_.c_str()); }
  std::string log() const { return readFile(logPath_); }
  std::string logPath_ = tempPath("log");
  ScopedEnv debug_{"NCCL_DEBUG", "INFO"};
  ScopedEnv subsys_{"NCCL_DEBUG_SUBSYS", "TUNING,COLL"};
  ScopedEnv file_{"NCCL_DEBUG_FILE", logPath_};
};

TEST_F(Simulate, EstimateIsTheChosenEntryOfTheCostTable) {
  Report report;
  std::vector<float> est;
  {
    CommSet set(kRanks, InitMode::kInitRank);
    ASSERT_TRUE(set.ok()) << set.error();
    est = simulate(set, {1 << 18}, report);  // 1 MiB
  }
  reportFailures(report);
  const std::string text = log();
  const auto tuning = linesWith(text, "AllReduce: 1048576 bytes -> algo ");
  ASSERT_EQ(tuning.size(), size_t{kRanks}) << text;
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_GT(est[r], 0.0f) << "rank " << r;
    const double logged = valueAfter(tuning[r], " time ");
    ASSERT_FALSE(std::isnan(logged)) << tuning[r];
    EXPECT_FLOAT_EQ(est[r], static_cast<float>(logged)) << tuning[r];
  }
  EXPECT_FLOAT_EQ(est[0], est[1]) << "ranks predicted different times for the same call";
  // Planned but not launched: no COLL line with an opCount, one "simulated" line per rank.
  EXPECT_TRUE(linesWith(text, "opCount").empty()) << text;
  EXPECT_EQ(linesWith(text, "AllReduce simulated:").size(), size_t{kRanks}) << text;
}

TEST_F(Simulate, GrowsWithSizeAndSumsAGroup) {
  Report report;
  std::vector<float> small, large, both;
  {
    CommSet set(kRanks, InitMode::kInitRank);
    ASSERT_TRUE(set.ok()) << set.error();
    small = simulate(set, {256}, report);         // 1 KiB
    large = simulate(set, {1 << 22}, report);     // 16 MiB
    both = simulate(set, {256, 1 << 22}, report);
  }
  reportFailures(report);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_GT(small[r], 0.0f);
    EXPECT_GT(large[r], small[r]) << "rank " << r << ": 16 MiB is not predicted slower than 1 KiB";
    EXPECT_FLOAT_EQ(both[r], small[r] + large[r]) << "rank " << r;
  }
}

TEST_F(Simulate, ForcedPairCostsItsOwnEntryAndNoLessThanTheFreeChoice) {
  Report report;
  std::vector<float> free, forced;
  {
    CommSet set(kRanks, InitMode::kInitRank);
    ASSERT_TRUE(set.ok()) << set.error();
    free = simulate(set, {16}, report);  // 64 B: the default model prefers a low-latency protocol
  }
  {
    // The filter is read at communicator init: a second set under the forced pair.
    ScopedEnv algo("NCCL_ALGO", "ring");
    ScopedEnv proto("NCCL_PROTO", "simple");
    CommSet set(kRanks, InitMode::kInitRank);
    ASSERT_TRUE(set.ok()) << set.error();
    forced = simulate(set, {16}, report);
  }
  reportFailures(report);
  const std::string text = log();
  const auto lines = linesWith(text, "AllReduce: 64 bytes -> algo ");
  ASSERT_EQ(lines.size(), size_t{2 * kRanks}) << text;
  for (int r = 0; r < kRanks; ++r) {
    const std::string& forcedLine = lines[kRanks + r];
    EXPECT_NE(forcedLine.find("algo Ring proto Simple"), std::string::npos) << forcedLine;
    EXPECT_FLOAT_EQ(forced[r], static_cast<float>(valueAfter(forcedLine, " time "))) << forcedLine;
    EXPECT_GE(forced[r], free[r]) << "the free choice is the cheapest allowed entry";
  }
  if (lines[0].find("algo Ring proto Simple") == std::string::npos) {
    EXPECT_GT(forced[0], free[0]) << "a different pair was chosen freely, so forcing Ring/Simple must cost more";
  }
}

TEST_F(Simulate, NothingRunsAndLaterCallsStillMatch) {
  Report report;
  CommSet set(kRanks, InitMode::kInitRank);
  ASSERT_TRUE(set.ok()) << set.error();
  // Only rank 0 simulates: had it advanced its operation counter or queued work, the real call below
  // would pair with the wrong operation on rank 1 and fail or hang.
  runPerRank(set, [&](int rank, ncclComm_t comm) {
    if (rank != 0) return;
    std::vector<float> buf(1024, 5.0f);
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    report.ok(ncclGroupStart(), "ncclGroupStart", comm);
    report.ok(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr), "ncclAllReduce",
              comm);
    report.ok(ncclGroupSimulateEnd(&info), "ncclGroupSimulateEnd", comm);
    for (float v : buf)
      if (v != 5.0f) return report.fail("rank 0: an in-place simulated AllReduce changed the buffer");
  }, report, "simulate on rank 0");
  realAllReduce(set, 1000, report);
  realAllReduce(set, 1 << 16, report);
  reportFailures(report);
}

TEST_F(Simulate, OneThreadDrivingEveryRankPredictsOneRanksTime) {
  Report report;
  std::vector<float> perRank;
  float together = std::nanf("");
  {
    CommSet set(kRanks, InitMode::kInitAll);
    ASSERT_TRUE(set.ok()) << set.error();
    perRank = simulate(set, {1 << 16}, report);
    // The ranks run concurrently: the group costs what one rank's share costs, not the sum over ranks.
    std::vector<std::vector<float>> bufs(kRanks, std::vector<float>(1 << 16, 2.0f));
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < kRanks; ++r)
      ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), bufs[r].size(), ncclFloat, ncclSum, set.comm(r), nullptr),
                ncclSuccess);
    ASSERT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess) << ncclGetLastError(nullptr);
    together = info.estimatedTime;
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(bufs[r][0], 2.0f) << "rank " << r << ": the simulated call ran";
  }
  reportFailures(report);
  EXPECT_FLOAT_EQ(together, perRank[0]);
}

TEST(SimulateArgs, BadSimInfoIsInvalidArgumentAndClosesTheGroup) {
  CommSet set(1, InitMode::kInitRank);
  ASSERT_TRUE(set.ok()) << set.error();
  ncclComm_t comm = set.comm(0);
  std::vector<float> buf(64, 1.0f);
  ncclSimInfo_t zeroed{};
  ncclSimInfo_t badMagic = NCCL_SIM_INFO_INITIALIZER;
  badMagic.magic = 0x12345678;
  ncclSimInfo_t tooSmall = NCCL_SIM_INFO_INITIALIZER;
  tooSmall.size = sizeof(size_t);
  struct Case {
    const char* what;
    ncclSimInfo_t* info;
    const char* message;
  } cases[] = {{"NULL", nullptr, "simInfo is NULL"},
               {"zeroed", &zeroed, "simInfo->size"},
               {"bad magic", &badMagic, "simInfo->magic"},
               {"too small", &tooSmall, "simInfo->size"}};
  for (const Case& c : cases) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclGroupSimulateEnd(c.info), ncclInvalidArgument) << c.what;
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find(c.message), std::string::npos)
        << c.what << ": " << ncclGetLastError(nullptr);
    // The group is closed: a further ncclGroupEnd has nothing to match.
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << c.what;
    EXPECT_EQ(buf[0], 1.0f) << c.what << ": the discarded task ran";
  }
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclInvalidUsage) << "outside a group";
  // An empty group predicts nothing.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess);
  EXPECT_EQ(info.estimatedTime, 0.0f);
  EXPECT_EQ(info.magic, 0x74685283u) << "the header must be left as the caller wrote it";
}

TEST(SimulateArgs, NestedGroupsPredictAtTheOutermostEnd) {
  CommSet set(1, InitMode::kInitRank);
  ASSERT_TRUE(set.ok()) << set.error();
  std::vector<float> buf(4096, 1.0f);
  ncclSimInfo_t inner = NCCL_SIM_INFO_INITIALIZER, outer = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, set.comm(0), nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(&inner), ncclSuccess);
  EXPECT_EQ(inner.estimatedTime, NCCL_UNDEF_FLOAT) << "an inner level only closes; NCCL leaves the struct alone";
  EXPECT_EQ(ncclGroupSimulateEnd(&outer), ncclSuccess);
  EXPECT_NE(outer.estimatedTime, NCCL_UNDEF_FLOAT);
  EXPECT_GE(outer.estimatedTime, 0.0f);
  EXPECT_EQ(buf[0], 1.0f) << "the simulated task ran";
}

}  // namespace
}  // namespace tutti::itest
