// tutti_mp_rank <rank> <nranks>: one rank of a job started by a script (one process per rank, possibly in
// different network namespaces). The rendezvous comes from NCCL_COMM_ID (rank 0 runs the root). Runs a
// short list of collectives and send/recv checks against the host reference; exit status 0 = all passed.
#include "coll_case.h"
#include "mp_rank.h"
#include "p2p_case.h"

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace tutti::itest;

namespace {

CaseList netnsCases(int nranks) {
  constexpr size_t kLarge = (size_t{1} << 20) + 3;
  CaseList cases;
  uint32_t seed = 4242;
  auto coll = [&](Coll c, ncclDataType_t type, OpKind op, size_t count, int root, bool inPlace) {
    CollSpec s;
    s.coll = c;
    s.type = type;
    s.op = op;
    s.count = count;
    s.root = root;
    s.inPlace = inPlace;
    s.sendOffset = seed % 8;
    s.recvOffset = (seed * 3) % 8;
    s.seed = seed++;
    cases.push_back(std::make_unique<CollCase>(s, nranks));
  };
  auto p2p = [&](P2pPattern pattern, int shift, size_t count) {
    P2pSpec s;
    s.pattern = pattern;
    s.shift = shift;
    s.type = ncclFloat32;
    s.count = count;
    s.seed = seed++;
    cases.push_back(std::make_unique<P2pCase>(s, nranks));
  };
  for (size_t count : {size_t{1}, size_t{1023}, kLarge}) {
    coll(Coll::kAllReduce, ncclFloat32, OpKind::kSum, count, 0, false);
    coll(Coll::kAllReduce, ncclInt32, OpKind::kMax, count, 0, true);
    coll(Coll::kAllGather, ncclFloat32, OpKind::kSum, count / 4 + 1, 0, count % 2 == 1);
    coll(Coll::kBroadcast, ncclInt8, OpKind::kSum, count, 0, false);
    coll(Coll::kBroadcast, ncclFloat32, OpKind::kSum, count, nranks - 1, true);
    p2p(P2pPattern::kAllPairs, 0, count / 4 + 1);
    p2p(P2pPattern::kRingShift, nranks / 2, count);
  }
  return cases;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <rank> <nranks>   (NCCL_COMM_ID=<host>:<port> must be set)\n", argv[0]);
    return 2;
  }
  RankContext ctx;
  ctx.rank = std::atoi(argv[1]);
  ctx.nranks = std::atoi(argv[2]);
  if (ctx.nranks < 1 || ctx.rank < 0 || ctx.rank >= ctx.nranks || std::getenv("NCCL_COMM_ID") == nullptr) {
    std::fprintf(stderr, "%s: bad rank/nranks (%s %s) or NCCL_COMM_ID not set\n", argv[0], argv[1], argv[2]);
    return 2;
  }
  if (ncclGetUniqueId(&ctx.id) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclGetUniqueId failed: %s\n", ctx.rank, ncclGetLastError(nullptr));
    return 1;
  }
  CaseList cases = netnsCases(ctx.nranks);
  Report report;
  const int rc = runCasesAsRank(ctx, cases, report);
  std::printf("rank %d/%d: %s\n", ctx.rank, ctx.nranks, rc == 0 ? "all cases passed" : "FAILED");
  return rc;
}
