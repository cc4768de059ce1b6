// Loads the SDK example plugins through the core's loaders and drives each call by call: the ABI version
// the loader detects, and that each example does what its README says.
#include "plugin/net_plugin.h"
#include "plugin/plugin_library.h"
#include "plugin/profiler_plugin.h"
#include "plugin/transport_plugin.h"
#include "plugin/tuner_plugin.h"
#include "util/check.h"
#include "util/log.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

namespace tutti {
namespace {

const std::string kDir = TUTTI_SDK_EXAMPLE_DIR;

// A logger that keeps what plugins log, so tests can check their messages.
std::mutex gLogMutex;
std::vector<std::string> gLogLines;
extern "C" void captureLogger(ncclDebugLogLevel, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(gLogMutex);
  gLogLines.emplace_back(buf);
}
std::string lastLogLine() {
  std::lock_guard<std::mutex> lock(gLogMutex);
  return gLogLines.empty() ? "" : gLogLines.back();
}

// ---- net ----------------------------------------------------------------------------------------

class NetExample : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(netPluginLoad(kDir + "/libnccl-net-example.so", &plugin_), ncclSuccess) << lastErrorText();
    ASSERT_TRUE(plugin_);
    net_ = &plugin_->net;
    ASSERT_EQ(net_->init(&ctx_, 42, nullptr, captureLogger, nullptr), ncclSuccess);
  }
  void TearDown() override {
    if (plugin_) {
      EXPECT_EQ(net_->finalize(ctx_), ncclSuccess);
    }
  }
  // listen + connect + accept on device 0.
  void connectPair(void** listenComm, void** sendComm, void** recvComm) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    ASSERT_EQ(net_->listen(ctx_, 0, handle, listenComm), ncclSuccess);
    *sendComm = *recvComm = nullptr;
    for (int i = 0; i < 100 && (!*sendComm || !*recvComm); ++i) {
      if (!*sendComm) {
        ASSERT_EQ(net_->connect(ctx_, 0, handle, sendComm, nullptr), ncclSuccess);
      }
      if (!*recvComm) {
        ASSERT_EQ(net_->accept(*listenComm, recvComm, nullptr), ncclSuccess);
      }
    }
    ASSERT_NE(*sendComm, nullptr);
    ASSERT_NE(*recvComm, nullptr);
  }
  // Polls until done; returns test()'s result.
  ncclResult_t wait(void* req, int* size) {
    int done = 0;
    for (int i = 0; i < 1000000; ++i) {
      ncclResult_t r = net_->test(req, &done, size);
      if (r != ncclSuccess || done) return r;
    }
    return ncclInternalError;
  }
  std::unique_ptr<NetPlugin> plugin_;
  ncclNet_v12_t* net_ = nullptr;
  void* ctx_ = nullptr;
};

