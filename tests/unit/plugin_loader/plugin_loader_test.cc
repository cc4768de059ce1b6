// Loads the test plugins of every ABI version through the plugin host and checks, through the native
// tables, that the adapters map each field; plus the error cases and name resolution.
#include "plugin/net_plugin.h"
#include "plugin/plugin_library.h"
#include "plugin/profiler_plugin.h"
#include "plugin/tuner_plugin.h"
#include "util/check.h"
#include "util/log.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace tutti {
namespace {

const std::string kDir = TUTTI_ABI_TEST_DIR;

std::string lib(const std::string& kind, const std::string& name) { return kDir + "/libnccl-" + kind + "-" + name + ".so"; }

template <typename T>
T* sym(const PluginLibrary& l, const char* name) {
  return reinterpret_cast<T*>(l.symbol(name));
}

class NetVersion : public ::testing::TestWithParam<int> {};

TEST_P(NetVersion, AdaptsToNative) {
  const int v = GetParam();
  std::unique_ptr<NetPlugin> p;
  ASSERT_EQ(netPluginLoad(lib("net", "testv" + std::to_string(v)), &p), ncclSuccess) << lastErrorText();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->abiVersion, v);
  EXPECT_EQ(std::string(p->net.name), "test-net-v" + std::to_string(v));
  void* ctx = nullptr;
  ncclNetCommConfig_v12_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ASSERT_EQ(p->net.init(&ctx, 1, &cfg, tuttiPluginLogger, nullptr), ncclSuccess);
  int n = 0;
  ASSERT_EQ(p->net.devices(&n), ncclSuccess);
  EXPECT_EQ(n, 1);
  ncclNetProperties_v12_t props;
  ASSERT_EQ(p->net.getProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.speed, 1000 * v);
  EXPECT_EQ(props.port, v);
  EXPECT_EQ(props.guid, 0x1234u);
  EXPECT_EQ(props.ptrSupport, NCCL_PTR_HOST);
  EXPECT_FLOAT_EQ(props.latency, 1.5f);
  EXPECT_EQ(props.maxComms, 64);
  EXPECT_STREQ(props.name, "test-dev");
  if (v >= 9) {
    EXPECT_EQ(props.maxP2pBytes, 4096u);
    EXPECT_EQ(props.vProps.devs[0], 7);
  } else {
    EXPECT_EQ(props.maxP2pBytes, static_cast<size_t>(MAX_NET_SIZE));  // default for old plugins
    EXPECT_EQ(props.vProps.ndevs, 1);
    EXPECT_EQ(props.vProps.devs[0], 0);
    EXPECT_EQ(props.netDeviceType, NCCL_NET_DEVICE_HOST);
  }
  EXPECT_EQ(props.maxMultiRequestSize, v >= 11 ? 5 : 1);
  EXPECT_EQ(props.railId, v >= 12 ? 3 : NCCL_NET_ID_UNDEF);
  EXPECT_EQ(props.planeId, v >= 12 ? 4 : NCCL_NET_ID_UNDEF);
  EXPECT_EQ(p->net.makeVDevice, nullptr);  // optional entries the plugin leaves NULL stay NULL
  EXPECT_EQ(p->net.setNetAttr, nullptr);
  // isend's size_t goes through (narrowed to int for v6..v8).
  void* req = nullptr;
  ASSERT_EQ(p->net.isend(nullptr, nullptr, 777, 0, nullptr, nullptr, &req), ncclSuccess);
  EXPECT_NE(req, nullptr);
  auto lastSize = sym<long()>(*p->library, "testNetLastSendSize");
  ASSERT_NE(lastSize, nullptr);
  EXPECT_EQ(lastSize(), 777);
  if (v <= 8) {
    EXPECT_EQ(p->net.isend(nullptr, nullptr, size_t{1} << 31, 0, nullptr, nullptr, &req), ncclInvalidArgument);
  }
  // Process-wide init of old versions runs once however many communicators init.
  void* ctx2 = nullptr;
  ASSERT_EQ(p->net.init(&ctx2, 2, nullptr, tuttiPluginLogger, nullptr), ncclSuccess);
  auto initCalls = sym<int()>(*p->library, "testNetInitCalls");
  ASSERT_NE(initCalls, nullptr);
  EXPECT_EQ(initCalls(), v >= 11 ? 2 : 1);
  if (p->net.finalize != nullptr) {
    EXPECT_EQ(p->net.finalize(ctx), ncclSuccess);
    EXPECT_EQ(p->net.finalize(ctx2), ncclSuccess);
  }
}
INSTANTIATE_TEST_SUITE_P(All, NetVersion, ::testing::Range(6, 13));

