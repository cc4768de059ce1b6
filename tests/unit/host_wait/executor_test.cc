// runConcurrently: a lone item runs on the calling thread; several run at once (they may wait on each
// other); the first error in time is the one returned; an escaping exception becomes ncclInternalError.
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

TEST(RunConcurrently, FirstErrorInTimeWins) {
  std::atomic<bool> firstFailed{false};
  std::vector<WorkItem> items;
  items.push_back([&] {
    firstFailed.store(true);
    return ncclSystemError;
  });
  items.push_back([&] {
    while (!firstFailed.load()) std::this_thread::yield();
    return ncclRemoteError;  // a consequence of the first failure
  });
  EXPECT_EQ(runConcurrently(items), ncclSystemError);
}

}  // namespace
