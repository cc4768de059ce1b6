// tutti_soak: thousands of randomly drawn, checked collectives across forked processes, with leak checks.
//
// Every iteration all ranks draw the same operation(s) from (seed, iteration) (soak_draw.h) and check
// every output element. Each rank samples its RSS, committed memory (VmData) and open fds after the
// warm-up and at every status checkpoint. The run fails on a wrong result or a failed call; on fds grown
// after the warm-up or still open after ncclCommDestroy; on RSS or VmData growth over the second half of
// the run beyond --rss-bound-mib; on /dev/shm segments left behind; on a connection not carried by the
// requested transport; and when no rank finishes an iteration for --stall-seconds (the ranks are then
// killed and the iteration each one was in is printed).
// Exit status: 0 pass, 1 fail, 2 bad arguments.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "mp_check.h"
#include "mp_harness.h"
#include "soak_draw.h"
#include "soak_rank.h"

using namespace tutti;
using namespace tutti::soak;

namespace {

void usage(const char* argv0) {
  std::fprintf(
      stderr,
      "usage: %s [--iters N] [--procs P] [--seed S] [--transport shm|net] [--max-bytes B]\n"
      "          [--warmup N] [--rss-bound-mib M] [--stall-seconds T] [--timeout T]\n"
      "          [--log-every N] [--status-every N] [--describe FIRST[-LAST]] [--only OPERATION]\n"
      "          [--inject corrupt|hang:RANK:ITER]   (self-test: the run must then fail)\n"
      "  defaults: --iters 10000 --procs 4 --seed 1 --transport shm --max-bytes 4194304 --warmup 200\n"
      "            --rss-bound-mib 8 --stall-seconds 120 --log-every 1000 --status-every 100\n"
      "  --describe prints what iterations FIRST..LAST run (same seed/procs/max-bytes/only) and exits\n"
      "  --only runs one operation every iteration: AllReduce AllGather ReduceScatter Broadcast Reduce\n"
      "         AlltoAll Gather Scatter SendRecv\n",
      argv0);
}

bool parseLong(const char* s, long lo, long hi, long* out) {
  if (s == nullptr) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 0);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi) return false;
  *out = static_cast<long>(v);
  return true;
}

struct Args {
  SoakOptions o;
  long describeFirst = -1;
  long describeLast = -1;
};

