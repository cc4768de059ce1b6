#include "perf_common.h"

#include <dlfcn.h>
#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "launch.h"

namespace tutti::perf {
namespace {

struct Options {
  size_t minBytes = 8, maxBytes = 32 << 20;
  double factor = 2;
  size_t increment = 0;
  int nRanks = 2;        // -g / -t: ranks as threads of this process
  bool ranksGiven = false;
  int procs = 0;         // -P / TUTTI_PERF_PROCS: forked processes (0: none, -1: invalid value)
  int iters = 20, warmup = 5;
  int check = 1;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  bool predict = false;  // --predict: add ncclGroupSimulateEnd's estimate as a last column
  std::string plot;      // --plot OUT: also draw the table with benchmarks/plot.sh (OUT.svg / OUT.png)
  bool bind = false;     // --bind: each forked rank on one CPU (bindCpus[rank])
  std::vector<int> bindCpus;
  int reg = 0;           // -R: 0 plain memory, 1 ncclCommRegister, 2 ncclMemAlloc + symmetric window
  int detPairs = 0;      // --det-pairs K: K rounds a size of the deterministic switch off, then on (0: not paired)
};

// tuttiCommSetDeterministic, looked up at run time so that the tools still run on a library without it.
using SetDeterministicFn = ncclResult_t (*)(ncclComm_t, int);
SetDeterministicFn setDeterministicFn() {
  return reinterpret_cast<SetDeterministicFn>(dlsym(RTLD_DEFAULT, "tuttiCommSetDeterministic"));
}

#ifndef TUTTI_PLOT_SCRIPT
#define TUTTI_PLOT_SCRIPT "benchmarks/plot.sh"
#endif

// Hands the table's rows to benchmarks/plot.sh (TUTTI_PLOT overrides its path); false with a message
// when the script is missing or fails (gnuplot not installed, unwritable output).
bool plotRows(const std::string& rows, const std::string& out, const std::string& title) {
  const char* env = std::getenv("TUTTI_PLOT");
  const std::string script = env && *env ? env : TUTTI_PLOT_SCRIPT;
  if (access(script.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "--plot: %s not found or not executable; set TUTTI_PLOT to benchmarks/plot.sh\n",
                 script.c_str());
    return false;
  }
  auto quote = [](const std::string& v) {
    std::string q = "'";
    for (char c : v) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string cmd = quote(script) + " -o " + quote(out) + " -t " + quote(title) + " -";
  FILE* pipe = popen(cmd.c_str(), "w");
  if (!pipe) {
    std::fprintf(stderr, "--plot: cannot run %s: %s\n", script.c_str(), std::strerror(errno));
    return false;
  }
  std::fwrite(rows.data(), 1, rows.size(), pipe);
  const int status = pclose(pipe);
  if (status != 0) std::fprintf(stderr, "--plot: %s failed (status %d)\n", script.c_str(), status);
  return status == 0;
}

const struct {
  const char* name;
  ncclDataType_t type;
  size_t size;
} kTypes[] = {{"int8", ncclInt8, 1},     {"uint8", ncclUint8, 1},   {"int32", ncclInt32, 4},
              {"uint32", ncclUint32, 4}, {"int64", ncclInt64, 8},   {"uint64", ncclUint64, 8},
              {"half", ncclFloat16, 2},  {"float", ncclFloat32, 4}, {"double", ncclFloat64, 8},
              {"bfloat16", ncclBfloat16, 2}, {"f8e4m3", ncclFloat8e4m3, 1}, {"f8e5m2", ncclFloat8e5m2, 1}};
const char* kOps[] = {"sum", "prod", "max", "min", "avg"};

// A switch, not a search of kTypes: runOnce calls it in the timed loop, where an empty call costs tens of ns.
size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    case ncclFloat16: case ncclBfloat16: return 2;
    default: return 1;
  }
}
const char* typeName(ncclDataType_t t) {
  for (const auto& e : kTypes)
    if (e.type == t) return e.name;
  return "?";
}

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (end && *end ? std::toupper(*end) : 0) {
    case 'K': v *= 1024; break;
    case 'M': v *= 1024 * 1024; break;
    case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

bool isReduction(Coll c) { return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce; }
bool hasRoot(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce; }

// nccl-tests' conventions: the size column is the largest buffer; count is per rank block where blocks exist.
size_t countOf(Coll c, size_t bytes, size_t tsize, int n) {
  size_t elems = bytes / tsize;
  switch (c) {
    case Coll::AllGather: case Coll::ReduceScatter: case Coll::AlltoAll: return elems / n;
    default: return elems;
  }
}

double busFactor(Coll c, int n) {
  switch (c) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::AllGather: case Coll::ReduceScatter: case Coll::AlltoAll: return double(n - 1) / n;
    default: return 1.0;
  }
}

// Input element i of rank r: small integers, so sums, products and extrema are exact in every type.
double inputValue(Coll c, ncclRedOp_t op, int r, size_t i) {
  if (isReduction(c) && op == ncclProd) return double((r + i) % 2 + 1);
  return double((r * 7 + i) % 11);
}

template <typename T>
void fill(void* buf, size_t n, Coll c, ncclRedOp_t op, int r, size_t base) {
  T* p = static_cast<T*>(buf);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(inputValue(c, op, r, base + i));
}

bool checkable(ncclDataType_t t) {
  return t != ncclFloat16 && t != ncclBfloat16 && t != ncclFloat8e4m3 && t != ncclFloat8e5m2;
}

template <typename F>
void dispatch(ncclDataType_t t, F&& f) {
  switch (t) {
    case ncclInt8: f(int8_t{}); break;
    case ncclUint8: f(uint8_t{}); break;
    case ncclInt32: f(int32_t{}); break;
    case ncclUint32: f(uint32_t{}); break;
    case ncclInt64: f(int64_t{}); break;
    case ncclUint64: f(uint64_t{}); break;
    case ncclFloat32: f(float{}); break;
    case ncclFloat64: f(double{}); break;
    default: break;
  }
}

template <typename T>
T reduceExpected(Coll c, ncclRedOp_t op, int n, size_t i) {
  T acc = static_cast<T>(inputValue(c, op, 0, i));
  for (int r = 1; r < n; ++r) {
    T v = static_cast<T>(inputValue(c, op, r, i));
    switch (op) {
      case ncclProd: acc = static_cast<T>(acc * v); break;
      case ncclMax: acc = std::max(acc, v); break;
      case ncclMin: acc = std::min(acc, v); break;
      default: acc = static_cast<T>(acc + v); break;
    }
  }
  if (op == ncclAvg) acc = static_cast<T>(acc / static_cast<T>(n));
  return acc;
}

// A rank's send or receive buffer: in `own` (plain memory), or in its ncclMemAlloc block (-R 2).
struct Span {
  char* p = nullptr;
  size_t n = 0;
  char* data() const { return p; }
  char* begin() const { return p; }
  char* end() const { return p + n; }
};
struct RankBuffers {
  Span send, recv;
  std::vector<char> own;
  void* mem = nullptr;           // -R 2: the ncclMemAlloc block holding both
  ncclWindow_t win = nullptr;    // -R 2
  void* handles[2] = {nullptr, nullptr};  // -R 1
};

// Sets up the inputs of one call for rank r.
void prepare(Coll c, const Options& o, int r, size_t count, RankBuffers& b, bool inPlace) {
  const int n = o.nRanks;
  const size_t ts = typeSize(o.dtype);
  std::fill(b.recv.begin(), b.recv.end(), 0);
  dispatch(o.dtype, [&](auto tag) {
    using T = decltype(tag);
    switch (c) {
      case Coll::AllGather:
        fill<T>(inPlace ? b.recv.data() + r * count * ts : b.send.data(), count, c, o.op, r, 0);
        break;
      case Coll::ReduceScatter: case Coll::AlltoAll:
        fill<T>(inPlace ? b.recv.data() : b.send.data(), count * n, c, o.op, r, 0);
        break;
      default:
        fill<T>(inPlace ? b.recv.data() : b.send.data(), count, c, o.op, r, 0);
        break;
    }
  });
}

// Counts wrong elements of rank r's output.
size_t verify(Coll c, const Options& o, int r, size_t count, const RankBuffers& b, bool inPlace) {
  const int n = o.nRanks;
  size_t wrong = 0;
  dispatch(o.dtype, [&](auto tag) {
    using T = decltype(tag);
    // In-place ReduceScatter leaves rank r's block at its own offset of the full buffer.
    const size_t outOff = (inPlace && c == Coll::ReduceScatter) ? r * count : 0;
    const T* out = reinterpret_cast<const T*>(b.recv.data()) + outOff;
    auto expectAt = [&](size_t idx, T want) {
      bool ok = std::is_floating_point_v<T> && o.op == ncclAvg
                    ? std::fabs(double(out[idx]) - double(want)) <= 1e-6 * std::max(1.0, std::fabs(double(want)))
                    : out[idx] == want;
      wrong += !ok;
    };
    switch (c) {
      case Coll::AllReduce:
        for (size_t i = 0; i < count; ++i) expectAt(i, reduceExpected<T>(c, o.op, n, i));
        break;
      case Coll::Reduce:
        if (r == o.root)
          for (size_t i = 0; i < count; ++i) expectAt(i, reduceExpected<T>(c, o.op, n, i));
        break;
      case Coll::ReduceScatter:
        for (size_t i = 0; i < count; ++i) expectAt(i, reduceExpected<T>(c, o.op, n, r * count + i));
        break;
      case Coll::Broadcast:
        for (size_t i = 0; i < count; ++i) expectAt(i, static_cast<T>(inputValue(c, o.op, o.root, i)));
        break;
      case Coll::AllGather:
        for (int p = 0; p < n; ++p)
          for (size_t i = 0; i < count; ++i) expectAt(p * count + i, static_cast<T>(inputValue(c, o.op, p, i)));
        break;
      case Coll::AlltoAll:
        for (int p = 0; p < n; ++p)
          for (size_t i = 0; i < count; ++i)
            expectAt(p * count + i, static_cast<T>(inputValue(c, o.op, p, r * count + i)));
        break;
      case Coll::SendRecv: {
        const int from = (r + n - 1) % n;
        for (size_t i = 0; i < count; ++i) expectAt(i, static_cast<T>(inputValue(c, o.op, from, i)));
        break;
      }
    }
  });
  return wrong;
}

ncclResult_t runOnce(Coll c, const Options& o, ncclComm_t comm, int r, size_t count, RankBuffers& b, bool inPlace) {
  const int n = o.nRanks;
  const size_t ts = typeSize(o.dtype);
  char* recv = b.recv.data();
  const void* send = b.send.data();
  switch (c) {
    case Coll::AllReduce: return ncclAllReduce(inPlace ? recv : send, recv, count, o.dtype, o.op, comm, nullptr);
    case Coll::Reduce: return ncclReduce(inPlace ? recv : send, recv, count, o.dtype, o.op, o.root, comm, nullptr);
    case Coll::Broadcast: return ncclBroadcast(inPlace ? recv : send, recv, count, o.dtype, o.root, comm, nullptr);
    case Coll::AllGather:
      return ncclAllGather(inPlace ? recv + r * count * ts : send, recv, count, o.dtype, comm, nullptr);
    case Coll::ReduceScatter:
      return ncclReduceScatter(inPlace ? recv : send, inPlace ? recv + r * count * ts : recv, count, o.dtype, o.op,
                               comm, nullptr);
    case Coll::AlltoAll: return ncclAlltoAll(send, recv, count, o.dtype, comm, nullptr);
    case Coll::SendRecv: {
      ncclGroupStart();
      ncclSend(send, count, o.dtype, (r + 1) % n, comm, nullptr);
      ncclRecv(recv, count, o.dtype, (r + n - 1) % n, comm, nullptr);
      return ncclGroupEnd();
    }
  }
  return ncclInternalError;
}

// The library's prediction for one call of this rank (ncclGroupSimulateEnd around the same call), in
// microseconds; nothing runs and the buffers are untouched.
ncclResult_t predictOnce(Coll c, const Options& o, ncclComm_t comm, int r, size_t count, RankBuffers& b, float* us) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  if (ncclResult_t res = ncclGroupStart(); res != ncclSuccess) return res;
  ncclResult_t res = runOnce(c, o, comm, r, count, b, false);
  ncclResult_t end = ncclGroupSimulateEnd(&info);
  if (res != ncclSuccess) return res;
  if (end != ncclSuccess) return end;
  *us = info.estimatedTime;
  return ncclSuccess;
}

