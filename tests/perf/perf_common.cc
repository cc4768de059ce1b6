#include "perf_common.h"

#include <getopt.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace tutti::perf {
namespace {

struct Options {
  size_t minBytes = 8, maxBytes = 32 << 20;
  double factor = 2;
  size_t increment = 0;
  int nRanks = 2;
  int iters = 20, warmup = 5;
  int check = 1;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;
};

const struct {
  const char* name;
  ncclDataType_t type;
  size_t size;
} kTypes[] = {{"int8", ncclInt8, 1},     {"uint8", ncclUint8, 1},   {"int32", ncclInt32, 4},
              {"uint32", ncclUint32, 4}, {"int64", ncclInt64, 8},   {"uint64", ncclUint64, 8},
              {"half", ncclFloat16, 2},  {"float", ncclFloat32, 4}, {"double", ncclFloat64, 8},
              {"bfloat16", ncclBfloat16, 2}, {"f8e4m3", ncclFloat8e4m3, 1}, {"f8e5m2", ncclFloat8e5m2, 1}};
const char* kOps[] = {"sum", "prod", "max", "min", "avg"};

size_t typeSize(ncclDataType_t t) {
  for (const auto& e : kTypes)
    if (e.type == t) return e.size;
  return 1;
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

struct RankBuffers {
  std::vector<char> send, recv;
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

void usage(const char* prog) {
  std::printf("usage: %s [-b minbytes] [-e maxbytes] [-f factor | -i increment] [-g|-t nranks] [-n iters]\n"
              "          [-w warmup] [-c check 0/1] [-d dtype] [-o op] [-r root] [-z blocking (host calls always "
              "block)]\n", prog);
}

}  // namespace

int perfMain(Coll coll, int argc, char** argv) {
  Options o;
  int opt;
  while ((opt = getopt(argc, argv, "b:e:f:i:g:t:n:w:c:d:o:r:z:m:a:h")) != -1) {
    switch (opt) {
      case 'b': o.minBytes = parseSize(optarg); break;
      case 'e': o.maxBytes = parseSize(optarg); break;
      case 'f': o.factor = std::atof(optarg); break;
      case 'i': o.increment = parseSize(optarg); break;
      case 'g': case 't': o.nRanks = std::atoi(optarg); break;
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
      case 'z': case 'm': case 'a': break;
      default: usage(argv[0]); return opt == 'h' ? 0 : 2;
    }
  }
  if (o.nRanks < 1 || o.iters < 1 || o.minBytes > o.maxBytes || o.root < 0 || o.root >= o.nRanks ||
      (o.increment == 0 && o.factor <= 1)) {
    usage(argv[0]);
    return 2;
  }
  const int n = o.nRanks;
  const size_t ts = typeSize(o.dtype);
  std::vector<size_t> sizes;
  for (size_t s = o.minBytes; s <= o.maxBytes;
       s = o.increment ? s + o.increment : std::max(s + 1, static_cast<size_t>(s * o.factor)))
    sizes.push_back(s);

  std::vector<ncclComm_t> comms(n);
  if (ncclResult_t res = ncclCommInitAll(comms.data(), n, nullptr); res != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitAll failed: %s (%s)\n", ncclGetErrorString(res), ncclGetLastError(nullptr));
    return 1;
  }
  int version = 0;
  ncclGetVersion(&version);
  std::printf("# Tutti %s: nranks %d (threads), iters %d, warmup %d, check %d, NCCL API %d\n",
              argv[0], n, o.iters, o.warmup, o.check, version);
  std::printf("#\n#%59s%s\n", "", "out-of-place                       in-place");
  std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
              "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
              "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");

  const size_t maxCount = countOf(coll, o.maxBytes, ts, n);
  const size_t blocks = (coll == Coll::AllGather || coll == Coll::ReduceScatter || coll == Coll::AlltoAll) ? n : 1;
  std::vector<RankBuffers> bufs(n);
  for (auto& b : bufs) {
    b.send.assign((maxCount * blocks + 1) * ts + 64, 0);
    b.recv.assign((maxCount * blocks + 1) * ts + 64, 0);
  }
  std::barrier sync(n);
  std::vector<double> times(n);
  std::vector<size_t> wrong(n);
  std::vector<ncclResult_t> errors(n, ncclSuccess);
  bool failed = false;
  size_t totalWrong = 0;
  const bool canInPlace = coll != Coll::AlltoAll && coll != Coll::SendRecv;

  for (size_t bytes : sizes) {
    const size_t count = countOf(coll, bytes, ts, n);
    double t[2] = {0, 0};
    long long w[2] = {0, 0};
    for (int place = 0; place < 2; ++place) {
      if (place == 1 && !canInPlace) continue;
      std::vector<std::thread> threads;
      for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r] {
          ncclResult_t res = ncclSuccess;
          for (int i = 0; i < o.warmup && res == ncclSuccess; ++i) res = runOnce(coll, o, comms[r], r, count, bufs[r], place);
          sync.arrive_and_wait();
          auto start = std::chrono::steady_clock::now();
          for (int i = 0; i < o.iters && res == ncclSuccess; ++i) res = runOnce(coll, o, comms[r], r, count, bufs[r], place);
          auto end = std::chrono::steady_clock::now();
          times[r] = std::chrono::duration<double, std::micro>(end - start).count() / o.iters;
          wrong[r] = 0;
          if (o.check && checkable(o.dtype) && res == ncclSuccess) {
            prepare(coll, o, r, count, bufs[r], place);
            sync.arrive_and_wait();
            res = runOnce(coll, o, comms[r], r, count, bufs[r], place);
            if (res == ncclSuccess) wrong[r] = verify(coll, o, r, count, bufs[r], place);
          } else {
            sync.arrive_and_wait();
          }
          errors[r] = res;
        });
      }
      for (auto& th : threads) th.join();
      for (int r = 0; r < n; ++r) {
        if (errors[r] != ncclSuccess) {
          std::fprintf(stderr, "rank %d: %s: %s\n", r, ncclGetErrorString(errors[r]), ncclGetLastError(comms[r]));
          failed = true;
        }
        t[place] = std::max(t[place], times[r]);
        w[place] += static_cast<long long>(wrong[r]);
      }
      totalWrong += w[place];
      if (failed) break;
    }
    if (failed) break;
    auto cols = [&](int place) {
      if (place == 1 && !canInPlace) return std::string("       N/A     N/A     N/A    N/A");
      double algbw = t[place] > 0 ? double(bytes) / t[place] / 1e3 : 0;
      char buf[128];
      std::string wr = o.check && checkable(o.dtype) ? std::to_string(w[place]) : std::string("N/A");
      std::snprintf(buf, sizeof buf, " %9.2f %7.2f %7.2f %6s", t[place], algbw, algbw * busFactor(coll, n), wr.c_str());
      return std::string(buf);
    };
    std::printf("  %10zu %12zu %8s %6s %6d%s%s\n", bytes, count, typeName(o.dtype),
                isReduction(coll) ? kOps[o.op] : "none", hasRoot(coll) ? o.root : -1, cols(0).c_str(),
                cols(1).c_str());
    std::fflush(stdout);
  }
  for (auto c : comms) ncclCommDestroy(c);
  std::printf("# Out of bounds values : %zu %s\n", totalWrong, totalWrong ? "FAILED" : "OK");
  return failed || totalWrong ? 1 : 0;
}

}  // namespace tutti::perf
