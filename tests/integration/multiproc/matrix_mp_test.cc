// The collective matrix with one process per rank, over shm (the default config) and over net-socket
// (shm and p2p disabled, loopback interface). Each ctest test forks k ranks that run one collective's
// cases on one communicator; the INIT log of every rank is then read back to prove the intended transport
// carried every connection (a silent fallback to another transport fails the test).
#include "coll_case.h"
#include "dtypes.h"
#include "mp_check.h"
#include "mp_rank.h"
#include "p2p_case.h"

#include <gtest/gtest.h>

namespace tutti::itest {
namespace {

enum class Via { kShm, kNet };
enum class Suite { kColl, kSendRecv };

struct MpMatrixParam {
  Via via;
  int nranks;
  Suite suite;
  Coll coll;  // kColl only
};

const char* viaName(Via v) { return v == Via::kShm ? "shm" : "net"; }

std::string paramLabel(const MpMatrixParam& p) {
  const std::string what = p.suite == Suite::kSendRecv ? "SendRecv" : collName(p.coll);
  return std::string(p.via == Via::kShm ? "Shm_" : "Net_") + what + "_k" + std::to_string(p.nranks);
}
void PrintTo(const MpMatrixParam& p, std::ostream* os) { *os << paramLabel(p); }

constexpr size_t kSmallCounts[] = {0, 1, 7, 1023};
constexpr size_t kLarge = (size_t{1} << 20) + 3;  // several slots and loops, with a ragged tail
// Data movement does not interpret elements; one type per element size covers it.
constexpr ncclDataType_t kMovementTypes[] = {ncclInt8, ncclFloat16, ncclFloat32, ncclFloat64};

// (type, op) pairs of a reduction: every type with sum, every op with float and int32.
std::vector<std::pair<ncclDataType_t, OpKind>> reductionPicks() {
  std::vector<std::pair<ncclDataType_t, OpKind>> picks;
  for (ncclDataType_t t : kAllTypes) picks.push_back({t, OpKind::kSum});
  for (ncclDataType_t t : {ncclFloat32, ncclInt32}) {
    for (OpKind op : kAllOps) {
      if (op != OpKind::kSum) picks.push_back({t, op});
    }
  }
  return picks;
}

CaseList collCases(Coll coll, int nranks) {
  CaseList cases;
  uint32_t index = 0;
  auto add = [&](ncclDataType_t type, OpKind op, size_t count, bool inPlace) {
    CollSpec s;
    s.coll = coll;
    s.type = type;
    s.op = op;
    s.count = count;
    s.inPlace = inPlace;
    s.root = (index / 2) % 2 == 0 ? 0 : nranks - 1;  // both roots for both placements
    s.sendOffset = index % 8;
    s.recvOffset = (index * 3 + 5) % 8;
    s.seed = 500 + index++;
    cases.push_back(std::make_unique<CollCase>(s, nranks));
  };
  std::vector<std::pair<ncclDataType_t, OpKind>> picks;
  if (isReduction(coll)) {
    picks = reductionPicks();
  } else {
    for (ncclDataType_t t : kMovementTypes) picks.push_back({t, OpKind::kSum});
  }
  for (const auto& [type, op] : picks) {
    for (size_t count : kSmallCounts) {
      add(type, op, count, false);
      if (supportsInPlace(coll)) add(type, op, count, true);
    }
  }
  // Large: out of place and in place, each root (index drives the root as above).
  for (int i = 0; i < 4; ++i) {
    const bool inPlace = supportsInPlace(coll) && i % 2 == 1;
    add(i < 2 ? ncclFloat32 : ncclInt32, i < 2 ? OpKind::kSum : OpKind::kMax, kLarge, inPlace);
  }
  return cases;
}

CaseList sendRecvCases(int nranks) {
  CaseList cases;
  uint32_t seed = 900;
  auto add = [&](P2pPattern pattern, int shift, ncclDataType_t type, size_t count) {
    P2pSpec s;
    s.pattern = pattern;
    s.shift = shift;
    s.type = type;
    s.count = count;
    s.seed = seed++;
    cases.push_back(std::make_unique<P2pCase>(s, nranks));
  };
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, kLarge}) {
    add(P2pPattern::kRingShift, 1, ncclFloat32, count);
    add(P2pPattern::kRingShift, nranks - 1, ncclInt8, count);
    add(P2pPattern::kAllPairs, 0, ncclFloat32, count);
    add(P2pPattern::kAllToAll, 0, ncclInt8, count);
    add(P2pPattern::kSelf, 0, ncclFloat64, count);
  }
  return cases;
}

class MpMatrix : public testing::TestWithParam<MpMatrixParam> {};

TEST_P(MpMatrix, Cases) {
  const MpMatrixParam p = GetParam();
  const std::string logDir = makeTempDir("tutti-mp-log");
  MpOptions opts;
  opts.nranks = p.nranks;
  opts.timeoutSeconds = 45;  // a case list takes a few seconds; anything near this is a hang
  opts.env = initLogEnv(logDir);
  if (p.via == Via::kNet) {
    opts.env.push_back({"NCCL_SHM_DISABLE", "1"});
    opts.env.push_back({"NCCL_P2P_DISABLE", "1"});
    opts.env.push_back({"NCCL_SOCKET_IFNAME", "lo"});
  }
  MpResult r = runProcesses(opts, [&](const RankContext& ctx) {
    CaseList cases = p.suite == Suite::kSendRecv ? sendRecvCases(ctx.nranks) : collCases(p.coll, ctx.nranks);
    Report report;
    return runCasesAsRank(ctx, cases, report);
  });
  logChildren(r);
  expectAllSucceeded(r, logDir);
  expectNoShmLeftovers(r);

  // Every rank is its own process on this host: shm must carry every pair by default, net when shm and
  // p2p are disabled. A connection of a rank to itself stays in-process and is not counted.
  std::vector<TransportUse> uses = readTransportLog(logDir);
  std::erase_if(uses, [](const TransportUse& u) { return u.rank == u.peer; });
  const std::string want = viaName(p.via);
  EXPECT_EQ(checkTransports(uses, p.nranks, [](int) { return 0; }, want, want), "")
      << "in the INIT logs under " << logDir;
  if (!HasFailure()) removeTree(logDir);
}

std::vector<MpMatrixParam> params() {
  std::vector<MpMatrixParam> out;
  for (Via via : {Via::kShm, Via::kNet}) {
    for (int k : {2, 3, 4}) {
      for (Coll c : kAllColls) {
        if (c == Coll::kBcast) continue;  // ncclBcast is ncclBroadcast in place, covered there
        out.push_back({via, k, Suite::kColl, c});
      }
      out.push_back({via, k, Suite::kSendRecv, Coll::kAllReduce});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Processes, MpMatrix, testing::ValuesIn(params()),
                         [](const testing::TestParamInfo<MpMatrixParam>& info) { return paramLabel(info.param); });

}  // namespace
}  // namespace tutti::itest