// Returns false (after printing why) on a bad command line.
bool parseArgs(int argc, char** argv, Args* a) {
  SoakOptions& o = a->o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* val = i + 1 < argc ? argv[i + 1] : nullptr;
    long v = 0;
    auto need = [&](long lo, long hi) {
      if (!parseLong(val, lo, hi, &v)) {
        std::fprintf(stderr, "%s: %s needs an integer in [%ld, %ld], got '%s'\n", argv[0], flag.c_str(), lo,
                     hi, val ? val : "(nothing)");
        return false;
      }
      ++i;
      return true;
    };
    if (flag == "--iters") {
      if (!need(1, 1L << 40)) return false;
      o.iters = v;
    } else if (flag == "--procs") {
      if (!need(1, SoakBoard::kMaxRanks)) return false;
      o.procs = static_cast<int>(v);
    } else if (flag == "--seed") {
      if (!need(0, (1L << 62))) return false;
      o.seed = static_cast<uint64_t>(v);
    } else if (flag == "--max-bytes") {
      if (!need(1, 1L << 32)) return false;
      o.maxBytes = static_cast<size_t>(v);
    } else if (flag == "--warmup") {
      if (!need(0, 1L << 40)) return false;
      o.warmup = v;
    } else if (flag == "--rss-bound-mib") {
      if (!need(0, 1 << 20)) return false;
      o.rssBoundMiB = static_cast<double>(v);
    } else if (flag == "--stall-seconds") {
      if (!need(1, 86400)) return false;
      o.stallSeconds = static_cast<int>(v);
    } else if (flag == "--timeout") {
      if (!need(0, 30 * 86400)) return false;
      o.timeoutSeconds = static_cast<int>(v);
    } else if (flag == "--log-every") {
      if (!need(1, 1L << 40)) return false;
      o.logEvery = v;
    } else if (flag == "--status-every") {
      if (!need(1, 1L << 40)) return false;
      o.statusEvery = v;
    } else if (flag == "--transport") {
      if (val == nullptr || (std::strcmp(val, "shm") != 0 && std::strcmp(val, "net") != 0)) {
        std::fprintf(stderr, "%s: --transport is shm or net, got '%s'\n", argv[0], val ? val : "(nothing)");
        return false;
      }
      o.transport = val;
      ++i;
    } else if (flag == "--only") {
      const std::vector<std::string>& names = operationNames();
      const auto found = std::find(names.begin(), names.end(), val ? val : "");
      if (found == names.end()) {
        std::string all;
        for (const std::string& n : names) all += " " + n;
        std::fprintf(stderr, "%s: --only takes one of%s; got '%s'\n", argv[0], all.c_str(), val ? val : "");
        return false;
      }
      o.only = static_cast<int>(found - names.begin());
      ++i;
    } else if (flag == "--describe") {
      std::string range = val ? val : "";
      const size_t dash = range.find('-');
      const std::string first = range.substr(0, dash);
      const std::string last = dash == std::string::npos ? first : range.substr(dash + 1);
      if (!parseLong(first.c_str(), 0, 1L << 40, &a->describeFirst) ||
          !parseLong(last.c_str(), a->describeFirst, 1L << 40, &a->describeLast)) {
        std::fprintf(stderr, "%s: --describe takes FIRST or FIRST-LAST, got '%s'\n", argv[0], range.c_str());
        return false;
      }
      ++i;
    } else if (flag == "--inject") {
      // corrupt:RANK:ITER or hang:RANK:ITER
      const std::string spec = val ? val : "";
      const size_t c1 = spec.find(':');
      const size_t c2 = c1 == std::string::npos ? c1 : spec.find(':', c1 + 1);
      const std::string kind = spec.substr(0, c1);
      long rank = -1;
      if (c2 == std::string::npos || (kind != "corrupt" && kind != "hang") ||
          !parseLong(spec.substr(c1 + 1, c2 - c1 - 1).c_str(), 0, SoakBoard::kMaxRanks - 1, &rank) ||
          !parseLong(spec.substr(c2 + 1).c_str(), 0, 1L << 40, &o.injectIter)) {
        std::fprintf(stderr, "%s: --inject takes corrupt:RANK:ITER or hang:RANK:ITER, got '%s'\n", argv[0],
                     spec.c_str());
        return false;
      }
      o.inject = kind == "corrupt" ? SoakOptions::Inject::kCorrupt : SoakOptions::Inject::kHang;
      o.injectRank = static_cast<int>(rank);
      ++i;
    } else if (flag == "-h" || flag == "--help") {
      usage(argv[0]);
      std::exit(0);
    } else {
      std::fprintf(stderr, "%s: unknown option '%s'\n", argv[0], flag.c_str());
      return false;
    }
  }
  return true;
}

std::string drawLabel(const SoakOptions& o, long iter) {
  return drawIteration(o.seed, iter, DrawLimits{o.procs, o.maxBytes, o.only}).label;
}

// Watches the board while the ranks run: stops every rank when one reports a failed call (after a grace
// period for its peers to fail on their own) or when no rank has finished an iteration for stallSeconds.
class Monitor {
 public:
  Monitor(const SoakOptions& o, SoakBoard* board) : o_(o), board_(board), thread_([this] { loop(); }) {}
  ~Monitor() { stop(); }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  const std::string& verdict() const { return verdict_; }  // "" unless the monitor stopped the ranks

 private:
  void loop() {
    using Clock = std::chrono::steady_clock;
    int64_t lastProgress = -1;
    auto lastChange = Clock::now();
    auto failSeen = Clock::time_point{};
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      int64_t progress = 0;
      for (int r = 0; r < o_.procs; ++r) progress += board_->iteration[r].load();
      const auto now = Clock::now();
      if (progress != lastProgress) {
        lastProgress = progress;
        lastChange = now;
      }
      if (board_->failedRank.load() >= 0) {
        if (failSeen == Clock::time_point{}) failSeen = now;
        if (now - failSeen > std::chrono::seconds(3)) {
          killRanks("rank " + std::to_string(board_->failedRank.load()) + " had a failed call");
          return;
        }
      } else if (now - lastChange > std::chrono::seconds(o_.stallSeconds)) {
        std::string where;
        for (int r = 0; r < o_.procs; ++r) {
          const int64_t it = board_->iteration[r].load();
          where += "\n  rank " + std::to_string(r) + ": " +
                   (board_->finished[r].load() ? std::string("finished")
                    : it == 0                  ? std::string("in ncclCommInitRank")
                              : "in iteration " + std::to_string(it - 1) + ": " + drawLabel(o_, it - 1));
        }
        killRanks("no progress for " + std::to_string(o_.stallSeconds) + " s (hang):" + where);
        return;
      }
    }
  }
  void killRanks(const std::string& why) {
    verdict_ = why;
    emitLine(board_, "SOAK STOPPING RANKS: " + why);
    for (int r = 0; r < o_.procs; ++r) {
      const pid_t pid = board_->pid[r].load();
      if (pid > 0 && !board_->finished[r].load()) kill(pid, SIGKILL);
    }
  }

  const SoakOptions& o_;
  SoakBoard* board_;
  std::atomic<bool> stop_{false};
  std::string verdict_;
  std::thread thread_;
};

