// Failure behaviour across processes, over shm and over net-socket:
// - a rank killed with SIGKILL in the middle of a loop of collectives: every survivor's call must fail
//   within 5 s with an error naming the dead rank (the detection time is printed), the communicator must
//   report it through ncclCommGetAsyncError, nothing may hang, and no shm segment may stay in /dev/shm;
//   whether the dead rank is reaped at once, left a zombie until the survivors are done, or every rank
//   lives in a pid namespace of its own (every rank has pid 2, sharing /dev/shm);
// - a rank stopped with SIGSTOP is not taken for dead: the others time out naming it after TUTTI_TIMEOUT,
//   and a SIGCONT before that lets every rank finish with the right results;
// - a rank that never calls the collective: with TUTTI_TIMEOUT=2 the others fail with ncclTimeout and a
//   message naming the operation and a peer.
#include "mp_check.h"
#include "mp_harness.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace tutti::itest {
namespace {

enum class Via { kShm, kNet };

EnvList viaEnv(Via via) { return via == Via::kShm ? EnvList{} : netOverLoopbackEnv(); }

// Memory shared by the parent and every child (mapped before fork).
struct Shared {
  std::atomic<int64_t> killNs{0};
  std::atomic<int> finished{0};
  std::atomic<int> stoppedPid{0};  // the rank that stopped itself (SIGSTOP tests)
};

class SharedMap {
 public:
  SharedMap() {
    void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    shared_ = p == MAP_FAILED ? nullptr : new (p) Shared();
  }
  ~SharedMap() {
    if (shared_ != nullptr) munmap(shared_, sizeof(Shared));
  }
  Shared* get() { return shared_; }

