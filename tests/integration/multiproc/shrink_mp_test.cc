// Fault tolerance across processes, over shm and over net-socket: a rank is killed with SIGKILL in the
// middle of a loop of AllReduces; every survivor's call fails naming it, then the survivors call
// ncclCommShrink(NCCL_SHRINK_ABORT) excluding it and carry on with correct AllReduces on the smaller
// communicator. Nothing may hang (watchdog) and no shm segment may be left behind.
#include "mp_check.h"
#include "mp_harness.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <csignal>
#include <string>
#include <vector>

namespace tutti::itest {
namespace {

enum class Via { kShm, kNet };

EnvList viaEnv(Via via) { return via == Via::kShm ? EnvList{} : netOverLoopbackEnv(); }

double monotonicSeconds() { return monotonicNs() / 1e9; }

class ShrinkAfterKill : public testing::TestWithParam<Via> {};

TEST_P(ShrinkAfterKill, SurvivorsGoOnWithoutTheDeadRank) {
  constexpr int kRanks = 4;
  constexpr int kVictim = 1;  // not the lowest rank: the new rank 0 is still old rank 0
  constexpr int kIterationsBeforeKill = 10;
  MpOptions opts;
  opts.nranks = kRanks;
  opts.timeoutSeconds = 60;
  opts.env = viaEnv(GetParam());
  opts.env.push_back({"NCCL_DEBUG", "WARN"});
  MpResult r = runProcesses(opts, [&](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != ncclSuccess) {
      setMessage(std::string("ncclCommInitRank failed: ") + ncclGetLastError(nullptr));
      return 10;
    }
    constexpr size_t kCount = 32 * 1024 + 3;
    std::vector<int32_t> buf(kCount);
    ncclResult_t res = ncclSuccess;
    for (int it = 0; it < 1000000; ++it) {
      if (ctx.rank == kVictim && it == kIterationsBeforeKill) raise(SIGKILL);
      buf.assign(kCount, ctx.rank + 1);
      res = ncclAllReduce(buf.data(), buf.data(), kCount, ncclInt32, ncclSum, comm, nullptr);
      if (res != ncclSuccess) break;
    }
    const std::string failure = ncclGetLastError(comm);
    std::printf("rank %d: AllReduce failed: %s: %s\n", ctx.rank, ncclGetErrorString(res), failure.c_str());
    if (res == ncclSuccess) return 1;

    int exclude[] = {kVictim};
    ncclComm_t small = nullptr;
    const double t0 = monotonicSeconds();
    const ncclResult_t shrink = ncclCommShrink(comm, exclude, 1, &small, nullptr, NCCL_SHRINK_ABORT);
    const double shrinkSeconds = monotonicSeconds() - t0;
    std::printf("rank %d: ncclCommShrink returned %s after %.3f s\n", ctx.rank, ncclGetErrorString(shrink),
                shrinkSeconds);
    if (shrink != ncclSuccess) {
      setMessage(std::string("ncclCommShrink failed: ") + ncclGetLastError(comm));
      ncclCommAbort(comm);
      return 2;
    }
    int count = 0, newRank = -1;
    ncclCommCount(small, &count);
    ncclCommUserRank(small, &newRank);
    const int expectedRank = ctx.rank < kVictim ? ctx.rank : ctx.rank - 1;
    if (count != kRanks - 1 || newRank != expectedRank) {
      setMessage("shrunk communicator has " + std::to_string(count) + " ranks, this rank is " +
                 std::to_string(newRank));
      return 3;
    }
    // Sum of (old rank + 1) over the survivors, on every element, several times and sizes.
    const int32_t want = (1 + 2 + 3 + 4) - (kVictim + 1);
    for (size_t n : {size_t{1}, size_t{4099}, kCount, size_t{1} << 20}) {
      std::vector<int32_t> v(n, ctx.rank + 1);
      if (ncclAllReduce(v.data(), v.data(), n, ncclInt32, ncclSum, small, nullptr) != ncclSuccess) {
        setMessage(std::string("AllReduce on the shrunk communicator failed: ") + ncclGetLastError(small));
        return 4;
      }
      for (size_t i = 0; i < n; ++i)
        if (v[i] != want) {
          setMessage("count " + std::to_string(n) + " index " + std::to_string(i) + ": got " + std::to_string(v[i]) +
                     ", want " + std::to_string(want));
          return 5;
        }
    }
    char line[160];
    std::snprintf(line, sizeof line, "shrink %.3f s; %d ranks go on as rank %d", shrinkSeconds, count, newRank);
    setMessage(line);
    if (ncclCommDestroy(small) != ncclSuccess) return 6;
    if (ncclCommAbort(comm) != ncclSuccess) return 7;
    return 0;
  });
  logChildren(r);
  EXPECT_TRUE(r.setupError.empty()) << r.setupError;
  EXPECT_FALSE(r.timedOut) << "hung (watchdog fired after " << r.seconds << " s)";
  ASSERT_EQ(static_cast<int>(r.children.size()), kRanks);
  for (const ChildResult& c : r.children) {
    if (c.rank == kVictim) {
      EXPECT_TRUE(!c.exited && c.signal == SIGKILL) << c.describe();
      continue;
    }
    std::printf("survivor: %s\n", c.describe().c_str());
    EXPECT_TRUE(c.ok()) << c.describe() << "\n" << tail(c.output);
  }
  expectNoShmLeftovers(r);
}

// Socket descriptors this process holds (listening, connected, any family).
int openSockets() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char link[64] = {};
      const std::string path = std::string("/proc/self/fd/") + e->d_name;
      if (readlink(path.c_str(), link, sizeof link - 1) > 0 && std::strncmp(link, "socket:", 7) == 0) ++n;
    }
    closedir(d);
  }
  return n;
}

