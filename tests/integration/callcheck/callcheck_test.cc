// Calls that do not match across ranks, as separate processes through the public API:
// - TUTTI_CHECK_CALLS=1: a mismatched collective (function, count, datatype, root, op) or send/receive pair
//   fails on EVERY rank of the call with ncclInvalidUsage and a text naming both ranks' calls, before any
//   data moves; matching calls still work with the option on and off;
// - TUTTI_TIMEOUT: when ranks 2 and 3 of 4 skip a collective, every waiting rank names exactly them;
// - TUTTI_WAIT_WARN: a long wait logs one WARN per operation, and the operation still completes.
#include "mp_check.h"
#include "mp_harness.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace tutti::itest {
namespace {

constexpr int kRanks = 4;
constexpr size_t kCount = 100;

// One rank's second call (the first is a matching AllReduce that sets up the connections).
using Call = std::function<ncclResult_t(int rank, ncclComm_t comm, std::vector<float>& buf)>;

struct MismatchCase {
  const char* name;
  int odd;                    // the rank whose call differs
  Call call;
  std::string oddText;        // "rank <odd> called <oddText>"
  std::string othersText;     // "rank <parent> called <othersText>"
};

ncclResult_t allReduce(ncclComm_t comm, std::vector<float>& buf, size_t count, ncclDataType_t dt, ncclRedOp_t op) {
  return ncclAllReduce(buf.data(), buf.data(), count, dt, op, comm, nullptr);
}

std::vector<MismatchCase> mismatchCases() {
  return {
      {"AllReduceVsAllGather", 1,
       [](int rank, ncclComm_t comm, std::vector<float>& buf) {
         if (rank == 1) return ncclAllGather(buf.data(), buf.data() + kCount, kCount, ncclInt32, comm, nullptr);
         return allReduce(comm, buf, kCount, ncclInt32, ncclSum);
       },
       "AllGather count 100 int32", "AllReduce count 100 int32 sum"},
      {"Count", 3,
       [](int rank, ncclComm_t comm, std::vector<float>& buf) {
         return allReduce(comm, buf, rank == 3 ? kCount - 1 : kCount, ncclFloat32, ncclSum);
       },
       "AllReduce count 99 float32 sum", "AllReduce count 100 float32 sum"},
      {"Datatype", 2,
       [](int rank, ncclComm_t comm, std::vector<float>& buf) {
         return allReduce(comm, buf, kCount, rank == 2 ? ncclInt32 : ncclFloat32, ncclSum);
       },
       "AllReduce count 100 int32 sum", "AllReduce count 100 float32 sum"},
      {"BroadcastRoot", 3,
       [](int rank, ncclComm_t comm, std::vector<float>& buf) {
         return ncclBroadcast(buf.data(), buf.data(), kCount, ncclFloat32, rank == 3 ? 1 : 0, comm, nullptr);
       },
       "Broadcast count 100 float32 root 1", "Broadcast count 100 float32 root 0"},
      {"Op", 1,
       [](int rank, ncclComm_t comm, std::vector<float>& buf) {
         return allReduce(comm, buf, kCount, ncclFloat32, rank == 1 ? ncclMax : ncclSum);
       },
       "AllReduce count 100 float32 max", "AllReduce count 100 float32 sum"},
  };
}

void PrintTo(const MismatchCase& c, std::ostream* os) { *os << c.name; }

class Mismatch : public testing::TestWithParam<MismatchCase> {};

// The tree edge that sees the difference joins the odd rank to its parent ((r - 1) / 2).
TEST_P(Mismatch, EveryRankFailsNamingBothCalls) {
  const MismatchCase c = GetParam();
  const int parent = (c.odd - 1) / 2;
  MpOptions opts;
  opts.nranks = kRanks;
  opts.timeoutSeconds = 40;  // the watchdog: nothing may hang
  opts.env = {{"TUTTI_CHECK_CALLS", "1"}, {"NCCL_DEBUG", "WARN"}};
  MpResult r = runProcesses(opts, [&](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != ncclSuccess) {
      setMessage(std::string("init failed: ") + ncclGetLastError(nullptr));
      return 10;
    }
    std::vector<float> buf(kCount * kRanks, 1.0f);
    if (allReduce(comm, buf, kCount, ncclFloat32, ncclSum) != ncclSuccess || buf[0] != kRanks) {
      setMessage(std::string("matching AllReduce failed: ") + ncclGetLastError(comm));
      ncclCommAbort(comm);
      return 11;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const ncclResult_t res = c.call(ctx.rank, comm, buf);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string text = ncclGetLastError(comm);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    ncclCommAbort(comm);
    setMessage("result " + std::to_string(res) + " after " + std::to_string(s) + " s: " + text);
    std::printf("rank %d: %s\n", ctx.rank, text.c_str());
    if (res != ncclInvalidUsage) return 1;
    if (text.find("rank " + std::to_string(c.odd) + " called " + c.oddText) == std::string::npos) return 2;
    if (text.find("rank " + std::to_string(parent) + " called " + c.othersText) == std::string::npos) return 3;
    if (text.find("opCount 1") == std::string::npos) return 4;
    if (async != ncclInvalidUsage) return 5;
    return 0;
  });
  logChildren(r);
  expectAllSucceeded(r);
  for (const ChildResult& ch : r.children)
    EXPECT_TRUE(ch.ok()) << ch.describe() << "\n(1: not ncclInvalidUsage; 2: odd rank's call not named; 3: the "
                         << "other call not named; 4: no opCount; 5: async error not set)";
  expectNoShmLeftovers(r);
}

INSTANTIATE_TEST_SUITE_P(Processes, Mismatch, testing::ValuesIn(mismatchCases()),
                         [](const testing::TestParamInfo<MismatchCase>& info) { return info.param.name; });

// Rank 0 sends 100 floats to rank 1, which receives 50: both fail naming both calls; ranks 2 and 3 make a
// matching pair at the same time and succeed.
TEST(MismatchP2p, SendAndRecvCountsDiffer) {
  MpOptions opts;
  opts.nranks = kRanks;
  opts.timeoutSeconds = 40;
  opts.env = {{"TUTTI_CHECK_CALLS", "1"}, {"NCCL_DEBUG", "WARN"}};
  MpResult r = runProcesses(opts, [&](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != ncclSuccess) return 10;
    std::vector<float> buf(kCount, 1.0f);
    const int peer = ctx.rank ^ 1;
    const size_t count = ctx.rank == 1 ? kCount / 2 : kCount;
    ncclGroupStart();
    if (ctx.rank % 2 == 0) ncclSend(buf.data(), count, ncclFloat32, peer, comm, nullptr);
    else ncclRecv(buf.data(), count, ncclFloat32, peer, comm, nullptr);
    const ncclResult_t res = ncclGroupEnd();
    const std::string text = ncclGetLastError(comm);
    ncclCommAbort(comm);
    setMessage("result " + std::to_string(res) + ": " + text);
    if (ctx.rank >= 2) return res == ncclSuccess ? 0 : 1;
    if (res != ncclInvalidUsage) return 2;
    if (text.find("rank 0's send #1 to rank 1 is count 100 float32, rank 1's matching receive from rank 0 is count "
                  "50 float32") == std::string::npos)
      return 3;
    return 0;
  });
  logChildren(r);
  expectAllSucceeded(r);
  expectNoShmLeftovers(r);
}

