// The proxy thread's CPUs as the kernel reports them (/proc/self/task/<tid>/status, the thread named
// tutti-proxy), for each TUTTI_PROXY_AFFINITY policy. The test binds its main thread to one CPU before the
// communicators exist, so the rank threads (and the proxy's creator) are bound the way a rank launched with
// mpirun --bind-to core is. Every test is its own process: the proxy thread starts once per process.
#include "harness.h"

#include <dirent.h>
#include <sched.h>

#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace tutti::itest {
namespace {

std::vector<int> cpusOf(const cpu_set_t& s) {
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &s)) out.push_back(c);
  return out;
}

std::string firstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// The CPUs the kernel allows the proxy thread ("Cpus_allowed_list" expanded); empty when no such thread.
std::vector<int> proxyThreadCpus() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return {};
  std::string tid;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (firstLine(std::string("/proc/self/task/") + e->d_name + "/comm") == "tutti-proxy") tid = e->d_name;
  }
  closedir(d);
  if (tid.empty()) return {};
  std::ifstream status("/proc/self/task/" + tid + "/status");
  std::vector<int> out;
  for (std::string line; std::getline(status, line);) {
    const std::string key = "Cpus_allowed_list:";
    if (line.compare(0, key.size(), key) != 0) continue;
    std::string list = line.substr(key.size());
    size_t pos = 0;
    while (pos < list.size()) {
      const size_t comma = list.find(',', pos);
      const std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      const size_t dash = item.find('-');
      const int a = std::stoi(item), b = dash == std::string::npos ? a : std::stoi(item.substr(dash + 1));
      for (int c = a; c <= b; ++c) out.push_back(c);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  return out;
}

class ProxyPlacement : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sched_getaffinity(0, sizeof original_, &original_), 0);
    allowed_ = cpusOf(original_);
    if (allowed_.size() < 2) GTEST_SKIP() << "needs 2 CPUs to tell the placements apart; this process may use "
                                          << allowed_.size();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(allowed_[0], &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  }
  void TearDown() override { sched_setaffinity(0, sizeof original_, &original_); }

  // Two ranks over net-socket, one AllReduce; returns the proxy thread's CPUs.
  std::vector<int> runAndPlace() {
    CommSet set(2, InitMode::kInitAll);
    EXPECT_TRUE(set.ok()) << set.error();
    if (!set.ok()) return {};
    Report report;
    runPerRank(set, [](int rank, ncclComm_t comm) {
      float x = static_cast<float>(rank + 1);
      ASSERT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
      EXPECT_EQ(x, 3.0f);
    }, report, "AllReduce");
    reportFailures(report);
    return proxyThreadCpus();
  }

  cpu_set_t original_;
  std::vector<int> allowed_;
  ScopedEnv p2p_{"NCCL_P2P_DISABLE", "1"};
  ScopedEnv shm_{"NCCL_SHM_DISABLE", "1"};
  ScopedEnv ifname_{"NCCL_SOCKET_IFNAME", "lo"};
};

TEST_F(ProxyPlacement, AutoKeepsTheProxyOffTheCpuItsRanksAreBoundTo) {
  const std::vector<int> cpus = runAndPlace();
  ASSERT_FALSE(cpus.empty()) << "no tutti-proxy thread";
  EXPECT_EQ(std::count(cpus.begin(), cpus.end(), allowed_[0]), 0) << "the proxy shares the ranks' CPU";
  for (size_t i = 1; i < allowed_.size(); ++i)
    EXPECT_EQ(std::count(cpus.begin(), cpus.end(), allowed_[i]), 1) << "CPU " << allowed_[i] << " left out";
}

TEST_F(ProxyPlacement, InheritKeepsTheCreatorsCpu) {
  ScopedEnv policy("TUTTI_PROXY_AFFINITY", "inherit");
  EXPECT_EQ(runAndPlace(), std::vector<int>{allowed_[0]});
}

TEST_F(ProxyPlacement, AListIsObeyed) {
  ScopedEnv policy("TUTTI_PROXY_AFFINITY", std::to_string(allowed_[1]));
  EXPECT_EQ(runAndPlace(), std::vector<int>{allowed_[1]});
}

TEST_F(ProxyPlacement, AMalformedValueFailsInitAndSaysWhy) {
  ScopedEnv policy("TUTTI_PROXY_AFFINITY", "1-0");
  std::vector<ncclComm_t> comms(2, nullptr);
  EXPECT_EQ(ncclCommInitAll(comms.data(), 2, nullptr), ncclInvalidArgument);
  const std::string why = ncclGetLastError(nullptr);
  EXPECT_NE(why.find("TUTTI_PROXY_AFFINITY: '1-0': expected auto, inherit or a CPU list"), std::string::npos) << why;
  EXPECT_NE(why.find("range '1-0' runs backwards"), std::string::npos) << why;
  EXPECT_TRUE(proxyThreadCpus().empty()) << "no proxy thread may start for a refused init";
}

}  // namespace
}  // namespace tutti::itest