class AbortWhileWaiting : public testing::TestWithParam<Via> {};

// Rank 1 stays alive but stops calling; rank 0's AllReduce waits on it (in the data path, through the
// proxy for sockets) until another thread of rank 0 calls ncclCommAbort. The waiting call must return an
// error within 5 s, the abort must free everything: no socket and no shm segment left by rank 0.
TEST_P(AbortWhileWaiting, AnotherThreadEndsTheWaitAndFreesEverything) {
  MpOptions opts;
  opts.nranks = 2;
  opts.timeoutSeconds = 60;
  opts.env = viaEnv(GetParam());
  opts.env.push_back({"NCCL_DEBUG", "WARN"});
  MpResult r = runProcesses(opts, [&](const RankContext& ctx) {
    const int socketsBefore = openSockets();
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != ncclSuccess) return 10;
    std::vector<float> v(100000, 1.0f);
    if (ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) return 11;
    const int socketsDuring = openSockets();  // the bootstrap's at least: proves the count sees them
    if (ctx.rank == 1) {
      // Absent from the second AllReduce; leaves once rank 0 had time to abort (its sockets then close).
      std::this_thread::sleep_for(std::chrono::seconds(3));
      ncclCommAbort(comm);
      return 0;
    }
    std::atomic<double> abortAt{0};
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      abortAt.store(monotonicSeconds());
      const ncclResult_t res = ncclCommAbort(comm);
      std::printf("rank 0: ncclCommAbort returned %s after %.3f s\n", ncclGetErrorString(res),
                  monotonicSeconds() - abortAt.load());
    });
    const ncclResult_t res = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr);
    const double returned = monotonicSeconds();
    aborter.join();
    const double after = abortAt.load() > 0 ? returned - abortAt.load() : -1;
    const int socketsAfter = openSockets();
    char line[200];
    std::snprintf(line, sizeof line, "waiting AllReduce returned %s %.3f s after the abort began; sockets %d, "
                  "%d while the communicator lived, %d after the abort", ncclGetErrorString(res), after, socketsBefore,
                  socketsDuring, socketsAfter);
    setMessage(line);
    std::printf("rank 0: %s\n", line);
    if (res == ncclSuccess) return 1;
    if (after < 0 || after > 5.0) return 2;
    if (socketsAfter != socketsBefore || socketsDuring <= socketsBefore) return 3;
    return 0;
  });
  logChildren(r);
  expectAllSucceeded(r);
  expectNoShmLeftovers(r);
}

INSTANTIATE_TEST_SUITE_P(Processes, AbortWhileWaiting, testing::Values(Via::kShm, Via::kNet),
                         [](const testing::TestParamInfo<Via>& info) {
                           return std::string(info.param == Via::kShm ? "Shm" : "Net");
                         });

INSTANTIATE_TEST_SUITE_P(Processes, ShrinkAfterKill, testing::Values(Via::kShm, Via::kNet),
                         [](const testing::TestParamInfo<Via>& info) {
                           return std::string(info.param == Via::kShm ? "Shm" : "Net");
                         });

}  // namespace
}  // namespace tutti::itest
