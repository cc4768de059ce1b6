// Tuning through the public API, 4 ranks as threads. Every TEST runs in its own process (ctest), so the
// NCCL_* variables set here are read fresh by the configuration and the log.
#include "harness.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tutti::itest {
namespace {

constexpr int kRanks = 4;

std::string tempPath(const char* tag) {
  return ::testing::TempDir() + "tutti_tuning_" + tag + "_" + std::to_string(getpid());
}

// AllReduce (sum of float) of `count` elements on every rank; checks every element.
void allReduce(const CommSet& set, size_t count, Report& report) {
  runPerRank(set, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(count), recv(count, -1.0f);
    for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(rank + 1) + static_cast<float>(i % 7);
    if (!report.ok(ncclAllReduce(send.data(), recv.data(), count, ncclFloat, ncclSum, comm, nullptr),
                   "ncclAllReduce", comm))
      return;
    for (size_t i = 0; i < count; ++i) {
      const float want = 10.0f + 4.0f * static_cast<float>(i % 7);  // 1+2+3+4 plus 4 times the offset
      if (recv[i] != want) {
        report.fail("rank " + std::to_string(rank) + " count " + std::to_string(count) + ": element " +
                    std::to_string(i) + " is " + std::to_string(recv[i]) + ", expected " + std::to_string(want));
        return;
      }
    }
  }, report, "AllReduce");
}

class TuningLog : public ::testing::Test {
 protected:
  void SetUp() override { std::remove(logPath_.c_str()); }
  void TearDown() override { std::remove(logPath_.c_str()); }
  std::string logPath_ = tempPath("log");
  ScopedEnv debug_{"NCCL_DEBUG", "INFO"};
  ScopedEnv subsys_{"NCCL_DEBUG_SUBSYS", "TUNING"};
  ScopedEnv file_{"NCCL_DEBUG_FILE", logPath_};
  ScopedEnv direct_{"TUTTI_DIRECT_MIN_BYTES", "0"};  // threads as ranks: the tuner decides every AllReduce
};

TEST_F(TuningLog, DecisionLineNamesEveryField) {
  Report report;
  {
    CommSet set(kRanks, InitMode::kInitRank);
    ASSERT_TRUE(set.ok()) << set.error();
    allReduce(set, 1 << 18, report);  // 1 MiB
  }
  reportFailures(report);
  const std::string log = readFile(logPath_);
  // The default tuner's pick depends on its calibration; the line's shape does not.
  const auto lines = linesWith(log, "AllReduce: 1048576 bytes -> algo ");
  ASSERT_EQ(lines.size(), size_t{kRanks}) << log;  // one decision per rank
  for (const std::string& l : lines) {
    EXPECT_NE(l.find(" proto "), std::string::npos) << l;
    EXPECT_NE(l.find(" channels "), std::string::npos) << l;
    EXPECT_NE(l.find("decider default"), std::string::npos) << l;
    EXPECT_NE(l.find("NCCL INFO"), std::string::npos) << l;
  }
  EXPECT_EQ(linesWith(log, "tuner chain: default").size(), size_t{kRanks}) << log;
}

