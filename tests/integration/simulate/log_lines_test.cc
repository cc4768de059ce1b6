// What NCCL_DEBUG=INFO prints for the two subsystems an operator reads first: COLL (one line per
// collective call with everything that decided how it ran) and INIT (plugins with their ABI versions, the
// transport of every connection). 2 ranks as threads; each TEST is its own process.
#include "harness.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace tutti::itest {
namespace {

constexpr int kRanks = 2;

// The capture groups ([0] = whole match) of every line of `text` that `re` matches.
using Captures = std::vector<std::string>;
std::vector<Captures> matches(const std::string& text, const std::regex& re) {
  std::vector<Captures> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    Captures c;
    for (const auto& sub : m) c.push_back(sub.str());
    out.push_back(std::move(c));
  }
  return out;
}

class LogLines : public ::testing::Test {
 protected:
  void SetUp() override { std::remove(logPath_.c_str()); }
  void TearDown() override { std::remove(logPath_.c_str()); }
  std::string logPath_ = ::testing::TempDir() + "tutti_loglines_" + std::to_string(getpid());
  ScopedEnv debug_{"NCCL_DEBUG", "INFO"};
  ScopedEnv file_{"NCCL_DEBUG_FILE", logPath_};
  ScopedEnv oneShot_{"TUTTI_ONESHOT_MAX_BYTES", "0"};  // the tuner decides every AllReduce
  ScopedEnv direct_{"TUTTI_DIRECT_MIN_BYTES", "0"};
};

// Each rank: AllReduce (sum, float, 2000 elements; the fixture keeps it off the one-shot path, so the tuner decides),
// then Broadcast from rank 1 (int32, 300 elements).
void twoCalls(const CommSet& set, Report& report) {
  runPerRank(set, [&](int rank, ncclComm_t comm) {
    std::vector<float> a(2000, 1.0f);
    std::vector<int> b(300, rank);
    if (!report.ok(ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat, ncclSum, comm, nullptr), "AllReduce", comm))
      return;
    if (!report.ok(ncclBroadcast(b.data(), b.data(), b.size(), ncclInt32, 1, comm, nullptr), "Broadcast", comm)) return;
    if (a[1999] != 2.0f || b[299] != 1) report.fail("rank " + std::to_string(rank) + ": wrong result");
  }, report, "calls");
}

TEST_F(LogLines, CollLineHasEveryField) {
  ScopedEnv subsys("NCCL_DEBUG_SUBSYS", "COLL");
  Report report;
  {
    CommSet set(kRanks, InitMode::kInitRank);
    ASSERT_TRUE(set.ok()) << set.error();
    twoCalls(set, report);
  }
  reportFailures(report);
  const std::string log = readFile(logPath_);
  const std::regex re(
      "NCCL INFO (\\w+): opCount (\\d+) count (\\d+) bytes (\\d+) datatype (\\w+) op (\\d+) root (\\d+) comm 0x[0-9a-f]+ "
      "\\[nranks=(\\d+)\\] algo (\\w+) proto (\\w+) channels (\\d+) tuner (\\S+)");
  const auto m = matches(log, re);
  ASSERT_EQ(m.size(), size_t{2 * kRanks}) << log;  // one line per call per rank, nothing else
  int allReduce = 0, broadcast = 0;
  for (const Captures& x : m) {
    EXPECT_EQ(x[8], std::to_string(kRanks));
    EXPECT_TRUE(x[9] == "Ring" || x[9] == "Tree") << x[0];  // NCCL's spellings, as NCCL_ALGO takes them
    EXPECT_TRUE(x[10] == "LL" || x[10] == "LL128" || x[10] == "Simple") << x[0];
    EXPECT_GE(std::stoi(x[11]), 1) << x[0];
    EXPECT_EQ(x[12], "default") << "the default tuner decides when no other tuner is configured: " << x[0];
    if (x[1] == "AllReduce") {
      ++allReduce;
      EXPECT_EQ(x[2], "0") << "first call of the communicator";
      EXPECT_EQ(x[3], "2000");
      EXPECT_EQ(x[4], "8000");
      EXPECT_EQ(x[5], "ncclFloat32");
      EXPECT_EQ(x[6], "0") << "ncclSum";
      EXPECT_EQ(x[7], "0");
    } else if (x[1] == "Broadcast") {
      ++broadcast;
      EXPECT_EQ(x[2], "1");
      EXPECT_EQ(x[3], "300");
      EXPECT_EQ(x[4], "1200");
      EXPECT_EQ(x[7], "1") << "root";
    }
  }
  EXPECT_EQ(allReduce, kRanks);
  EXPECT_EQ(broadcast, kRanks);
}

