// NCCL_ALGO / NCCL_PROTO grammar (NCCL 2.30): lists, ^ exclusion, per-collective sections, case, errors.
#include "plan/tuning.h"
#include "util/check.h"

#include <gtest/gtest.h>

namespace tutti {
namespace {

AlgoProtoFilter parseOk(const std::string& algo, const std::string& proto) {
  AlgoProtoFilter f;
  EXPECT_EQ(parseAlgoProtoFilter(algo, proto, &f), ncclSuccess) << algo << " / " << proto;
  return f;
}

TEST(AlgoProtoFilter, EmptyAllowsEverything) {
  AlgoProtoFilter f = parseOk("", "");
  for (int c = 0; c < kNumTunedFuncs; ++c)
    for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a)
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) EXPECT_TRUE(f.allows(static_cast<ncclFunc_t>(c), a, p));
}

TEST(AlgoProtoFilter, PlainListIsCaseInsensitive) {
  AlgoProtoFilter f = parseOk("rInG, TREE", "simple");
  for (int c = 0; c < kNumTunedFuncs; ++c) {
    auto fn = static_cast<ncclFunc_t>(c);
    EXPECT_TRUE(f.allows(fn, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE));
    EXPECT_TRUE(f.allows(fn, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE));
    EXPECT_FALSE(f.allows(fn, NCCL_ALGO_PAT, NCCL_PROTO_SIMPLE));
    EXPECT_FALSE(f.allows(fn, NCCL_ALGO_RING, NCCL_PROTO_LL));
    EXPECT_FALSE(f.allows(fn, NCCL_ALGO_RING, NCCL_PROTO_LL128));
  }
}

TEST(AlgoProtoFilter, CaretExcludesTheWholeList) {
  AlgoProtoFilter f = parseOk("^tree,pat", "^LL128,ll");
  EXPECT_FALSE(f.algo[ncclFuncAllReduce][NCCL_ALGO_TREE]);
  EXPECT_FALSE(f.algo[ncclFuncAllReduce][NCCL_ALGO_PAT]);
  EXPECT_TRUE(f.algo[ncclFuncAllReduce][NCCL_ALGO_RING]);
  EXPECT_TRUE(f.algo[ncclFuncAllReduce][NCCL_ALGO_NVLS_TREE]);
  EXPECT_FALSE(f.proto[ncclFuncBroadcast][NCCL_PROTO_LL]);
  EXPECT_FALSE(f.proto[ncclFuncBroadcast][NCCL_PROTO_LL128]);
  EXPECT_TRUE(f.proto[ncclFuncBroadcast][NCCL_PROTO_SIMPLE]);
}

TEST(AlgoProtoFilter, SectionsOverrideTheFirstList) {
  // Everything but LL128, except AllReduce which may use only LL128 (NCCL's documented example).
  AlgoProtoFilter f = parseOk("ring,collnetdirect;allreduce:tree,CollnetDirect;Broadcast:ring", "^LL128;allreduce:LL128");
  EXPECT_TRUE(f.algo[ncclFuncReduce][NCCL_ALGO_RING]);
  EXPECT_TRUE(f.algo[ncclFuncReduce][NCCL_ALGO_COLLNET_DIRECT]);
  EXPECT_FALSE(f.algo[ncclFuncReduce][NCCL_ALGO_TREE]);
  EXPECT_TRUE(f.algo[ncclFuncAllReduce][NCCL_ALGO_TREE]);
  EXPECT_FALSE(f.algo[ncclFuncAllReduce][NCCL_ALGO_RING]);
  EXPECT_TRUE(f.algo[ncclFuncBroadcast][NCCL_ALGO_RING]);
  EXPECT_FALSE(f.algo[ncclFuncBroadcast][NCCL_ALGO_COLLNET_DIRECT]);
  EXPECT_TRUE(f.proto[ncclFuncAllGather][NCCL_PROTO_LL]);
  EXPECT_FALSE(f.proto[ncclFuncAllGather][NCCL_PROTO_LL128]);
  EXPECT_TRUE(f.proto[ncclFuncAllReduce][NCCL_PROTO_LL128]);
  EXPECT_FALSE(f.proto[ncclFuncAllReduce][NCCL_PROTO_SIMPLE]);
}

TEST(AlgoProtoFilter, SectionOnlyLeavesOtherCollectivesAlone) {
  AlgoProtoFilter f = parseOk("allgather:^ring", "reducescatter:ll");
  EXPECT_FALSE(f.algo[ncclFuncAllGather][NCCL_ALGO_RING]);
  EXPECT_TRUE(f.algo[ncclFuncAllGather][NCCL_ALGO_PAT]);
  EXPECT_TRUE(f.algo[ncclFuncAllReduce][NCCL_ALGO_RING]);
  EXPECT_TRUE(f.proto[ncclFuncReduceScatter][NCCL_PROTO_LL]);
  EXPECT_FALSE(f.proto[ncclFuncReduceScatter][NCCL_PROTO_SIMPLE]);
  EXPECT_TRUE(f.proto[ncclFuncAllReduce][NCCL_PROTO_SIMPLE]);
}

TEST(AlgoProtoFilter, AllNcclNamesAreKnown) {
  AlgoProtoFilter f = parseOk("Tree,Ring,CollnetDirect,CollnetChain,NVLS,NVLSTree,PAT", "LL,LL128,Simple");
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a) EXPECT_TRUE(f.algo[ncclFuncAllReduce][a]) << a;
}

void expectError(const std::string& algo, const std::string& proto, const std::string& word) {
  AlgoProtoFilter f;
  f.algo[0][0] = false;  // marker: must survive a failed parse
  clearLastError();
  EXPECT_EQ(parseAlgoProtoFilter(algo, proto, &f), ncclInvalidUsage) << algo << " / " << proto;
  EXPECT_NE(std::string(lastErrorText()).find(word), std::string::npos) << lastErrorText();
  EXPECT_FALSE(f.algo[0][0]) << "output written on failure";
}

TEST(AlgoProtoFilter, UnknownWordsAreErrorsNamingThem) {
  expectError("ring,rign", "", "\"rign\"");
  expectError("", "Simple,LL256", "\"LL256\"");
  expectError("allreduc:ring", "", "\"allreduc\"");
  expectError("^bogus", "", "\"bogus\"");
  expectError("", "allreduce:ll;simple", "first entry");  // prefix-less list after a section
  expectError("ring", "^simple,ll,foo", "NCCL_PROTO");
}

}  // namespace
}  // namespace tutti
