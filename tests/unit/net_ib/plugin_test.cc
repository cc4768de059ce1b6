// The loaded libtutti-net-ib.so without a usable HCA: it loads, init succeeds, devices() is 0 with one INFO
// line and no warning, and every other entry point given a bad argument returns an error instead of
// crashing. NCCL_IB_HCA naming no device forces the "no device" case on any machine.
#include "ib_fixture.h"

#include <cstdlib>
#include <cstring>

using namespace ibtest;

namespace {

// Runs init / devices / finalize with the environment as set; returns init's result and *ndev.
ncclResult_t initCount(int* ndev, void** ctx) {
  const ncclNet_v12_t* n = net();
  *ndev = -1;
  ncclResult_t r = n->init(ctx, 1, nullptr, testLogger, nullptr);
  if (r == ncclSuccess) {
    EXPECT_EQ(n->devices(ndev), ncclSuccess);
  }
  return r;
}

class NetIbPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(net(), nullptr);
    setenv("NCCL_IB_HCA", "=no_such_hca_for_tests", 1);
    clearLog();
    int ndev = -1;
    ASSERT_EQ(initCount(&ndev, &ctx_), ncclSuccess);
    ASSERT_EQ(ndev, 0);
  }
  void TearDown() override {
    EXPECT_EQ(net()->finalize(ctx_), ncclSuccess);
    unsetenv("NCCL_IB_HCA");
  }
  void* ctx_ = nullptr;
};

}  // namespace

TEST(NetIbLoad, ExportsEveryAbiVersionNamedIB) {
  const char* names[] = {"ncclNetPlugin_v12", "ncclNetPlugin_v11", "ncclNetPlugin_v10", "ncclNetPlugin_v9",
                         "ncclNetPlugin_v8",  "ncclNetPlugin_v7",  "ncclNetPlugin_v6"};
  for (const char* s : names) {
    // Every table starts with the name pointer.
    const char* const* name = symbol<const char*>(s);
    ASSERT_NE(name, nullptr) << s;
    EXPECT_STREQ(*name, "IB") << s;
  }
}

TEST(NetIbLoad, NoDeviceOnThisMachineIsOneInfoLine) {
  if (sysfsHcaCount() > 0) GTEST_SKIP() << "this machine has an RDMA device; see NetIbPlugin for the forced case";
  clearLog();
  void* ctx = nullptr;
  int ndev = -1;
  ASSERT_EQ(initCount(&ndev, &ctx), ncclSuccess);
  EXPECT_EQ(ndev, 0);
  EXPECT_EQ(countLog(NCCL_LOG_WARN), 0);
  EXPECT_EQ(countLog(NCCL_LOG_INFO, "no IB device"), 1);
  EXPECT_EQ(net()->finalize(ctx), ncclSuccess);
}

TEST_F(NetIbPlugin, NoDeviceIsReportedWithoutWarnings) {
  EXPECT_EQ(countLog(NCCL_LOG_WARN), 0);
  EXPECT_EQ(countLog(NCCL_LOG_INFO, "no IB device"), 1);
}

TEST_F(NetIbPlugin, OlderTablesReportNoDeviceToo) {
  auto* v6 = symbol<ncclNet_v6_t>("ncclNetPlugin_v6");
  ASSERT_NE(v6, nullptr);
  // v6 init is process-wide and never finalized; the v12 init of the fixture already stands for it.
  int ndev = -1;
  EXPECT_EQ(v6->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 0);
  ncclNetProperties_v6_t p6;
  EXPECT_NE(v6->getProperties(0, &p6), ncclSuccess);
}

