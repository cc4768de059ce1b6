// Helpers for bootstrap tests: ranks as threads of this process.
#pragma once

#include "bootstrap/bootstrap.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace tutti::test {

using Id = std::array<char, 128>;

inline Id newId() {
  Id id{};
  EXPECT_EQ(bootstrapGetUniqueId(id.data()), ncclSuccess);
  return id;
}

// Runs `body(rank, bootstrap)` on nRanks threads after each joined `id`; returns each rank's create()
// result (the body runs only where create succeeded).
inline std::vector<ncclResult_t> runRanks(const Id& id, int nRanks,
                                          const std::function<void(int, Bootstrap&)>& body,
                                          const std::vector<int>& skip = {}) {
  std::vector<ncclResult_t> res(nRanks, ncclInternalError);
  std::vector<std::thread> threads;
  for (int r = 0; r < nRanks; ++r) {
    if (std::find(skip.begin(), skip.end(), r) != skip.end()) continue;
    threads.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> b;
      res[r] = Bootstrap::create(id.data(), r, nRanks, &b);
      if (res[r] == ncclSuccess) {
        EXPECT_EQ(b->rank(), r);
        EXPECT_EQ(b->nRanks(), nRanks);
        body(r, *b);
      } else {
        EXPECT_EQ(b, nullptr);
      }
    });
  }
  for (auto& t : threads) t.join();
  return res;
}

// Root threads exit shortly after serving; waits up to `ms` for them to be gone.
inline bool rootThreadsGone(int ms = 5000) {
  for (int i = 0; i < ms / 10; ++i) {
    if (bootstrapRootThreadsRunning() == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace tutti::test
