// Ranks driving their own network tasks (proxy.h): proxyProgressInline runs a task on the calling thread, the
// proxy thread leaves a driven task alone while its rank is awake, and takes it over when the rank hands it
// over (proxyRelease) or sleeps (proxyHandOffBegin / proxyHandOffEnd).
#include "proxy/proxy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace tutti {
namespace {

using Clock = std::chrono::steady_clock;

// A task with `left` units of work; each progress() call does one, on whichever thread calls it.
class CountingTask : public ProxyTask {
 public:
  explicit CountingTask(int left) : left_(left) {}
  ncclResult_t progress(bool* active) override {
    const bool mine = std::this_thread::get_id() == owner_;
    (mine ? byOwner_ : byOthers_).fetch_add(1);
    if (left_.load() > 0) {
      left_.fetch_sub(1);
      *active = true;
    }
    return ncclSuccess;
  }
  bool busy() const override { return left_.load() > 0; }
  int left() const { return left_.load(); }
  int byOwner() const { return byOwner_.load(); }
  int byOthers() const { return byOthers_.load(); }

 private:
  std::atomic<int> left_;
  std::atomic<int> byOwner_{0}, byOthers_{0};
  const std::thread::id owner_ = std::this_thread::get_id();
};

// Waits (up to 10 s) until the task has no work left.
bool drained(const CountingTask& t) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (t.left() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return t.left() == 0;
}

TEST(ProxyDrive, InlineProgressRunsOnTheCallingThread) {
  auto task = std::make_shared<CountingTask>(3);
  proxyAdd(task);
  EXPECT_FALSE(task->driven());
  proxyProgressInline(task.get());
  EXPECT_TRUE(task->driven());
  EXPECT_GE(task->byOwner(), 1);
  proxyProgressInline(task.get());
  proxyProgressInline(task.get());
  EXPECT_TRUE(drained(*task));
  proxyRemove(task.get());
}

TEST(ProxyDrive, ProxyLeavesADrivenTaskToItsRankUntilHandedOver) {
  auto task = std::make_shared<CountingTask>(1000000);
  proxyProgressInline(task.get());  // driven from now on (before the proxy thread knows it), and still busy
  proxyAdd(task);
  const int before = task->byOthers();
  // The proxy thread is awake (proxyAdd rang it) and sees a busy task: a driven one is not its to move.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(task->byOthers(), before) << "the proxy thread progressed a task its rank drives";
  // Released with work left: the proxy thread finishes it.
  proxyRelease(task.get());
  EXPECT_TRUE(drained(*task)) << task->left() << " units left";
  EXPECT_GT(task->byOthers(), before);
  EXPECT_FALSE(task->handedOver());  // cleared once the proxy found it idle
  proxyRemove(task.get());
}

TEST(ProxyDrive, ASleepingRankHandsItsWorkToTheProxy) {
  auto task = std::make_shared<CountingTask>(1000000);
  proxyProgressInline(task.get());
  ASSERT_TRUE(task->driven());
  proxyAdd(task);
  proxyHandOffBegin();  // as a wait does before it sleeps
  EXPECT_TRUE(drained(*task)) << task->left() << " units left";
  proxyHandOffEnd();
  EXPECT_GT(task->byOthers(), 0);
  proxyRemove(task.get());
}

// A task another thread is running is not run twice at once: tryRun refuses, and the caller is told so.
TEST(ProxyDrive, TryRunIsExclusive) {
  struct Blocking : ProxyTask {
    std::atomic<bool> inside{false}, release{false};
    ncclResult_t progress(bool*) override {
      inside = true;
      while (!release) std::this_thread::yield();
      return ncclSuccess;
    }
    bool busy() const override { return false; }
  } task;
  std::thread t([&] {
    bool active = false, busy = false;
    ncclResult_t res = ncclInternalError;
    EXPECT_TRUE(task.tryRun(&active, &busy, &res));
    EXPECT_EQ(res, ncclSuccess);
  });
  while (!task.inside) std::this_thread::yield();
  bool active = false, busy = false;
  ncclResult_t res = ncclSuccess;
  EXPECT_FALSE(task.tryRun(&active, &busy, &res));
  task.release = true;
  t.join();
  EXPECT_TRUE(task.tryRun(&active, &busy, &res));
}

// The race behind a rare hang of a 4-rank tree AllReduce over sockets: the proxy thread is inside a driven task
// (its rank had slept, so the proxy took the task over), the rank wakes, posts a step and finds the task taken
// (proxyProgressInline cannot run it). The proxy's run read the rank's counters before the post, so it leaves the
// step unsent; and with the rank awake it no longer runs a driven task. The rank then waited on another connection
// in the net plugin, which it may do while nothing of the process is in flight (an unsent step is not), and the
// step never left. A task found taken must be handed over, so the proxy thread runs it again.
TEST(ProxyDrive, WorkPostedWhileTheProxyRunsTheTaskIsNotLost) {
  // progress() sends what the rank had posted when it began (as a send end reads tail); on the proxy thread it can be
  // held inside, after that read, until the test lets it go.
  class GatedTask : public ProxyTask {
   public:
    ncclResult_t progress(bool* active) override {
      const int posted = posted_.load();
      if (std::this_thread::get_id() != owner_ && hold_.load()) {
        inside_ = true;
        while (hold_.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (sent_.load() < posted) {
        sent_.store(posted);
        *active = true;
      }
      return ncclSuccess;
    }
    bool busy() const override { return sent_.load() < posted_.load(); }
    std::atomic<int> posted_{0}, sent_{0};
    std::atomic<bool> hold_{false}, inside_{false};

   private:
    const std::thread::id owner_ = std::this_thread::get_id();
  };
  auto task = std::make_shared<GatedTask>();
  proxyProgressInline(task.get());  // driven by this thread
  proxyAdd(task);
  task->hold_ = true;
  proxyHandOffBegin();  // this rank sleeps: the proxy thread takes the task and is held inside it
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!task->inside_ && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(task->inside_) << "the proxy thread never ran the task of a sleeping rank";
  proxyHandOffEnd();  // awake again
  task->posted_ = 1;  // a step posted
  proxyProgressInline(task.get());  // the proxy thread is in the task: not run here
  EXPECT_EQ(task->sent_.load(), 0);
  task->hold_ = false;  // the proxy's run ends without the step (it read posted before the post)
  const auto sendBy = Clock::now() + std::chrono::seconds(5);
  while (task->sent_.load() < 1 && Clock::now() < sendBy) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(task->sent_.load(), 1) << "a step posted while the proxy thread ran the task was never sent";
  proxyRemove(task.get());
}

}  // namespace
}  // namespace tutti
