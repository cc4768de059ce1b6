// NCCL_IB_HCA parsing and matching, link speed and RoCE GID choice: the pure selection logic of net-ib.
#include <gtest/gtest.h>

#include "selection.h"

using namespace tutti::netib;

namespace {
HcaFilter parse(const std::string& spec) {
  HcaFilter f;
  std::string err;
  EXPECT_TRUE(parseHcaFilter(spec, &f, &err)) << spec << ": " << err;
  return f;
}
}  // namespace

TEST(NetIbHca, EmptySelectsEverything) {
  HcaFilter f = parse("");
  EXPECT_TRUE(f.matches("mlx5_0", 1));
  EXPECT_TRUE(f.matches("anything", 2));
}

TEST(NetIbHca, PrefixAndPort) {
  HcaFilter f = parse("mlx5_0:1,mlx5_1");
  EXPECT_FALSE(f.exclude);
  EXPECT_FALSE(f.exact);
  ASSERT_EQ(f.entries.size(), 2u);
  EXPECT_EQ(f.entries[0].port, 1);
  EXPECT_EQ(f.entries[1].port, -1);
  EXPECT_TRUE(f.matches("mlx5_0", 1));
  EXPECT_FALSE(f.matches("mlx5_0", 2));   // port given: only that port
  EXPECT_TRUE(f.matches("mlx5_1", 2));    // no port: every port
  EXPECT_TRUE(f.matches("mlx5_10", 1));   // prefix: mlx5_1 selects mlx5_10 too
  EXPECT_FALSE(f.matches("mlx4_0", 1));
}

TEST(NetIbHca, ExactMatch) {
  HcaFilter f = parse("=mlx5_1");
  EXPECT_TRUE(f.exact);
  EXPECT_TRUE(f.matches("mlx5_1", 1));
  EXPECT_FALSE(f.matches("mlx5_10", 1));
}

TEST(NetIbHca, Exclude) {
  HcaFilter f = parse("^mlx5_0:2,bnxt");
  EXPECT_TRUE(f.exclude);
  EXPECT_FALSE(f.matches("mlx5_0", 2));
  EXPECT_TRUE(f.matches("mlx5_0", 1));
  EXPECT_FALSE(f.matches("bnxt_re0", 1));
  EXPECT_TRUE(f.matches("mlx5_1", 1));
}

TEST(NetIbHca, ExcludeExact) {
  HcaFilter f = parse("^=mlx5_1");
  EXPECT_TRUE(f.exclude);
  EXPECT_TRUE(f.exact);
  EXPECT_FALSE(f.matches("mlx5_1", 1));
  EXPECT_TRUE(f.matches("mlx5_10", 1));
}

TEST(NetIbHca, EmptyEntriesIgnored) {
  HcaFilter f = parse("mlx5_0,,mlx5_2,");
  EXPECT_EQ(f.entries.size(), 2u);
}

TEST(NetIbHca, BadInputIsAnErrorNamingTheEntry) {
  HcaFilter f;
  f.entries.push_back({"keep", 3});
  std::string err;
  for (const char* bad : {"mlx5_0:", "mlx5_0:x", "mlx5_0:0", "mlx5_0:256", "mlx5_0:1x", ":1", "a,:2", "mlx5_0:-1"}) {
    err.clear();
    EXPECT_FALSE(parseHcaFilter(bad, &f, &err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
  }
  EXPECT_NE(err.find("-1"), std::string::npos);
  // A failed parse leaves the output untouched.
  ASSERT_EQ(f.entries.size(), 1u);
  EXPECT_EQ(f.entries[0].name, "keep");
  std::string many;
  for (size_t i = 0; i <= kMaxHcaEntries; i++) many += "d" + std::to_string(i) + ",";
  EXPECT_FALSE(parseHcaFilter(many, &f, &err));
}

TEST(NetIbSpeed, WidthTimesLaneRate) {
  EXPECT_EQ(linkSpeedMbps(1, 1), 2500);       // SDR 1x
  EXPECT_EQ(linkSpeedMbps(32, 2), 100000);    // EDR 4x
  EXPECT_EQ(linkSpeedMbps(64, 2), 200000);    // HDR 4x
  EXPECT_EQ(linkSpeedMbps(128, 2), 400000);   // NDR 4x
  EXPECT_EQ(linkSpeedMbps(128, 16), 200000);  // NDR 2x
  EXPECT_EQ(linkSpeedMbps(0, 0), 2500);       // unknown codes: the slowest, never inflated
}

namespace {
GidEntry gid(std::initializer_list<uint8_t> tail, const char* type, bool v4 = false, bool linkLocal = false) {
  GidEntry e;
  if (v4) e.raw[10] = e.raw[11] = 0xff;
  if (linkLocal) {
    e.raw[0] = 0xfe;
    e.raw[1] = 0x80;
  }
  int i = 16 - static_cast<int>(tail.size());
  for (uint8_t b : tail) e.raw[i++] = b;
  e.type = type;
  return e;
}
}  // namespace

TEST(NetIbGid, PrefersRoceV2Ipv4Mapped) {
  std::vector<GidEntry> t = {gid({1}, "IB/RoCE v1", false, true), gid({1}, "RoCE v2", false, true),
                             gid({10, 0, 0, 1}, "IB/RoCE v1", true), gid({10, 0, 0, 1}, "RoCE v2", true)};
  EXPECT_EQ(chooseGidIndex(t), 3);
}

TEST(NetIbGid, FallsBackToV2GlobalThenAnyNonZero) {
  std::vector<GidEntry> t = {gid({}, ""), gid({1}, "RoCE v2", false, true), gid({0x20, 1}, "RoCE v2")};
  t[2].raw[0] = 0x20;
  EXPECT_EQ(chooseGidIndex(t), 2);
  std::vector<GidEntry> v1only = {gid({}, ""), gid({1}, "IB/RoCE v1", false, true)};
  EXPECT_EQ(chooseGidIndex(v1only), 1);
  std::vector<GidEntry> zeros = {gid({}, ""), gid({}, "RoCE v2")};
  EXPECT_EQ(chooseGidIndex(zeros), -1);
  EXPECT_EQ(chooseGidIndex({}), -1);
}