class TunerVersion : public ::testing::TestWithParam<int> {};

TEST_P(TunerVersion, PassesCostTableThrough) {
  const int v = GetParam();
  std::unique_ptr<TunerPlugin> p;
  ASSERT_EQ(tunerPluginLoad(lib("tuner", "testv" + std::to_string(v)), &p), ncclSuccess) << lastErrorText();
  EXPECT_EQ(p->abiVersion, v);
  EXPECT_EQ(std::string(p->tuner.name), "test-tuner-v" + std::to_string(v));
  void* ctx = nullptr;
  ASSERT_EQ(p->tuner.init(&ctx, 1, 8, 2, tuttiPluginLogger, nullptr, nullptr), ncclSuccess);
  float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  for (auto& row : table)
    for (float& c : row) c = 100.0f;
  table[NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE] = NCCL_ALGO_PROTO_IGNORE;
  int nChannels = 0;
  ASSERT_EQ(p->tuner.getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, reinterpret_cast<float**>(table),
                                 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nChannels),
            ncclSuccess);
  EXPECT_EQ(nChannels, v);
  if (v == 2) {
    EXPECT_EQ(table[NCCL_ALGO_TREE][NCCL_PROTO_LL128], 0.0f);  // the v2 choice became the cheapest entry
    EXPECT_EQ(table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], 100.0f);
  } else {
    EXPECT_EQ(table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], static_cast<float>(v));
    EXPECT_EQ(table[NCCL_ALGO_TREE][NCCL_PROTO_LL128], 100.0f);
  }
  EXPECT_EQ(table[NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE], NCCL_ALGO_PROTO_IGNORE);
  if (v == 6) {
    ASSERT_NE(p->tuner.getChunkSize, nullptr);
    size_t chunk = 1;
    EXPECT_EQ(p->tuner.getChunkSize(ctx, ncclFuncAllReduce, 1, 0, 0, 1, &chunk), ncclSuccess);
    EXPECT_EQ(chunk, 12345u);
  } else {
    EXPECT_EQ(p->tuner.getChunkSize, nullptr);
  }
  EXPECT_EQ(p->tuner.finalize(ctx), ncclSuccess);  // the plugin checks it gets its own context back
}
INSTANTIATE_TEST_SUITE_P(All, TunerVersion, ::testing::Range(2, 7));

class ProfilerVersion : public ::testing::TestWithParam<int> {};