// The INIT lines of one run under `transport`'s environment: every plugin with its ABI version, and one
// line per connection end naming `transport`.
void checkInit(const std::string& logPath, const char* transport, bool expectNetPlugin) {
  Report report;
  {
    CommSet set(kRanks, InitMode::kInitRank);
    ASSERT_TRUE(set.ok()) << set.error();
    twoCalls(set, report);
  }
  reportFailures(report);
  const std::string log = readFile(logPath);
  const auto plugins = matches(log, std::regex("(\\w+) plugin '?([\\w-]+)'? loaded from (\\S+) \\(ABI v(\\d+)\\)"));
  bool tuner = false, transportPlugin = false, net = false;
  for (const Captures& p : plugins) {
    EXPECT_GE(std::stoi(p[4]), 1) << p[0];
    tuner |= p[1] == "tuner" && p[2] == "default";
    transportPlugin |= p[1] == "transport" && p[2] == transport;
    net |= p[1] == "net";
  }
  EXPECT_TRUE(tuner) << "no 'tuner plugin default loaded ... (ABI vN)' line\n" << log;
  if (std::string(transport) != "net") {
    EXPECT_TRUE(transportPlugin) << "transport " << transport << "\n" << log;
  }
  if (expectNetPlugin) {
    EXPECT_TRUE(net) << "no net plugin line\n" << log;
  }
  const auto conns = matches(log, std::regex("rank (\\d) channel (\\d+) (coll|p2p) (->|<-) rank (\\d) via (\\w+)"));
  ASSERT_FALSE(conns.empty()) << log;
  int sends[kRanks] = {}, recvs[kRanks] = {};
  for (const Captures& c : conns) {
    EXPECT_EQ(c[6], transport) << c[0];
    EXPECT_NE(c[1], c[5]) << c[0];
    // Not `(cond ? sends : recvs)[r]++`: GCC 12 with -fsanitize=null/alignment miscompiles a subscript of
    // a conditional array lvalue (the increment lands in the other element), which failed this under ASan.
    const int r = std::stoi(c[1]);
    if (c[4] == "->") ++sends[r];
    else ++recvs[r];
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_GE(sends[r], 1) << "rank " << r << " logged no send connection\n" << log;
    EXPECT_GE(recvs[r], 1) << "rank " << r << " logged no receive connection\n" << log;
  }
}

TEST_F(LogLines, InitNamesPluginsAndP2pConnections) {
  ScopedEnv subsys("NCCL_DEBUG_SUBSYS", "INIT");
  checkInit(logPath_, "p2p", false);
}

TEST_F(LogLines, InitNamesShmConnections) {
  ScopedEnv subsys("NCCL_DEBUG_SUBSYS", "INIT");
  ScopedEnv p2p("NCCL_P2P_DISABLE", "1");
  checkInit(logPath_, "shm", false);
}

TEST_F(LogLines, InitNamesNetConnectionsAndTheNetPlugin) {
  ScopedEnv subsys("NCCL_DEBUG_SUBSYS", "INIT,NET");
  ScopedEnv p2p("NCCL_P2P_DISABLE", "1");
  ScopedEnv shm("NCCL_SHM_DISABLE", "1");
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  checkInit(logPath_, "net", true);
}

}  // namespace
}  // namespace tutti::itest
