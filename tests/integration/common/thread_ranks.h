// Helpers of tests that reduce floating data on ranks as threads and check every element's bits.
#pragma once

#include <nccl.h>

#include "device/common/dtypes.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace tutti::itest {

// One communicator of n ranks, one thread per rank: setup(comm, rank) (when given) then body(comm, rank), which
// return "" or what failed. One line per failed rank.
inline std::vector<std::string> onThreadRanks(int n, const std::function<std::string(ncclComm_t, int)>& body,
                                              const std::function<std::string(ncclComm_t, int)>& setup = {}) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return {"ncclGetUniqueId failed"};
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess) {
        errors[r] = std::string("init: ") + ncclGetLastError(nullptr);
        return;
      }
      if (setup) errors[r] = setup(comm, r);
      if (errors[r].empty()) errors[r] = body(comm, r);
      if (ncclCommDestroy(comm) != ncclSuccess && errors[r].empty()) errors[r] = "ncclCommDestroy failed";
    });
  for (auto& t : threads) t.join();
  std::vector<std::string> failed;
  for (int r = 0; r < n; ++r)
    if (!errors[r].empty()) failed.push_back("rank " + std::to_string(r) + ": " + errors[r]);
  return failed;
}

inline uint64_t splitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Element i of rank r's input (data set `seed`): both signs and a wide exponent range for the type, so sums
// cancel and round, and any change of order changes bits.
template <typename T>
T wideInput(int r, size_t i, int seed = 0) {
  const uint64_t h = splitMix64((uint64_t(r) << 40) ^ (uint64_t(seed) << 56) ^ i);
  const double mant = double(int64_t(h >> 11) - (int64_t(1) << 52)) / double(int64_t(1) << 52);
  const int span = std::is_same_v<T, double> ? 40 : (std::is_same_v<T, float> ? 20 : 4);
  const int e = int((h & 0xff) % (2 * span + 1)) - span;
  return fromCompute<T>(std::ldexp(mant, e));
}

}  // namespace tutti::itest