TEST_P(ProfilerVersion, TranslatesEvents) {
  const int v = GetParam();
  std::unique_ptr<ProfilerPlugin> p;
  ASSERT_EQ(profilerPluginLoad(lib("profiler", "testv" + std::to_string(v)), &p), ncclSuccess) << lastErrorText();
  EXPECT_EQ(p->abiVersion, v);
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(p->profiler.init(&ctx, 1, &mask, "c", 1, 2, 0, tuttiPluginLogger), ncclSuccess);
  EXPECT_EQ(sym<int()>(*p->library, "testProfilerInitCalls")(), 1);
  EXPECT_EQ((mask & ncclProfileCeColl) != 0, v >= 6);
  EXPECT_EQ((mask & ncclProfileCollApi) != 0, v >= 5);
  EXPECT_NE(mask & ncclProfileColl, 0);

  ncclProfilerEventDescr_v6_t d{};
  int group = 0, api = 0;
  d.type = ncclProfileColl;
  d.parentObj = &api;
  d.rank = 1;
  d.coll.count = 4242;
  d.coll.parentGroup = &group;
  void* h = nullptr;
  ASSERT_EQ(p->profiler.startEvent(ctx, &h, &d), ncclSuccess);
  EXPECT_NE(h, nullptr);
  EXPECT_EQ(sym<long()>(*p->library, "testProfilerLastType")(), ncclProfileColl);
  EXPECT_EQ(sym<long()>(*p->library, "testProfilerLastCount")(), 4242);
  EXPECT_EQ(sym<void*()>(*p->library, "testProfilerLastParent")(), v == 4 ? static_cast<void*>(&group) : &api);
  EXPECT_EQ(p->profiler.stopEvent(h), ncclSuccess);

  // An event the plugin's version does not know is not passed on.
  d.type = ncclProfileCeColl;
  h = reinterpret_cast<void*>(1);
  ASSERT_EQ(p->profiler.startEvent(ctx, &h, &d), ncclSuccess);
  EXPECT_EQ(h == nullptr, v < 6);
  auto states = sym<int()>(*p->library, "testProfilerStates");
  ncclProfilerEventStateArgs_v6_t args{};
  args.proxyStep.transSize = 8;
  EXPECT_EQ(p->profiler.recordEventState(reinterpret_cast<void*>(1), ncclProfilerProxyStepSendWait, &args), ncclSuccess);
  EXPECT_EQ(states(), 1);
  EXPECT_EQ(p->profiler.recordEventState(reinterpret_cast<void*>(1), ncclProfilerCeCollStart, nullptr), ncclSuccess);
  EXPECT_EQ(states(), v == 4 ? 1 : 2);
  EXPECT_EQ(p->profiler.finalize(ctx), ncclSuccess);
}
INSTANTIATE_TEST_SUITE_P(All, ProfilerVersion, ::testing::Range(4, 7));

TEST(PluginErrors, MissingPath) {
  std::unique_ptr<NetPlugin> p;
  EXPECT_EQ(netPluginLoad(kDir + "/libnccl-net-doesnotexist.so", &p), ncclInvalidArgument);
  EXPECT_FALSE(p);
  EXPECT_NE(std::string(lastErrorText()).find("libnccl-net-doesnotexist.so"), std::string::npos);
}

TEST(PluginErrors, NoKnownSymbolListsProbedVersions) {
  std::unique_ptr<NetPlugin> p;
  EXPECT_EQ(netPluginLoad(lib("net", "nosymbol"), &p), ncclInvalidUsage);
  EXPECT_FALSE(p);
  std::string err = lastErrorText();
  EXPECT_NE(err.find("libnccl-net-nosymbol.so"), std::string::npos) << err;
  EXPECT_NE(err.find("ncclNetPlugin_v12"), std::string::npos) << err;
  EXPECT_NE(err.find("ncclNetPlugin_v6"), std::string::npos) << err;
}

TEST(PluginErrors, WrongKindHasNoSymbol) {
  std::unique_ptr<TunerPlugin> p;
  EXPECT_EQ(tunerPluginLoad(lib("net", "testv12"), &p), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorText()).find("ncclTunerPlugin_v2"), std::string::npos);
}

TEST(PluginErrors, NotALibrary) {
  std::unique_ptr<NetPlugin> p;
  EXPECT_EQ(netPluginLoad(lib("net", "notalib"), &p), ncclSystemError);
  EXPECT_FALSE(p);
  EXPECT_NE(std::string(lastErrorText()).find("libnccl-net-notalib.so"), std::string::npos);
}

TEST(PluginErrors, InitFailureIsReported) {
  std::unique_ptr<NetPlugin> p;
  ASSERT_EQ(netPluginLoad(lib("net", "initfail"), &p), ncclSuccess);
  void* ctx = nullptr;
  EXPECT_EQ(p->net.init(&ctx, 1, nullptr, tuttiPluginLogger, nullptr), ncclSystemError);
}

TEST(PluginErrors, NoneAndEmptyLoadNothing) {
  std::unique_ptr<NetPlugin> n;
  std::unique_ptr<TunerPlugin> t;
  std::unique_ptr<ProfilerPlugin> pr;
  EXPECT_EQ(netPluginLoad("none", &n), ncclSuccess);
  EXPECT_EQ(tunerPluginLoad("NONE", &t), ncclSuccess);
  EXPECT_EQ(profilerPluginLoad("", &pr), ncclSuccess);
  EXPECT_FALSE(n);
  EXPECT_FALSE(t);
  EXPECT_FALSE(pr);
  EXPECT_TRUE(describePlugin(PluginKind::Net, "none").disabled);
}

