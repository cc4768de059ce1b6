// The default tuner loaded through the real loader: monotonic in bytes, -1 entries left alone, nothing
// written outside the table, channels from 1 upwards, options read and rejected with clear errors.
#include "plugin/tuner_plugin.h"
#include "util/log.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

namespace tutti {
namespace {

constexpr int kA = NCCL_NUM_ALGORITHMS, kP = NCCL_NUM_PROTOCOLS;

class DefaultTuner : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(tunerPluginLoad(TUTTI_TUNER_DEFAULT_SO, &plugin_), ncclSuccess);
    ASSERT_TRUE(plugin_);
    EXPECT_EQ(plugin_->abiVersion, 6);
    EXPECT_STREQ(plugin_->tuner.name, "default");
    EXPECT_TRUE(plugin_->stateless) << "the default tuner declares tuttiTunerStateless";
  }
  void* init(size_t nRanks, size_t nNodes, ncclResult_t expect = ncclSuccess) {
    void* ctx = nullptr;
    EXPECT_EQ(plugin_->tuner.init(&ctx, 1, nRanks, nNodes, tuttiPluginLogger, nullptr, nullptr), expect);
    return ctx;
  }
  std::unique_ptr<TunerPlugin> plugin_;
};

// The table surrounded by guard values: a write outside it shows up in the guards.
struct Guarded {
  float before[8];
  float t[kA][kP];
  float after[8];
  Guarded() {
    for (float& g : before) g = 12345.0f;
    for (float& g : after) g = 12345.0f;
    for (auto& row : t)
      for (float& e : row) e = NCCL_ALGO_PROTO_IGNORE;
  }
  bool guardsIntact() const {
    for (float g : before)
      if (g != 12345.0f) return false;
    for (float g : after)
      if (g != 12345.0f) return false;
    return true;
  }
};

TEST_F(DefaultTuner, MonotonicInBytesAndKeepsIgnoredEntries) {
  void* ctx = init(4, 1);
  ASSERT_NE(ctx, nullptr);
  for (int f = ncclFuncBroadcast; f <= ncclFuncAllReduce; ++f) {
    float prev = -1;
    int prevChannels = 0;
    for (size_t bytes : {size_t{0}, size_t{8}, size_t{4096}, size_t{1} << 20, size_t{1} << 26}) {
      Guarded g;
      g.t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 1.0f;
      g.t[NCCL_ALGO_RING][NCCL_PROTO_LL] = 1.0f;
      int ch = 99;
      ASSERT_EQ(plugin_->tuner.getCollInfo(ctx, static_cast<ncclFunc_t>(f), bytes, 1,
                                           reinterpret_cast<float**>(&g.t[0][0]), kA, kP, 0, &ch),
                ncclSuccess);
      EXPECT_TRUE(g.guardsIntact());
      for (int a = 0; a < kA; ++a)
        for (int p = 0; p < kP; ++p)
          if (!(a == NCCL_ALGO_RING && (p == NCCL_PROTO_SIMPLE || p == NCCL_PROTO_LL))) {
            EXPECT_EQ(g.t[a][p], NCCL_ALGO_PROTO_IGNORE) << "entry " << a << "/" << p << " enabled";
          }
      const float cost = g.t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE];
      EXPECT_GT(cost, 0.0f);
      EXPECT_GE(cost, prev) << "f " << f << " bytes " << bytes;
      prev = cost;
      EXPECT_GE(ch, 1);
      EXPECT_GE(ch, prevChannels);
      prevChannels = ch;
      if (bytes <= 4096) {
        EXPECT_EQ(ch, 1);
      }
    }
    EXPECT_GT(prevChannels, 1) << "large collectives should be offered more channels";
  }
  // LL carries half the data per byte moved: its cost relative to Simple grows with the message size, and
  // large messages go to Simple. (Which wins at 64 B depends on the measured latencies of the host.)
  Guarded small, large;
  for (Guarded* g : {&small, &large}) {
    g->t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = g->t[NCCL_ALGO_RING][NCCL_PROTO_LL] = 1.0f;
    int ch = 1;
    ASSERT_EQ(plugin_->tuner.getCollInfo(ctx, ncclFuncAllReduce, g == &small ? 64 : size_t{64} << 20, 1,
                                         reinterpret_cast<float**>(&g->t[0][0]), kA, kP, 0, &ch), ncclSuccess);
  }
  EXPECT_LT(small.t[NCCL_ALGO_RING][NCCL_PROTO_LL] / small.t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE],
            large.t[NCCL_ALGO_RING][NCCL_PROTO_LL] / large.t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE]);
  EXPECT_GT(large.t[NCCL_ALGO_RING][NCCL_PROTO_LL], large.t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE]);
  EXPECT_EQ(plugin_->tuner.finalize(ctx), ncclSuccess);
}