TEST_F(NetExample, LoadsAsV12WithOneHostDevice) {
  EXPECT_EQ(plugin_->abiVersion, 12);
  EXPECT_STREQ(net_->name, "loopback");
  int n = 0;
  ASSERT_EQ(net_->devices(&n), ncclSuccess);
  EXPECT_EQ(n, 1);
  ncclNetProperties_v12_t props;
  ASSERT_EQ(net_->getProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(props.maxRecvs, 1);
  EXPECT_EQ(props.maxP2pBytes, static_cast<size_t>(MAX_NET_SIZE));
  EXPECT_EQ(props.netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_EQ(props.railId, NCCL_NET_ID_UNDEF);
  EXPECT_EQ(net_->getProperties(1, &props), ncclInvalidArgument);
  // The older symbol is exported too and reports the same device.
  auto* v11 = static_cast<const ncclNet_v11_t*>(plugin_->library->symbol("ncclNetPlugin_v11"));
  ASSERT_NE(v11, nullptr);
  ncclNetProperties_v11_t p11;
  ASSERT_EQ(v11->getProperties(0, &p11), ncclSuccess);
  EXPECT_EQ(p11.speed, props.speed);
  EXPECT_EQ(p11.maxRecvs, 1);
}

TEST_F(NetExample, MovesBytesInOrderAndReportsSizes) {
  void *l, *s, *r;
  connectPair(&l, &s, &r);
  std::vector<char> src(3000), dst(8192, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 1);
  void *smr = nullptr, *rmr = nullptr;
  ASSERT_EQ(net_->regMr(s, src.data(), src.size(), NCCL_PTR_HOST, &smr), ncclSuccess);
  ASSERT_EQ(net_->regMr(r, dst.data(), dst.size(), NCCL_PTR_HOST, &rmr), ncclSuccess);
  void* bad = nullptr;
  EXPECT_EQ(net_->regMr(r, dst.data(), dst.size(), NCCL_PTR_CUDA, &bad), ncclInvalidArgument);

  // Receive posted first with a larger buffer: the send's size is what test() reports on both sides.
  void* rdata[1] = {dst.data()};
  size_t rsize[1] = {4096};
  int tags[1] = {0};
  void* rmrs[1] = {rmr};
  void *rreq = nullptr, *sreq = nullptr;
  ASSERT_EQ(net_->irecv(r, 1, rdata, rsize, tags, rmrs, nullptr, &rreq), ncclSuccess);
  ASSERT_NE(rreq, nullptr);
  ASSERT_EQ(net_->isend(s, src.data(), 1000, 0, smr, nullptr, &sreq), ncclSuccess);
  ASSERT_NE(sreq, nullptr);
  int got = -1, sent = -1;
  ASSERT_EQ(wait(rreq, &got), ncclSuccess);
  ASSERT_EQ(wait(sreq, &sent), ncclSuccess);
  EXPECT_EQ(got, 1000);
  EXPECT_EQ(sent, 1000);
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), 1000), 0);
  EXPECT_EQ(dst[1000], 0) << "bytes beyond the message must stay untouched";

  // Two sends before any receive: matched in posting order.
  void *s1, *s2, *r1, *r2;
  ASSERT_EQ(net_->isend(s, src.data(), 10, 0, smr, nullptr, &s1), ncclSuccess);
  ASSERT_EQ(net_->isend(s, src.data() + 100, 20, 0, smr, nullptr, &s2), ncclSuccess);
  rsize[0] = 1000;
  rdata[0] = dst.data() + 5000;
  ASSERT_EQ(net_->irecv(r, 1, rdata, rsize, tags, rmrs, nullptr, &r1), ncclSuccess);
  rdata[0] = dst.data();
  ASSERT_EQ(net_->irecv(r, 1, rdata, rsize, tags, rmrs, nullptr, &r2), ncclSuccess);
  ASSERT_EQ(wait(r1, &got), ncclSuccess);
  EXPECT_EQ(got, 10);
  ASSERT_EQ(wait(r2, &got), ncclSuccess);
  EXPECT_EQ(got, 20);
  EXPECT_EQ(std::memcmp(dst.data() + 5000, src.data(), 10), 0);
  EXPECT_EQ(std::memcmp(dst.data(), src.data() + 100, 20), 0);
  ASSERT_EQ(wait(s1, nullptr), ncclSuccess);
  ASSERT_EQ(wait(s2, nullptr), ncclSuccess);

  // A send larger than the posted receive fails on both sides instead of overrunning the buffer.
  rsize[0] = 50;
  ASSERT_EQ(net_->irecv(r, 1, rdata, rsize, tags, rmrs, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(net_->isend(s, src.data(), 100, 0, smr, nullptr, &sreq), ncclSuccess);
  EXPECT_NE(wait(rreq, &got), ncclSuccess);
  EXPECT_NE(wait(sreq, &sent), ncclSuccess);
  EXPECT_NE(lastLogLine().find("truncated"), std::string::npos) << lastLogLine();

  // Grouped receives beyond maxRecvs and buffers outside their registration are refused.
  void* two[2] = {dst.data(), dst.data() + 100};
  size_t twoSizes[2] = {10, 10};
  int twoTags[2] = {0, 1};
  void* twoMrs[2] = {rmr, rmr};
  EXPECT_EQ(net_->irecv(r, 2, two, twoSizes, twoTags, twoMrs, nullptr, &rreq), ncclInvalidArgument);
  EXPECT_EQ(net_->isend(s, src.data() + 2990, 100, 0, smr, nullptr, &sreq), ncclInvalidArgument);

  EXPECT_EQ(net_->deregMr(s, smr), ncclSuccess);
  EXPECT_EQ(net_->deregMr(r, rmr), ncclSuccess);
  EXPECT_EQ(net_->closeSend(s), ncclSuccess);
  EXPECT_EQ(net_->closeRecv(r), ncclSuccess);
  EXPECT_EQ(net_->closeListen(l), ncclSuccess);
}

TEST_F(NetExample, FullRequestQueueAsksForRetry) {
  void *l, *s, *r;
  connectPair(&l, &s, &r);
  char byte = 'x', sink[NCCL_NET_MAX_REQUESTS] = {};
  std::vector<void*> sends;
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; ++i) {
    void* req = nullptr;
    ASSERT_EQ(net_->isend(s, &byte, 1, 0, nullptr, nullptr, &req), ncclSuccess);
    ASSERT_NE(req, nullptr);
    sends.push_back(req);
  }
  void* extra = &byte;
  ASSERT_EQ(net_->isend(s, &byte, 1, 0, nullptr, nullptr, &extra), ncclSuccess);
  EXPECT_EQ(extra, nullptr) << "a full queue must answer with a NULL request (try again), not an error";
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; ++i) {
    void* data[1] = {&sink[i]};
    size_t size[1] = {1};
    int tag[1] = {0};
    void* req = nullptr;
    ASSERT_EQ(net_->irecv(r, 1, data, size, tag, nullptr, nullptr, &req), ncclSuccess);
    ASSERT_EQ(wait(req, nullptr), ncclSuccess);
    ASSERT_EQ(wait(sends[i], nullptr), ncclSuccess);
    EXPECT_EQ(sink[i], 'x');
  }
  EXPECT_EQ(net_->closeSend(s), ncclSuccess);
  EXPECT_EQ(net_->closeRecv(r), ncclSuccess);
  EXPECT_EQ(net_->closeListen(l), ncclSuccess);
}

