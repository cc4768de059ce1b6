// runConcurrently: a lone item runs on the calling thread; several run at once (they may wait on each
// other); the first error reported is the one returned; an escaping exception becomes ncclInternalError.
#include "device/host/executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace tutti::host;

namespace {

TEST(RunConcurrently, EmptyIsSuccess) {
  std::vector<WorkItem> items;
  EXPECT_EQ(runConcurrently(items), ncclSuccess);
}

TEST(RunConcurrently, LoneItemRunsOnTheCallingThread) {
  const auto self = std::this_thread::get_id();
  std::thread::id ran;
  std::vector<WorkItem> items;
  items.push_back([&] {
    ran = std::this_thread::get_id();
    return ncclSuccess;
  });
  EXPECT_EQ(runConcurrently(items), ncclSuccess);
  EXPECT_EQ(ran, self);
}

TEST(RunConcurrently, LoneItemErrorAndException) {
  std::vector<WorkItem> items;
  items.push_back([] { return ncclRemoteError; });
  EXPECT_EQ(runConcurrently(items), ncclRemoteError);
  items.clear();
  items.push_back([]() -> ncclResult_t { throw std::runtime_error("boom"); });
  EXPECT_EQ(runConcurrently(items), ncclInternalError);
}

TEST(RunConcurrently, ItemsThatWaitOnEachOtherAllRun) {
  // Each item waits until all have started: this only ends if every item has a thread at once.
  constexpr int kItems = 6;
  std::atomic<int> started{0};
  std::vector<WorkItem> items;
  for (int i = 0; i < kItems; ++i) {
    items.push_back([&] {
      started.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (started.load() < kItems) {
        if (std::chrono::steady_clock::now() > deadline) return ncclInternalError;
        std::this_thread::yield();
      }
      return ncclSuccess;
    });
  }
  EXPECT_EQ(runConcurrently(items), ncclSuccess);
  EXPECT_EQ(started.load(), kItems);
}

TEST(WorkGroup, FirstReportedErrorWins) {
  // The items of one launch fail in a chain: one cause, then its consequences on the other channels. The
  // group keeps the error reported first, whatever the others say after it.
  WorkGroup group;
  group.add(3);
  EXPECT_FALSE(group.finished());
  group.done(ncclSuccess);
  group.done(ncclSystemError);
  EXPECT_FALSE(group.finished());
  group.done(ncclRemoteError);
  EXPECT_TRUE(group.finished());
  EXPECT_EQ(group.wait(), ncclSystemError);
}

TEST(RunConcurrently, AnErrorOnEitherSideIsReturned) {
  // The error of an executor item and that of the item run on the calling thread both reach the caller.
  for (int failing = 0; failing < 2; ++failing) {
    std::atomic<int> ran{0};
    std::vector<WorkItem> items;
    for (int i = 0; i < 2; ++i)
      items.push_back([&ran, i, failing] {
        ran.fetch_add(1);
        return i == failing ? ncclSystemError : ncclSuccess;
      });
    EXPECT_EQ(runConcurrently(items), ncclSystemError) << "item " << failing << " fails";
    EXPECT_EQ(ran.load(), 2);
  }
}

}  // namespace
