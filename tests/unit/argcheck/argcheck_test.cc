// Argument checks: each with good and bad input; failures return the documented code and leave a
// message naming the call and the argument in ncclGetLastError.
#include "api/argcheck.h"
#include "util/check.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace tutti;

namespace {

// Expects `code` and a last-error message containing every fragment.
::testing::AssertionResult failsWith(ncclResult_t got, ncclResult_t want, std::vector<std::string> fragments) {
  if (got != want) return ::testing::AssertionFailure() << "result " << got << ", expected " << want;
  const std::string msg = ncclGetLastError(nullptr);
  if (msg.empty()) return ::testing::AssertionFailure() << "empty last-error message";
  for (const auto& f : fragments)
    if (msg.find(f) == std::string::npos)
      return ::testing::AssertionFailure() << "message '" << msg << "' lacks '" << f << "'";
  return ::testing::AssertionSuccess();
}

CollArgs coll(ncclFunc_t func, const void* send, const void* recv, size_t count, int rank = 0, int nRanks = 4) {
  CollArgs a;
  a.call = "ncclTest";
  a.func = func;
  a.sendbuff = send;
  a.recvbuff = recv;
  a.count = count;
  a.datatype = ncclFloat32;
  a.op = ncclSum;
  a.root = 0;
  a.rank = rank;
  a.nRanks = nRanks;
  return a;
}

int gValidatorCalls = 0;
bool onlyEvenAddresses(const void* p) {
  ++gValidatorCalls;
  return (reinterpret_cast<uintptr_t>(p) & 1) == 0;
}

}  // namespace

TEST(ArgCheck, Comm) {
  EXPECT_TRUE(failsWith(argCheckComm(nullptr, "ncclAllReduce"), ncclInvalidArgument, {"ncclAllReduce", "comm"}));
  alignas(8) char fake[16];
  EXPECT_EQ(argCheckComm(fake, "ncclAllReduce"), ncclSuccess);  // no validator installed: accepted
  argSetCommValidator(onlyEvenAddresses);
  EXPECT_EQ(argCheckComm(fake, "ncclAllReduce"), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckComm(fake + 1, "ncclBroadcast"), ncclInvalidArgument, {"ncclBroadcast", "live"}));
  EXPECT_GE(gValidatorCalls, 2);
  EXPECT_FALSE(commLooksValid(nullptr));
  argSetCommValidator(nullptr);
}

TEST(ArgCheck, SingleArguments) {
  int x = 0;
  EXPECT_EQ(argCheckPtr(&x, "version", "ncclGetVersion"), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckPtr(nullptr, "version", "ncclGetVersion"), ncclInvalidArgument,
                        {"ncclGetVersion", "version"}));
  EXPECT_EQ(argCheckDataType(ncclFloat8e5m2, "c"), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckDataType(ncclNumTypes, "ncclAllReduce"), ncclInvalidArgument, {"datatype", "12"}));
  EXPECT_TRUE(failsWith(argCheckDataType(ncclDataType_t(-3), "ncclAllReduce"), ncclInvalidArgument, {"-3"}));
  EXPECT_EQ(argCheckRedOp(ncclAvg, "c"), ncclSuccess);
  EXPECT_EQ(argCheckRedOp(ncclRedOp_t(ncclNumOps + 3), "c"), ncclSuccess);  // liveness is the table's job
  EXPECT_TRUE(failsWith(argCheckRedOp(ncclRedOp_t(-1), "ncclReduce"), ncclInvalidArgument, {"reduction", "-1"}));
  EXPECT_EQ(argCheckRoot(3, 4, "c"), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckRoot(4, 4, "ncclBroadcast"), ncclInvalidArgument, {"root 4", "0..3"}));
  EXPECT_TRUE(failsWith(argCheckRoot(-1, 4, "ncclBroadcast"), ncclInvalidArgument, {"root -1"}));
  EXPECT_EQ(argCheckPeer(0, 1, "c"), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckPeer(1, 1, "ncclSend"), ncclInvalidArgument, {"ncclSend", "peer 1"}));
  size_t bytes = 0;
  EXPECT_EQ(argCheckBytes(1000, ncclFloat64, 4, "c", &bytes), ncclSuccess);
  EXPECT_EQ(bytes, 32000u);
  EXPECT_TRUE(failsWith(argCheckBytes(SIZE_MAX / 4, ncclFloat64, 1, "ncclAllGather", &bytes), ncclInvalidArgument,
                        {"ncclAllGather", "overflow"}));
  EXPECT_TRUE(failsWith(argCheckBytes(SIZE_MAX / 16, ncclInt8, 16, "ncclAllGather", &bytes), ncclInvalidArgument,
                        {"overflow"}));
  EXPECT_EQ(bytes, 32000u);  // untouched on failure
}