TEST_F(DefaultTuner, SmallerTableIsRespected) {
  void* ctx = init(8, 2);
  ASSERT_NE(ctx, nullptr);
  // A caller with a 2x2 table: entries past it must not be touched.
  float t[2][2] = {{1, 1}, {1, NCCL_ALGO_PROTO_IGNORE}};
  int ch = 1;
  ASSERT_EQ(plugin_->tuner.getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, reinterpret_cast<float**>(&t[0][0]), 2,
                                       2, 0, &ch), ncclSuccess);
  EXPECT_EQ(t[1][1], NCCL_ALGO_PROTO_IGNORE);
  EXPECT_GT(t[1][0], 1.0f);  // ring/LL over the network for 1 MiB costs more than 1 us
  EXPECT_EQ(plugin_->tuner.finalize(ctx), ncclSuccess);
}

TEST_F(DefaultTuner, OptionsChangeTheModelAndBadValuesFailInit) {
  setenv("TUTTI_TUNER_BANDWIDTH_SHM", "1,1,1000", 1);
  setenv("TUTTI_TUNER_MAX_CHANNELS", "3", 1);
  void* ctx = init(4, 1);
  ASSERT_NE(ctx, nullptr);
  float t[kA][kP];
  for (auto& row : t)
    for (float& e : row) e = NCCL_ALGO_PROTO_IGNORE;
  t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = t[NCCL_ALGO_RING][NCCL_PROTO_LL] = 1.0f;
  int ch = 1;
  ASSERT_EQ(plugin_->tuner.getCollInfo(ctx, ncclFuncAllGather, size_t{1} << 30, 1, reinterpret_cast<float**>(&t[0][0]),
                                       kA, kP, 0, &ch), ncclSuccess);
  EXPECT_EQ(ch, 3);
  // 1 GiB at 1000 GB/s (Simple) vs 1 GB/s (LL).
  EXPECT_LT(t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] * 100, t[NCCL_ALGO_RING][NCCL_PROTO_LL]);
  EXPECT_EQ(plugin_->tuner.finalize(ctx), ncclSuccess);

  for (const char* bad : {"1,2", "1,2,3,4", "1,x,3", "0,1,1", "-1,1,1"}) {
    setenv("TUTTI_TUNER_BANDWIDTH_SHM", bad, 1);
    EXPECT_EQ(init(4, 1, ncclInvalidUsage), nullptr) << bad;
  }
  unsetenv("TUTTI_TUNER_BANDWIDTH_SHM");
  setenv("TUTTI_TUNER_MAX_CHANNELS", "65", 1);
  EXPECT_EQ(init(4, 1, ncclInvalidUsage), nullptr);
  unsetenv("TUTTI_TUNER_MAX_CHANNELS");
  setenv("TUTTI_TUNER_INTRA_LINK", "nvlink", 1);
  EXPECT_EQ(init(4, 1, ncclInvalidUsage), nullptr);
  unsetenv("TUTTI_TUNER_INTRA_LINK");
  EXPECT_EQ(init(4, 8, ncclInvalidArgument), nullptr) << "more nodes than ranks";
}

}  // namespace
}  // namespace tutti