void usage(const char* prog) {
  std::printf("usage: %s [-b minbytes] [-e maxbytes] [-f factor | -i increment] [-g|-t nranks] [-P nprocs]\n"
              "          [-n iters] [-w warmup] [-c check 0/1] [-d dtype] [-o op] [-r root]\n"
              "          [-z blocking (host calls always block)] [-R 0/1/2] [--predict] [--plot OUT] [--det-pairs K]\n"
              "  -R 1: buffers registered with ncclCommRegister; -R 2: both buffers in one ncclMemAlloc block\n"
              "  registered as a window with NCCL_WIN_COLL_SYMMETRIC (AllReduce, AllGather and ReduceScatter then\n"
              "  run on the peers' buffers directly), as nccl-tests' -R.\n"
              "  --predict: one more column, the time the library predicts for the call (ncclGroupSimulateEnd,\n"
              "  the tuner chain's estimate for the algorithm/protocol it picks); compare it with the time column.\n"
              "  --plot OUT: also draw busbw vs size into OUT.svg and OUT.png (or only OUT.svg / OUT.png) with\n"
              "  benchmarks/plot.sh (gnuplot; TUTTI_PLOT overrides the script's path).\n"
              "  -g N: N ranks as threads of this process; -P N (or TUTTI_PERF_PROCS=N): N forked processes,\n"
              "  one rank each; under mpirun (OMPI_COMM_WORLD_* or PMI_*): one rank per process, the unique id\n"
              "  passed through the file TUTTI_PERF_ID_FILE (default /tmp/tutti-perf-id-<job>).\n"
              "  --bind (with -P): rank r runs on CPU r mod k of the k CPUs this process may use, as mpirun\n"
              "  --bind-to core does; under mpirun, bind with mpirun's own option.\n"
              "  --det-pairs K (AllReduce, ReduceScatter, Reduce): the cost of deterministic reductions. Each size\n"
              "  runs K rounds of two timed loops (warm-up, -n calls), one with the switch off and one with it on\n"
              "  (tuttiCommSetDeterministic), in turns (off-on, on-off, ...), out of place, on the same ranks and\n"
              "  buffers; the columns give each setting's fastest loop (the slowest rank's time), then the ratio of\n"
              "  the two and the median of the K rounds' ratios.\n", prog);
}