TEST_F(NetExample, RefusesForeignOrStaleHandles) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* l = nullptr;
  ASSERT_EQ(net_->listen(ctx_, 0, handle, &l), ncclSuccess);
  char forged[NCCL_NET_HANDLE_MAXSIZE];
  std::memset(forged, 0x5a, sizeof forged);
  void* s = &forged;
  EXPECT_EQ(net_->connect(ctx_, 0, forged, &s, nullptr), ncclInvalidArgument);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(net_->listen(ctx_, 3, forged, &s), ncclInvalidArgument);
  ASSERT_EQ(net_->closeListen(l), ncclSuccess);
  EXPECT_EQ(net_->connect(ctx_, 0, handle, &s, nullptr), ncclRemoteError) << "listener is closed";
}

// ---- tuner --------------------------------------------------------------------------------------

class TunerExample : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(tunerPluginLoad(kDir + "/libnccl-tuner-example.so", &plugin_), ncclSuccess) << lastErrorText();
    EXPECT_FALSE(plugin_->stateless) << "a tuner that does not export tuttiTunerStateless is asked on every call";
    csv_ = std::filesystem::temp_directory_path() / ("tutti-sdk-tuner-" + std::to_string(getpid()) + ".csv");
  }
  void TearDown() override {
    unsetenv("TUTTI_EXAMPLE_TUNER_CSV");
    std::filesystem::remove(csv_);
  }
  void writeCsv(const std::string& text) {
    std::ofstream(csv_) << text;
    setenv("TUTTI_EXAMPLE_TUNER_CSV", csv_.c_str(), 1);
  }
  // Every pair costs 1 except Tree/LL128, which is unsupported.
  void resetTable() {
    for (auto& row : table_)
      for (float& c : row) c = 1.0f;
    table_[NCCL_ALGO_TREE][NCCL_PROTO_LL128] = NCCL_ALGO_PROTO_IGNORE;
  }
  ncclResult_t ask(void* ctx, ncclFunc_t coll, size_t bytes, int* channels) {
    resetTable();
    return plugin_->tuner.getCollInfo(ctx, coll, bytes, 1, reinterpret_cast<float**>(table_), NCCL_NUM_ALGORITHMS,
                                      NCCL_NUM_PROTOCOLS, 0, channels);
  }
  std::unique_ptr<TunerPlugin> plugin_;
  std::filesystem::path csv_;
  float table_[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
};