TEST_F(NetIbPlugin, DeviceEntryPointsRejectBadIndices) {
  const ncclNet_v12_t* n = net();
  ncclNetProperties_v12_t props;
  EXPECT_EQ(n->getProperties(0, &props), ncclInvalidArgument);
  EXPECT_EQ(n->getProperties(-1, &props), ncclInvalidArgument);
  EXPECT_EQ(n->devices(nullptr), ncclInvalidArgument);
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listenComm = nullptr;
  EXPECT_EQ(n->listen(ctx_, 0, handle, &listenComm), ncclInvalidArgument);
  EXPECT_EQ(listenComm, nullptr);
  void* sendComm = nullptr;
  EXPECT_EQ(n->connect(ctx_, 0, handle, &sendComm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(sendComm, nullptr);
  EXPECT_GT(countLog(NCCL_LOG_WARN, "dev 0 of 0"), 0);  // the failure is explained
}

TEST_F(NetIbPlugin, CommEntryPointsRejectNullAndForeignObjects) {
  const ncclNet_v12_t* n = net();
  // A readable block that is not a net-ib object (wrong magic everywhere).
  alignas(64) static unsigned char foreign[1 << 16];
  std::memset(foreign, 0x5a, sizeof foreign);
  void* recvComm = nullptr;
  EXPECT_EQ(n->accept(nullptr, &recvComm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(n->accept(foreign, &recvComm, nullptr), ncclInvalidArgument);
  void* mh = nullptr;
  char buf[64];
  EXPECT_EQ(n->regMr(nullptr, buf, sizeof buf, NCCL_PTR_HOST, &mh), ncclInvalidArgument);
  EXPECT_EQ(n->regMr(foreign, buf, sizeof buf, NCCL_PTR_HOST, &mh), ncclInvalidArgument);
  EXPECT_EQ(n->regMrDmaBuf(foreign, buf, sizeof buf, NCCL_PTR_DMABUF, 0, 3, &mh), ncclInvalidArgument);
  EXPECT_EQ(mh, nullptr);
  EXPECT_EQ(n->deregMr(foreign, foreign), ncclInvalidArgument);
  void* req = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(n->isend(nullptr, buf, 8, 0, nullptr, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(n->isend(foreign, buf, 8, 0, nullptr, nullptr, &req), ncclInvalidArgument);
  void* data[1] = {buf};
  size_t sizes[1] = {8};
  int tags[1] = {0};
  void* mhs[1] = {nullptr};
  EXPECT_EQ(n->irecv(foreign, 1, data, sizes, tags, mhs, nullptr, &req), ncclInvalidArgument);
  int isizes[1] = {8};
  EXPECT_EQ(n->iflush(nullptr, 1, data, isizes, mhs, &req), ncclInvalidArgument);
  int done = 0;
  EXPECT_EQ(n->test(nullptr, &done, nullptr), ncclInvalidArgument);
  std::memset(foreign, 0, sizeof foreign);  // a "request" whose comm pointer is NULL
  EXPECT_EQ(n->test(foreign, &done, nullptr), ncclInvalidArgument);
  EXPECT_EQ(done, 0);
  std::memset(foreign, 0x5a, sizeof foreign);
  EXPECT_EQ(n->closeSend(foreign), ncclInvalidArgument);
  EXPECT_EQ(n->closeRecv(foreign), ncclInvalidArgument);
  EXPECT_EQ(n->closeListen(foreign), ncclInvalidArgument);
  // NULL closes are no-ops, as for every net plugin.
  EXPECT_EQ(n->closeSend(nullptr), ncclSuccess);
  EXPECT_EQ(n->closeRecv(nullptr), ncclSuccess);
  EXPECT_EQ(n->closeListen(nullptr), ncclSuccess);
}

TEST(NetIbOptions, MalformedVariablesFailInitNamingTheVariable) {
  ASSERT_NE(net(), nullptr);
  struct {
    const char* name;
    const char* value;
  } bad[] = {{"NCCL_IB_HCA", "mlx5_0:zero"}, {"NCCL_IB_TIMEOUT", "32"},        {"NCCL_IB_RETRY_CNT", "8"},
             {"NCCL_IB_QPS_PER_CONNECTION", "0"}, {"NCCL_IB_GID_INDEX", "x"}, {"NCCL_IB_SL", "16"},
             {"NCCL_IB_TC", "256"},           {"NCCL_IB_ADAPTIVE_ROUTING", "-1"}};
  for (auto& b : bad) {
    setenv(b.name, b.value, 1);
    clearLog();
    void* ctx = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(net()->init(&ctx, 1, nullptr, testLogger, nullptr), ncclInvalidUsage) << b.name;
    EXPECT_EQ(countLog(NCCL_LOG_WARN, b.name), 1) << b.name;
    unsetenv(b.name);
  }
}