// Which ranks this process runs; process modes have exactly one, threads mode all of them.
struct Run {
  Mode mode = Mode::Threads;
  int nRanks = 1;
  int firstRank = 0;
  int localRanks = 1;
};

struct Sample {
  double us = 0;
  float predictedUs = 0;
  size_t wrong = 0;
  ncclResult_t res = ncclSuccess;
};

// One rank's part of one table cell: warmup, timed loop, then one checked call on fresh inputs. `sync()`
// returns when every rank of the run reached it; every rank calls it the same number of times.
template <typename Sync>
Sample measure(Coll coll, const Options& o, ncclComm_t comm, int r, size_t count, RankBuffers& b, bool inPlace,
               Sync&& sync) {
  Sample s;
  if (o.predict && !inPlace) s.res = predictOnce(coll, o, comm, r, count, b, &s.predictedUs);
  for (int i = 0; i < o.warmup && s.res == ncclSuccess; ++i) s.res = runOnce(coll, o, comm, r, count, b, inPlace);
  if (ncclResult_t res = sync(); s.res == ncclSuccess) s.res = res;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters && s.res == ncclSuccess; ++i) s.res = runOnce(coll, o, comm, r, count, b, inPlace);
  auto end = std::chrono::steady_clock::now();
  s.us = std::chrono::duration<double, std::micro>(end - start).count() / o.iters;
  if (o.check && checkable(o.dtype) && s.res == ncclSuccess) {
    prepare(coll, o, r, count, b, inPlace);
    // No rank may rewrite its buffers while a peer still reads them in the timed loop.
    if (ncclResult_t res = sync(); s.res == ncclSuccess) s.res = res;
    if (s.res == ncclSuccess) s.res = runOnce(coll, o, comm, r, count, b, inPlace);
    if (s.res == ncclSuccess) s.wrong = verify(coll, o, r, count, b, inPlace);
  } else if (ncclResult_t res = sync(); s.res == ncclSuccess) {
    s.res = res;
  }
  return s;
}