TEST_F(TunerExample, CsvRulesSetCostAndChannels) {
  EXPECT_EQ(plugin_->abiVersion, 6);
  EXPECT_STREQ(plugin_->tuner.name, "example-csv");
  writeCsv("# collective,minBytes,maxBytes,algorithm,protocol,channels\n"
           "allreduce,0,65536,ring,ll,4\n"
           "allreduce, 65536, inf, tree, simple, -1\n"
           "allgather,0,inf,tree,ll128,2\n");
  void* ctx = nullptr;
  ASSERT_EQ(plugin_->tuner.init(&ctx, 1, 8, 1, captureLogger, nullptr, nullptr), ncclSuccess);
  int ch = 7;
  ASSERT_EQ(ask(ctx, ncclFuncAllReduce, 1000, &ch), ncclSuccess);
  EXPECT_EQ(table_[NCCL_ALGO_RING][NCCL_PROTO_LL], 0.0f);
  EXPECT_EQ(table_[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], 1.0f);
  EXPECT_EQ(ch, 4);
  ch = 7;
  ASSERT_EQ(ask(ctx, ncclFuncAllReduce, 65536, &ch), ncclSuccess);  // maxBytes is exclusive
  EXPECT_EQ(table_[NCCL_ALGO_RING][NCCL_PROTO_LL], 1.0f);
  EXPECT_EQ(table_[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE], 0.0f);
  EXPECT_EQ(ch, 7) << "channels -1 keeps the core's choice";
  // The rule names an unsupported pair: it must stay unsupported.
  ASSERT_EQ(ask(ctx, ncclFuncAllGather, 10, &ch), ncclSuccess);
  EXPECT_EQ(table_[NCCL_ALGO_TREE][NCCL_PROTO_LL128], NCCL_ALGO_PROTO_IGNORE);
  EXPECT_EQ(ch, 7);
  // No rule for broadcast: nothing changes.
  ASSERT_EQ(ask(ctx, ncclFuncBroadcast, 10, &ch), ncclSuccess);
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a) {
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) {
      if (a != NCCL_ALGO_TREE || p != NCCL_PROTO_LL128) {
        EXPECT_EQ(table_[a][p], 1.0f);
      }
    }
  }
  EXPECT_EQ(plugin_->tuner.finalize(ctx), ncclSuccess);
}