// Without the option a count mismatch is still caught once data moves: the receiver of a slot of another
// size fails naming the sender, the failure spreads, and nothing hangs (the watchdog would fire). The counts: rank 3's
// one element short of the others', as Simple slots (400 B), as LL lane packets (160 B) and on both sides of the LL
// limit (256 B as a packet, 260 B in a Simple slot), the limit set to 256 B (TUTTI_ONESHOT_LL_MAX_BYTES).
class WithoutTheCheck : public testing::TestWithParam<size_t> {};

TEST_P(WithoutTheCheck, CountMismatchFailsOnceDataMoves) {
  const size_t count = GetParam();
  MpOptions opts;
  opts.nranks = kRanks;
  opts.timeoutSeconds = 40;
  opts.env = {{"TUTTI_CHECK_CALLS", "0"}, {"NCCL_DEBUG", "WARN"}, {"TUTTI_ONESHOT_LL_MAX_BYTES", "256"}};
  MpResult r = runProcesses(opts, [&](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != ncclSuccess) return 10;
    std::vector<float> buf(kCount * kRanks, 1.0f);
    if (allReduce(comm, buf, count, ncclFloat32, ncclSum) != ncclSuccess) return 11;
    const size_t mine = count == 64 ? (ctx.rank == 3 ? 65 : 64) : ctx.rank == 3 ? count - 1 : count;
    const ncclResult_t res = allReduce(comm, buf, mine, ncclFloat32, ncclSum);
    const std::string text = ncclGetLastError(comm);
    ncclCommAbort(comm);
    setMessage("result " + std::to_string(res) + ": " + text);
    return res == ncclSuccess ? 1 : 0;
  });
  logChildren(r);
  EXPECT_FALSE(r.timedOut);
  int named = 0, failed = 0;
  for (const ChildResult& ch : r.children) {
    failed += ch.ok();
    if (std::regex_search(ch.message, std::regex("rank [0-9] sent [0-9]+ bytes .* where [0-9]+ bytes"))) ++named;
  }
  EXPECT_EQ(failed, kRanks) << "a rank completed the mismatched call";
  EXPECT_GE(named, 1) << "no rank named the sender of the unexpected slot";
}