// Chooses the mode from the flags and the environment; returns false with a message on bad combinations.
bool resolveRun(Options& o, Run* run) {
  int mpiRank = 0, mpiSize = 0;
  std::string error;
  const bool underLauncher = detectLauncher(&mpiRank, &mpiSize, &error);
  if (!error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return false;
  }
  if (o.procs < 0) {
    std::fprintf(stderr, "-P / TUTTI_PERF_PROCS must be a positive process count\n");
    return false;
  }
  if ((underLauncher || o.procs > 0) && o.ranksGiven && o.nRanks != 1) {
    std::fprintf(stderr, "-g/-t %d runs ranks as threads of one process; with -P or under mpirun every "
                 "process is one rank (drop -g, or use -g 1)\n", o.nRanks);
    return false;
  }
  if (underLauncher && o.procs > 0) {
    std::fprintf(stderr, "-P / TUTTI_PERF_PROCS forks ranks locally and cannot be combined with mpirun "
                 "(rank %d of %d); unset it\n", mpiRank, mpiSize);
    return false;
  }
  if (underLauncher) {
    *run = {Mode::Mpi, mpiSize, mpiRank, 1};
  } else if (o.procs > 0) {
    *run = {Mode::Fork, o.procs, 0, 1};
  } else {
    *run = {Mode::Threads, o.nRanks, 0, o.nRanks};
  }
  o.nRanks = run->nRanks;
  return true;
}

// The NCCL_* / TUTTI_* settings of this run, so that a saved output says which transport was asked for.
std::string envSummary() {
  std::string s;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "NCCL_", 5) == 0 || std::strncmp(*e, "TUTTI_", 6) == 0) s += std::string(" ") + *e;
  return s.empty() ? " (no NCCL_* or TUTTI_* variables set)" : s;
}

void printHeader(const Options& o, const Run& run, const char* prog) {
  int version = 0;
  ncclGetVersion(&version);
  const int procs = run.mode == Mode::Threads ? 1 : run.nRanks;
  std::printf("# Tutti %s: nranks %d, mode %s, %d process%s x %d rank%s, iters %d, warmup %d, check %d, "
              "register %d, NCCL API %d\n", prog, run.nRanks, modeName(run.mode), procs, procs > 1 ? "es" : "",
              run.localRanks, run.localRanks > 1 ? "s" : "", o.iters, o.warmup, o.check, o.reg, version);
  if (o.bind) {
    std::string cpus;
    for (size_t r = 0; r < o.bindCpus.size(); ++r) cpus += (r ? ", " : "") + std::to_string(r) + ":" + std::to_string(o.bindCpus[r]);
    std::printf("# bind: rank:CPU %s\n", cpus.c_str());
  }
  std::printf("# env:%s\n", envSummary().c_str());
  if (o.detPairs > 0) {
    std::printf("# deterministic switch off and on in turns, %d round%s a size, out of place; ratio = on / off (fastest "
                "loops), median = the rounds' median ratio\n", o.detPairs, o.detPairs > 1 ? "s" : "");
    std::printf("#\n#%59s%s\n", "", "deterministic off                  deterministic on");
    std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s %6s %6s\n", "size", "count", "type", "redop",
                "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "ratio", "median");
    std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
                "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    return;
  }
  std::printf("#\n#%59s%s\n", "", "out-of-place                       in-place");
  std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s%s\n", "size", "count", "type", "redop", "root",
              "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", o.predict ? "   predict" : "");
  std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s%s\n", "(B)", "(elements)", "", "", "", "(us)",
              "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", o.predict ? "      (us)" : "");
}

// Ranks as threads: one thread per rank for the whole sweep, as nccl-tests keeps its threads. A thread made for each
// size starts on its maker's core and waits for the scheduler to move it: two ranks sharing a core for a short
// timed loop sleep and wake each other on every call (2 threads, 8 B: 0.6 or 4-5 us a call from run to run).
class RankThreads {
 public:
  explicit RankThreads(int n) : start_(n + 1), done_(n + 1) {
    for (int i = 0; i < n; ++i)
      threads_.emplace_back([this, i] {
        while (true) {
          start_.arrive_and_wait();
          if (stop_) return;
          job_(i);
          done_.arrive_and_wait();
        }
      });
  }
  ~RankThreads() {
    stop_ = true;
    start_.arrive_and_wait();
    for (auto& t : threads_) t.join();
  }
  // Runs job(i) on thread i, every i at once; returns once all returned.
  void run(const std::function<void(int)>& job) {
    job_ = job;
    start_.arrive_and_wait();
    done_.arrive_and_wait();
  }

