// The collective matrix with one process per rank, over shm (the default config) and over net-socket
// (shm and p2p disabled, loopback interface). Each ctest test forks k ranks that run one collective's
// cases on one communicator; the INIT log of every rank is then read back to prove the intended transport
// carried every connection (a silent fallback to another transport fails the test).
#include "mp_cases.h"
#include "mp_check.h"
#include "mp_rank.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace tutti::itest {
namespace {

// kDirect: over shm, with every AllGather / Broadcast / AlltoAll of at least one byte on the single-copy path
// (device/host/direct_copy.h: each rank reads the others' buffers with process_vm_readv; a Broadcast's root writes
// a share of the readers' buffers with process_vm_writev).
// kOneShot: over shm, every AllReduce, ReduceScatter, AllGather, Broadcast and AlltoAll up to half a Simple slot on the
// one-shot path (device/host/oneshot.h).
// kNetZeroCopy: over net-socket, with every non-empty Simple step of a ring collective or a send/recv moved
// straight between the user's buffers and the wire (TUTTI_NET_ZERO_COPY_MIN_BYTES=1): odd counts, unaligned
// and in-place buffers included.
enum class Via { kShm, kNet, kDirect, kOneShot, kNetZeroCopy };
enum class Suite { kColl, kSendRecv };

struct MpMatrixParam {
  Via via;
  int nranks;
  Suite suite;
  Coll coll;  // kColl only
};

const char* viaName(Via v) { return v == Via::kNet || v == Via::kNetZeroCopy ? "net" : "shm"; }

std::string paramLabel(const MpMatrixParam& p) {
  const std::string what = p.suite == Suite::kSendRecv ? "SendRecv" : collName(p.coll);
  const char* via = p.via == Via::kShm           ? "Shm_"
                    : p.via == Via::kNet         ? "Net_"
                    : p.via == Via::kNetZeroCopy ? "NetZeroCopy_"
                    : p.via == Via::kDirect      ? "Direct_"
                                                 : "OneShot_";
  return via + what + "_k" + std::to_string(p.nranks);
}
void PrintTo(const MpMatrixParam& p, std::ostream* os) { *os << paramLabel(p); }

// Lines of the logs in `dir` (one file per rank) that contain `text`.
int countLogLines(const std::string& dir, const std::string& text) {
  int n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) n += line.find(text) != std::string::npos;
  }
  return n;
}

class MpMatrix : public testing::TestWithParam<MpMatrixParam> {};