 private:
  Shared* shared_ = nullptr;
};

// How the dead rank's process is treated: reaped as soon as it dies, left a zombie until every survivor has
// exited, or every rank in a pid namespace of its own.
enum class Death { kReaped, kZombie, kPidNamespace };

struct KillParam {
  Via via;
  int nranks;
  Death death = Death::kReaped;
};

std::string killName(const KillParam& p) {
  const char* how = p.death == Death::kZombie ? "_zombie" : p.death == Death::kPidNamespace ? "_pidns" : "";
  return std::string(p.via == Via::kShm ? "Shm" : "Net") + "_k" + std::to_string(p.nranks) + how;
}
void PrintTo(const KillParam& p, std::ostream* os) { *os << killName(p); }

class PeerKilled : public testing::TestWithParam<KillParam> {};

constexpr int kVictimIterations = 25;  // collectives completed before the victim dies
constexpr double kDetectLimitSeconds = 5.0;

TEST_P(PeerKilled, SurvivorsFailNamingTheDeadRank) {
  const KillParam p = GetParam();
  SharedMap map;
  ASSERT_NE(map.get(), nullptr);
  Shared* shared = map.get();
  const int victim = p.nranks - 1;
  MpOptions opts;
  opts.nranks = p.nranks;
  opts.timeoutSeconds = 20;  // detection must take under 5 s; the rest is init and teardown
  opts.env = viaEnv(p.via);
  opts.env.push_back({"NCCL_DEBUG", "WARN"});
  if (p.death == Death::kZombie) opts.reapLast = {victim};
  if (p.death == Death::kPidNamespace) {
    if (geteuid() != 0) GTEST_SKIP() << "pid namespaces need root";
    opts.pidNamespaces = true;
  }
  MpResult r = runProcesses(opts, [&](const RankContext& ctx) {
    if (p.death == Death::kPidNamespace && getpid() != 2) {
      setMessage("not in a pid namespace of its own (pid " + std::to_string(getpid()) + ")");
      return 20;
    }
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != ncclSuccess) {
      setMessage(std::string("ncclCommInitRank failed: ") + ncclGetLastError(nullptr));
      return 10;
    }
    constexpr size_t kCount = 64 * 1024 + 5;  // several slots per call
    std::vector<float> buf(kCount, 1.0f);
    ncclResult_t res = ncclSuccess;
    int64_t failNs = 0;
    for (int it = 0;; ++it) {
      if (ctx.rank == victim && it == kVictimIterations) {
      std::fflush(nullptr);
        shared->killNs.store(monotonicNs());
        raise(SIGKILL);
      }
      res = ncclAllReduce(buf.data(), buf.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
      if (res != ncclSuccess) {
        failNs = monotonicNs();
        break;
      }
      if (it == 0 || it + 1 == kVictimIterations) std::printf("rank %d: AllReduce %d done\n", ctx.rank, it);
      if (it > 1000000) break;  // cannot happen while the victim lives; the watchdog bounds the wait anyway
    }
    const std::string text = ncclGetLastError(comm);
    ncclResult_t async = ncclSuccess;
    const ncclResult_t asyncCall = ncclCommGetAsyncError(comm, &async);
    const int64_t killNs = shared->killNs.load();
    const double seconds = killNs > 0 && failNs > 0 ? (failNs - killNs) / 1e9 : -1;
    char line[512];
    std::snprintf(line, sizeof line, "result %d (%s) after %.3f s; async %d; error: ", res,
                  ncclGetErrorString(res), seconds, async);
    setMessage(line + text);
    // Printed before the abort, so a hang in ncclCommAbort is told apart from one in the collective.
    std::printf("rank %d: %s%s\nrank %d: calling ncclCommAbort\n", ctx.rank, line, text.c_str(), ctx.rank);
    std::fflush(stdout);
    // Abort must return promptly even with a dead peer (the watchdog catches a hang here too).
    const ncclResult_t abortRes = ncclCommAbort(comm);
    std::printf("rank %d: ncclCommAbort returned %d\n", ctx.rank, abortRes);
    if (res != ncclRemoteError) return 1;
    if (seconds < 0 || seconds > kDetectLimitSeconds) return 2;
    if (text.find("rank " + std::to_string(victim)) == std::string::npos) return 3;
    if (asyncCall != ncclSuccess || async == ncclSuccess || async == ncclInProgress) return 4;
    if (abortRes != ncclSuccess) return 5;
    return 0;
  });
  logChildren(r);
  EXPECT_TRUE(r.setupError.empty()) << r.setupError;
  EXPECT_FALSE(r.timedOut) << "survivors hung after rank " << victim << " died (watchdog fired after "
                           << r.seconds << " s)";
  ASSERT_EQ(static_cast<int>(r.children.size()), p.nranks);
  const ChildResult& dead = r.children[victim];
  EXPECT_TRUE(!dead.exited && dead.signal == SIGKILL) << dead.describe();
  for (const ChildResult& c : r.children) {
    if (c.rank == victim) continue;
    std::printf("detection: %s\n", c.describe().c_str());
    EXPECT_TRUE(c.ok()) << c.describe()
                        << "\n(exit 1: not ncclRemoteError; 2: slower than 5 s; 3: error text does not name "
                           "the dead rank; 4: no async error; 5: abort failed)\n"
                        << tail(c.output);
  }
  expectNoShmLeftovers(r);
}

INSTANTIATE_TEST_SUITE_P(Processes, PeerKilled,
                         testing::Values(KillParam{Via::kShm, 2}, KillParam{Via::kShm, 3},
                                         KillParam{Via::kShm, 4}, KillParam{Via::kNet, 2},
                                         KillParam{Via::kNet, 3}, KillParam{Via::kNet, 4},
                                         KillParam{Via::kShm, 3, Death::kZombie},
                                         KillParam{Via::kNet, 3, Death::kZombie},
                                         KillParam{Via::kShm, 3, Death::kPidNamespace},
                                         KillParam{Via::kNet, 3, Death::kPidNamespace}),
                         [](const testing::TestParamInfo<KillParam>& info) { return killName(info.param); });

// A rank that stops itself (SIGSTOP) in the middle of a loop of collectives is alive: with `resume`, rank 0
// sends it SIGCONT after 1 s and every rank finishes the loop with the right sums (TUTTI_TIMEOUT=10 leaves
// room); without, the others time out after TUTTI_TIMEOUT=2 naming it, never taking it for dead, and then
// kill it (the harness reaps it).
struct StopParam {
  Via via;
  bool resume;
};

class PeerStopped : public testing::TestWithParam<StopParam> {};

TEST_P(PeerStopped, IsNotTakenForDead) {
  const StopParam p = GetParam();
  SharedMap map;
  ASSERT_NE(map.get(), nullptr);
  Shared* shared = map.get();
  constexpr int kRanks = 3, kVictim = 2, kStopAt = 5, kIterations = 12;
  MpOptions opts;
  opts.nranks = kRanks;
  opts.timeoutSeconds = 50;
  opts.env = viaEnv(p.via);
  opts.env.push_back({"TUTTI_TIMEOUT", p.resume ? "10" : "2"});
  opts.env.push_back({"NCCL_DEBUG", "WARN"});
  MpResult r = runProcesses(opts, [&](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != ncclSuccess) {
      setMessage(std::string("ncclCommInitRank failed: ") + ncclGetLastError(nullptr));
      return 10;
    }
    std::thread resumer;
    if (ctx.rank == 0 && p.resume)
      resumer = std::thread([&] {
        const int64_t until = monotonicNs() + int64_t{30} * 1000000000;
        while (shared->stoppedPid.load() == 0 && monotonicNs() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::this_thread::sleep_for(std::chrono::seconds(1));
        if (shared->stoppedPid.load() > 0) kill(shared->stoppedPid.load(), SIGCONT);
      });
    constexpr size_t kCount = 16 * 1024 + 3;
    std::vector<float> buf(kCount);
    ncclResult_t res = ncclSuccess;
    int it = 0;
    int64_t t0 = 0;
    for (; it < kIterations; ++it) {
      if (ctx.rank == kVictim && it == kStopAt) {
        std::fflush(nullptr);
        shared->stoppedPid.store(getpid());
        raise(SIGSTOP);
      }
      for (size_t i = 0; i < kCount; ++i) buf[i] = float(ctx.rank + it) + float(i % 3);
      t0 = monotonicNs();
      res = ncclAllReduce(buf.data(), buf.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
      if (res != ncclSuccess) break;
      const float want = float(kRanks * (kRanks - 1) / 2 + kRanks * it);
      for (size_t i = 0; i < kCount; ++i)
        if (buf[i] != want + float(kRanks) * float(i % 3)) {
          setMessage("iteration " + std::to_string(it) + ": element " + std::to_string(i) + " is wrong");
          if (resumer.joinable()) resumer.join();
          ncclCommAbort(comm);
          return 6;
        }
    }
    if (resumer.joinable()) resumer.join();
    const double seconds = (monotonicNs() - t0) / 1e9;
    const std::string text = ncclGetLastError(comm);
    char line[256];
    std::snprintf(line, sizeof line, "result %d (%s) at iteration %d after %.3f s; error: ", res,
                  ncclGetErrorString(res), it, seconds);
    setMessage(line + text);
    std::printf("rank %d: %s%s\n", ctx.rank, line, text.c_str());
    std::fflush(stdout);
    if (p.resume) {
      const ncclResult_t destroyed = ncclCommDestroy(comm);
      return res != ncclSuccess ? 1 : destroyed != ncclSuccess ? 5 : 0;
    }
    // The survivors both time out before the stopped rank is killed: an abort would close connections and
    // turn the other's timeout into "closed the connection".
    shared->finished.fetch_add(1);
    const int64_t until = monotonicNs() + int64_t{15} * 1000000000;
    while (shared->finished.load() < kRanks - 1 && monotonicNs() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (ctx.rank == 0 && shared->stoppedPid.load() > 0) kill(shared->stoppedPid.load(), SIGKILL);
    ncclCommAbort(comm);
    if (res != ncclTimeout) return 1;
    if (it != kStopAt) return 2;
    if (!std::regex_search(text, std::regex("rank [0-9]+.*rank [0-9]+"))) return 3;  // self and a peer
    return 0;
  });
  logChildren(r);
  EXPECT_TRUE(r.setupError.empty()) << r.setupError;
  EXPECT_FALSE(r.timedOut) << "hung (watchdog fired after " << r.seconds << " s)";
  ASSERT_EQ(static_cast<int>(r.children.size()), kRanks);
  for (const ChildResult& c : r.children) {
    if (!p.resume && c.rank == kVictim) {
      EXPECT_TRUE(!c.exited && c.signal == SIGKILL) << c.describe();
      continue;
    }
    EXPECT_TRUE(c.ok()) << c.describe()
                        << "\n(exit 1: wrong result code; 2: failed at another iteration; 3: the error names no "
                           "peer; 5: destroy failed; 6: wrong sum)\n"
                        << tail(c.output);
  }
  if (!p.resume) {
    bool named = false;
    for (const ChildResult& c : r.children)
      named |= c.rank != kVictim && c.message.find("rank " + std::to_string(kVictim)) != std::string::npos;
    EXPECT_TRUE(named) << "no timeout names rank " << kVictim;
  }
  expectNoShmLeftovers(r);
}

INSTANTIATE_TEST_SUITE_P(Processes, PeerStopped,
                         testing::Values(StopParam{Via::kShm, false}, StopParam{Via::kShm, true},
                                         StopParam{Via::kNet, false}, StopParam{Via::kNet, true}),
                         [](const testing::TestParamInfo<StopParam>& info) {
                           return std::string(info.param.via == Via::kShm ? "Shm" : "Net") +
                                  (info.param.resume ? "_resumed" : "_timeout");
                         });

class RankSkips : public testing::TestWithParam<Via> {};

// Three ranks agree on a first AllReduce (connections are made then, outside the timeout under test);
// rank 2 then skips the second one and stays alive until the others are done.
TEST_P(RankSkips, OthersTimeOutNamingOperationAndPeer) {
  const Via via = GetParam();
  SharedMap map;
  ASSERT_NE(map.get(), nullptr);
  Shared* shared = map.get();
  constexpr int kRanks = 3;
  constexpr int kAbsent = 2;
  MpOptions opts;
  opts.nranks = kRanks;
  opts.timeoutSeconds = 40;
  opts.env = viaEnv(via);
  opts.env.push_back({"TUTTI_TIMEOUT", "2"});
  opts.env.push_back({"NCCL_DEBUG", "WARN"});
  MpResult r = runProcesses(opts, [&](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != ncclSuccess) {
      setMessage(std::string("ncclCommInitRank failed: ") + ncclGetLastError(nullptr));
      return 10;
    }
    std::vector<int32_t> buf(4099, ctx.rank);
    if (ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, nullptr) != ncclSuccess) {
      setMessage(std::string("first AllReduce failed: ") + ncclGetLastError(comm));
      ncclCommAbort(comm);
      return 11;
    }
    if (ctx.rank == kAbsent) {
      // Alive but absent: wait (bounded) for the others to give up, then leave.
      const int64_t until = monotonicNs() + int64_t{20} * 1000000000;
      while (shared->finished.load() < kRanks - 1 && monotonicNs() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      ncclCommAbort(comm);
      setMessage("skipped the second AllReduce");
      return 0;
    }
    const int64_t t0 = monotonicNs();
    const ncclResult_t res = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, nullptr);
    const double seconds = (monotonicNs() - t0) / 1e9;
    const std::string text = ncclGetLastError(comm);
    // Abort only once every waiting rank has returned: an abort closes connections, and a peer still
    // waiting would then fail with "closed the connection" instead of its own timeout.
    shared->finished.fetch_add(1);
    const int64_t until = monotonicNs() + int64_t{15} * 1000000000;
    while (shared->finished.load() < kRanks - 1 && monotonicNs() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ncclCommAbort(comm);
    char line[256];
    std::snprintf(line, sizeof line, "result %d (%s) after %.3f s; error: ", res, ncclGetErrorString(res),
                  seconds);
    setMessage(line + text);
    std::printf("rank %d: %s%s\n", ctx.rank, line, text.c_str());
    if (res != ncclTimeout) return 1;
    if (seconds < 1.5 || seconds > 10) return 2;
    if (text.find("AllReduce") == std::string::npos) return 3;
    if (!std::regex_search(text, std::regex("rank [0-9]+.*rank [0-9]+"))) return 4;  // self and a peer
    return 0;
  });
  logChildren(r);
  expectAllSucceeded(r);
  if (!HasFailure()) {
    // The rank that stalls the operation must be named by at least one of the ranks waiting on it.
    bool named = false;
    for (const ChildResult& c : r.children) {
      if (c.rank != kAbsent && c.message.find("rank " + std::to_string(kAbsent)) != std::string::npos)
        named = true;
    }
    EXPECT_TRUE(named) << "no timeout message names rank " << kAbsent;
  }
  expectNoShmLeftovers(r);
}

void PrintTo(Via v, std::ostream* os) { *os << (v == Via::kShm ? "Shm" : "Net"); }

INSTANTIATE_TEST_SUITE_P(Processes, RankSkips, testing::Values(Via::kShm, Via::kNet),
                         [](const testing::TestParamInfo<Via>& info) {
                           return std::string(info.param == Via::kShm ? "Shm" : "Net");
                         });

}  // namespace
}  // namespace tutti::itest
