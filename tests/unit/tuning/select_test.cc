// Selection through a chain of fake tuners: refinement in chain order, errors skipped per call, -1
// everywhere reported, unsupported entries kept unsupported, channel clamping, filters, YAML overrides.
#include "plan/tuning.h"
#include "plugin/tuner_plugin.h"
#include "util/check.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

namespace tutti {
namespace {

using Table = float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
Table& tableOf(float** t) { return *reinterpret_cast<Table*>(t); }

std::atomic<int> gInits{0}, gFinalizes{0};

ncclResult_t countInit(void** ctx, uint64_t, size_t, size_t, ncclDebugLogger_t, ncclNvlDomainInfo_v6_t*,
                       ncclTunerConstants_v6_t*) {
  ++gInits;
  *ctx = &gInits;
  return ncclSuccess;
}
ncclResult_t failInit(void**, uint64_t, size_t, size_t, ncclDebugLogger_t, ncclNvlDomainInfo_v6_t*,
                      ncclTunerConstants_v6_t*) {
  return ncclSystemError;
}
ncclResult_t countFinalize(void*) {
  ++gFinalizes;
  return ncclSuccess;
}

// Makes tree/simple the cheapest entry (when available).
ncclResult_t treeCheap(void*, ncclFunc_t, size_t, int, float** t, int, int, int, int*) {
  if (tableOf(t)[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] >= 0) tableOf(t)[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = 0.5f;
  return ncclSuccess;
}
// Makes ring/simple the cheapest entry and asks for 3 channels.
ncclResult_t ringCheap(void*, ncclFunc_t, size_t, int, float** t, int, int, int, int* nChannels) {
  tableOf(t)[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 0.1f;
  *nChannels = 3;
  return ncclSuccess;
}
// Scribbles over the table, then fails: the core must discard what it wrote.
ncclResult_t failing(void*, ncclFunc_t, size_t, int, float** t, int, int, int, int* nChannels) {
  for (auto& row : tableOf(t))
    for (float& e : row) e = 0.0f;
  *nChannels = 7;
  return ncclInternalError;
}
ncclResult_t allIgnore(void*, ncclFunc_t, size_t, int, float** t, int, int, int, int*) {
  for (auto& row : tableOf(t))
    for (float& e : row) e = NCCL_ALGO_PROTO_IGNORE;
  return ncclSuccess;
}
// Tries to enable PAT/LL, which the engine does not run, and asks for 0 channels (invalid).
ncclResult_t enablesUnsupported(void*, ncclFunc_t, size_t, int, float** t, int, int, int, int* nChannels) {
  tableOf(t)[NCCL_ALGO_NVLS][NCCL_PROTO_LL] = 0.0f;  // hardware this engine does not drive
  *nChannels = 0;
  return ncclSuccess;
}

ncclTuner_v6_t make(const char* name, decltype(ncclTuner_v6_t::getCollInfo) get,
                    decltype(ncclTuner_v6_t::init) init = countInit) {
  ncclTuner_v6_t t{};
  t.name = name;
  t.init = init;
  t.getCollInfo = get;
  t.finalize = countFinalize;
  return t;
}

const ncclTuner_v6_t kTree = make("tree-cheap", treeCheap);
const ncclTuner_v6_t kRing = make("ring-cheap", ringCheap);
const ncclTuner_v6_t kFailing = make("failing", failing);
const ncclTuner_v6_t kAllIgnore = make("all-ignore", allIgnore);
const ncclTuner_v6_t kUnsupported = make("enables-unsupported", enablesUnsupported);
const ncclTuner_v6_t kBadInit = make("bad-init", treeCheap, failInit);

struct Supported {
  bool s[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] = {};
  Supported() {
    s[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = true;
    s[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = true;
    s[NCCL_ALGO_RING][NCCL_PROTO_LL] = true;
  }
};

std::atomic<int> gAsked{0};
// Makes ring/simple the cheapest entry, and counts the calls.
ncclResult_t countingRing(void*, ncclFunc_t, size_t, int, float** t, int, int, int, int*) {
  ++gAsked;
  tableOf(t)[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 0.1f;
  return ncclSuccess;
}
const ncclTuner_v6_t kCounting = make("counting", countingRing);

// A chain of stateless tuners (tuttiTunerStateless) is asked once per distinct call; any other, on every call. The
// decision is the same either way.
TEST(TuningSelect, StatelessChainsAreAskedOncePerDistinctCall) {
  Supported sup;
  for (bool stateless : {true, false}) {
    auto plugin = std::make_shared<TunerPlugin>();
    plugin->stateless = stateless;
    TunerChain chain(4, 1);
    ASSERT_EQ(chain.add("counting", plugin, &kCounting, false), ncclSuccess);
    gAsked = 0;
    TuningDecision first, again, other;
    ASSERT_EQ(chain.select(ncclFuncAllReduce, 4096, sup.s, 2, 2, &first), ncclSuccess);
    ASSERT_EQ(chain.select(ncclFuncAllReduce, 4096, sup.s, 2, 2, &again), ncclSuccess);
    EXPECT_EQ(gAsked, stateless ? 1 : 2) << (stateless ? "stateless" : "stateful");
    EXPECT_EQ(again.algorithm, first.algorithm);
    EXPECT_EQ(again.protocol, first.protocol);
    EXPECT_EQ(again.nChannels, first.nChannels);
    EXPECT_EQ(again.decider, "counting");
    // Another size, collective or channel limit is another call.
    ASSERT_EQ(chain.select(ncclFuncAllReduce, 8192, sup.s, 2, 2, &other), ncclSuccess);
    ASSERT_EQ(chain.select(ncclFuncAllGather, 4096, sup.s, 2, 2, &other), ncclSuccess);
    ASSERT_EQ(chain.select(ncclFuncAllReduce, 4096, sup.s, 1, 2, &other), ncclSuccess);
    ASSERT_EQ(chain.select(ncclFuncAllReduce, 4096, sup.s, 2, 2, &other, /*filtered=*/false), ncclSuccess);
    EXPECT_EQ(gAsked, stateless ? 5 : 6) << (stateless ? "stateless" : "stateful");
    EXPECT_EQ(other.algorithm, NCCL_ALGO_RING);
  }
}

TEST(TuningSelect, NoTunersUsesCoreCostsAndChannels) {
  TunerChain chain(4, 1);
  bool ringOnly[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  engineSupport(ncclFuncAllReduce, false, ringOnly);
  TuningDecision d;
  ASSERT_EQ(chain.select(ncclFuncAllReduce, 1 << 20, ringOnly, 2, 2, &d), ncclSuccess);
  EXPECT_EQ(d.algorithm, NCCL_ALGO_RING);
  EXPECT_EQ(d.protocol, NCCL_PROTO_SIMPLE);
  EXPECT_EQ(d.nChannels, 2);
  EXPECT_FALSE(d.channelsFromTuner);
  EXPECT_EQ(d.decider, "core");
}

TEST(TuningSelect, LaterTunersRefineEarlierOnes) {
  Supported sup;
  TuningDecision d;
  {
    TunerChain chain(4, 1);
    ASSERT_EQ(chain.add("tree-cheap", nullptr, &kTree, false), ncclSuccess);
    ASSERT_EQ(chain.select(ncclFuncAllReduce, 4096, sup.s, 1, 2, &d), ncclSuccess);
    EXPECT_EQ(d.algorithm, NCCL_ALGO_TREE);
    EXPECT_EQ(d.decider, "tree-cheap");
    ASSERT_EQ(chain.add("ring-cheap", nullptr, &kRing, false), ncclSuccess);
    ASSERT_EQ(chain.select(ncclFuncAllReduce, 4096, sup.s, 1, 2, &d), ncclSuccess);
    EXPECT_EQ(d.algorithm, NCCL_ALGO_RING);
    EXPECT_EQ(d.protocol, NCCL_PROTO_SIMPLE);
    EXPECT_EQ(d.decider, "ring-cheap");
    // 3 channels asked, 2 allowed.
    EXPECT_EQ(d.nChannels, 2);
    EXPECT_TRUE(d.channelsFromTuner);
    EXPECT_EQ(d.channelsBy, "ring-cheap");
  }
}

TEST(TuningSelect, FinalizeOncePerInit) {
  const int inits = gInits, finalizes = gFinalizes;
  {
    TunerChain chain(2, 1);
    ASSERT_EQ(chain.add("a", nullptr, &kTree, false), ncclSuccess);
    ASSERT_EQ(chain.add("b", nullptr, &kRing, false), ncclSuccess);
    EXPECT_EQ(gInits - inits, 2);
    EXPECT_EQ(gFinalizes - finalizes, 0);
  }
  EXPECT_EQ(gFinalizes - finalizes, 2);
}

TEST(TuningSelect, FailingTunerIsSkippedForTheCall) {
  Supported sup;
  TunerChain chain(4, 1);
  ASSERT_EQ(chain.add("tree-cheap", nullptr, &kTree, false), ncclSuccess);
  ASSERT_EQ(chain.add("failing", nullptr, &kFailing, false), ncclSuccess);
  TuningDecision d;
  for (int i = 0; i < 2; ++i) {  // the second failure is logged quietly but handled the same way
    ASSERT_EQ(chain.select(ncclFuncAllReduce, 4096, sup.s, 1, 4, &d), ncclSuccess);
    EXPECT_EQ(d.algorithm, NCCL_ALGO_TREE);
    EXPECT_EQ(d.decider, "tree-cheap");
    EXPECT_EQ(d.nChannels, 1) << "channels of a failed call must be discarded";
    EXPECT_FALSE(d.channelsFromTuner);
  }
}

TEST(TuningSelect, EverythingIgnoredIsAnErrorNamingTheCollective) {
  Supported sup;
  TunerChain chain(4, 1);
  ASSERT_EQ(chain.add("all-ignore", nullptr, &kAllIgnore, false), ncclSuccess);
  TuningDecision d;
  d.algorithm = 42;  // marker: untouched on failure
  clearLastError();
  EXPECT_EQ(chain.select(ncclFuncReduceScatter, 4096, sup.s, 1, 2, &d), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorText()).find("ReduceScatter"), std::string::npos) << lastErrorText();
  EXPECT_NE(std::string(lastErrorText()).find("all-ignore"), std::string::npos) << lastErrorText();
  EXPECT_EQ(d.algorithm, 42);
}

TEST(TuningSelect, UnsupportedStaysUnsupportedAndBadChannelsIgnored) {
  bool ringOnly[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  engineSupport(ncclFuncAllGather, false, ringOnly);
  TunerChain chain(4, 1);
  ASSERT_EQ(chain.add("enables-unsupported", nullptr, &kUnsupported, false), ncclSuccess);
  TuningDecision d;
  ASSERT_EQ(chain.select(ncclFuncAllGather, 1 << 20, ringOnly, 2, 2, &d), ncclSuccess);
  EXPECT_EQ(d.algorithm, NCCL_ALGO_RING);
  EXPECT_EQ(d.protocol, NCCL_PROTO_SIMPLE);
  EXPECT_EQ(d.nChannels, 2);
  EXPECT_FALSE(d.channelsFromTuner);
}

TEST(TuningSelect, FailedInitSkipsUnlessRequired) {
  TunerChain chain(4, 1);
  EXPECT_EQ(chain.add("bad-init", nullptr, &kBadInit, false), ncclSuccess);
  EXPECT_TRUE(chain.entries().empty());
  clearLastError();
  EXPECT_EQ(chain.add("bad-init", nullptr, &kBadInit, true), ncclSystemError);
  EXPECT_NE(std::string(lastErrorText()).find("bad-init"), std::string::npos) << lastErrorText();
  EXPECT_TRUE(chain.entries().empty());
}

TEST(TuningSelect, FiltersApplyAfterTheTuners) {
  Supported sup;
  TunerChain chain(4, 1);
  ASSERT_EQ(chain.add("ring-cheap", nullptr, &kRing, false), ncclSuccess);
  AlgoProtoFilter f;
  ASSERT_EQ(parseAlgoProtoFilter("allreduce:tree", "", &f), ncclSuccess);
  chain.setFilter(f);
  TuningDecision d;
  ASSERT_EQ(chain.select(ncclFuncAllReduce, 4096, sup.s, 1, 2, &d), ncclSuccess);
  EXPECT_EQ(d.algorithm, NCCL_ALGO_TREE);  // ring was cheapest but is filtered out
  EXPECT_EQ(d.decider, "core");
  ASSERT_EQ(chain.select(ncclFuncBroadcast, 4096, sup.s, 1, 2, &d), ncclSuccess);
  EXPECT_EQ(d.algorithm, NCCL_ALGO_RING);

  ASSERT_EQ(parseAlgoProtoFilter("", "reduce:ll128", &f), ncclSuccess);
  chain.setFilter(f);
  clearLastError();
  EXPECT_EQ(chain.select(ncclFuncReduce, 4096, sup.s, 1, 2, &d), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorText()).find("Reduce"), std::string::npos) << lastErrorText();
}

TuningRule rule(ncclFunc_t f, int64_t lo, int64_t hi, int algo, int proto, int channels) {
  TuningRule r;
  r.collective = f;
  r.minBytes = lo;
  r.maxBytes = hi;
  r.algorithm = algo;
  r.protocol = proto;
  r.channels = channels;
  return r;
}

TEST(TuningOverrides, MatchingRuleForcesItsChoice) {
  Supported sup;
  TunerChain chain(4, 1);
  ASSERT_EQ(chain.add("ring-cheap", nullptr, &kRing, false), ncclSuccess);
  chain.addOverrides({rule(ncclFuncAllReduce, 0, 65536, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE, 1)});
  ASSERT_EQ(chain.entries().size(), 2u);
  TuningDecision d;
  ASSERT_EQ(chain.select(ncclFuncAllReduce, 1000, sup.s, 2, 2, &d), ncclSuccess);
  EXPECT_EQ(d.algorithm, NCCL_ALGO_TREE);
  EXPECT_EQ(d.decider, "yaml-overrides");
  EXPECT_EQ(d.nChannels, 1);
  EXPECT_EQ(d.channelsBy, "yaml-overrides");
  // Outside the byte range, and for another collective: untouched.
  ASSERT_EQ(chain.select(ncclFuncAllReduce, 65536, sup.s, 2, 2, &d), ncclSuccess);
  EXPECT_EQ(d.algorithm, NCCL_ALGO_RING);
  EXPECT_EQ(d.decider, "ring-cheap");
  ASSERT_EQ(chain.select(ncclFuncAllGather, 1000, sup.s, 2, 2, &d), ncclSuccess);
  EXPECT_EQ(d.decider, "ring-cheap");
}

TEST(TuningOverrides, ProtocolOnlyChannelsOnlyAndLaterRules) {
  Supported sup;
  TunerChain chain(4, 1);
  ASSERT_EQ(chain.add("tree-cheap", nullptr, &kTree, false), ncclSuccess);
  chain.addOverrides({rule(ncclFuncBroadcast, 0, INT64_MAX, -1, NCCL_PROTO_LL, -1),
                      rule(ncclFuncReduce, 0, INT64_MAX, -1, -1, 2),
                      rule(ncclFuncAllReduce, 0, INT64_MAX, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE, -1),
                      rule(ncclFuncAllReduce, 0, 100, NCCL_ALGO_RING, NCCL_PROTO_LL, -1)});
  TuningDecision d;
  ASSERT_EQ(chain.select(ncclFuncBroadcast, 10, sup.s, 1, 4, &d), ncclSuccess);
  EXPECT_EQ(d.algorithm, NCCL_ALGO_RING);  // the only LL entry supported
  EXPECT_EQ(d.protocol, NCCL_PROTO_LL);
  ASSERT_EQ(chain.select(ncclFuncReduce, 10, sup.s, 1, 4, &d), ncclSuccess);
  EXPECT_EQ(d.algorithm, NCCL_ALGO_TREE);  // the rule set channels only
  EXPECT_EQ(d.decider, "tree-cheap");
  EXPECT_EQ(d.nChannels, 2);
  ASSERT_EQ(chain.select(ncclFuncAllReduce, 10, sup.s, 1, 4, &d), ncclSuccess);
  EXPECT_EQ(d.algorithm, NCCL_ALGO_RING);  // the later matching rule wins
  EXPECT_EQ(d.protocol, NCCL_PROTO_LL);
  ASSERT_EQ(chain.select(ncclFuncAllReduce, 1000, sup.s, 1, 4, &d), ncclSuccess);
  EXPECT_EQ(d.algorithm, NCCL_ALGO_TREE);
  EXPECT_EQ(d.decider, "yaml-overrides");
}

TEST(TuningOverrides, RankRangeAndUnavailablePairs) {
  bool ringOnly[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] = {};
  ringOnly[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = ringOnly[NCCL_ALGO_RING][NCCL_PROTO_LL] = true;
  TuningRule big = rule(ncclFuncAllReduce, 0, INT64_MAX, -1, -1, 1);
  big.minRanks = 8;
  TunerChain chain(4, 1);
  chain.addOverrides({big, rule(ncclFuncAllReduce, 0, INT64_MAX, NCCL_ALGO_TREE, NCCL_PROTO_LL, 2)});
  TuningDecision d;
  ASSERT_EQ(chain.select(ncclFuncAllReduce, 10, ringOnly, 2, 2, &d), ncclSuccess);
  EXPECT_EQ(d.algorithm, NCCL_ALGO_RING);  // tree/LL unavailable: the rule's pair is ignored
  EXPECT_EQ(d.nChannels, 2);               // its channel count still applies; the 8+ rank rule does not
  EXPECT_EQ(d.decider, "core");
}

TEST(TuningSupport, TreeOnlyForAllReduceAndLL128OnlyWhenEveryTransportGuaranteesIt) {
  bool s[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  engineSupport(ncclFuncAllReduce, true, s);
  for (int p : {NCCL_PROTO_LL, NCCL_PROTO_LL128, NCCL_PROTO_SIMPLE}) {
    EXPECT_TRUE(s[NCCL_ALGO_RING][p]) << p;
    EXPECT_TRUE(s[NCCL_ALGO_TREE][p]) << p;
    EXPECT_FALSE(s[NCCL_ALGO_NVLS][p]) << p;
  }
  engineSupport(ncclFuncAllReduce, false, s);
  EXPECT_FALSE(s[NCCL_ALGO_RING][NCCL_PROTO_LL128]);
  EXPECT_FALSE(s[NCCL_ALGO_TREE][NCCL_PROTO_LL128]);
  EXPECT_TRUE(s[NCCL_ALGO_TREE][NCCL_PROTO_LL]);
  for (ncclFunc_t f : {ncclFuncAllGather, ncclFuncReduceScatter, ncclFuncBroadcast, ncclFuncReduce}) {
    engineSupport(f, true, s);
    EXPECT_FALSE(s[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE]) << f;
    EXPECT_TRUE(s[NCCL_ALGO_RING][NCCL_PROTO_LL128]) << f;
  }
}

}  // namespace
}  // namespace tutti
