// Host streams (tutti.h): calls on a stream return at once and run in order; synchronize waits for them
// and reports their first error; query tells pending from done; a stream that is not one of ours is
// rejected.
#include <nccl.h>
#include <tutti.h>

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace {

TEST(HostStreams, AsyncAllReduceCompletesInOrderOnSynchronize) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1 << 16;
  std::vector<ncclComm_t> comms(kRanks);
  ASSERT_EQ(ncclCommInitAll(comms.data(), kRanks, nullptr), ncclSuccess);
  std::vector<cudaStream_t> streams(kRanks);
  for (auto& s : streams) ASSERT_EQ(tuttiStreamCreate(&s), ncclSuccess);
  std::vector<std::vector<float>> bufs(kRanks, std::vector<float>(kCount));
  for (int r = 0; r < kRanks; ++r)
    for (size_t i = 0; i < kCount; ++i) bufs[r][i] = static_cast<float>(r + 1);
  // Two dependent AllReduces per rank: the second must see the first's result (in-order execution).
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), kCount, ncclFloat, ncclSum, comms[r], streams[r]),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), kCount, ncclFloat, ncclSum, comms[r], streams[r]),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (auto s : streams) {
    ASSERT_EQ(tuttiStreamSynchronize(s), ncclSuccess);
    EXPECT_EQ(tuttiStreamQuery(s), ncclSuccess);
  }
  // (1+2+3) summed, then that sum summed over 3 ranks.
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(bufs[r][0], 18.0f) << "rank " << r;
    EXPECT_EQ(bufs[r][kCount - 1], 18.0f) << "rank " << r;
  }
  for (auto s : streams) EXPECT_EQ(tuttiStreamDestroy(s), ncclSuccess);
  for (auto c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(HostStreams, QueryReportsPendingWorkUntilPeersArrive) {
  std::vector<ncclComm_t> comms(2);
  ASSERT_EQ(ncclCommInitAll(comms.data(), 2, nullptr), ncclSuccess);
  cudaStream_t s0;
  ASSERT_EQ(tuttiStreamCreate(&s0), ncclSuccess);
  std::vector<int> a(16, 1), b(16, 2);
  // Connections are set up by the first call, which needs both ranks at once (as in NCCL): do it in a group.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  std::vector<std::vector<int>> warm(2, std::vector<int>(4, 1));
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclAllReduce(warm[r].data(), warm[r].data(), 4, ncclInt32, ncclSum, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  // Rank 0 enqueues alone: its AllReduce cannot finish before rank 1 joins.
  ASSERT_EQ(ncclAllReduce(a.data(), a.data(), a.size(), ncclInt32, ncclSum, comms[0], s0), ncclSuccess);
  EXPECT_EQ(tuttiStreamQuery(s0), ncclInProgress);
  ASSERT_EQ(ncclAllReduce(b.data(), b.data(), b.size(), ncclInt32, ncclSum, comms[1], nullptr), ncclSuccess);
  ASSERT_EQ(tuttiStreamSynchronize(s0), ncclSuccess);
  EXPECT_EQ(a[0], 3);
  EXPECT_EQ(b[15], 3);
  EXPECT_EQ(tuttiStreamDestroy(s0), ncclSuccess);
  for (auto c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(HostStreams, ForeignStreamsAreRejectedWithAMessage) {
  ncclComm_t comm;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess);
  int x = 1;
  int bogus = 0;
  auto notOurs = reinterpret_cast<cudaStream_t>(&bogus);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, notOurs), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("host stream"), std::string::npos) << ncclGetLastError(comm);
  EXPECT_EQ(tuttiStreamSynchronize(notOurs), ncclInvalidArgument);
  EXPECT_EQ(tuttiStreamQuery(notOurs), ncclInvalidArgument);
  EXPECT_EQ(tuttiStreamDestroy(notOurs), ncclInvalidArgument);
  EXPECT_EQ(tuttiStreamCreate(nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