 private:
  std::barrier<> start_, done_;
  std::function<void(int)> job_;
  bool stop_ = false;  // set before the start barrier, read after it
  std::vector<std::thread> threads_;
};

// Runs the sweep on this process's communicators (comms[i] is rank run.firstRank + i). Only the process
// holding rank 0 prints the table. Returns the exit code.
int sweep(Coll coll, const Options& o, const Run& run, const std::vector<ncclComm_t>& comms, const char* prog) {
  const int n = run.nRanks, local = run.localRanks;
  const bool printer = run.firstRank == 0;
  const size_t ts = typeSize(o.dtype);
  std::vector<size_t> sizes;
  for (size_t s = o.minBytes; s <= o.maxBytes;
       s = o.increment ? s + o.increment : std::max(s + 1, static_cast<size_t>(s * o.factor)))
    sizes.push_back(s);
  if (printer) printHeader(o, run, prog);

  const size_t maxCount = countOf(coll, o.maxBytes, ts, n);
  const size_t blocks = (coll == Coll::AllGather || coll == Coll::ReduceScatter || coll == Coll::AlltoAll) ? n : 1;
  std::vector<RankBuffers> bufs(local);
  const size_t bufBytes = ((maxCount * blocks + 1) * ts + 64 + 4095) / 4096 * 4096;
  // -R 2 registers every local rank's block as one window, in a group (collective over the communicator).
  if (o.reg == 2 && ncclGroupStart() != ncclSuccess) return 1;
  for (int i = 0; i < local; ++i) {
    RankBuffers& b = bufs[i];
    char* base = nullptr;
    if (o.reg == 2) {
      if (ncclMemAlloc(&b.mem, 2 * bufBytes) != ncclSuccess ||
          ncclCommWindowRegister(comms[i], b.mem, 2 * bufBytes, &b.win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess) {
        std::fprintf(stderr, "rank %d: -R 2: %s\n", run.firstRank + i, ncclGetLastError(comms[i]));
        ncclGroupEnd();
        return 1;
      }
      base = static_cast<char*>(b.mem);
      std::memset(base, 0, 2 * bufBytes);
    } else {
      b.own.assign(2 * bufBytes, 0);
      base = b.own.data();
    }
    b.send = {base, bufBytes};
    b.recv = {base + bufBytes, bufBytes};
    if (o.reg == 1 && (ncclCommRegister(comms[i], b.send.p, bufBytes, &b.handles[0]) != ncclSuccess ||
                       ncclCommRegister(comms[i], b.recv.p, bufBytes, &b.handles[1]) != ncclSuccess)) {
      std::fprintf(stderr, "rank %d: -R 1: %s\n", run.firstRank + i, ncclGetLastError(comms[i]));
      return 1;
    }
  }
  if (o.reg == 2 && ncclGroupEnd() != ncclSuccess) {
    std::fprintf(stderr, "-R 2: registering the windows failed: %s\n", ncclGetLastError(comms[0]));
    return 1;
  }
  struct Release {
    std::vector<RankBuffers>& bufs;
    const std::vector<ncclComm_t>& comms;
    ~Release() {
      for (size_t i = 0; i < bufs.size(); ++i) {
        for (void* h : bufs[i].handles)
          if (h) ncclCommDeregister(comms[i], h);
        if (bufs[i].win) ncclCommWindowDeregister(comms[i], bufs[i].win);
        if (bufs[i].mem) ncclMemFree(bufs[i].mem);
      }
    }
  } release{bufs, comms};
  std::barrier threadSync(local);
  auto barrierSync = [&threadSync]() -> ncclResult_t {
    threadSync.arrive_and_wait();
    return ncclSuccess;
  };
  // Between processes the library itself is the barrier: a one-element AllReduce completes on no rank
  // before every rank has entered it.
  int token = 0;
  auto commSync = [&]() -> ncclResult_t { return ncclAllReduce(&token, &token, 1, ncclInt32, ncclMax, comms[0], nullptr); };
  std::vector<Sample> samples(local);
  size_t totalWrong = 0;
  std::string rows = "# env:" + envSummary() + "\n";  // what --plot draws
  const bool canInPlace = coll != Coll::AlltoAll && coll != Coll::SendRecv;
  // Warm-up before the sweep, as nccl-tests does: -w calls at the largest size, then at the smallest, then a few
  // barriers. The first calls connect the ranks, start their helpers and fault in the buffers; without this the first
  // row's timed loop shares the cores with that work (an empty call, 4 ranks: 0.06 -> 0.03 us).
  auto warmUp = [&](int i, int rank, const auto& sync) -> ncclResult_t {
    for (size_t bytes : {sizes.back(), sizes.front()})
      for (int k = 0; k < o.warmup; ++k)
        if (ncclResult_t res = runOnce(coll, o, comms[i], rank, countOf(coll, bytes, ts, n), bufs[i], false);
            res != ncclSuccess)
          return res;
    for (int k = 0; k < 5; ++k)
      if (ncclResult_t res = sync(); res != ncclSuccess) return res;
    return ncclSuccess;
  };
  std::vector<ncclResult_t> warmRes(local, ncclSuccess);
  std::unique_ptr<RankThreads> team;
  if (run.mode == Mode::Threads) {
    team = std::make_unique<RankThreads>(local);
    team->run([&](int i) { warmRes[i] = warmUp(i, i, barrierSync); });
  } else {
    warmRes[0] = warmUp(0, run.firstRank, commSync);
  }
  for (int i = 0; i < local; ++i)
    if (warmRes[i] != ncclSuccess) {
      std::fprintf(stderr, "rank %d: warm-up failed: %s: %s\n", run.firstRank + i, ncclGetErrorString(warmRes[i]),
                   ncclGetLastError(comms[i]));
      return 1;
    }

  // --det-pairs: one size's rounds, the switch off and on in turns on the same communicators and buffers, so that
  // both settings share the ranks' placement on the cores, the buffers' pages and the host's moment; prints the row.
  const SetDeterministicFn setDet = o.detPairs > 0 ? setDeterministicFn() : nullptr;
  auto pairedRow = [&](size_t bytes, size_t count) -> bool {
    const int k = o.detPairs;
    std::vector<double> loops(2 * k, 0);  // [setting * k + round]: the slowest local rank's time
    uint64_t w[2] = {0, 0};
    for (int round = 0; round < k; ++round) {
      for (int turn = 0; turn < 2; ++turn) {
        const int det = round % 2 == 0 ? turn : 1 - turn;
        Options oo = o;
        oo.check = round == k - 1 ? o.check : 0;  // each setting's last loop is checked
        auto job = [&](int i, int rank, const auto& sync) {
          // A failed switch is reported after the loop, which every rank still runs: its peers wait at its barriers.
          const ncclResult_t set = setDet(comms[i], det);
          samples[i] = measure(coll, oo, comms[i], rank, count, bufs[i], false, sync);
          if (set != ncclSuccess) samples[i].res = set;
        };
        if (run.mode == Mode::Threads) {
          team->run([&](int i) { job(i, i, barrierSync); });
        } else {
          job(0, run.firstRank, commSync);
        }
        for (int i = 0; i < local; ++i) {
          if (samples[i].res != ncclSuccess) {
            std::fprintf(stderr, "rank %d: deterministic %s: %s: %s\n", run.firstRank + i, det ? "on" : "off",
                         ncclGetErrorString(samples[i].res), ncclGetLastError(comms[i]));
            return false;
          }
          loops[det * k + round] = std::max(loops[det * k + round], samples[i].us);
          w[det] += samples[i].wrong;
        }
      }
    }
    if (run.mode != Mode::Threads) {
      ncclResult_t res = ncclAllReduce(loops.data(), loops.data(), loops.size(), ncclFloat64, ncclMax, comms[0], nullptr);
      if (res == ncclSuccess) res = ncclAllReduce(w, w, 2, ncclUint64, ncclSum, comms[0], nullptr);
      if (res != ncclSuccess) {
        std::fprintf(stderr, "rank %d: gathering the results failed: %s: %s\n", run.firstRank, ncclGetErrorString(res),
                     ncclGetLastError(comms[0]));
        return false;
      }
    }
    totalWrong += w[0] + w[1];
    if (!printer) return true;
    double t[2];
    std::vector<double> ratios(k);
    for (int det = 0; det < 2; ++det) t[det] = *std::min_element(loops.begin() + det * k, loops.begin() + (det + 1) * k);
    for (int round = 0; round < k; ++round) ratios[round] = loops[round] > 0 ? loops[k + round] / loops[round] : 0;
    std::sort(ratios.begin(), ratios.end());
    const double median = k % 2 ? ratios[k / 2] : (ratios[k / 2 - 1] + ratios[k / 2]) / 2;
    std::string cols;
    for (int det = 0; det < 2; ++det) {
      const double algbw = t[det] > 0 ? double(bytes) / t[det] / 1e3 : 0;
      const std::string wr = o.check && checkable(o.dtype) ? std::to_string(w[det]) : std::string("N/A");
      char buf[96];
      std::snprintf(buf, sizeof buf, " %9.2f %7.2f %7.2f %6s", t[det], algbw, algbw * busFactor(coll, n), wr.c_str());
      cols += buf;
    }
    char row[320];
    std::snprintf(row, sizeof row, "  %10zu %12zu %8s %6s %6d%s %6.3f %6.3f\n", bytes, count, typeName(o.dtype),
                  kOps[o.op], hasRoot(coll) ? o.root : -1, cols.c_str(), t[0] > 0 ? t[1] / t[0] : 0, median);
    std::fputs(row, stdout);
    std::fflush(stdout);
    rows += row;
    return true;
  };

  for (size_t bytes : sizes) {
    const size_t count = countOf(coll, bytes, ts, n);
    if (o.detPairs > 0) {
      if (!pairedRow(bytes, count)) return 1;
      continue;
    }
    double t[2] = {0, 0};
    uint64_t w[2] = {0, 0};
    float predicted = 0;  // rank 0's prediction (every rank decides identically)
    for (int place = 0; place < 2; ++place) {
      if (place == 1 && !canInPlace) continue;
      if (run.mode == Mode::Threads) {
        team->run([&](int i) { samples[i] = measure(coll, o, comms[i], i, count, bufs[i], place, barrierSync); });
      } else {
        samples[0] = measure(coll, o, comms[0], run.firstRank, count, bufs[0], place, commSync);
      }
      bool failed = false;
      for (int i = 0; i < local; ++i) {
        if (samples[i].res != ncclSuccess) {
          std::fprintf(stderr, "rank %d: %s: %s\n", run.firstRank + i, ncclGetErrorString(samples[i].res),
                       ncclGetLastError(comms[i]));
          failed = true;
        }
        t[place] = std::max(t[place], samples[i].us);
        if (place == 0 && i == 0) predicted = samples[i].predictedUs;
        w[place] += samples[i].wrong;
      }
      // A failed rank cannot take part in the gathers below; its peers notice it leaving.
      if (failed) return 1;
      if (run.mode != Mode::Threads) {
        ncclResult_t res = ncclAllReduce(&t[place], &t[place], 1, ncclFloat64, ncclMax, comms[0], nullptr);
        if (res == ncclSuccess) res = ncclAllReduce(&w[place], &w[place], 1, ncclUint64, ncclSum, comms[0], nullptr);
        if (res != ncclSuccess) {
          std::fprintf(stderr, "rank %d: gathering the results failed: %s: %s\n", run.firstRank,
                       ncclGetErrorString(res), ncclGetLastError(comms[0]));
          return 1;
        }
      }
      totalWrong += w[place];
    }
    if (!printer) continue;
    auto cols = [&](int place) {
      if (place == 1 && !canInPlace) return std::string("       N/A     N/A     N/A    N/A");
      double algbw = t[place] > 0 ? double(bytes) / t[place] / 1e3 : 0;
      char buf[128];
      std::string wr = o.check && checkable(o.dtype) ? std::to_string(w[place]) : std::string("N/A");
      std::snprintf(buf, sizeof buf, " %9.2f %7.2f %7.2f %6s", t[place], algbw, algbw * busFactor(coll, n), wr.c_str());
      return std::string(buf);
    };
    char pred[32] = "";
    if (o.predict) std::snprintf(pred, sizeof pred, " %9.2f", predicted);
    char row[256];
    std::snprintf(row, sizeof row, "  %10zu %12zu %8s %6s %6d%s%s%s\n", bytes, count, typeName(o.dtype),
                  isReduction(coll) ? kOps[o.op] : "none", hasRoot(coll) ? o.root : -1, cols(0).c_str(),
                  cols(1).c_str(), pred);
    std::fputs(row, stdout);
    std::fflush(stdout);
    rows += row;
  }
  if (printer) std::printf("# Out of bounds values : %zu %s\n", totalWrong, totalWrong ? "FAILED" : "OK");
  if (printer && !o.plot.empty()) {
    std::fflush(stdout);
    const std::string name = std::string(prog).substr(std::string(prog).find_last_of('/') + 1);
    if (!plotRows(rows, o.plot, name + ", " + std::to_string(n) + " ranks")) return 1;
  }
  return totalWrong ? 1 : 0;
}

// Process modes: this process's single rank joins the communicator, runs the sweep and leaves.
int runProcessRank(Coll coll, const Options& o, const Run& run, const ncclUniqueId& id, const char* prog) {
  ncclComm_t comm = nullptr;
  if (ncclResult_t res = ncclCommInitRank(&comm, run.nRanks, id, run.firstRank); res != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclCommInitRank failed: %s (%s)\n", run.firstRank, ncclGetErrorString(res),
                 ncclGetLastError(nullptr));
    return 1;
  }
  if (run.mode == Mode::Mpi && run.firstRank == 0) removeIdFile();
  std::vector<ncclComm_t> comms{comm};
  int rc = sweep(coll, o, run, comms, prog);
  // One more collective after the last result row, so that a rank leaving early (its last call done while a
  // peer still receives from it) can at worst fail this barrier, not the gather of the last row.
  int token = 0;
  if (ncclResult_t res = rc == 0 ? ncclAllReduce(&token, &token, 1, ncclInt32, ncclMax, comm, nullptr) : ncclSuccess;
      res != ncclSuccess) {
    std::fprintf(stderr, "rank %d: final barrier failed: %s: %s\n", run.firstRank, ncclGetErrorString(res),
                 ncclGetLastError(comm));
    rc = 1;
  }
  if (rc == 0) {
    ncclCommDestroy(comm);
  } else {
    ncclCommAbort(comm);
  }
  return rc;
}

}  // namespace