INSTANTIATE_TEST_SUITE_P(Counts, WithoutTheCheck, testing::Values(kCount, size_t{40}, size_t{64}),
                         [](const testing::TestParamInfo<size_t>& info) { return "c" + std::to_string(info.param); });

// With the option on and off, matching collectives and send/receive pairs give the right results.
class Matching : public testing::TestWithParam<bool> {};

TEST_P(Matching, CallsWorkWithTheCheck) {
  const bool on = GetParam();
  MpOptions opts;
  opts.nranks = 3;
  opts.timeoutSeconds = 40;
  opts.env = {{"TUTTI_CHECK_CALLS", on ? "1" : "0"}, {"NCCL_DEBUG", "WARN"}};
  MpResult r = runProcesses(opts, [&](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != ncclSuccess) return 10;
    std::vector<float> a(1000, static_cast<float>(ctx.rank + 1)), b(3000, 0.0f);
    int bad = 0;
    for (int it = 0; it < 5 && !bad; ++it) {
      std::fill(a.begin(), a.end(), static_cast<float>(ctx.rank + 1));
      ncclGroupStart();
      ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, comm, nullptr);
      ncclAllGather(a.data(), b.data(), a.size(), ncclFloat32, comm, nullptr);
      const int next = (ctx.rank + 1) % ctx.nranks, prev = (ctx.rank + ctx.nranks - 1) % ctx.nranks;
      ncclSend(a.data(), 10, ncclFloat32, next, comm, nullptr);
      ncclRecv(b.data() + 2990, 10, ncclFloat32, prev, comm, nullptr);
      if (ncclGroupEnd() != ncclSuccess) bad = 1;
      if (!bad && a[0] != 6.0f) bad = 2;
    }
    const std::string text = ncclGetLastError(comm);
    ncclCommDestroy(comm);
    setMessage("bad " + std::to_string(bad) + ": " + text);
    return bad;
  });
  logChildren(r);
  expectAllSucceeded(r);
}

INSTANTIATE_TEST_SUITE_P(Processes, Matching, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& info) { return info.param ? "On" : "Off"; });

// kShmChecked: with TUTTI_CHECK_CALLS=1 the waiting ranks time out in the call check instead of the data path.
enum class Via { kShm, kNet, kShmChecked };

EnvList viaEnv(Via via) {
  if (via == Via::kShm) return {};
  if (via == Via::kShmChecked) return {{"TUTTI_CHECK_CALLS", "1"}};
  return netOverLoopbackEnv();
}

std::string viaName(Via via) { return via == Via::kShm ? "Shm" : via == Via::kNet ? "Net" : "ShmChecked"; }
void PrintTo(Via via, std::ostream* os) { *os << viaName(via); }

class TwoSkip : public testing::TestWithParam<Via> {};

