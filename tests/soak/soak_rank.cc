#include "soak_rank.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "harness.h"
#include "soak_draw.h"
#include "soak_resources.h"

namespace tutti::soak {

namespace {

constexpr long kMaxMismatchLines = 3;  // failed iterations printed per rank

// What one rank shares at each checkpoint, as the ncclInt64 elements of one AllGather.
enum StatusField { kDone, kMismatches, kRss, kFds, kStatusFields };

bool isCheckpoint(long done, const SoakOptions& o) {
  return done % o.statusEvery == 0 || done == effectiveWarmup(o) || done == o.iters;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// A failed call leaves the peers inside the operation: flag it so the parent stops them, then abort.
int callFailed(const SoakOptions& o, SoakBoard* board, int rank, long iter, const std::string& what,
               ncclResult_t r, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  char line[3072];
  std::snprintf(line, sizeof line, "SOAK CALL FAILED iter=%ld seed=%" PRIu64 " rank=%d %s returned %s (%s)",
                iter, o.seed, rank, what.c_str(), itest::resultName(r), last ? last : "no last error");
  std::fprintf(stderr, "%s\n", line);
  emitLine(board, line);
  int32_t none = -1;
  board->failedRank.compare_exchange_strong(none, rank);
  itest::setMessage(line);
  if (comm != nullptr) ncclCommAbort(comm);
  board->finished[rank].store(1);
  return 1;
}

// One operation alone, several inside one group (the library must then run them as one launch).
ncclResult_t issueAll(itest::CaseList& cases, int rank, ncclComm_t comm) {
  if (cases.size() == 1) return cases[0]->issue(rank, comm);
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  for (auto& c : cases) {
    r = c->issue(rank, comm);
    if (r != ncclSuccess) break;
  }
  const ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

}  // namespace

long effectiveWarmup(const SoakOptions& o) { return std::min(o.warmup, o.iters / 2); }

void emitLine(const SoakBoard* board, const std::string& line) {
  if (board == nullptr || board->progressFd < 0) return;
  const std::string text = line + "\n";
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = write(board->progressFd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

int runSoakRank(const itest::RankContext& ctx, const SoakOptions& o, SoakBoard* board) {
  const int rank = ctx.rank;
  const int n = ctx.nranks;
  board->pid[rank].store(static_cast<int32_t>(getpid()));
  // The captured output is read back after exit; line buffering keeps the last lines of a killed rank.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::vector<std::string> fdsBeforeInit = openFds();
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRank(&comm, n, ctx.id, rank);
  if (r != ncclSuccess) return callFailed(o, board, rank, -1, "ncclCommInitRank", r, nullptr);

  const DrawLimits limits{n, o.maxBytes, o.only};
  const long warmup = effectiveWarmup(o);
  std::vector<int64_t> status(kStatusFields);
  std::vector<int64_t> all(static_cast<size_t>(kStatusFields) * n);
  ResourceSample start;
  ResourceSample mid;  // first checkpoint at or past max(warm-up, iters / 2)
  ResourceSample last;
  long mismatches = 0;     // failure messages (a failed case gives up to four)
  long mismatchIters = 0;  // iterations with at least one
  long done = 0;
  if (warmup == 0) start = sampleResources();
  const auto t0 = std::chrono::steady_clock::now();
  for (long it = 0; it < o.iters; ++it) {
    board->iteration[rank].store(it + 1);
    const bool injectHere =
        o.inject != SoakOptions::Inject::kNone && rank == o.injectRank && it >= o.injectIter;
    if (injectHere && o.inject == SoakOptions::Inject::kHang) {
      for (;;) pause();  // the peers block in this iteration's operation; the parent must notice
    }
    IterationDraw d = drawIteration(o.seed, it, limits, injectHere ? 0x5eedu : 0u);
    itest::Report report;
    for (auto& c : d.cases) c->prepare(rank, comm, report);
    r = issueAll(d.cases, rank, comm);
    if (r != ncclSuccess) return callFailed(o, board, rank, it, d.label, r, comm);
    for (auto& c : d.cases) c->verify(rank, comm, report);
    // A failure message names the operation (collective, type, op, count, root, layout), the rank, the
    // first bad element and the expected and received values. One line per failed iteration (the first
    // message and how many more), for the first few iterations only: a systematic bug stays readable.
    const std::vector<std::string> failures = report.take();
    if (!failures.empty() && mismatchIters++ < kMaxMismatchLines) {
      char head[160];
      std::snprintf(head, sizeof head,
                    "SOAK MISMATCH iter=%ld seed=%" PRIu64 " rank=%d (%zu failure messages): ", it, o.seed,
                    rank, failures.size());
      emitLine(board, head + failures.front());
    }
    mismatches += static_cast<long>(failures.size());
    done = it + 1;
    if (!isCheckpoint(done, o)) continue;

    last = sampleResources();
    if (done == warmup) start = last;
    if (done >= std::max(warmup, o.iters / 2) && mid.rssBytes < 0) mid = last;
    char detail[256];
    std::snprintf(
        detail, sizeof detail,
        "  rank %d iter %ld: rss %.2f MiB (anon %.3f, shmem %.2f, file %.2f; data %.1f) fds %" PRId64
        " threads %" PRId64 " mismatches %ld",
        rank, done, mib(last.rssBytes), mib(last.anonBytes), mib(last.shmemBytes), mib(last.fileBytes),
        mib(last.dataBytes), last.fds, last.threads, mismatches);
    std::printf("%s\n", detail);
    if (done % o.logEvery == 0 || done == o.iters || done == warmup) emitLine(board, detail);
    status[kDone] = done;
    status[kMismatches] = mismatches;
    status[kRss] = last.rssBytes;
    status[kFds] = last.fds;
    r = ncclAllGather(status.data(), all.data(), kStatusFields, ncclInt64, comm, nullptr);
    if (r != ncclSuccess) return callFailed(o, board, rank, it, "status AllGather", r, comm);
    int64_t totalMismatches = 0;
    for (int p = 0; p < n; ++p) totalMismatches += all[p * kStatusFields + kMismatches];
    if (rank == 0 && (done % o.logEvery == 0 || done == o.iters || totalMismatches > 0)) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::string line;
      char buf[160];
      std::snprintf(buf, sizeof buf, "soak: iter %ld/%ld %.1f s (%.0f it/s) rss MiB", done, o.iters, secs,
                    secs > 0 ? done / secs : 0.0);
      line = buf;
      for (int p = 0; p < n; ++p) {
        std::snprintf(buf, sizeof buf, " %.1f", mib(all[p * kStatusFields + kRss]));
        line += buf;
      }
      line += " fds";
      for (int p = 0; p < n; ++p) line += " " + std::to_string(all[p * kStatusFields + kFds]);
      line += " mismatches " + std::to_string(totalMismatches);
      emitLine(board, line);
    }
    // Every rank sees the same totals, so all stop after the same checkpoint.
    if (totalMismatches > 0) break;
  }

  r = ncclCommDestroy(comm);
  if (r != ncclSuccess) return callFailed(o, board, rank, done, "ncclCommDestroy", r, nullptr);
  // Descriptors opened since before init and still open: a leak, except the NCCL_DEBUG_FILE, which the
  // library (as NCCL) opens at its first log line and keeps for the life of the process.
  const char* debugFile = std::getenv("NCCL_DEBUG_FILE");
  const std::string debugPath = debugFile ? debugFile : "";
  const std::string logDir = debugPath.substr(0, debugPath.rfind('/') + 1);  // "" when unset or no '/'

  int64_t leaked = 0;
  for (const std::string& fd : openFds()) {
    if (std::find(fdsBeforeInit.begin(), fdsBeforeInit.end(), fd) != fdsBeforeInit.end()) continue;
    if (!logDir.empty() && fd.find(" -> " + logDir) != std::string::npos) continue;
    ++leaked;
    emitLine(board,
             "  rank " + std::to_string(rank) + ": open after ncclCommDestroy, not before init: " + fd);
  }
  RankSummary s;
  s.rssStart = start.rssBytes;
  s.rssEnd = last.rssBytes;
  s.privStart = start.anonBytes + start.fileBytes;
  s.privEnd = last.anonBytes + last.fileBytes;
  s.shmemStart = start.shmemBytes;
  s.shmemEnd = last.shmemBytes;
  s.rssMid = mid.rssBytes;
  s.dataStart = start.dataBytes;
  s.dataMid = mid.dataBytes;
  s.dataEnd = last.dataBytes;
  s.threadsStart = start.threads;
  s.threadsEnd = last.threads;
  s.fdsStart = start.fds;
  s.fdsEnd = last.fds;
  s.fdsLeaked = leaked;
  s.mismatches = mismatches;
  s.done = done;
  const std::string msg = formatRankMessage(s);
  itest::setMessage(msg);
  std::printf("%s\n", msg.c_str());
  board->finished[rank].store(1);
  return mismatches == 0 && done == o.iters ? 0 : 1;
}

namespace {
// The fields in message order; one table for writing and parsing.
constexpr std::pair<const char*, int64_t RankSummary::*> kSummaryFields[] = {
    {"rss_start", &RankSummary::rssStart},     {"rss_end", &RankSummary::rssEnd},
    {"priv_start", &RankSummary::privStart},   {"priv_end", &RankSummary::privEnd},
    {"shmem_start", &RankSummary::shmemStart}, {"shmem_end", &RankSummary::shmemEnd},
    {"rss_mid", &RankSummary::rssMid},         {"data_start", &RankSummary::dataStart},
    {"data_mid", &RankSummary::dataMid},       {"data_end", &RankSummary::dataEnd},
    {"threads_start", &RankSummary::threadsStart}, {"threads_end", &RankSummary::threadsEnd},       {"fds_start", &RankSummary::fdsStart},
    {"fds_end", &RankSummary::fdsEnd},         {"fds_leaked", &RankSummary::fdsLeaked},
    {"mismatches", &RankSummary::mismatches},  {"done", &RankSummary::done}};
}  // namespace

std::string formatRankMessage(const RankSummary& s) {
  std::string msg;
  for (const auto& [name, field] : kSummaryFields)
    msg += (msg.empty() ? "" : " ") + std::string(name) + "=" + std::to_string(s.*field);
  return msg;
}

bool parseRankMessage(const std::string& msg, RankSummary* out) {
  RankSummary s;
  size_t pos = 0;
  for (const auto& [name, field] : kSummaryFields) {
    const std::string key = std::string(name) + "=";
    if (msg.compare(pos, key.size(), key) != 0) return false;
    pos += key.size();
    char* end = nullptr;
    s.*field = std::strtoll(msg.c_str() + pos, &end, 10);
    if (end == msg.c_str() + pos) return false;
    pos = static_cast<size_t>(end - msg.c_str());
    if (pos < msg.size() && msg[pos] == ' ') ++pos;
  }
  *out = s;
  return true;
}

}  // namespace tutti::soak