TEST_F(TuningLog, ExampleTunerDecidesInsideItsRange) {
#ifndef TUTTI_EXAMPLE_TUNER_SO
  GTEST_SKIP() << "sdk/examples/tuner is not built in this tree (tests/integration/sdk)";
#else
  const std::string csv = tempPath("rules.csv");
  {
    std::ofstream out(csv);
    out << "# collective,minBytes,maxBytes,algorithm,protocol,channels\n"
        << "allreduce,0,65536,ring,simple,1\n";
  }
  ScopedEnv rules("TUTTI_EXAMPLE_TUNER_CSV", csv);
  ScopedEnv tuner("NCCL_TUNER_PLUGIN", TUTTI_EXAMPLE_TUNER_SO);
  Report report;
  {
    CommSet set(kRanks, InitMode::kInitRank);
    ASSERT_TRUE(set.ok()) << set.error();
    for (size_t count : {size_t{1}, size_t{1000}, size_t{16383}, size_t{16384}, size_t{1} << 18})
      allReduce(set, count, report);
  }
  reportFailures(report);
  std::remove(csv.c_str());
  const std::string log = readFile(logPath_);
  EXPECT_EQ(linesWith(log, "tuner chain: default -> example-csv").size(), size_t{kRanks}) << log;
  for (size_t bytes : {4, 4000, 65532}) {
    auto l = linesWith(log, "AllReduce: " + std::to_string(bytes) + " bytes -> algo Ring proto Simple channels 1 "
                       "decider example-csv");
    EXPECT_EQ(l.size(), size_t{kRanks}) << bytes << "\n" << log;
  }
  for (size_t bytes : {65536, 1048576}) {
    // Outside the CSV's range the default tuner decides (whichever pair it prefers there).
    auto l = linesWith(log, "AllReduce: " + std::to_string(bytes) + " bytes -> algo ");
    ASSERT_EQ(l.size(), size_t{kRanks}) << bytes << "\n" << log;
    for (const std::string& x : l) EXPECT_NE(x.find("decider default"), std::string::npos) << x;
  }
#endif
}

// A YAML config: the default tuner with an option from its `options:` map, a missing optional tuner
// (WARN, skipped), and a tuning rule that forces channels for small AllReduces.
TEST_F(TuningLog, YamlOverridesAndPluginOptions) {
  const std::string yaml = tempPath("config.yaml");
  {
    std::ofstream out(yaml);
    out << "version: 1\n"
        << "plugins:\n"
        << "  tuner:\n"
        << "    - name: default\n"
        << "      options: {TUTTI_TUNER_CHANNEL_BYTES: \"1\"}\n"
        << "    - path: /nonexistent/libnccl-tuner-missing.so\n"
        << "tuning:\n"
        << "  - collective: allreduce\n"
        << "    bytes: [0, 4K]\n"
        << "    algorithm: ring\n"
        << "    protocol: simple\n"
        << "    channels: 1\n";
  }
  ScopedEnv config("TUTTI_CONFIG", yaml);
  // Set explicitly, the core's maximum is not capped by the host's cores (comm.h, collChannelCap).
  ScopedEnv maxChannels("NCCL_MAX_NCHANNELS", "2");
  Report report;
  {
    CommSet set(kRanks, InitMode::kInitRank);
    ASSERT_TRUE(set.ok()) << set.error();
    allReduce(set, 16, report);    // 64 bytes: the rule decides
    allReduce(set, 4096, report);  // 16 KiB: the default model, one channel per byte -> the core's maximum
  }
  reportFailures(report);
  std::remove(yaml.c_str());
  const std::string log = readFile(logPath_);
  EXPECT_EQ(linesWith(log, "tuner chain: default -> yaml-overrides").size(), size_t{kRanks}) << log;
  EXPECT_FALSE(linesWith(log, "libnccl-tuner-missing.so").empty()) << "the skipped tuner is not named\n" << log;
  auto small = linesWith(log, "AllReduce: 64 bytes -> algo Ring proto Simple channels 1 decider yaml-overrides "
                              "(channels by yaml-overrides)");
  EXPECT_EQ(small.size(), size_t{kRanks}) << log;
  auto large = linesWith(log, "AllReduce: 16384 bytes -> algo ");
  ASSERT_EQ(large.size(), size_t{kRanks}) << log;
  for (const std::string& l : large) {
    EXPECT_NE(l.find("decider default (channels by default)"), std::string::npos) << l;
    EXPECT_EQ(l.find("channels 1 "), std::string::npos) << "TUTTI_TUNER_CHANNEL_BYTES from options: not applied\n"
                                                         << l;
  }
}