// Four ranks agree on a first AllReduce; ranks 2 and 3 skip the second one (alive, sleeping). With
// TUTTI_TIMEOUT=2 ranks 0 and 1 fail with ncclTimeout, and each names exactly ranks 2 and 3.
TEST_P(TwoSkip, EveryWaitingRankNamesTheAbsentRanks) {
  // Ranks 0 and 1 each leave a file here once they are done; ranks 2 and 3 stay alive until both exist.
  const std::string doneDir = makeTempDir("twoskip");
  MpOptions opts;
  opts.nranks = kRanks;
  opts.timeoutSeconds = 50;
  opts.env = viaEnv(GetParam());
  opts.env.push_back({"TUTTI_TIMEOUT", "2"});
  opts.env.push_back({"NCCL_DEBUG", "WARN"});
  MpResult r = runProcesses(opts, [&](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != ncclSuccess) return 10;
    std::vector<int32_t> buf(4099, ctx.rank);
    if (ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, nullptr) != ncclSuccess) {
      ncclCommAbort(comm);
      return 11;
    }
    if (ctx.rank >= 2) {
      // Absent but alive until the others have given up (their grace period included), 40 s at most.
      const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(40);
      auto done = [&](int r) { return access((doneDir + "/" + std::to_string(r)).c_str(), F_OK) == 0; };
      while (!(done(0) && done(1)) && std::chrono::steady_clock::now() < giveUp)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ncclCommAbort(comm);
      setMessage(done(0) && done(1) ? "skipped the second AllReduce" : "ranks 0 and 1 did not finish in 40 s");
      return done(0) && done(1) ? 0 : 4;
    }
    const ncclResult_t res = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, nullptr);
    const std::string text = ncclGetLastError(comm);
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the peer may still be collecting notes
    ncclCommAbort(comm);
    std::fclose(std::fopen((doneDir + "/" + std::to_string(ctx.rank)).c_str(), "w"));
    setMessage("result " + std::to_string(res) + ": " + text);
    if (res != ncclTimeout) return 1;
    if (text.find(GetParam() == Via::kShmChecked ? "call check" : "AllReduce") == std::string::npos) return 2;
    if (!std::regex_search(text, std::regex("ranks 2,3 did not arrive at opCount 1 \\(ranks 0,1 did\\)"))) return 3;
    return 0;
  });
  logChildren(r);
  expectAllSucceeded(r);
  for (const ChildResult& ch : r.children)
    EXPECT_TRUE(ch.ok()) << ch.describe() << "\n(1: not ncclTimeout; 2: operation not named; 3: absent ranks not "
                         << "named exactly; 4: the waiting ranks never finished)";
  expectNoShmLeftovers(r);
  removeTree(doneDir);
}

INSTANTIATE_TEST_SUITE_P(Processes, TwoSkip, testing::Values(Via::kShm, Via::kNet, Via::kShmChecked),
                         [](const testing::TestParamInfo<Via>& info) { return viaName(info.param); });

// Rank 2 of 3 comes 3 s late to the second AllReduce with TUTTI_WAIT_WARN=1 and no timeout: each waiting rank
// logs exactly one WARN naming itself, the operation, its opCount and a peer; everything completes.
TEST(WaitWarn, OneWarningPerOperationAndTheCallCompletes) {
  MpOptions opts;
  opts.nranks = 3;
  opts.timeoutSeconds = 40;
  opts.env = {{"TUTTI_WAIT_WARN", "1"}, {"TUTTI_TIMEOUT", "0"}, {"NCCL_DEBUG", "WARN"}};
  MpResult r = runProcesses(opts, [&](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != ncclSuccess) return 10;
    std::vector<float> buf(4099, 1.0f);
    if (ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
      return 11;
    if (ctx.rank == 2) std::this_thread::sleep_for(std::chrono::seconds(3));
    std::fill(buf.begin(), buf.end(), 1.0f);
    const ncclResult_t res = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    ncclCommDestroy(comm);
    if (res != ncclSuccess) return 1;
    if (buf[0] != 3.0f || buf.back() != 3.0f) return 2;
    return 0;
  });
  logChildren(r);
  expectAllSucceeded(r);
  const std::regex warn("rank ([0-9]): AllReduce \\(opCount 1, channel [0-9]+\\) has waited [0-9]+ s for .* rank "
                        "[0-9] \\(step [0-9]+\\); still waiting");
  for (const ChildResult& ch : r.children) {
    int lines = 0;
    for (auto it = std::sregex_iterator(ch.output.begin(), ch.output.end(), warn); it != std::sregex_iterator();
         ++it) {
      EXPECT_EQ((*it)[1].str(), std::to_string(ch.rank)) << it->str();
      ++lines;
    }
    if (ch.rank == 2) {
      EXPECT_EQ(lines, 0) << "the late rank did not wait\n" << tail(ch.output);
    } else {
      EXPECT_EQ(lines, 1) << "rank " << ch.rank << " should warn once\n" << tail(ch.output);
    }
  }
}

}  // namespace
}  // namespace tutti::itest