TEST(ArgCheck, CollectiveNullBuffers) {
  std::vector<float> buf(64);
  float* p = buf.data();
  EXPECT_EQ(argCheckCollective(coll(ncclFuncAllReduce, p, p + 16, 16)), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckCollective(coll(ncclFuncAllReduce, nullptr, p, 16)), ncclInvalidArgument,
                        {"ncclTest", "sendbuff"}));
  EXPECT_TRUE(failsWith(argCheckCollective(coll(ncclFuncAllReduce, p, nullptr, 16)), ncclInvalidArgument,
                        {"recvbuff"}));
  EXPECT_EQ(argCheckCollective(coll(ncclFuncAllReduce, nullptr, nullptr, 0)), ncclSuccess);  // count 0
  // Unused buffers may be NULL: Broadcast non-root send, Reduce non-root recv, Send recv, Recv send.
  EXPECT_EQ(argCheckCollective(coll(ncclFuncBroadcast, nullptr, p, 4, /*rank=*/1)), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckCollective(coll(ncclFuncBroadcast, nullptr, p, 4, /*rank=*/0)), ncclInvalidArgument,
                        {"sendbuff", "root 0"}));
  EXPECT_EQ(argCheckCollective(coll(ncclFuncReduce, p, nullptr, 4, 2)), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckCollective(coll(ncclFuncReduce, p, nullptr, 4, 0)), ncclInvalidArgument, {"recvbuff"}));
  EXPECT_EQ(argCheckCollective(coll(ncclFuncGather, p, nullptr, 4, 1)), ncclSuccess);
  EXPECT_EQ(argCheckCollective(coll(ncclFuncScatter, nullptr, p, 4, 1)), ncclSuccess);
  EXPECT_EQ(argCheckCollective(coll(ncclFuncSend, p, nullptr, 4)), ncclSuccess);
  EXPECT_EQ(argCheckCollective(coll(ncclFuncRecv, nullptr, p, 4)), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckCollective(coll(ncclFuncRecv, p, nullptr, 4)), ncclInvalidArgument, {"recvbuff"}));
}

TEST(ArgCheck, CollectiveTypeOpRootPeer) {
  std::vector<float> buf(64);
  float* p = buf.data();
  CollArgs a = coll(ncclFuncAllReduce, p, p + 32, 8);
  a.datatype = ncclNumTypes;
  EXPECT_TRUE(failsWith(argCheckCollective(a), ncclInvalidArgument, {"datatype"}));
  a = coll(ncclFuncAllReduce, p, p + 32, 8);
  a.op = ncclRedOp_t(-2);
  EXPECT_TRUE(failsWith(argCheckCollective(a), ncclInvalidArgument, {"reduction"}));
  a.func = ncclFuncAllGather;  // op is not looked at for non-reductions
  a.sendbuff = p;
  a.recvbuff = p + 16;
  a.count = 4;
  EXPECT_EQ(argCheckCollective(a), ncclSuccess);
  a = coll(ncclFuncBroadcast, p, p + 32, 8);
  a.root = 4;
  EXPECT_TRUE(failsWith(argCheckCollective(a), ncclInvalidArgument, {"root 4"}));
  a = coll(ncclFuncSend, p, nullptr, 8);
  a.root = -1;
  EXPECT_TRUE(failsWith(argCheckCollective(a), ncclInvalidArgument, {"peer -1"}));
  a = coll(ncclFuncAllGather, p, p + 32, SIZE_MAX / 8);
  EXPECT_TRUE(failsWith(argCheckCollective(a), ncclInvalidArgument, {"overflow"}));
  a = coll(ncclFuncAllReduce, p, p, 8, 5, 4);  // rank outside the communicator: engine bug
  EXPECT_EQ(argCheckCollective(a), ncclInternalError);
}