TEST_P(MpMatrix, Cases) {
  const MpMatrixParam p = GetParam();
  const bool hostOnly = p.via == Via::kDirect || p.via == Via::kOneShot;
  if (const char* device = std::getenv("TUTTI_DEVICE"); hostOnly && device && std::string(device) != "host")
    GTEST_SKIP() << "the single-copy and one-shot paths are the host backend's";
  if (hostOnly && (std::getenv("NCCL_ALGO") || std::getenv("NCCL_PROTO")))
    GTEST_SKIP() << "a forced algorithm or protocol turns the single-copy and one-shot paths off";
  const std::string logDir = makeTempDir("tutti-mp-log");
  MpOptions opts;
  opts.nranks = p.nranks;
  opts.timeoutSeconds = 45;  // a case list takes a few seconds; anything near this is a hang
  opts.env = initLogEnv(logDir);
  if (p.via == Via::kNet || p.via == Via::kNetZeroCopy) {
    opts.env.push_back({"NCCL_SHM_DISABLE", "1"});
    opts.env.push_back({"NCCL_P2P_DISABLE", "1"});
    opts.env.push_back({"NCCL_SOCKET_IFNAME", "lo"});
  }
  if (p.via == Via::kDirect) {
    opts.env.push_back({"TUTTI_DIRECT_MIN_BYTES", "1"});
    // A Broadcast's root writes the last 1/n of every reader's buffer wherever that is a page or more.
    opts.env.push_back({"TUTTI_DIRECT_ROOT_SHARE_MIN_BYTES", "1"});
  }
  if (p.via == Via::kNetZeroCopy) {
    opts.env.push_back({"TUTTI_NET_ZERO_COPY_MIN_BYTES", "1"});
    for (auto& [name, value] : opts.env)
      if (name == "NCCL_DEBUG_SUBSYS") value = "INIT,NET";  // the net transport logs its first zero-copy step
  }
  if (p.via == Via::kOneShot) {
    opts.env.push_back({"TUTTI_ONESHOT_MAX_BYTES", "262144"});
    opts.env.push_back({"TUTTI_BINOMIAL_BCAST_MAX_BYTES", "0"});  // the one-shot Broadcast itself
    opts.env.push_back({"TUTTI_TREE_ALLREDUCE_MAX_BYTES", "0"});  // the one-shot AllReduce itself
    opts.env.push_back({"TUTTI_TREE_REDUCESCATTER_MAX_BYTES", "0"});
  }
  if (hostOnly) {
    for (auto& [name, value] : opts.env)
      if (name == "NCCL_DEBUG_SUBSYS") value = "INIT,COLL";  // the COLL lines name each call's algorithm
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
  if (p.via == Via::kOneShot) {
    // Every rank ran collectives on the one-shot path (the larger cases of the list take the ring).
    EXPECT_GE(countLogLines(logDir, "algo ONESHOT"), p.nranks) << "in the logs under " << logDir;
  }
  const char* device = std::getenv("TUTTI_DEVICE");
  if (p.via == Via::kNetZeroCopy && (!device || std::string(device) == "host")) {
    // Steps left from and (except where every receive is reduced) landed in user buffers: the host backend's
    // driven ends. Device backends keep their FIFOs.
    EXPECT_GE(countLogLines(logDir, "leave from user buffers"), 1) << "in the logs under " << logDir;
    const bool reducesAll = p.suite == Suite::kColl && (p.coll == Coll::kReduce || p.coll == Coll::kReduceScatter);
    if (!reducesAll) {
      EXPECT_GE(countLogLines(logDir, "land in user buffers"), 1) << "in the logs under " << logDir;
    }
  }
  if (p.via == Via::kDirect) {
    // Every rank found it could read every other rank (the probe at init), so the path was taken.
    EXPECT_EQ(countLogLines(logDir, "single-copy AllGather from 1 bytes, Broadcast from 1 bytes, AlltoAll from 1 bytes, "
                                      "AllReduce from 1 bytes, ReduceScatter from 1 bytes"),
              p.nranks)
        << "in the INIT logs under " << logDir;
    EXPECT_GE(countLogLines(logDir, "algo DIRECT"), p.nranks) << "in the logs under " << logDir;
  }
  if (!HasFailure()) removeTree(logDir);
}

std::vector<MpMatrixParam> params() {
  std::vector<MpMatrixParam> out;
  for (Via via : {Via::kShm, Via::kNet}) {
    for (int k : {2, 3, 4}) {
      for (Coll c : matrixColls()) out.push_back({via, k, Suite::kColl, c});
      out.push_back({via, k, Suite::kSendRecv, Coll::kAllReduce});
    }
  }
  // 8 processes within a node: AllReduce's small and mid-size calls go up the tree in one hop by default.
  out.push_back({Via::kShm, 8, Suite::kColl, Coll::kAllReduce});
  for (int k : {2, 3}) {
    for (Coll c : matrixColls()) out.push_back({Via::kNetZeroCopy, k, Suite::kColl, c});
    out.push_back({Via::kNetZeroCopy, k, Suite::kSendRecv, Coll::kAllReduce});
  }
  for (int k : {2, 3, 4}) {
    for (Coll c : {Coll::kAllGather, Coll::kBroadcast, Coll::kBcast, Coll::kAlltoAll, Coll::kAllReduce,
                   Coll::kReduceScatter})
      out.push_back({Via::kDirect, k, Suite::kColl, c});
    for (Coll c : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kAlltoAll})
      out.push_back({Via::kOneShot, k, Suite::kColl, c});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Processes, MpMatrix, testing::ValuesIn(params()),
                         [](const testing::TestParamInfo<MpMatrixParam>& info) { return paramLabel(info.param); });

}  // namespace
}  // namespace tutti::itest
