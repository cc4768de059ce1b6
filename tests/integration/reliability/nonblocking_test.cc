// Nonblocking communicators (config.blocking = 0), driven from ONE thread: every call that would wait for
// the other ranks returns ncclInProgress instead, and ncclCommGetAsyncError reports when it is done. With
// blocking calls the same sequence from one thread would deadlock, so passing shows the calls did not wait.
#include "rel_util.h"

#include <cstring>
#include <numeric>
#include <string>

namespace tutti::rtest {
namespace {

constexpr int kRanks = 4;

// Inits kRanks nonblocking communicators from the calling thread, one call per rank, no group.
std::vector<ncclComm_t> initNonblocking(int nRanks) {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclComm_t> comms(nRanks, nullptr);
  ncclConfig_t config = nonblockingConfig();
  for (int r = 0; r < nRanks; ++r) {
    const ncclResult_t res = ncclCommInitRankConfig(&comms[r], nRanks, id, r, &config);
    EXPECT_TRUE(res == ncclInProgress || res == ncclSuccess) << "rank " << r << ": " << ncclGetErrorString(res);
    EXPECT_NE(comms[r], nullptr) << "a nonblocking init must hand out the communicator at once";
  }
  return comms;
}

TEST(Nonblocking, InitFromOneThreadReturnsInProgressThenSucceeds) {
  Watchdog dog(60);
  std::vector<ncclComm_t> comms = initNonblocking(kRanks);
  // Rank 0 cannot have finished: ranks 1..3 were not even started when its call returned.
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(waitAsync(comms[r]), ncclSuccess) << "rank " << r;
  int count = 0, rank = -1;
  EXPECT_EQ(ncclCommCount(comms[2], &count), ncclSuccess);
  EXPECT_EQ(ncclCommUserRank(comms[2], &rank), ncclSuccess);
  EXPECT_EQ(count, kRanks);
  EXPECT_EQ(rank, 2);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(Nonblocking, CallsBeforeInitEndsAreRefusedNotCrashing) {
  Watchdog dog(60);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = nonblockingConfig();
  ncclComm_t comm = nullptr;
  // Two ranks, only one ever joins: the init stays in progress.
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 2, id, 0, &config), ncclInProgress);
  ASSERT_NE(comm, nullptr);
  ncclResult_t state = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
  EXPECT_EQ(state, ncclInProgress);
  float x = 1;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("still initializing"), std::string::npos)
      << ncclGetLastError(comm);
  int count = 0;
  EXPECT_EQ(ncclCommCount(comm, &count), ncclInvalidArgument);
  ncclRedOp_t op;
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, &x, ncclFloat32, ncclScalarHostImmediate, comm), ncclInvalidArgument);
  // Abort ends the rendezvous wait at once (the bootstrap timeout is minutes).
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_LT(secondsSince(t0), 5.0);
}

TEST(Nonblocking, CollectivesFromOneThreadRunInTheBackground) {
  Watchdog dog(60);
  std::vector<ncclComm_t> comms = initNonblocking(kRanks);
  for (ncclComm_t c : comms) ASSERT_EQ(waitAsync(c), ncclSuccess);
  constexpr size_t kCount = 100003;  // several slots and channels
  std::vector<std::vector<int32_t>> bufs(kRanks);
  for (int round = 0; round < 3; ++round) {
    for (int r = 0; r < kRanks; ++r) {
      bufs[r].assign(kCount, 0);
      for (size_t i = 0; i < kCount; ++i) bufs[r][i] = static_cast<int32_t>((i % 97) + r + round);
      // Would block forever waiting for rank r+1 if it were a blocking call.
      const ncclResult_t res =
          ncclAllReduce(bufs[r].data(), bufs[r].data(), kCount, ncclInt32, ncclSum, comms[r], nullptr);
      ASSERT_TRUE(res == ncclInProgress || res == ncclSuccess) << ncclGetErrorString(res);
    }
    // A second call while the first is running is refused, as in NCCL.
    int32_t one = 1;
    ncclResult_t state = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comms[0], &state), ncclSuccess);
    if (state == ncclInProgress) {
      EXPECT_EQ(ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, comms[0], nullptr), ncclInvalidArgument);
    }
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(waitAsync(comms[r]), ncclSuccess) << "rank " << r;
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount; i += 997) {
        const int32_t want = static_cast<int32_t>(kRanks * ((i % 97) + round) + (0 + 1 + 2 + 3));
        ASSERT_EQ(bufs[r][i], want) << "round " << round << " rank " << r << " index " << i;
      }
  }
  // A grouped pair of collectives on every communicator, still from one thread.
  std::vector<int64_t> a(kRanks * 8), b(kRanks * 8 * kRanks);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < 8; ++i) a[r * 8 + i] = r * 100 + i;
    ASSERT_EQ(ncclAllGather(&a[r * 8], &b[r * 8 * kRanks], 8, ncclInt64, comms[r], nullptr), ncclSuccess);
  }
  const ncclResult_t end = ncclGroupEnd();
  ASSERT_TRUE(end == ncclInProgress || end == ncclSuccess) << ncclGetErrorString(end);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(waitAsync(comms[r]), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    for (int q = 0; q < kRanks; ++q)
      for (int i = 0; i < 8; ++i) ASSERT_EQ(b[r * 8 * kRanks + q * 8 + i], q * 100 + i);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(Nonblocking, SplitFromOneThread) {
  Watchdog dog(60);
  std::vector<ncclComm_t> comms = initNonblocking(kRanks);
  for (ncclComm_t c : comms) ASSERT_EQ(waitAsync(c), ncclSuccess);
  // Even ranks form one communicator, odd ranks another; rank 3 stays out.
  std::vector<ncclComm_t> children(kRanks, nullptr);
  for (int r = 0; r < kRanks; ++r) {
    const int color = r == 3 ? NCCL_SPLIT_NOCOLOR : r % 2;
    const ncclResult_t res = ncclCommSplit(comms[r], color, -r, &children[r], nullptr);
    ASSERT_TRUE(res == ncclInProgress || res == ncclSuccess) << ncclGetErrorString(res);
  }
  EXPECT_EQ(children[3], nullptr);
  EXPECT_EQ(waitAsync(comms[3]), ncclSuccess);  // its part of the exchange ran in the background
  for (int r = 0; r < 3; ++r) {
    ASSERT_NE(children[r], nullptr);
    ASSERT_EQ(waitAsync(children[r]), ncclSuccess) << "rank " << r;
  }
  int rank = -1, count = 0;
  ASSERT_EQ(ncclCommUserRank(children[0], &rank), ncclSuccess);
  ASSERT_EQ(ncclCommCount(children[0], &count), ncclSuccess);
  EXPECT_EQ(count, 2);
  EXPECT_EQ(rank, 1);  // key -r: rank 2 comes first
  std::vector<float> v = {1.5f, 2.5f, 3.0f};
  for (int r : {0, 2}) ASSERT_NE(ncclAllReduce(v.data(), v.data(), 0, ncclFloat32, ncclSum, children[r], nullptr),
                                 ncclInvalidArgument);
  for (int r : {0, 2}) ASSERT_EQ(waitAsync(children[r]), ncclSuccess);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ncclCommDestroy(children[r]), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

}  // namespace
}  // namespace tutti::rtest
