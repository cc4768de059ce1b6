// TUTTI_CHECK_CALLS with ranks as threads of one process: one thread per rank, and one thread driving every
// rank inside one group (the check of the communicators then runs concurrently).
#include "harness.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tutti::itest {
namespace {

constexpr int kRanks = 3;
constexpr size_t kCount = 1000;

TEST(CallCheckThreads, MatchingCallsWorkOneThreadPerRank) {
  ScopedEnv check("TUTTI_CHECK_CALLS", "1");
  CommSet set(kRanks, InitMode::kInitRank);
  ASSERT_TRUE(set.ok()) << set.error();
  Report report;
  runPerRank(set, [&](int rank, ncclComm_t comm) {
    std::vector<float> buf(kCount, static_cast<float>(rank + 1));
    for (int it = 0; it < 3; ++it) {
      std::fill(buf.begin(), buf.end(), static_cast<float>(rank + 1));
      if (!report.ok(ncclAllReduce(buf.data(), buf.data(), kCount, ncclFloat32, ncclSum, comm, nullptr),
                     "AllReduce", comm))
        return;
      if (buf[0] != 6.0f || buf[kCount - 1] != 6.0f) report.fail("rank " + std::to_string(rank) + ": wrong sum");
    }
  }, report, "AllReduce x3", 60);
  reportFailures(report);
}

// One thread issues every rank's AllReduce in one group; rank 1 passes another count. The group must fail
// with ncclInvalidUsage (every communicator's check fails) instead of hanging.
TEST(CallCheckThreads, MismatchInOneGroupDrivingEveryRank) {
  ScopedEnv check("TUTTI_CHECK_CALLS", "1");
  CommSet set(kRanks, InitMode::kInitAll);
  ASSERT_TRUE(set.ok()) << set.error();
  std::vector<std::vector<float>> bufs(kRanks, std::vector<float>(kCount, 1.0f));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), r == 1 ? kCount - 1 : kCount, ncclFloat32, ncclSum,
                            set.comm(r), nullptr),
              ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  const std::string text = ncclGetLastError(nullptr);
  EXPECT_NE(text.find("rank 0 called AllReduce count 1000 float32 sum, rank 1 called AllReduce count 999 float32 "
                      "sum"), std::string::npos) << text;
  for (int r = 0; r < kRanks; ++r) {
    ncclResult_t async = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(set.comm(r), &async), ncclSuccess);
    EXPECT_EQ(async, ncclInvalidUsage) << "rank " << r;
  }
}

}  // namespace
}  // namespace tutti::itest
