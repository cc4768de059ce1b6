// Small helpers of the reliability tests: one unique id for a set of ranks driven by threads, polling
// ncclCommGetAsyncError with a deadline, and a watchdog that turns a hang into a failed test.
#pragma once

#include <nccl.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

namespace tutti::rtest {

inline double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Polls until the communicator's state is no longer ncclInProgress, or `limitSeconds` passed (then
// returns ncclInProgress).
inline ncclResult_t waitAsync(ncclComm_t comm, double limitSeconds = 30) {
  const auto t0 = std::chrono::steady_clock::now();
  ncclResult_t state = ncclInProgress;
  while (secondsSince(t0) < limitSeconds) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state != ncclInProgress) return state;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return ncclInProgress;
}

// Kills the test process if the scope lasts longer than `seconds`: a hang must fail, not stall CI.
class Watchdog {
 public:
  explicit Watchdog(int seconds) {
    thread_ = std::thread([this, seconds] {
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
      while (!done_.load() && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!done_.load()) {
        std::fprintf(stderr, "watchdog: the test hung for %d s\n", seconds);
        std::_Exit(3);
      }
    });
  }
  ~Watchdog() {
    done_.store(true);
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

inline ncclConfig_t nonblockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

}  // namespace tutti::rtest
