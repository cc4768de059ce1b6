// ncclCommAbort from another thread, ncclCommRevoke and ncclCommShrink, ranks as threads of one process.
// The "failed" rank is a rank that stops calling: the others wait on it inside a collective until
// another thread aborts, revokes or shrinks them out of it.
#include "rel_util.h"

#include <future>
#include <string>

namespace tutti::rtest {
namespace {

std::vector<ncclComm_t> initAll(int n) {
  std::vector<ncclComm_t> comms(n, nullptr);
  EXPECT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess);
  return comms;
}

// One AllReduce on every rank at once, so the connections exist (later waits are in the data path).
void allReduceEverywhere(const std::vector<ncclComm_t>& comms, size_t count) {
  std::vector<std::thread> threads;
  std::vector<ncclResult_t> res(comms.size(), ncclInternalError);
  for (size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] {
      std::vector<float> v(count, 1.0f);
      res[r] = ncclAllReduce(v.data(), v.data(), count, ncclFloat32, ncclSum, comms[r], nullptr);
      if (res[r] == ncclSuccess && v[count - 1] != static_cast<float>(comms.size())) res[r] = ncclInternalError;
    });
  for (auto& t : threads) t.join();
  for (size_t r = 0; r < comms.size(); ++r) ASSERT_EQ(res[r], ncclSuccess) << "rank " << r;
}

// Starts an AllReduce on comms[r] for each r in `ranks` on its own thread; they wait for the absent ranks.
struct Waiting {
  std::vector<std::future<ncclResult_t>> results;
  std::vector<std::chrono::steady_clock::time_point> returnedAt;
};
std::future<ncclResult_t> startAllReduce(ncclComm_t comm, size_t count,
                                         std::chrono::steady_clock::time_point* returnedAt) {
  return std::async(std::launch::async, [comm, count, returnedAt] {
    std::vector<float> v(count, 1.0f);
    const ncclResult_t res = ncclAllReduce(v.data(), v.data(), count, ncclFloat32, ncclSum, comm, nullptr);
    *returnedAt = std::chrono::steady_clock::now();
    return res;
  });
}

class AbortFromAnotherThread : public testing::TestWithParam<bool> {};

// Rank 1 never calls; rank 0's AllReduce waits (in the bootstrap while connecting when the connections
// do not exist yet, in the data path when they do) until the main thread aborts rank 0's communicator.
TEST_P(AbortFromAnotherThread, EndsTheWaitingCollectiveAndFrees) {
  const bool connected = GetParam();
  Watchdog dog(60);
  std::vector<ncclComm_t> comms = initAll(2);
  if (connected) allReduceEverywhere(comms, 50000);
  std::chrono::steady_clock::time_point returnedAt;
  auto waiting = startAllReduce(comms[0], 50000, &returnedAt);
  ASSERT_EQ(waiting.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "the AllReduce returned although rank 1 never called it";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(comms[0]), ncclSuccess);
  const double abortSeconds = secondsSince(t0);
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const ncclResult_t res = waiting.get();
  EXPECT_NE(res, ncclSuccess);
  const double unblocked = std::chrono::duration<double>(returnedAt - t0).count();
  std::printf("abort returned after %.3f s; the waiting AllReduce returned %s after %.3f s\n", abortSeconds,
              ncclGetErrorString(res), unblocked);
  EXPECT_LT(abortSeconds, 5.0);
  EXPECT_LT(unblocked, 5.0);
  // The other rank's communicator is still whole and can be aborted (or destroyed) normally.
  EXPECT_EQ(ncclCommAbort(comms[1]), ncclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Rel, AbortFromAnotherThread, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "InDataPath" : "WhileConnecting");
                         });