TEST(TuningConfig, RequiredTunerThatCannotLoadFailsCommInit) {
  const std::string yaml = tempPath("required.yaml");
  {
    std::ofstream out(yaml);
    out << "version: 1\nplugins:\n  tuner:\n    - path: /nonexistent/libnccl-tuner-needed.so\n"
        << "      required: true\n";
  }
  ScopedEnv config("TUTTI_CONFIG", yaml);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  EXPECT_NE(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("libnccl-tuner-needed.so"), std::string::npos)
      << ncclGetLastError(nullptr);
  std::remove(yaml.c_str());
}

TEST(TuningFilters, UnknownAlgorithmFailsCommInit) {
  ScopedEnv algo("NCCL_ALGO", "ring,treee");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclInvalidUsage);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("\"treee\""), std::string::npos) << ncclGetLastError(nullptr);
}

TEST(TuningFilters, FilterWithoutSupportedChoiceFailsTheCall) {
  // NVLS is a valid name but needs hardware the host engine does not have: AllReduce has nothing left,
  // AllGather (ring) does.
  ScopedEnv algo("NCCL_ALGO", "ring;allreduce:nvls");
  ScopedEnv proto("NCCL_PROTO", "^ll,ll128");
  CommSet set(kRanks, InitMode::kInitRank);
  ASSERT_TRUE(set.ok()) << set.error();
  Report report;
  std::vector<ncclResult_t> results(kRanks, ncclSuccess);
  runPerRank(set, [&](int rank, ncclComm_t comm) {
    float x = 1, y = 0;
    results[rank] = ncclAllReduce(&x, &y, 1, ncclFloat, ncclSum, comm, nullptr);
  }, report, "AllReduce");
  for (ncclResult_t r : results) EXPECT_EQ(r, ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("AllReduce"), std::string::npos) << ncclGetLastError(nullptr);
  runPerRank(set, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(3, static_cast<float>(rank)), recv(3 * kRanks, -1);
    if (!report.ok(ncclAllGather(send.data(), recv.data(), 3, ncclFloat, comm, nullptr), "ncclAllGather", comm)) return;
    for (int i = 0; i < 3 * kRanks; ++i)
      if (recv[i] != static_cast<float>(i / 3)) report.fail("AllGather element " + std::to_string(i) + " wrong");
  }, report, "AllGather");
  reportFailures(report);
}

// Send/recv pick LL up to NCCL_P2P_LL_THRESHOLD (default: channels x 16 KiB) and Simple above, on both
// ends, and the data arrives intact either way.
class P2pProtocol : public ::testing::Test {
 protected:
  void SetUp() override { std::remove(logPath_.c_str()); }
  void TearDown() override { std::remove(logPath_.c_str()); }
  // Rank 0 sends `bytes` to rank 1 (one group per call); returns the protocols rank 0 and rank 1 logged.
  std::pair<std::string, std::string> exchange(size_t bytes, Report& report) {
    const size_t logged = readFile(logPath_).size();  // the log stays open for the process: read what is new
    {
      CommSet set(2, InitMode::kInitRank);
      if (!set.ok()) {
        report.fail(set.error());
        return {};
      }
      runPerRank(set, [&](int rank, ncclComm_t comm) {
        std::vector<unsigned char> buf(bytes, 0);
        if (rank == 0) {
          for (size_t i = 0; i < bytes; ++i) buf[i] = static_cast<unsigned char>(i * 13 + 5);
          report.ok(ncclSend(buf.data(), bytes, ncclUint8, 1, comm, nullptr), "ncclSend", comm);
          return;
        }
        if (!report.ok(ncclRecv(buf.data(), bytes, ncclUint8, 0, comm, nullptr), "ncclRecv", comm)) return;
        for (size_t i = 0; i < bytes; ++i)
          if (buf[i] != static_cast<unsigned char>(i * 13 + 5)) {
            report.fail("byte " + std::to_string(i) + " of " + std::to_string(bytes) + " is wrong");
            return;
          }
      }, report, "SendRecv");
    }
    const std::string log = readFile(logPath_).substr(logged);
    auto protoOf = [&](const std::string& what) {
      auto l = linesWith(log, what + " " + std::to_string(bytes) + " bytes ");
      if (l.size() != 1) return "(" + std::to_string(l.size()) + " lines)\n" + log;
      const size_t at = l[0].find(" proto ");
      return at == std::string::npos ? l[0] : l[0].substr(at + 7, l[0].find(' ', at + 7) - at - 7);
    };
    return {protoOf("Send"), protoOf("Recv")};
  }
  std::string logPath_ = tempPath("p2p_log");
  ScopedEnv debug_{"NCCL_DEBUG", "INFO"};
  ScopedEnv subsys_{"NCCL_DEBUG_SUBSYS", "P2P"};
  ScopedEnv file_{"NCCL_DEBUG_FILE", logPath_};
};

