// Waits on a connection counter: ready at once, woken by a publisher while spinning and while asleep,
// and ended by abort, a closed peer or a timeout in both phases (spinning with yields, then sleeping).
#include "device/host/wait.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace tutti::host;

namespace {

struct Counter {
  uint64_t value = 0;
  uint32_t waiters = 0;
  uint32_t seq = 0;
  uint32_t closed = 0;
  WaitStatus wait(uint64_t target, const WaitContext& ctx) {
    return waitAtLeast(&value, &waiters, &seq, &closed, target, ctx);
  }
};

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Spin budgets as commInitRank picks them: ranks fit the cores, ranks outnumber the cores, and none.
class WaitTest : public ::testing::TestWithParam<int> {};

TEST_P(WaitTest, ReadyWhenAlreadyThere) {
  Counter c;
  c.value = 5;
  WaitContext ctx;
  ctx.spinCount = GetParam();
  EXPECT_EQ(c.wait(5, ctx), WaitStatus::Ready);
  EXPECT_EQ(c.wait(3, ctx), WaitStatus::Ready);
}

TEST_P(WaitTest, WokenByPublish) {
  for (int delayUs : {0, 50, 20000}) {  // during the spin, and (for short budgets) after the waiter slept
    Counter c;
    WaitContext ctx;
    ctx.spinCount = GetParam();
    std::thread publisher([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(delayUs));
      publish(&c.value, &c.waiters, &c.seq, 1, false);
    });
    EXPECT_EQ(c.wait(1, ctx), WaitStatus::Ready) << "delay " << delayUs << " us";
    publisher.join();
    EXPECT_EQ(c.waiters, 0u);
  }
}

TEST_P(WaitTest, AbortEndsTheWait) {
  Counter c;
  std::atomic<bool> abort{false};
  WaitContext ctx;
  ctx.spinCount = GetParam();
  ctx.abortFlag = &abort;
  const auto t0 = Clock::now();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    abort.store(true);
  });
  EXPECT_EQ(c.wait(1, ctx), WaitStatus::Aborted);
  aborter.join();
  EXPECT_LT(secondsSince(t0), 2.0);
}

TEST_P(WaitTest, ClosedPeerEndsTheWaitUnlessTheDataIsThere) {
  Counter c;
  WaitContext ctx;
  ctx.spinCount = GetParam();
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::atomic_ref<uint32_t>(c.closed).store(1);
  });
  EXPECT_EQ(c.wait(1, ctx), WaitStatus::PeerClosed);
  closer.join();
  // Data published before the close still counts.
  c.value = 1;
  EXPECT_EQ(c.wait(1, ctx), WaitStatus::Ready);
}

TEST_P(WaitTest, TimesOut) {
  Counter c;
  WaitContext ctx;
  ctx.spinCount = GetParam();
  ctx.timeoutNs = 20 * 1000 * 1000;
  const auto t0 = Clock::now();
  EXPECT_EQ(c.wait(1, ctx), WaitStatus::TimedOut);
  const double s = secondsSince(t0);
  EXPECT_GE(s, 0.015);
  EXPECT_LT(s, 5.0);
}

INSTANTIATE_TEST_SUITE_P(SpinBudgets, WaitTest, ::testing::Values(20000, 1000, 1, 0),
                         [](const ::testing::TestParamInfo<int>& p) { return "spin" + std::to_string(p.param); });

// Two threads pass a token back and forth through two counters, as two ranks exchange steps, with more
// threads than this test can assume cores for when the budget is short: every hand-off must complete.
TEST(WaitPingPong, ManyRoundsWithShortAndLongBudgets) {
  for (int spin : {20000, 1000, 0}) {
    Counter ab, ba;
    WaitContext ctx;
    ctx.spinCount = spin;
    constexpr uint64_t kRounds = 2000;
    std::thread peer([&] {
      for (uint64_t i = 1; i <= kRounds; ++i) {
        ASSERT_EQ(ab.wait(i, ctx), WaitStatus::Ready);
        publish(&ba.value, &ba.waiters, &ba.seq, i, false);
      }
    });
    for (uint64_t i = 1; i <= kRounds; ++i) {
      publish(&ab.value, &ab.waiters, &ab.seq, i, false);
      ASSERT_EQ(ba.wait(i, ctx), WaitStatus::Ready) << "spin " << spin << " round " << i;
    }
    peer.join();
    EXPECT_EQ(ba.value, kRounds);
  }
}

}  // namespace