TEST(Revoke, StopsOperationsAndLeavesOnlyManagementCalls) {
  Watchdog dog(60);
  std::vector<ncclComm_t> comms = initAll(3);
  allReduceEverywhere(comms, 4099);
  // Ranks 0 and 1 wait on rank 2, which never calls.
  std::chrono::steady_clock::time_point at0, at1;
  auto w0 = startAllReduce(comms[0], 4099, &at0);
  auto w1 = startAllReduce(comms[1], 4099, &at1);
  ASSERT_EQ(w0.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT), ncclSuccess);
  EXPECT_EQ(ncclCommRevoke(comms[1], NCCL_REVOKE_DEFAULT), ncclSuccess);
  ASSERT_EQ(w0.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  ASSERT_EQ(w1.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_NE(w0.get(), ncclSuccess);
  EXPECT_NE(w1.get(), ncclSuccess);
  EXPECT_LT(secondsSince(t0), 5.0);
  ncclResult_t state = ncclInternalError;
  EXPECT_EQ(ncclCommGetAsyncError(comms[0], &state), ncclSuccess);
  EXPECT_EQ(state, ncclSuccess) << "a revoked communicator reports ncclSuccess once quiescent";
  float x = 1;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comms[0], nullptr), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("revoked"), std::string::npos) << ncclGetLastError(comms[0]);
  EXPECT_EQ(ncclCommFinalize(comms[0]), ncclInvalidUsage);
  EXPECT_EQ(ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT), ncclInvalidArgument);  // twice
  EXPECT_EQ(ncclCommRevoke(comms[2], 1), ncclInvalidArgument);                    // bad flags
  EXPECT_EQ(ncclCommRevoke(nullptr, NCCL_REVOKE_DEFAULT), ncclSuccess);

  // Survivors shrink the revoked communicator (the bootstrap survived the revoke) and go on without rank 2.
  int exclude[] = {2};
  std::vector<ncclComm_t> small(2, nullptr);
  std::vector<ncclResult_t> sres(2, ncclInternalError);
  std::thread s0([&] { sres[0] = ncclCommShrink(comms[0], exclude, 1, &small[0], nullptr, NCCL_SHRINK_DEFAULT); });
  std::thread s1([&] { sres[1] = ncclCommShrink(comms[1], exclude, 1, &small[1], nullptr, NCCL_SHRINK_DEFAULT); });
  s0.join();
  s1.join();
  ASSERT_EQ(sres[0], ncclSuccess) << ncclGetLastError(comms[0]);
  ASSERT_EQ(sres[1], ncclSuccess) << ncclGetLastError(comms[1]);
  allReduceEverywhere(small, 10007);
  for (ncclComm_t c : small) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// NCCL_SHRINK_ABORT: the survivors' own collectives are still waiting on the lost rank when they shrink.
TEST(Shrink, AbortFlagEndsWaitingOperationsAndTheSurvivorsGoOn) {
  Watchdog dog(60);
  std::vector<ncclComm_t> comms = initAll(4);
  allReduceEverywhere(comms, 70001);
  std::vector<std::chrono::steady_clock::time_point> at(3);
  std::vector<std::future<ncclResult_t>> waiting;
  for (int r = 0; r < 3; ++r) waiting.push_back(startAllReduce(comms[r], 70001, &at[r]));
  ASSERT_EQ(waiting[0].wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  int exclude[] = {3};
  std::vector<ncclComm_t> small(3, nullptr);
  std::vector<ncclResult_t> sres(3, ncclInternalError);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      sres[r] = ncclCommShrink(comms[r], exclude, 1, &small[r], nullptr, NCCL_SHRINK_ABORT);
    });
  for (auto& t : threads) t.join();
  std::printf("shrink with NCCL_SHRINK_ABORT took %.3f s\n", secondsSince(t0));
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(waiting[r].wait_for(std::chrono::seconds(5)), std::future_status::ready);
    EXPECT_NE(waiting[r].get(), ncclSuccess);
    ASSERT_EQ(sres[r], ncclSuccess) << "rank " << r << ": " << ncclGetLastError(comms[r]);
    int count = 0, rank = -1;
    ASSERT_EQ(ncclCommCount(small[r], &count), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(small[r], &rank), ncclSuccess);
    EXPECT_EQ(count, 3);
    EXPECT_EQ(rank, r);
  }
  allReduceEverywhere(small, 70001);
  for (ncclComm_t c : small) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommAbort(c), ncclSuccess);
}

TEST(Shrink, BadArgumentsAreRejected) {
  Watchdog dog(60);
  std::vector<ncclComm_t> comms = initAll(2);
  ncclComm_t out = reinterpret_cast<ncclComm_t>(0x1);
  int self[] = {0}, outOfRange[] = {2}, negative[] = {-1}, twice[] = {1, 1};
  EXPECT_EQ(ncclCommShrink(comms[0], self, 1, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("excludes itself"), std::string::npos);
  EXPECT_EQ(ncclCommShrink(comms[0], outOfRange, 1, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms[0], negative, 1, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms[0], twice, 2, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms[0], nullptr, 1, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms[0], outOfRange, -1, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms[0], outOfRange, 0, nullptr, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms[0], outOfRange, 0, &out, nullptr, 7), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(nullptr, outOfRange, 0, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  // Nothing above touched the communicators: they still work.
  allReduceEverywhere(comms, 33);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

}  // namespace
}  // namespace tutti::rtest
