// The host backend's fold of n rows, timed alone: hostReduceCopy (the default path's order) and hostDetReduceCopy
// (the fixed order of deterministic reductions) over the same rows, 2 to 8 of them, each count from -b to -e bytes
// per row. Every deterministic result is checked against detReduceReference first. The rows stay in cache at small
// counts: what a one-hop tree's root, a direct reduction or an exchange spends on arithmetic, apart from the copies.
// -l 4 or -l 8 times the fp32 vector form of the fixed order (det_sum_simd.h) at that width instead of the form the
// CPU gets (float, 3 to 8 rows; -F 0: at 4 lanes, adds only, the form of CPUs without FMA), to compare the widths
// and forms on one CPU.
//
//   fold_perf [-b 16K] [-e 1M] [-f 4] [-r "2 4 8"] [-d float|double|bfloat16|half] [-n iterations] [-l 4|8] [-F 0|1]
#include "device/common/det_reduce.h"
#include "device/host/det_reduce_copy.h"
#include "device/host/det_sum_simd.h"
#include "device/host/reduce_copy.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

// The best of five timed loops of `iters` calls, in microseconds a call.
template <typename F>
double bestOf(int iters, F&& fn) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) fn();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    best = std::min(best, us);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tutti;
  size_t minBytes = 16 << 10, maxBytes = 1 << 20;
  int factor = 4, iters = 0, lanes = 0, fma = 1;
  std::string ranks = "2 4 8", type = "float";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "-b") minBytes = parseSize(argv[i + 1]);
    else if (flag == "-e") maxBytes = parseSize(argv[i + 1]);
    else if (flag == "-f") factor = std::atoi(argv[i + 1]);
    else if (flag == "-r") ranks = argv[i + 1];
    else if (flag == "-d") type = argv[i + 1];
    else if (flag == "-n") iters = std::atoi(argv[i + 1]);
    else if (flag == "-l") lanes = std::atoi(argv[i + 1]);
    else if (flag == "-F") fma = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "fold_perf: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  const ncclDataType_t dt = type == "double"     ? ncclFloat64
                           : type == "bfloat16" ? ncclBfloat16
                           : type == "half"     ? ncclFloat16
                                                : ncclFloat32;
  if (type != "float" && type != "double" && type != "bfloat16" && type != "half") {
    std::fprintf(stderr, "fold_perf: -d takes float, double, bfloat16 or half\n");
    return 2;
  }
  if (lanes != 0 && (dt != ncclFloat32 || (lanes != 4 && lanes != 8) || lanes > detSumFloatLanes())) {
    std::fprintf(stderr, "fold_perf: -l takes 4 or 8 (at most %d on this CPU), with float\n", detSumFloatLanes());
    return 2;
  }
  const size_t es = dataTypeSize(dt);
  if (factor < 2 || minBytes < es || maxBytes < minBytes) {
    std::fprintf(stderr, "fold_perf: need -f >= 2 and %zu <= -b <= -e\n", es);
    return 2;
  }
  std::printf("# fold of n rows of %s, one output, the best of five loops; us a call\n", type.c_str());
  if (lanes) std::printf("# fixed order: the %d-lane vector form%s\n", lanes, lanes == 4 && !fma ? ", adds only" : "");
  std::printf("# %5s %12s %12s %12s %12s %8s\n", "rows", "bytes/row", "count", "default", "fixed order", "ratio");
  int wrong = 0;
  std::istringstream list(ranks);
  for (int n; list >> n;) {
    if (n < 2 || n > 64) {
      std::fprintf(stderr, "fold_perf: rows must be 2 to 64 (-r)\n");
      return 2;
    }
    for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= static_cast<size_t>(factor)) {
      const size_t count = bytes / es;
      std::mt19937_64 rng(n * 1000003u + count);
      std::uniform_real_distribution<double> value(-1000.0, 1000.0);
      std::vector<std::vector<char>> rows(n, std::vector<char>(count * es));
      std::vector<const void*> in;
      for (auto& row : rows) {
        for (size_t e = 0; e < count; ++e) {
          const double v = value(rng);
          if (dt == ncclFloat64) std::memcpy(row.data() + e * es, &v, es);
          else if (dt == ncclFloat32) { const float f = float(v); std::memcpy(row.data() + e * es, &f, es); }
          else if (dt == ncclBfloat16) { const BFloat16 h = BFloat16::fromFloat(float(v)); std::memcpy(row.data() + e * es, &h, es); }
          else { const Half h = Half::fromFloat(float(v)); std::memcpy(row.data() + e * es, &h, es); }
        }
        in.push_back(row.data());
      }
      std::vector<char> out(count * es), want(count * es);
      void* dst = out.data();
      ResolvedRedOp op{};
      resolveBuiltinRedOp(ncclSum, dt, n, &op);
      // The fixed order as timed: the host form, or with -l the vector form alone (its whole vectors).
      const bool vector = lanes != 0 && n >= 3 && n <= 8;
      size_t checked = count;
      auto fixedOrder = [&] {
        if (vector) checked = detSumFloatSimd(n, false, false, in.data(), dst, count, nullptr, lanes, fma != 0);
        else hostDetReduceCopy(op, n, in.data(), 1, &dst, count, nullptr);
      };
      fixedOrder();
      if (detReduceReference(in.data(), n, want.data(), count, op) != ncclSuccess ||
          std::memcmp(out.data(), want.data(), checked * es) != 0)
        ++wrong;
      const int loops = iters > 0 ? iters : static_cast<int>(std::clamp<size_t>((64u << 20) / (bytes * n), 5, 5000));
      const double plain = bestOf(loops, [&] { hostReduceCopy(op, n, in.data(), 1, &dst, count, false, true); });
      const double det = bestOf(loops, fixedOrder);
      std::printf("  %5d %12zu %12zu %12.2f %12.2f %8.2f\n", n, bytes, count, plain, det, det / plain);
    }
  }
  std::printf("# Wrong fixed-order results : %d %s\n", wrong, wrong ? "FAILED" : "OK");
  return wrong ? 1 : 0;
}
