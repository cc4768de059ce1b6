// tutti_mp_rank <rank> <nranks> [suite ...]: one rank of a job started by a script (one process per rank,
// possibly in different network namespaces). The rendezvous comes from NCCL_COMM_ID (rank 0 runs the
// root). Runs the multi-process matrix (mp_cases.h) on one communicator: the named suites (a collective
// such as AllReduce, or SendRecv), or all of them when none is named. Every rank must name the same
// suites. Each failed check is printed at once with its case and rank; exit status 0 = all passed,
// 1 = a case failed, 2 = bad arguments.
#include "mp_cases.h"
#include "mp_rank.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace tutti::itest;

namespace {

void usage(const char* argv0) {
  std::string names;
  for (const std::string& n : suiteNames()) names += " " + n;
  std::fprintf(stderr,
               "usage: %s <rank> <nranks> [suite ...]   (NCCL_COMM_ID=<host>:<port> must be set)\n"
               "suites (all when none is named):%s\n",
               argv0, names.c_str());
}

// A whole decimal int in [lo, hi], or -1.
int parseInt(const char* s, int lo, int hi) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return -1;
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    usage(argv[0]);
    return 2;
  }
  RankContext ctx;
  ctx.nranks = parseInt(argv[2], 1, 1 << 16);
  ctx.rank = ctx.nranks < 1 ? -1 : parseInt(argv[1], 0, ctx.nranks - 1);
  if (ctx.nranks < 1 || ctx.rank < 0 || std::getenv("NCCL_COMM_ID") == nullptr) {
    std::fprintf(stderr, "%s: bad rank/nranks (%s %s) or NCCL_COMM_ID not set\n", argv[0], argv[1], argv[2]);
    usage(argv[0]);
    return 2;
  }
  CaseList cases;
  std::string suites;
  for (int i = 3; i < argc; ++i) {
    if (!appendSuiteCases(argv[i], ctx.nranks, cases)) {
      std::fprintf(stderr, "%s: no suite named '%s'\n", argv[0], argv[i]);
      usage(argv[0]);
      return 2;
    }
    suites += std::string(suites.empty() ? "" : " ") + argv[i];
  }
  if (argc == 3) {
    for (const std::string& name : suiteNames()) appendSuiteCases(name, ctx.nranks, cases);
    suites = "all suites";
  }
  if (ncclGetUniqueId(&ctx.id) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclGetUniqueId failed: %s\n", ctx.rank, ncclGetLastError(nullptr));
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  Report report;
  const int rc = runCasesAsRank(ctx, cases, report);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank %d/%d: %zu cases (%s) in %.2f s: %s\n", ctx.rank, ctx.nranks, cases.size(),
              suites.c_str(), seconds, rc == 0 ? "all passed" : "FAILED");
  return rc;
}