std::string mibString(int64_t bytes) {
  if (bytes < 0) return "n/a";  // not sampled (the run stopped before the warm-up ended)
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parseArgs(argc, argv, &args)) {
    usage(argv[0]);
    return 2;
  }
  const SoakOptions& o = args.o;
  if (o.injectRank >= o.procs) {
    std::fprintf(stderr, "%s: --inject names rank %d of %d\n", argv[0], o.injectRank, o.procs);
    return 2;
  }
  if (args.describeFirst >= 0) {
    for (long it = args.describeFirst; it <= args.describeLast; ++it)
      std::printf("iter %ld: %s\n", it, drawLabel(o, it).c_str());
    return 0;
  }

  void* mem = mmap(nullptr, sizeof(SoakBoard), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::fprintf(stderr, "SOAK FAIL cannot map the shared board: %s\n", std::strerror(errno));
    return 1;
  }
  SoakBoard* board = new (mem) SoakBoard();
  for (int r = 0; r < SoakBoard::kMaxRanks; ++r) {
    board->iteration[r].store(0);
    board->pid[r].store(0);
    board->finished[r].store(0);
  }
  board->failedRank.store(-1);
  board->progressFd = dup(STDOUT_FILENO);

  const std::string logDir = itest::makeTempDir("tutti-soak-log");
  itest::MpOptions mp;
  mp.nranks = o.procs;
  mp.timeoutSeconds = o.timeoutSeconds > 0 ? o.timeoutSeconds : 30 * 86400;
  // INIT logs name the transport of every connection; read back below to prove which one carried them.
  mp.env = itest::initLogEnv(logDir);
  if (o.transport == "net") {
    mp.env.push_back({"NCCL_SHM_DISABLE", "1"});
    mp.env.push_back({"NCCL_P2P_DISABLE", "1"});
    mp.env.push_back({"NCCL_SOCKET_IFNAME", "lo"});
  }
  std::printf("soak: iters=%ld procs=%d seed=%" PRIu64
              " transport=%s max-bytes=%zu warmup=%ld rss-bound=%.0f MiB"
              " stall=%d s\n",
              o.iters, o.procs, o.seed, o.transport.c_str(), o.maxBytes, effectiveWarmup(o), o.rssBoundMiB,
              o.stallSeconds);
  std::fflush(stdout);

  Monitor monitor(o, board);
  itest::MpResult res =
      itest::runProcesses(mp, [&](const itest::RankContext& ctx) { return runSoakRank(ctx, o, board); });
  monitor.stop();

  std::vector<std::string> problems;
  if (!res.setupError.empty()) problems.push_back("setup: " + res.setupError);
  if (!monitor.verdict().empty()) problems.push_back(monitor.verdict());
  if (res.timedOut)
    problems.push_back("the whole run exceeded --timeout " + std::to_string(o.timeoutSeconds) + " s");
  std::string rssField, rssField2, dataField, fdsField;
  std::vector<pid_t> pids;
  const int64_t bound = static_cast<int64_t>(o.rssBoundMiB * (1 << 20));
  for (const itest::ChildResult& c : res.children) {
    pids.push_back(c.pid);
    RankSummary s;
    const bool parsed = parseRankMessage(c.message, &s);
    if (parsed && s.mismatches > 0)
      problems.push_back("rank " + std::to_string(c.rank) + ": " + std::to_string(s.mismatches) +
                         " wrong results");
    if (parsed && s.done != o.iters)
      problems.push_back("rank " + std::to_string(c.rank) + ": stopped after " + std::to_string(s.done) +
                         " iterations");
    // A rank that left no summary crashed, was killed or had a failed call: show what it printed.
    if (!parsed) {
      problems.push_back(c.describe());
      if (!c.output.empty())
        std::printf("----- rank %d (pid %d) output -----\n%s\n", c.rank, static_cast<int>(c.pid),
                    itest::tail(c.output).c_str());
    }
    if (!parsed) continue;
    std::printf(
        "rank %d: rss %s -> %s -> %s MiB (warm-up, middle, end; private %s -> %s, shmem %s -> %s), "
        "committed %s -> %s -> %s MiB, fds %" PRId64 " -> %" PRId64 ", threads %" PRId64 " -> %" PRId64
        ", %" PRId64 " iterations, %" PRId64 " mismatches\n",
        c.rank, mibString(s.rssStart).c_str(), mibString(s.rssMid).c_str(), mibString(s.rssEnd).c_str(),
        mibString(s.privStart).c_str(), mibString(s.privEnd).c_str(), mibString(s.shmemStart).c_str(),
        mibString(s.shmemEnd).c_str(), mibString(s.dataStart).c_str(), mibString(s.dataMid).c_str(),
        mibString(s.dataEnd).c_str(), s.fdsStart, s.fdsEnd, s.threadsStart, s.threadsEnd, s.done,
        s.mismatches);
    const std::string r = "rank " + std::to_string(c.rank);
    if (s.rssStart < 0 || s.rssMid < 0 || s.fdsStart < 0) {
      if (s.done == o.iters) problems.push_back(r + ": no resource sample after the warm-up");
    } else {
      if (s.fdsEnd > s.fdsStart)
        problems.push_back(r + ": open fds grew from " + std::to_string(s.fdsStart) + " to " +
                           std::to_string(s.fdsEnd));
      // Resident memory first grows as FIFO pages mapped at connect time are touched by their first large
      // enough message, and committed memory as lazily made resources (a thread and its stack, a
      // buffer) appear on the first call that needs them; both then level off, while a leak keeps
      // growing with the calls. So both are bounded over the second half of the run.
      if (s.rssEnd - s.rssMid > bound)
        problems.push_back(r + ": RSS grew by " + mibString(s.rssEnd - s.rssMid) +
                           " MiB over the second half of the run (bound " + mibString(bound) + ")");
      if (s.dataEnd - s.dataMid > bound)
        problems.push_back(r + ": committed memory (VmData) grew by " + mibString(s.dataEnd - s.dataMid) +
                           " MiB over the second half of the run (bound " + mibString(bound) + ")");
    }
    if (s.fdsLeaked > 0)
      problems.push_back(r + ": " + std::to_string(s.fdsLeaked) + " fds still open after ncclCommDestroy");
    auto add = [](std::string& field, const std::string& v) { field += (field.empty() ? "" : ",") + v; };
    add(rssField, mibString(s.rssStart) + "/" + mibString(s.rssEnd));
    add(rssField2, mibString(s.rssMid));
    add(dataField, mibString(s.dataStart) + "/" + mibString(s.dataEnd));
    add(fdsField, std::to_string(s.fdsStart) + "/" + std::to_string(s.fdsEnd));
  }
  for (const std::string& name : itest::shmLeftovers(pids))
    problems.push_back("left behind: /dev/shm/" + name);
  if (o.procs > 1 && problems.empty()) {
    std::vector<itest::TransportUse> uses = itest::readTransportLog(logDir);
    std::erase_if(uses, [](const itest::TransportUse& u) { return u.rank == u.peer; });
    const std::string bad = itest::checkTransports(
        uses, o.procs, [](int) { return 0; }, o.transport, o.transport);
    if (!bad.empty()) problems.push_back("transport: " + bad);
  }
  if (problems.empty()) itest::removeTree(logDir);

  char head[256];
  std::snprintf(head, sizeof head, "iters=%ld procs=%d seed=%" PRIu64 " transport=%s seconds=%.1f", o.iters,
                o.procs, o.seed, o.transport.c_str(), res.seconds);
  const std::string resources = " rss_start/end_mib=" + rssField + " rss_mid_mib=" + rssField2 +
                                " vmdata_start/end_mib=" + dataField + " fds_start/end=" + fdsField;
  if (problems.empty()) {
    std::printf("SOAK PASS %s%s\n", head, resources.c_str());
    return 0;
  }
  for (const std::string& p : problems) std::printf("  problem: %s\n", p.c_str());
  std::printf("SOAK FAIL %s%s (%zu problems; logs in %s; replay: --seed %" PRIu64
              " --procs %d --transport %s"
              " --max-bytes %zu)\n",
              head, resources.c_str(), problems.size(), logDir.c_str(), o.seed, o.procs, o.transport.c_str(),
              o.maxBytes);
  return 1;
}