TEST(PluginResolution, NamesAndOrder) {
  auto names = pluginFileNames(PluginKind::Net, "socket");
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0], "libnccl-net-socket.so");
  EXPECT_EQ(names[1], "libtutti-net-socket.so");
  auto tnames = pluginFileNames(PluginKind::Transport, "shm");
  ASSERT_EQ(tnames.size(), 1u);
  EXPECT_EQ(tnames[0], "libtutti-transport-shm.so");
}

TEST(PluginResolution, SearchPathFirstThenNcclNameThenTuttiName) {
  namespace fs = std::filesystem;
  fs::path a = fs::temp_directory_path() / ("tutti-plugin-a-" + std::to_string(getpid()));
  fs::path b = fs::temp_directory_path() / ("tutti-plugin-b-" + std::to_string(getpid()));
  fs::create_directories(a);
  fs::create_directories(b);
  fs::copy_file(lib("net", "testv9"), b / "libnccl-net-order.so", fs::copy_options::overwrite_existing);
  fs::copy_file(lib("net", "testv12"), a / "libtutti-net-order.so", fs::copy_options::overwrite_existing);
  fs::copy_file(lib("net", "testv10"), a / "libnccl-net-order.so", fs::copy_options::overwrite_existing);
  setenv("TUTTI_PLUGIN_PATH", (a.string() + ":" + b.string()).c_str(), 1);
  auto dirs = pluginSearchDirs();
  ASSERT_GE(dirs.size(), 3u);
  EXPECT_EQ(dirs[0], a.string());
  EXPECT_EQ(dirs[1], b.string());

  std::unique_ptr<NetPlugin> p;
  ASSERT_EQ(netPluginLoad("order", &p), ncclSuccess) << lastErrorText();
  EXPECT_EQ(p->abiVersion, 10);  // first dir wins; libnccl- before libtutti- inside it
  p.reset();
  fs::remove(a / "libnccl-net-order.so");
  ASSERT_EQ(netPluginLoad("order", &p), ncclSuccess);
  EXPECT_EQ(p->abiVersion, 12);  // then Tutti's own name in the same dir
  p.reset();
  fs::remove(a / "libtutti-net-order.so");
  ASSERT_EQ(netPluginLoad("order", &p), ncclSuccess);
  EXPECT_EQ(p->abiVersion, 9);  // then the next dir
  p.reset();

  PluginDescription d = describePlugin(PluginKind::Net, "order");
  EXPECT_EQ(d.error, "");
  EXPECT_EQ(d.name, "test-net-v9");
  EXPECT_EQ(d.abiVersion, 9);
  EXPECT_NE(d.path.find("libnccl-net-order.so"), std::string::npos);

  fs::remove_all(a);
  fs::remove_all(b);
  std::unique_ptr<NetPlugin> missing;
  EXPECT_NE(netPluginLoad("order", &missing), ncclSuccess);
  EXPECT_NE(std::string(lastErrorText()).find("libtutti-net-order.so"), std::string::npos);
  PluginDescription dm = describePlugin(PluginKind::Net, "order");
  EXPECT_FALSE(dm.error.empty());
  unsetenv("TUTTI_PLUGIN_PATH");
}

TEST(PluginResolution, EnvironmentWinsOverConfig) {
  setenv("NCCL_TUNER_PLUGIN", "fromenv", 1);
  EXPECT_EQ(pluginSpecFor(PluginKind::Tuner, "fromconfig"), "fromenv");
  unsetenv("NCCL_TUNER_PLUGIN");
  EXPECT_EQ(pluginSpecFor(PluginKind::Tuner, "fromconfig"), "fromconfig");
  EXPECT_EQ(pluginSpecFor(PluginKind::Transport, "shm"), "shm");
}

}  // namespace
}  // namespace tutti