TEST(ArgCheck, InPlaceRules) {
  std::vector<float> buf(256);
  float* r = buf.data();
  const size_t n = 8;  // elements per rank block, 4 ranks
  // AllReduce / Broadcast / Reduce: same pointer or disjoint.
  EXPECT_EQ(argCheckCollective(coll(ncclFuncAllReduce, r, r, n)), ncclSuccess);
  EXPECT_EQ(argCheckCollective(coll(ncclFuncAllReduce, r, r + n, n)), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckCollective(coll(ncclFuncAllReduce, r, r + 1, n)), ncclInvalidUsage,
                        {"overlap", "recvbuff == sendbuff"}));
  EXPECT_TRUE(failsWith(argCheckCollective(coll(ncclFuncBroadcast, r + 3, r, n)), ncclInvalidUsage, {"overlap"}));
  // AllGather: sendbuff == recvbuff + rank*count.
  EXPECT_EQ(argCheckCollective(coll(ncclFuncAllGather, r + 2 * n, r, n, /*rank=*/2)), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckCollective(coll(ncclFuncAllGather, r + 1 * n, r, n, /*rank=*/2)), ncclInvalidUsage,
                        {"rank*sendcount"}));
  EXPECT_EQ(argCheckCollective(coll(ncclFuncAllGather, r + 4 * n, r, n, 2)), ncclSuccess);  // just past recv: disjoint
  // ReduceScatter: recvbuff == sendbuff + rank*count.
  EXPECT_EQ(argCheckCollective(coll(ncclFuncReduceScatter, r, r + 3 * n, n, 3)), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckCollective(coll(ncclFuncReduceScatter, r, r, n, 3)), ncclInvalidUsage,
                        {"rank*recvcount"}));
  // Gather (root 0, this rank root): sendbuff == recvbuff + root*count.
  EXPECT_EQ(argCheckCollective(coll(ncclFuncGather, r, r, n, 0)), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckCollective(coll(ncclFuncGather, r + n, r, n, 0)), ncclInvalidUsage, {"root*count"}));
  // Scatter: recvbuff == sendbuff + root*count.
  CollArgs sc = coll(ncclFuncScatter, r, r + 2 * n, n, 2);
  sc.root = 2;
  EXPECT_EQ(argCheckCollective(sc), ncclSuccess);
  sc.recvbuff = r + n;
  EXPECT_TRUE(failsWith(argCheckCollective(sc), ncclInvalidUsage, {"root*count"}));
  // AlltoAll: in place only as the same buffer (ncclAlltoAll stages it through a scratch copy).
  EXPECT_EQ(argCheckCollective(coll(ncclFuncAlltoAll, r, r, n)), ncclSuccess);
  EXPECT_TRUE(failsWith(argCheckCollective(coll(ncclFuncAlltoAll, r, r + 1, n)), ncclInvalidUsage, {"overlap"}));
  EXPECT_EQ(argCheckCollective(coll(ncclFuncAlltoAll, r, r + 4 * n, n)), ncclSuccess);
}

