// net-ib over a real HCA (label ib): a loopback connection on device 0 moving single and grouped receives
// of several sizes, with NCCL_IB_QPS_PER_CONNECTION=2 so payloads are split. Skips where there is no RDMA
// device.
#include "ib_fixture.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>

using namespace ibtest;

namespace {

using Clock = std::chrono::steady_clock;

class NetIbHw : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sysfsHcaCount() == 0) GTEST_SKIP() << "no RDMA device in /sys/class/infiniband";
    setenv("NCCL_IB_QPS_PER_CONNECTION", "2", 1);
    ASSERT_NE(net(), nullptr);
    ASSERT_EQ(net()->init(&ctx_, 7, nullptr, testLogger, nullptr), ncclSuccess);
    int ndev = 0;
    ASSERT_EQ(net()->devices(&ndev), ncclSuccess);
    if (ndev == 0) GTEST_SKIP() << "RDMA devices exist but no port is active";
    ASSERT_EQ(net()->listen(ctx_, 0, handle_, &listen_), ncclSuccess);
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while ((send_ == nullptr || recv_ == nullptr) && Clock::now() < deadline) {
      if (send_ == nullptr) {
        ASSERT_EQ(net()->connect(ctx_, 0, handle_, &send_, nullptr), ncclSuccess);
      }
      if (recv_ == nullptr) {
        ASSERT_EQ(net()->accept(listen_, &recv_, nullptr), ncclSuccess);
      }
    }
    ASSERT_NE(send_, nullptr);
    ASSERT_NE(recv_, nullptr);
  }
  void TearDown() override {
    if (ctx_ == nullptr) return;
    EXPECT_EQ(net()->closeSend(send_), ncclSuccess);
    EXPECT_EQ(net()->closeRecv(recv_), ncclSuccess);
    EXPECT_EQ(net()->closeListen(listen_), ncclSuccess);
    EXPECT_EQ(net()->finalize(ctx_), ncclSuccess);
    unsetenv("NCCL_IB_QPS_PER_CONNECTION");
  }
  // Posts the receive, then retries isends until the CTS arrives, then waits for everything.
  void transfer(int n, const size_t* sendSizes, const size_t* recvSizes, std::vector<std::vector<char>>& out) {
    std::vector<std::vector<char>> in(n);
    out.assign(n, {});
    std::vector<void*> smh(n), rmh(n), rdata(n);
    std::vector<int> tags(n);
    std::vector<size_t> rsizes(recvSizes, recvSizes + n);
    for (int i = 0; i < n; i++) {
      in[i].resize(sendSizes[i] + 1);
      for (size_t b = 0; b < in[i].size(); b++) in[i][b] = static_cast<char>(b * 7 + i);
      out[i].assign(recvSizes[i] + 1, 0);
      ASSERT_EQ(net()->regMr(send_, in[i].data(), in[i].size(), NCCL_PTR_HOST, &smh[i]), ncclSuccess);
      ASSERT_EQ(net()->regMr(recv_, out[i].data(), out[i].size(), NCCL_PTR_HOST, &rmh[i]), ncclSuccess);
      rdata[i] = out[i].data();
      tags[i] = 100 + i;
    }
    void* rreq = nullptr;
    ASSERT_EQ(net()->irecv(recv_, n, rdata.data(), rsizes.data(), tags.data(), rmh.data(), nullptr, &rreq),
              ncclSuccess);
    ASSERT_NE(rreq, nullptr);
    std::vector<void*> sreq(n, nullptr);
    auto deadline = Clock::now() + std::chrono::seconds(20);
    for (int i = n - 1; i >= 0; i--)  // reverse order: matching is by tag, not position
      while (sreq[i] == nullptr && Clock::now() < deadline) {
        ASSERT_EQ(net()->isend(send_, in[i].data(), sendSizes[i], tags[i], smh[i], nullptr, &sreq[i]), ncclSuccess);
      }
    int rdone = 0;
    std::vector<int> sdone(n, 0), got(n, -1);
    while (Clock::now() < deadline) {
      bool all = true;
      for (int i = 0; i < n; i++) {
        if (!sdone[i]) {
          ASSERT_EQ(net()->test(sreq[i], &sdone[i], nullptr), ncclSuccess);
        }
        all = all && sdone[i];
      }
      if (!rdone) {
        ASSERT_EQ(net()->test(rreq, &rdone, got.data()), ncclSuccess);
      }
      if (all && rdone) break;
    }
    ASSERT_TRUE(rdone);
    for (int i = 0; i < n; i++) {
      EXPECT_EQ(got[i], static_cast<int>(sendSizes[i]));
      EXPECT_EQ(std::memcmp(out[i].data(), in[i].data(), sendSizes[i]), 0) << "buffer " << i;
      EXPECT_EQ(out[i][recvSizes[i]], 0) << "wrote past the posted size";
      EXPECT_EQ(net()->deregMr(send_, smh[i]), ncclSuccess);
      EXPECT_EQ(net()->deregMr(recv_, rmh[i]), ncclSuccess);
    }
  }
  void* ctx_ = nullptr;
  char handle_[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};

}  // namespace

TEST_F(NetIbHw, PropertiesDescribeAnActivePort) {
  ncclNetProperties_v12_t p;
  ASSERT_EQ(net()->getProperties(0, &p), ncclSuccess);
  EXPECT_GT(p.speed, 0);
  EXPECT_GE(p.port, 1);
  EXPECT_EQ(p.maxRecvs, 8);
  EXPECT_TRUE(p.ptrSupport & NCCL_PTR_HOST);
  EXPECT_EQ(p.regIsGlobal, 1);
}

TEST_F(NetIbHw, SingleReceivesOfManySizes) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{127}, size_t{4096}, size_t{1} << 20, (size_t{1} << 22) + 3}) {
    std::vector<std::vector<char>> out;
    size_t recv = size + 64;
    transfer(1, &size, &recv, out);
    if (HasFatalFailure()) return;
  }
}

TEST_F(NetIbHw, GroupedReceiveMatchesByTag) {
  size_t sends[4] = {10, 0, 70000, 4096};
  size_t recvs[4] = {16, 8, 70000, 8192};
  for (int round = 0; round < 40; round++) {  // more rounds than FIFO slots: the FIFO wraps
    std::vector<std::vector<char>> out;
    transfer(4, sends, recvs, out);
    if (HasFatalFailure()) return;
  }
}