TEST_F(TunerExample, BadFilesFailInitWithTheLine) {
  void* ctx = nullptr;
  writeCsv("allreduce,0,100,ring,ll,4\nallreduce,0,100,ring,ll64,4\n");
  EXPECT_EQ(plugin_->tuner.init(&ctx, 1, 8, 1, captureLogger, nullptr, nullptr), ncclInvalidUsage);
  EXPECT_NE(lastLogLine().find(":2: unknown protocol 'll64'"), std::string::npos) << lastLogLine();
  writeCsv("allreduce,100,10,ring,ll,4\n");
  EXPECT_EQ(plugin_->tuner.init(&ctx, 1, 8, 1, captureLogger, nullptr, nullptr), ncclInvalidUsage);
  writeCsv("allreduce,0,10,ring,ll\n");
  EXPECT_EQ(plugin_->tuner.init(&ctx, 1, 8, 1, captureLogger, nullptr, nullptr), ncclInvalidUsage);
  setenv("TUTTI_EXAMPLE_TUNER_CSV", "/nonexistent/tuner.csv", 1);
  EXPECT_EQ(plugin_->tuner.init(&ctx, 1, 8, 1, captureLogger, nullptr, nullptr), ncclSystemError);
  // No variable at all: the tuner works and changes nothing.
  unsetenv("TUTTI_EXAMPLE_TUNER_CSV");
  ASSERT_EQ(plugin_->tuner.init(&ctx, 1, 8, 1, captureLogger, nullptr, nullptr), ncclSuccess);
  int ch = 3;
  ASSERT_EQ(ask(ctx, ncclFuncAllReduce, 10, &ch), ncclSuccess);
  EXPECT_EQ(table_[NCCL_ALGO_RING][NCCL_PROTO_LL], 1.0f);
  EXPECT_EQ(ch, 3);
  EXPECT_EQ(plugin_->tuner.finalize(ctx), ncclSuccess);
}

// ---- profiler -----------------------------------------------------------------------------------

TEST(ProfilerExample, CountsEventsAndLogsSummary) {
  std::unique_ptr<ProfilerPlugin> plugin;
  ASSERT_EQ(profilerPluginLoad(kDir + "/libnccl-profiler-example.so", &plugin), ncclSuccess) << lastErrorText();
  EXPECT_EQ(plugin->abiVersion, 6);
  EXPECT_STREQ(plugin->profiler.name, "example-counter");
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(plugin->profiler.init(&ctx, 0xabc, &mask, "world", 1, 4, 2, captureLogger), ncclSuccess);
  EXPECT_TRUE(mask & ncclProfileColl);
  EXPECT_FALSE(mask & ncclProfileProxyStep);
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileColl;
  void *e1 = nullptr, *e2 = nullptr, *g = nullptr;
  ASSERT_EQ(plugin->profiler.startEvent(ctx, &e1, &d), ncclSuccess);
  ASSERT_EQ(plugin->profiler.startEvent(ctx, &e2, &d), ncclSuccess);
  d.type = ncclProfileGroup;
  ASSERT_EQ(plugin->profiler.startEvent(ctx, &g, &d), ncclSuccess);
  ASSERT_NE(e1, nullptr);
  ASSERT_EQ(plugin->profiler.recordEventState(g, ncclProfilerProxyCtrlIdle, nullptr), ncclSuccess);
  EXPECT_EQ(plugin->profiler.stopEvent(e1), ncclSuccess);
  EXPECT_EQ(plugin->profiler.stopEvent(e2), ncclSuccess);
  ASSERT_EQ(plugin->profiler.finalize(ctx), ncclSuccess);  // g left open on purpose
  std::string line = lastLogLine();
  EXPECT_NE(line.find("comm world (id abc) rank 2/4: Group=1 Coll=2 stateUpdates=1 open=1"), std::string::npos)
      << line;

  setenv("TUTTI_EXAMPLE_PROFILER_MASK", "0x10", 1);
  ASSERT_EQ(plugin->profiler.init(&ctx, 1, &mask, nullptr, 1, 1, 0, captureLogger), ncclSuccess);
  EXPECT_EQ(mask, ncclProfileProxyStep);
  ASSERT_EQ(plugin->profiler.finalize(ctx), ncclSuccess);
  EXPECT_NE(lastLogLine().find("no events"), std::string::npos) << lastLogLine();
  setenv("TUTTI_EXAMPLE_PROFILER_MASK", "lots", 1);
  ASSERT_EQ(plugin->profiler.init(&ctx, 1, &mask, nullptr, 1, 1, 0, captureLogger), ncclSuccess);
  EXPECT_TRUE(mask & ncclProfileColl) << "a bad mask falls back to the default";
  ASSERT_EQ(plugin->profiler.finalize(ctx), ncclSuccess);
  unsetenv("TUTTI_EXAMPLE_PROFILER_MASK");
}

// ---- transport ----------------------------------------------------------------------------------