int perfMain(Coll coll, int argc, char** argv) {
  // The buffers are host memory: the host backend unless TUTTI_DEVICE asks for another (`device: auto` would
  // take the GPU of a GPU machine; scripts/gpu-check.sh measures that one with gpu_perf).
  setenv("TUTTI_DEVICE", "host", 0);
  Options o;
  if (const char* p = std::getenv("TUTTI_PERF_PROCS"); p != nullptr && *p) o.procs = std::atoi(p) > 0 ? std::atoi(p) : -1;
  int opt;
  const struct option longOpts[] = {{"predict", no_argument, nullptr, 'p'}, {"plot", required_argument, nullptr, 'x'},
                                    {"bind", no_argument, nullptr, 'B'}, {"help", no_argument, nullptr, 'h'},
                                    {"det-pairs", required_argument, nullptr, 'D'},
                                    {nullptr, 0, nullptr, 0}};
  while ((opt = getopt_long(argc, argv, "b:e:f:i:g:t:P:n:w:c:d:o:r:z:m:a:R:h", longOpts, nullptr)) != -1) {
    switch (opt) {
      case 'p': o.predict = true; break;
      case 'D':
        o.detPairs = std::atoi(optarg);
        if (o.detPairs < 1) {
          std::fprintf(stderr, "--det-pairs takes a number of rounds, at least 1\n");
          return 2;
        }
        break;
      case 'B': o.bind = true; break;
      case 'x': o.plot = optarg; break;
      case 'b': o.minBytes = parseSize(optarg); break;
      case 'e': o.maxBytes = parseSize(optarg); break;
      case 'f': o.factor = std::atof(optarg); break;
      case 'i': o.increment = parseSize(optarg); break;
      case 'g': case 't': o.nRanks = std::atoi(optarg), o.ranksGiven = true; break;
      case 'P': o.procs = std::atoi(optarg) > 0 ? std::atoi(optarg) : -1; break;
      case 'n': o.iters = std::atoi(optarg); break;
      case 'w': o.warmup = std::atoi(optarg); break;
      case 'c': o.check = std::atoi(optarg); break;
      case 'd': {
        bool found = false;
        for (const auto& t : kTypes)
          if (std::strcmp(optarg, t.name) == 0) o.dtype = t.type, found = true;
        if (!found) {
          std::fprintf(stderr, "unknown datatype %s\n", optarg);
          return 2;
        }
        break;
      }
      case 'o': {
        int i = 0;
        for (; i < 5 && std::strcmp(optarg, kOps[i]) != 0; ++i) {}
        if (i == 5) {
          std::fprintf(stderr, "unknown op %s\n", optarg);
          return 2;
        }
        o.op = static_cast<ncclRedOp_t>(i);
        break;
      }
      case 'r': o.root = std::atoi(optarg); break;
      case 'R':
        o.reg = std::atoi(optarg);
        if (o.reg < 0 || o.reg > 2) {
          std::fprintf(stderr, "-R takes 0 (plain memory), 1 (ncclCommRegister) or 2 (symmetric window)\n");
          return 2;
        }
        break;
      case 'z': case 'm': case 'a': break;
      default: usage(argv[0]); return opt == 'h' ? 0 : 2;
    }
  }
  Run run;
  if (!resolveRun(o, &run)) return 2;
  if (o.nRanks < 1 || o.iters < 1 || o.warmup < 0 || o.minBytes > o.maxBytes || o.root < 0 || o.root >= o.nRanks ||
      (o.increment == 0 && o.factor <= 1)) {
    usage(argv[0]);
    return 2;
  }

  if (o.detPairs > 0) {
    if (!isReduction(coll)) {
      std::fprintf(stderr, "--det-pairs compares deterministic reductions: AllReduce, ReduceScatter or Reduce\n");
      return 2;
    }
    if (o.predict) {
      std::fprintf(stderr, "--det-pairs and --predict do not go together (the paired table has no prediction column)\n");
      return 2;
    }
    if (setDeterministicFn() == nullptr) {
      std::fprintf(stderr, "--det-pairs: this library has no tuttiCommSetDeterministic\n");
      return 2;
    }
  }
  if (o.bind && run.mode != Mode::Fork) {
    std::fprintf(stderr, "--bind binds forked ranks (-P N); ranks as threads are not bound, and under mpirun "
                 "its own --bind-to option binds\n");
    return 2;
  }
  if (run.mode == Mode::Fork) {
    for (int r = 0; o.bind && r < run.nRanks; ++r) {
      o.bindCpus.push_back(bindCpuFor(r));
      if (o.bindCpus.back() < 0) {
        std::fprintf(stderr, "--bind: cannot read this process's CPU mask: %s\n", std::strerror(errno));
        return 1;
      }
    }
    ncclUniqueId id;
    int rank = 0, parentExit = 1;
    if (!forkRanks(run.nRanks, &id, &rank, &parentExit)) return parentExit;
    if (o.bind && !bindToCpu(rank, o.bindCpus[rank])) _exit(1);
    run.firstRank = rank;
    int rc = runProcessRank(coll, o, run, id, argv[0]);
    // The child shares the parent's copy of the library's globals (and none of its threads); leave
    // without running their destructors.
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(rc);
  }
  if (run.mode == Mode::Mpi) {
    ncclUniqueId id;
    if (!shareIdThroughFile(run.firstRank, 120, &id)) return 1;
    return runProcessRank(coll, o, run, id, argv[0]);
  }

  std::vector<ncclComm_t> comms(run.nRanks);
  if (ncclResult_t res = ncclCommInitAll(comms.data(), run.nRanks, nullptr); res != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitAll failed: %s (%s)\n", ncclGetErrorString(res), ncclGetLastError(nullptr));
    return 1;
  }
  int rc = sweep(coll, o, run, comms, argv[0]);
  for (auto c : comms) rc == 0 ? ncclCommDestroy(c) : ncclCommAbort(c);
  return rc;
}

}  // namespace tutti::perf
