// Growing a communicator as NCCL 2.30 describes it: the coordinator (an existing rank) makes a grow id with
// ncclCommGetUniqueId and hands it to the joining ranks; existing ranks call ncclCommGrow(comm, n, id or
// NULL, -1) and keep their ranks, joining ranks call ncclCommGrow(NULL, n, &id, rank). Ranks are threads.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

// Runs fn(i) on one thread each and returns the results.
std::vector<ncclResult_t> onThreads(int n, const std::function<ncclResult_t(int)>& fn) {
  std::vector<ncclResult_t> res(n, ncclInternalError);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { res[i] = fn(i); });
  for (auto& t : threads) t.join();
  return res;
}

// An AllReduce of each rank's (rank + 1) on every rank of `comms`: every rank must see n(n+1)/2.
void expectAllReduceWorks(const std::vector<ncclComm_t>& comms) {
  const int n = static_cast<int>(comms.size());
  std::vector<std::vector<int>> bufs(n, std::vector<int>(1000));
  auto res = onThreads(n, [&](int r) {
    std::fill(bufs[r].begin(), bufs[r].end(), r + 1);
    return ncclAllReduce(bufs[r].data(), bufs[r].data(), bufs[r].size(), ncclInt32, ncclSum, comms[r], nullptr);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[r], ncclSuccess) << "rank " << r << ": " << ncclGetLastError(comms[r]);
    for (int v : bufs[r]) ASSERT_EQ(v, n * (n + 1) / 2) << "rank " << r;
  }
}

class Grow : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(Grow, ExistingRanksKeepTheirRanksAndJoiningRanksFillTheRest) {
  const auto [before, after] = GetParam();
  std::vector<ncclComm_t> parent(before);
  ASSERT_EQ(ncclCommInitAll(parent.data(), before, nullptr), ncclSuccess);
  const int coordinator = before - 1;  // any existing rank may coordinate
  ncclUniqueId id;
  ASSERT_EQ(ncclCommGetUniqueId(parent[coordinator], &id), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<ncclComm_t> grown(after, nullptr);
  auto res = onThreads(after, [&](int r) {
    if (r < before) return ncclCommGrow(parent[r], after, r == coordinator ? &id : nullptr, -1, &grown[r], nullptr);
    return ncclCommGrow(nullptr, after, &id, r, &grown[r], nullptr);
  });
  for (int r = 0; r < after; ++r) ASSERT_EQ(res[r], ncclSuccess) << "rank " << r << ": " << ncclGetLastError(nullptr);
  for (int r = 0; r < after; ++r) {
    int rank = -1, count = -1;
    ASSERT_EQ(ncclCommUserRank(grown[r], &rank), ncclSuccess);
    ASSERT_EQ(ncclCommCount(grown[r], &count), ncclSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(count, after);
  }
  expectAllReduceWorks(grown);
  // The parent still works until destroyed, and a new grow needs a new id (the old one was consumed).
  expectAllReduceWorks(parent);
  ncclUniqueId again;
  EXPECT_EQ(ncclCommGetUniqueId(parent[coordinator], &again), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_NE(std::memcmp(&again, &id, sizeof id), 0);
  for (ncclComm_t c : grown) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  for (ncclComm_t c : parent) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Sizes, Grow,
                         ::testing::Values(std::make_pair(1, 2), std::make_pair(2, 4), std::make_pair(3, 4),
                                           std::make_pair(2, 5)));

TEST(GrowErrors, MisuseIsRefusedWithAMessage) {
  constexpr int n = 2;
  std::vector<ncclComm_t> parent(n);
  ASSERT_EQ(ncclCommInitAll(parent.data(), n, nullptr), ncclSuccess);
  ncclUniqueId id;
  ASSERT_EQ(ncclCommGetUniqueId(parent[0], &id), ncclSuccess);
  ncclUniqueId second;
  EXPECT_EQ(ncclCommGetUniqueId(parent[0], &second), ncclInvalidUsage) << "the first id is not consumed yet";
  ncclComm_t out = nullptr;
  // A joining rank asking for a parent rank, or past the new size; an id that is not a grow id.
  EXPECT_EQ(ncclCommGrow(nullptr, 4, &id, 1, &out, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("[2, 4)"), std::string::npos) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommGrow(nullptr, 4, &id, 4, &out, nullptr), ncclInvalidArgument);
  ncclUniqueId plain;
  ASSERT_EQ(ncclGetUniqueId(&plain), ncclSuccess);
  EXPECT_EQ(ncclCommGrow(nullptr, 4, &plain, 3, &out, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommGrow(nullptr, 4, nullptr, 3, &out, nullptr), ncclInvalidArgument);
  // Existing ranks: a rank other than -1, a size that does not grow, an id that is not this rank's.
  EXPECT_EQ(ncclCommGrow(parent[0], 4, &id, 0, &out, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommGrow(parent[0], 2, &id, -1, &out, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommGrow(parent[1], 4, &id, -1, &out, nullptr), ncclInvalidArgument);
  EXPECT_EQ(out, nullptr);
  // Two coordinators: both existing ranks pass an id (rank 1's own): both are told, nothing is created.
  ncclUniqueId other;
  ASSERT_EQ(ncclCommGetUniqueId(parent[1], &other), ncclSuccess);
  std::vector<ncclComm_t> grown(n, nullptr);
  auto res = onThreads(n, [&](int r) { return ncclCommGrow(parent[r], 3, r == 0 ? &id : &other, -1, &grown[r], nullptr); });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(res[r], ncclInvalidUsage);
    EXPECT_EQ(grown[r], nullptr);
  }
  // Nothing was lost: the parent works.
  expectAllReduceWorks(parent);
  for (ncclComm_t c : parent) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

}  // namespace