TEST(TransportExample, ConnectsTwoEndsOfOneProcess) {
  std::unique_ptr<TransportPlugin> t;
  ASSERT_EQ(TransportPlugin::load(kDir + "/libtutti-transport-example.so", &t), ncclSuccess) << lastErrorText();
  EXPECT_EQ(t->name(), "example");
  const tuttiTransport_v1_t& api = t->api();
  tuttiPeerInfo_t a{0, -1, 11, 22, -1, getpid(), 0, 0};
  tuttiPeerInfo_t b{1, -1, 11, 22, -1, getpid(), 0, 0};
  tuttiPeerInfo_t other{2, -1, 11, 33, -1, getpid() + 1, 0, 0};
  int ok = -1;
  ASSERT_EQ(api.canConnect(t->ctx(), &a, &b, &ok), ncclSuccess);
  EXPECT_EQ(ok, 1);
  ASSERT_EQ(api.canConnect(t->ctx(), &a, &other, &ok), ncclSuccess);
  EXPECT_EQ(ok, 0) << "another process is out of reach";

  tuttiConnectRequest_t req{};
  req.peer = 0;
  req.buffSizes[TUTTI_PROTO_LL] = 1000;
  req.buffSizes[TUTTI_PROTO_SIMPLE] = 1 << 20;
  char recvInfo[TUTTI_CONNECT_INFO_BYTES] = {}, sendInfo[TUTTI_CONNECT_INFO_BYTES] = {};
  void *recvRes = nullptr, *sendRes = nullptr;
  ASSERT_EQ(api.recvSetup(t->ctx(), &req, &b, &a, recvInfo, &recvRes), ncclSuccess);
  ASSERT_EQ(api.sendSetup(t->ctx(), &req, &a, &b, sendInfo, &sendRes), ncclSuccess);
  tuttiConnector_t rc, sc;
  ASSERT_EQ(api.recvConnect(recvRes, sendInfo, &rc), ncclSuccess);
  ASSERT_EQ(api.sendConnect(sendRes, recvInfo, &sc), ncclSuccess);
  EXPECT_EQ(sc.ctrl, rc.ctrl);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(rc.ctrl) % 64, 0u);
  EXPECT_EQ(rc.ctrl->tail, 0u);
  EXPECT_EQ(rc.ctrl->head, 0u);
  EXPECT_EQ(rc.buffs[TUTTI_PROTO_LL128], nullptr);
  EXPECT_EQ(rc.buffSizes[TUTTI_PROTO_SIMPLE], size_t{1} << 20);
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) EXPECT_EQ(sc.buffs[p], rc.buffs[p]);
  EXPECT_TRUE(rc.flags & TUTTI_CONN_LL128_SAFE);
  // What the sender writes, the receiver reads, at both ends of the largest FIFO.
  char* simple = static_cast<char*>(sc.buffs[TUTTI_PROTO_SIMPLE]);
  simple[0] = 'a';
  simple[(1 << 20) - 1] = 'z';
  EXPECT_EQ(static_cast<char*>(rc.buffs[TUTTI_PROTO_SIMPLE])[(1 << 20) - 1], 'z');

  // Connect info that does not come from this process is refused.
  char forged[TUTTI_CONNECT_INFO_BYTES];
  std::memset(forged, 0x11, sizeof forged);
  void* res2 = nullptr;
  ASSERT_EQ(api.sendSetup(t->ctx(), &req, &a, &b, sendInfo, &res2), ncclSuccess);
  tuttiConnector_t c2;
  EXPECT_EQ(api.sendConnect(res2, forged, &c2), ncclInvalidUsage);
  EXPECT_EQ(api.free(res2), ncclSuccess);

  // Receiver first: the sender's view stays valid until it is freed too.
  EXPECT_EQ(api.free(recvRes), ncclSuccess);
  simple[1] = 'b';
  EXPECT_EQ(api.free(sendRes), ncclSuccess);
}

}  // namespace
}  // namespace tutti
