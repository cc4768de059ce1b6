// The default tuner's per-call overhead, tree factors and intra-node link choice, through the real plugin:
// each option moves the estimate by exactly what the README's formula says, and bad values fail init.
#include "plugin/tuner_plugin.h"
#include "util/log.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tutti {
namespace {

constexpr int kA = NCCL_NUM_ALGORITHMS, kP = NCCL_NUM_PROTOCOLS;

// Sets variables for one test and restores the environment after it.
class Env {
 public:
  ~Env() {
    for (const auto& [name, old] : saved_) {
      if (old.has_value()) setenv(name.c_str(), old->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }
  void set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    setenv(name, value, 1);
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

class DefaultTunerTerms : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(tunerPluginLoad(TUTTI_TUNER_DEFAULT_SO, &plugin_), ncclSuccess);
    ASSERT_TRUE(plugin_);
    // The terms each test does not look at are switched off, so the expected values stay simple.
    base_.set("TUTTI_TUNER_CORES", "0");
    base_.set("TUTTI_TUNER_TREE_FILL_FACTOR", "0");
  }
  // Costs of ring and tree (Simple) for an AllReduce of `bytes` on a fresh context; -1 when init fails.
  struct Costs {
    float ring = -1, tree = -1;
  };
  Costs costs(int nRanks, size_t bytes, int nNodes = 1, int coreChannels = 1) {
    void* ctx = nullptr;
    if (plugin_->tuner.init(&ctx, 1, nRanks, nNodes, tuttiPluginLogger, nullptr, nullptr) != ncclSuccess) return {};
    float t[kA][kP];
    for (auto& row : t)
      for (float& e : row) e = NCCL_ALGO_PROTO_IGNORE;
    t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = t[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = 1.0f;
    int ch = coreChannels;
    EXPECT_EQ(plugin_->tuner.getCollInfo(ctx, ncclFuncAllReduce, bytes, 1, reinterpret_cast<float**>(&t[0][0]), kA,
                                         kP, 0, &ch), ncclSuccess);
    EXPECT_EQ(plugin_->tuner.finalize(ctx), ncclSuccess);
    return {t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], t[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE]};
  }
  std::unique_ptr<TunerPlugin> plugin_;
  Env base_;
};

TEST_F(DefaultTunerTerms, OverheadIsAddedOncePerCall) {
  Env env;
  env.set("TUTTI_TUNER_INTRA_LINK", "shm");
  env.set("TUTTI_TUNER_OVERHEAD_SHM", "0,0,0");
  const Costs base2 = costs(2, 4096), base8 = costs(8, 4096);
  env.set("TUTTI_TUNER_OVERHEAD_SHM", "0,0,25");
  const Costs more2 = costs(2, 4096), more8 = costs(8, 4096);
  ASSERT_GT(base2.ring, 0);
  // The same 25 us whatever the rank count (a per-step term would grow with the steps).
  EXPECT_NEAR(more2.ring - base2.ring, 25.0f, 1e-3f);
  EXPECT_NEAR(more8.ring - base8.ring, 25.0f, 1e-3f);
  EXPECT_NEAR(more8.tree - base8.tree, 25.0f, 1e-3f);
}

TEST_F(DefaultTunerTerms, TreeFactorsScaleOnlyTree) {
  Env env;
  env.set("TUTTI_TUNER_INTRA_LINK", "shm");
  env.set("TUTTI_TUNER_OVERHEAD_SHM", "0,0,0");
  env.set("TUTTI_TUNER_LATENCY_SHM", "1,1,10");
  env.set("TUTTI_TUNER_BANDWIDTH_SHM", "1,1,1");
  env.set("TUTTI_TUNER_TREE_LATENCY_FACTOR", "1");
  env.set("TUTTI_TUNER_TREE_BANDWIDTH_FACTOR", "1");
  const Costs base = costs(8, 0), baseBig = costs(8, size_t{1} << 20);
  // 8 ranks on one node: the tree is a chain of 8, 2 x 7 = 14 steps of 10 us at 0 bytes, like the ring.
  EXPECT_NEAR(base.tree, 140.0f, 1e-3f);
  EXPECT_NEAR(base.ring, 140.0f, 1e-3f);  // 2(k-1) = 14 steps
  env.set("TUTTI_TUNER_TREE_LATENCY_FACTOR", "3");
  env.set("TUTTI_TUNER_TREE_BANDWIDTH_FACTOR", "4");
  const Costs scaled = costs(8, 0), scaledBig = costs(8, size_t{1} << 20);
  EXPECT_NEAR(scaled.tree, 420.0f, 1e-3f);
  EXPECT_FLOAT_EQ(scaled.ring, base.ring);
  EXPECT_FLOAT_EQ(scaledBig.ring, baseBig.ring);
  // Traffic 2 x 1 MiB at 1 GB/s = 2097.152 us, a quarter of it at 4x the bandwidth.
  EXPECT_NEAR(baseBig.tree - base.tree, 2097.152f, 0.01f);
  EXPECT_NEAR(scaledBig.tree - scaled.tree, 2097.152f / 4, 0.01f);
}

TEST_F(DefaultTunerTerms, ShallowTreeTrafficAppliesOnlyAtDepthOne) {
  Env env;
  env.set("TUTTI_TUNER_INTRA_LINK", "shm");
  env.set("TUTTI_TUNER_OVERHEAD_SHM", "0,0,0");
  env.set("TUTTI_TUNER_LATENCY_SHM", "1,1,1");
  env.set("TUTTI_TUNER_BANDWIDTH_SHM", "1,1,1");
  env.set("TUTTI_TUNER_TREE_LATENCY_FACTOR", "1");
  env.set("TUTTI_TUNER_TREE_BANDWIDTH_FACTOR", "1");
  const size_t mib = size_t{1} << 20;
  env.set("TUTTI_TUNER_TREE_SHALLOW_TRAFFIC", "1");
  const Costs two = costs(2, mib), four = costs(4, mib), nodes = costs(4, mib, 2);
  env.set("TUTTI_TUNER_TREE_SHALLOW_TRAFFIC", "9,1.5,9");  // process,shm,net: shm applies
  // 2 ranks: 1.5 x 1 MiB instead of 1 x 1 MiB at 1 GB/s.
  EXPECT_NEAR(costs(2, mib).tree - two.tree, 0.5f * 1048.576f, 0.01f);
  EXPECT_FLOAT_EQ(costs(2, mib).ring, two.ring);
  // Deeper trees keep their 2 bytes per byte: a chain of 4, and 2 nodes of 2 (one link plus a chain of 1).
  EXPECT_FLOAT_EQ(costs(4, mib).tree, four.tree);
  EXPECT_FLOAT_EQ(costs(4, mib, 2).tree, nodes.tree);
  for (const char* bad : {"0", "-1", "1,2"}) {
    Env e;
    e.set("TUTTI_TUNER_TREE_SHALLOW_TRAFFIC", bad);
    EXPECT_LT(costs(2, 8).ring, 0) << "TUTTI_TUNER_TREE_SHALLOW_TRAFFIC=" << bad;
  }
}

TEST_F(DefaultTunerTerms, TreeIsAChainInsideANodeAndATreeAcrossNodes) {
  Env env;
  env.set("TUTTI_TUNER_OVERHEAD_NET", "0,0,0");
  env.set("TUTTI_TUNER_LATENCY_NET", "1,1,1");
  env.set("TUTTI_TUNER_TREE_LATENCY_FACTOR", "1");
  // 16 ranks: 16 nodes of 1 (depth log2 16 = 4), 4 nodes of 4 (2 + a chain of 3), 2 nodes of 8 (1 + 7).
  EXPECT_NEAR(costs(16, 0, 16).tree, 8.0f, 1e-3f);
  EXPECT_NEAR(costs(16, 0, 4).tree, 10.0f, 1e-3f);
  EXPECT_NEAR(costs(16, 0, 2).tree, 16.0f, 1e-3f);
  EXPECT_NEAR(costs(16, 0, 16).ring, 30.0f, 1e-3f);
}

TEST_F(DefaultTunerTerms, TreeFactorsPerLink) {
  Env env;
  env.set("TUTTI_TUNER_OVERHEAD_SHM", "0,0,0");
  env.set("TUTTI_TUNER_OVERHEAD_NET", "0,0,0");
  env.set("TUTTI_TUNER_LATENCY_SHM", "1,1,1");
  env.set("TUTTI_TUNER_LATENCY_NET", "1,1,1");
  env.set("TUTTI_TUNER_OVERHEAD_PROCESS", "0,0,0");
  env.set("TUTTI_TUNER_LATENCY_PROCESS", "1,1,1");
  env.set("TUTTI_TUNER_TREE_LATENCY_FACTOR", "7,3,0.5");  // process,shm,net
  env.set("TUTTI_TUNER_INTRA_LINK", "shm");
  EXPECT_NEAR(costs(4, 0).tree, 18.0f, 1e-3f);      // a chain of 4: 6 steps x 3
  EXPECT_NEAR(costs(4, 0, 4).tree, 2.0f, 1e-3f);    // 4 nodes: 2 log2 4 = 4 steps x 0.5
  env.set("TUTTI_TUNER_INTRA_LINK", "process");
  EXPECT_NEAR(costs(4, 0).tree, 42.0f, 1e-3f);
}

TEST_F(DefaultTunerTerms, AutoLinkTakesTheNetworkWhenShmAndP2pAreDisabled) {
  Env env;
  env.set("TUTTI_TUNER_INTRA_LINK", "auto");
  env.set("TUTTI_TUNER_OVERHEAD_SHM", "0,0,0");
  env.set("TUTTI_TUNER_OVERHEAD_NET", "0,0,0");
  env.set("TUTTI_TUNER_LATENCY_SHM", "1,1,1");
  env.set("TUTTI_TUNER_LATENCY_NET", "1000,1000,1000");
  env.set("NCCL_SHM_DISABLE", "0");
  env.set("NCCL_P2P_DISABLE", "1");
  EXPECT_NEAR(costs(2, 0).ring, 2.0f, 1e-3f) << "shm still carries intra-node traffic";
  env.set("NCCL_SHM_DISABLE", "1");
  EXPECT_NEAR(costs(2, 0).ring, 2000.0f, 1e-3f) << "only the network is left";
  env.set("TUTTI_TUNER_INTRA_LINK", "shm");
  EXPECT_NEAR(costs(2, 0).ring, 2.0f, 1e-3f) << "an explicit link wins over auto";
}

TEST_F(DefaultTunerTerms, TreeFillIsSlotsOfDataTimesTheChainDepth) {
  Env env;
  env.set("TUTTI_TUNER_INTRA_LINK", "shm");
  env.set("TUTTI_TUNER_OVERHEAD_SHM", "0,0,0");
  env.set("TUTTI_TUNER_LATENCY_SHM", "1,1,1");
  env.set("TUTTI_TUNER_BANDWIDTH_SHM", "1,1,1");
  env.set("TUTTI_TUNER_TREE_LATENCY_FACTOR", "1");
  env.set("TUTTI_TUNER_TREE_BANDWIDTH_FACTOR", "1");
  const size_t mib = size_t{1} << 20;
  const Costs none4 = costs(4, mib, 1, 2), none2 = costs(2, mib, 1, 2), noneBig = costs(4, 64 * mib, 1, 2);
  env.set("TUTTI_TUNER_TREE_FILL_FACTOR", "1");
  // A chain of 4 (depth 3) pays 2 x 3 - 1 = 5 chunk times. 1 MiB on 2 channels is a 512 KiB share per
  // channel, which the core cuts into 32 KiB chunks (it wants 4 x 3 chunks; 32 KiB is the floor): 5 x 2 x
  // 32 KiB at 1 GB/s.
  EXPECT_NEAR(costs(4, mib, 1, 2).tree - none4.tree, 5 * 65.536f, 0.05f);
  EXPECT_FLOAT_EQ(costs(4, mib, 1, 2).ring, none4.ring) << "the ring has no fill term";
  // Between 2 ranks (depth 1) 4 chunks of 128 KiB per channel are enough; one chunk time.
  EXPECT_NEAR(costs(2, mib, 1, 2).tree - none2.tree, 262.144f, 0.05f);
  // Larger collectives: the chunk stays one slot per channel, so the fill stops growing.
  EXPECT_NEAR(costs(4, 64 * mib, 1, 2).tree - noneBig.tree, 5 * 1048.576f, 0.5f);
  // One channel offered by the core: half the chunk.
  EXPECT_NEAR(costs(4, 64 * mib, 1, 1).tree - noneBig.tree, 5 * 524.288f, 0.5f);
  // The slot follows NCCL_BUFFSIZE (8 slots per buffer): 1 MiB buffers give 128 KiB slots.
  env.set("NCCL_BUFFSIZE", "1048576");
  EXPECT_NEAR(costs(4, 64 * mib, 1, 2).tree - noneBig.tree, 5 * 262.144f, 0.5f);
}

TEST_F(DefaultTunerTerms, OversubscribedNodesPayLongerStepsAndShareBandwidth) {
  Env env;
  env.set("TUTTI_TUNER_INTRA_LINK", "shm");
  env.set("TUTTI_TUNER_OVERHEAD_SHM", "0,0,0");
  env.set("TUTTI_TUNER_LATENCY_SHM", "1,1,1");
  env.set("TUTTI_TUNER_BANDWIDTH_SHM", "1,1,1");
  const size_t mib = size_t{1} << 20;
  const Costs lat8 = costs(8, 0), big8 = costs(8, mib), lat2 = costs(2, 0), big2 = costs(2, mib);
  env.set("TUTTI_TUNER_CORES", "2");
  env.set("TUTTI_TUNER_OVERSUBSCRIBED", "3,1");
  // 8 ranks on 2 cores: 4x oversubscribed, steps 3x longer, bandwidth a quarter.
  EXPECT_NEAR(costs(8, 0).ring, 3 * lat8.ring, 1e-3f);
  EXPECT_NEAR(costs(8, mib).ring - costs(8, 0).ring, 4 * (big8.ring - lat8.ring), 0.05f);
  // 2 ranks fit the 2 cores: nothing changes; nor do 8 ranks spread over 4 nodes (2 per node).
  EXPECT_FLOAT_EQ(costs(2, 0).ring, lat2.ring);
  EXPECT_FLOAT_EQ(costs(2, mib).ring, big2.ring);
  env.set("TUTTI_TUNER_OVERSUBSCRIBED", "3,0.5");
  EXPECT_NEAR(costs(8, mib).ring - costs(8, 0).ring, 2 * (big8.ring - lat8.ring), 0.05f) << "4^0.5 = 2";
  for (const char* bad : {"x", "1", "0,1", "1,-1", "1,2,3", "2,"}) {
    Env e;
    e.set("TUTTI_TUNER_OVERSUBSCRIBED", bad);
    EXPECT_LT(costs(2, 8).ring, 0) << "TUTTI_TUNER_OVERSUBSCRIBED=" << bad;
  }
  for (const char* bad : {"-1", "x", "2.5"}) {
    Env e;
    e.set("TUTTI_TUNER_CORES", bad);
    EXPECT_LT(costs(2, 8).ring, 0) << "TUTTI_TUNER_CORES=" << bad;
  }
}

TEST_F(DefaultTunerTerms, BadTermValuesFailInit) {
  for (const char* bad : {"-1,0,0", "0,0", "0,0,x", "nan,0,0"}) {
    Env env;
    env.set("TUTTI_TUNER_OVERHEAD_NET", bad);
    EXPECT_LT(costs(2, 8).ring, 0) << "TUTTI_TUNER_OVERHEAD_NET=" << bad;
  }
  for (const char* bad : {"0", "-2", "x", "1.5x", "1,2", "1,2,3,4", "1,0,1", "1,2,", ""}) {
    Env env;
    env.set("TUTTI_TUNER_TREE_LATENCY_FACTOR", bad);
    // An empty value means "unset": the default applies.
    if (*bad) EXPECT_LT(costs(2, 8).ring, 0) << "TUTTI_TUNER_TREE_LATENCY_FACTOR=" << bad;
    else EXPECT_GT(costs(2, 8).ring, 0);
  }
  Env env;
  env.set("TUTTI_TUNER_TREE_BANDWIDTH_FACTOR", "0.5");
  EXPECT_GT(costs(2, 8).ring, 0);
}

}  // namespace
}  // namespace tutti