TEST(ArgCheck, Config) {
  ncclConfig_t out;
  ncclConfig_t good = NCCL_CONFIG_INITIALIZER;
  good.blocking = 0;
  good.commName = "trainer";
  ASSERT_EQ(argCheckConfig(&good, &out, "ncclCommInitRankConfig"), ncclSuccess);
  EXPECT_EQ(out.blocking, 0);
  EXPECT_STREQ(out.commName, "trainer");
  EXPECT_EQ(out.maxCTAs, NCCL_CONFIG_UNDEF_INT);
  ASSERT_EQ(argCheckConfig(nullptr, &out, "ncclCommInitRankConfig"), ncclSuccess);  // NULL: all unset
  EXPECT_EQ(out.blocking, NCCL_CONFIG_UNDEF_INT);

  ncclConfig_t bad = good;
  bad.magic = 0;
  EXPECT_TRUE(failsWith(argCheckConfig(&bad, &out, "ncclCommInitRankConfig"), ncclInvalidArgument,
                        {"ncclCommInitRankConfig", "magic", "NCCL_CONFIG_INITIALIZER"}));
  bad = good;
  bad.size = 0;
  EXPECT_TRUE(failsWith(argCheckConfig(&bad, &out, "ncclCommSplit"), ncclInvalidArgument, {"size"}));
  bad = good;
  bad.blocking = 2;
  EXPECT_TRUE(failsWith(argCheckConfig(&bad, &out, "c"), ncclInvalidArgument, {"blocking", "2"}));
  bad = good;
  bad.minCTAs = 8;
  bad.maxCTAs = 4;
  EXPECT_TRUE(failsWith(argCheckConfig(&bad, &out, "c"), ncclInvalidArgument, {"minCTAs", "maxCTAs"}));
  bad = good;
  bad.minCTAs = 8;  // max unset: fine
  EXPECT_EQ(argCheckConfig(&bad, &out, "c"), ncclSuccess);
  bad = good;
  bad.CTAPolicy = 8;
  EXPECT_TRUE(failsWith(argCheckConfig(&bad, &out, "c"), ncclInvalidArgument, {"CTAPolicy"}));
  bad = good;
  bad.nChannelsPerNetPeer = 65;
  EXPECT_TRUE(failsWith(argCheckConfig(&bad, &out, "c"), ncclInvalidArgument, {"nChannelsPerNetPeer"}));
  bad = good;
  bad.graphUsageMode = 3;
  EXPECT_TRUE(failsWith(argCheckConfig(&bad, &out, "c"), ncclInvalidArgument, {"graphUsageMode"}));

  // A caller built against NCCL 2.27 has a shorter struct; fields it lacks are ignored (reset to unset)
  // even if the memory after its struct holds garbage.
  ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
  old.version = NCCL_VERSION(2, 27, 0);
  old.size = offsetof(ncclConfig_t, nChannelsPerNetPeer);
  old.nvlsCTAs = 2;
  old.nChannelsPerNetPeer = -5;  // beyond the caller's struct
  old.graphStreamOrdering = 77;
  ASSERT_EQ(argCheckConfig(&old, &out, "c"), ncclSuccess);
  EXPECT_EQ(out.nvlsCTAs, 2);
  EXPECT_EQ(out.nChannelsPerNetPeer, NCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ(out.graphStreamOrdering, NCCL_CONFIG_UNDEF_INT);
  // Version says 2.27 but the struct is full size: fields newer than 2.27 still ignored.
  old.size = sizeof(ncclConfig_t);
  ASSERT_EQ(argCheckConfig(&old, &out, "c"), ncclSuccess);
  EXPECT_EQ(out.nChannelsPerNetPeer, NCCL_CONFIG_UNDEF_INT);
  // Output untouched on failure.
  out.blocking = 123;
  bad = good;
  bad.maxP2pPeers = 0;
  EXPECT_TRUE(failsWith(argCheckConfig(&bad, &out, "c"), ncclInvalidArgument, {"maxP2pPeers"}));
  EXPECT_EQ(out.blocking, 123);
}