TEST_F(P2pProtocol, LLUpToTheThresholdSimpleAbove) {
  Report report;
  ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");
  {
    ScopedEnv threshold("NCCL_P2P_LL_THRESHOLD", "32768");
    for (auto [bytes, want] : {std::pair<size_t, const char*>{0, "LL"}, {4096, "LL"}, {32768, "LL"},
                               {32769, "Simple"}, {size_t{1} << 20, "Simple"}}) {
      auto [send, recv] = exchange(bytes, report);
      EXPECT_EQ(send, want) << bytes << " bytes";
      EXPECT_EQ(recv, want) << bytes << " bytes";
    }
  }
  // Unset: the device backends use LL up to channels x 16 KiB; the host backend, where LL is no faster, Simple.
  const char* device = std::getenv("TUTTI_DEVICE");  // the @sim copies of this test set it
  const bool host = device == nullptr || std::string(device) == "host";
  for (size_t bytes : {size_t{0}, size_t{4096}, size_t{32768}}) {
    auto [send, recv] = exchange(bytes, report);
    EXPECT_EQ(send, host ? "Simple" : "LL") << bytes << " bytes";
    EXPECT_EQ(recv, host ? "Simple" : "LL") << bytes << " bytes";
  }
  {
    ScopedEnv threshold("NCCL_P2P_LL_THRESHOLD", "0");
    auto [send, recv] = exchange(4096, report);
    EXPECT_EQ(send, "Simple");
    EXPECT_EQ(recv, "Simple");
  }
  reportFailures(report);
}

// A receive that expects another size than was sent may also expect another protocol (one side of the
// threshold each): the receiver must report the mismatch, whichever side is LL, and never wait forever.
TEST_F(P2pProtocol, SizesOnBothSidesOfTheThresholdAreAMismatchNotAHang) {
  ScopedEnv threshold("NCCL_P2P_LL_THRESHOLD", "32768");
  for (auto [sent, expected] : {std::pair<size_t, size_t>{65536, 4096}, {4096, 65536}}) {
    CommSet set(2, InitMode::kInitRank);
    ASSERT_TRUE(set.ok()) << set.error();
    std::vector<ncclResult_t> results(2, ncclSuccess);
    std::string recvError;
    Report report;
    runPerRank(set, [&](int rank, ncclComm_t comm) {
      std::vector<unsigned char> buf(std::max(sent, expected), 1);
      results[rank] = rank == 0 ? ncclSend(buf.data(), sent, ncclUint8, 1, comm, nullptr)
                                : ncclRecv(buf.data(), expected, ncclUint8, 0, comm, nullptr);
      if (rank == 1) recvError = ncclGetLastError(comm);
    }, report, "SendRecv");
    EXPECT_EQ(results[1], ncclInvalidUsage) << sent << " sent, " << expected << " expected";
    EXPECT_TRUE(results[0] == ncclSuccess || results[0] == ncclRemoteError) << results[0];
    EXPECT_NE(recvError.find("were expected"), std::string::npos) << recvError;
  }
}

}  // namespace
}  // namespace tutti::itest
