// The rank side of the soak: one communicator per process, `iters` drawn iterations, each checked, with
// resource samples at checkpoints. The parent (soak_main.cc) forks the ranks with the multi-process
// harness and watches them through a SoakBoard.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "mp_harness.h"

namespace tutti::soak {

struct SoakOptions {
  long iters = 10000;
  int procs = 4;
  uint64_t seed = 1;
  std::string transport = "shm";  // "shm" (default config) or "net" (shm and p2p disabled, loopback)
  size_t maxBytes = size_t{4} << 20;
  int only = -1;           // --only NAME: every iteration runs that operation (index into operationNames())
  long warmup = 200;       // the first resource sample is taken after this many iterations
  long statusEvery = 100;  // ranks exchange status (and may stop together) every this many iterations
  long logEvery = 1000;    // rank 0 prints a summary line every this many iterations
  double rssBoundMiB = 8;  // allowed RSS growth between the warm-up sample and the last one
  int stallSeconds = 120;  // no rank finishing an iteration for this long is a hang
  int timeoutSeconds = 0;  // whole run; 0 = no limit besides the stall detector
  // Self-test of the checks (--inject corrupt|hang:RANK:ITER): from iteration injectIter on, rank
  // injectRank feeds data its peers do not expect, or stops before issuing that iteration.
  enum class Inject { kNone, kCorrupt, kHang } inject = Inject::kNone;
  int injectRank = -1;
  long injectIter = -1;
};

// The warm-up actually used: at most half the run, so a short run still has a start and an end sample.
long effectiveWarmup(const SoakOptions& o);

// Shared by the parent and every rank (an anonymous MAP_SHARED mapping made before the fork).
struct SoakBoard {
  static constexpr int kMaxRanks = 64;
  std::atomic<int64_t> iteration[kMaxRanks];  // 1 + the iteration a rank is in; 0 during init
  std::atomic<int32_t> pid[kMaxRanks];        // set when the rank starts
  std::atomic<int32_t> finished[kMaxRanks];   // set when the rank body returns
  std::atomic<int32_t> failedRank;            // -1, or the first rank whose library call failed
  int progressFd = -1;                        // the parent's stdout: summary and failure lines
};
static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free,
              "the board is shared between processes");

// Writes one line to the progress stream (a single write, so lines of different ranks never mix).
void emitLine(const SoakBoard* board, const std::string& line);

// The rank body. Returns 0 when every check passed. Leaves a message for the parent with its resource
// samples as "key=value" pairs (see parseRankMessage).
int runSoakRank(const itest::RankContext& ctx, const SoakOptions& o, SoakBoard* board);

// What a rank reports at exit (bytes, at the warm-up and the last checkpoint).
struct RankSummary {
  int64_t rssStart = -1, rssEnd = -1;    // whole resident set
  int64_t privStart = -1, privEnd = -1;  // private part: anonymous + file-backed pages
  int64_t shmemStart = -1, shmemEnd = -1;
  int64_t rssMid = -1;  // at the checkpoint nearest the middle of the run (after the warm-up)
  int64_t dataStart = -1, dataMid = -1, dataEnd = -1;  // VmData
  int64_t threadsStart = -1, threadsEnd = -1;
  int64_t fdsStart = -1, fdsEnd = -1;
  int64_t fdsLeaked = -1;  // descriptors opened since before ncclCommInitRank and still open after destroy
  int64_t mismatches = -1;
  int64_t done = -1;  // iterations completed
};

std::string formatRankMessage(const RankSummary& s);
// Parses what formatRankMessage wrote; false when `msg` is something else (e.g. a failed call).
bool parseRankMessage(const std::string& msg, RankSummary* out);

}  // namespace tutti::soak
