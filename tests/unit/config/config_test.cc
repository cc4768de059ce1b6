// Config discovery, overlay on the built-in default, parameter precedence and origins, the
// NCCL_*_PLUGIN overrides, and the shipped configs.
#include "plugin/config.h"
#include "plugin/config_schema.h"
#include "plugin/params.h"
#include "util/check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

namespace tutti {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> labels(const std::vector<PluginSpec>& v) {
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(s.label());
  return out;
}

void writeFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// Each test gets an empty temporary cwd / HOME / XDG_CONFIG_HOME, no config-related variables, and a
// fresh process configuration; everything is restored afterwards.
class ConfigEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"TUTTI_CONFIG", "XDG_CONFIG_HOME", "HOME", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN",
                          "NCCL_PROFILER_PLUGIN", "NCCL_BUFFSIZE", "NCCL_ALGO", "NCCL_DEBUG", "NCCL_SOCKET_NTHREADS"}) {
      const char* old = std::getenv(v);
      saved_[v] = old ? std::optional<std::string>(old) : std::nullopt;
      unsetenv(v);
    }
    char tmpl[] = "/tmp/tutti-config-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    oldCwd_ = fs::current_path();
    fs::current_path(dir_);
    setenv("HOME", (dir_ / "home").c_str(), 1);
    configResetForTest();
  }
  void TearDown() override {
    fs::current_path(oldCwd_);
    fs::remove_all(dir_);
    for (const auto& [k, v] : saved_)
      if (v) setenv(k.c_str(), v->c_str(), 1);
      else unsetenv(k.c_str());
    configResetForTest();
  }
  const Config* get() {
    const Config* c = nullptr;
    EXPECT_EQ(configGet(&c), ncclSuccess) << lastErrorText();
    return c;
  }
  fs::path dir_, oldCwd_;
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST(ConfigBuiltin, DefaultNamesTheFivePlugins) {
  Config c;
  ASSERT_EQ(configParse(configBuiltinText(), kBuiltinConfigName, &c), ncclSuccess) << lastErrorText();
  EXPECT_EQ(c.device, DeviceKind::Auto);
  EXPECT_EQ(labels(c.transports), (std::vector<std::string>{"p2p", "shm"}));
  EXPECT_EQ(labels(c.nets), (std::vector<std::string>{"ib", "socket"}));
  EXPECT_EQ(labels(c.tuners), (std::vector<std::string>{"default"}));
  EXPECT_TRUE(c.profilers.empty());
  EXPECT_TRUE(c.tuning.empty());
  EXPECT_EQ(c.nets[0].kind, PluginKind::Net);
  EXPECT_EQ(c.nets[0].origin.kind, ParamOrigin::Default);
  EXPECT_GT(c.nets[0].origin.line, 0);
}

TEST(ConfigBuiltin, ShippedExamplesParse) {
  for (const char* f : {"default.yaml", "tcp-cluster.yaml", "ib-cluster.yaml"}) {
    Config c;
    EXPECT_EQ(configLoadFile(std::string(TUTTI_TEST_SOURCE_DIR) + "/configs/" + f, &c), ncclSuccess)
        << f << ": " << lastErrorText();
  }
  Config tcp, ib;
  ASSERT_EQ(configLoadFile(std::string(TUTTI_TEST_SOURCE_DIR) + "/configs/tcp-cluster.yaml", &tcp), ncclSuccess);
  ASSERT_EQ(labels(tcp.nets), (std::vector<std::string>{"socket"}));
  EXPECT_TRUE(tcp.nets[0].required);
  EXPECT_EQ(tcp.nets[0].options.at(0), (std::pair<std::string, std::string>{"NCCL_SOCKET_NTHREADS", "4"}));
  ASSERT_NE(tcp.findParam("NCCL_SOCKET_IFNAME"), nullptr);
  EXPECT_EQ(tcp.findParam("NCCL_SOCKET_IFNAME")->value, "ens2f");

  ASSERT_EQ(configLoadFile(std::string(TUTTI_TEST_SOURCE_DIR) + "/configs/ib-cluster.yaml", &ib), ncclSuccess);
  EXPECT_EQ(ib.device, DeviceKind::Cuda);
  ASSERT_EQ(ib.tuning.size(), 3u);
  const TuningRule& r = ib.tuning[1];
  EXPECT_EQ(r.collective, ncclFuncAllReduce);
  EXPECT_EQ(r.minBytes, 64 << 10);
  EXPECT_EQ(r.maxBytes, 4 << 20);
  EXPECT_EQ(r.minNodes, 2);
  EXPECT_EQ(r.algorithm, -1);
  EXPECT_EQ(r.protocol, 1);  // NCCL_PROTO_LL128
  EXPECT_EQ(r.channels, 8);
  EXPECT_TRUE(r.matches(ncclFuncAllReduce, 64 << 10, 16, 2));
  EXPECT_FALSE(r.matches(ncclFuncAllReduce, 4 << 20, 16, 2));  // max is exclusive
  EXPECT_FALSE(r.matches(ncclFuncAllReduce, 1 << 20, 16, 1));  // below the node range
  EXPECT_FALSE(r.matches(ncclFuncAllGather, 1 << 20, 16, 2));
  EXPECT_EQ(ib.tuning[2].maxBytes, INT64_MAX);
  EXPECT_EQ(ib.tuning[0].algorithm, 1);  // NCCL_ALGO_RING
}

TEST(ConfigBuiltin, SchemaTableDrivesKeys) {
  EXPECT_EQ(configChildKeys(""),
            (std::vector<std::string>{"version", "device", "deterministic", "plugins", "params", "tuning"}));
  EXPECT_EQ(configChildKeys("plugins.*[]"), (std::vector<std::string>{"name", "path", "options", "required"}));
}

// configs/REFERENCE.md carries the tables `tutti-info --reference` prints; every declared key and
// parameter must have its row, parameters with their current default (regenerate the file when this fails).
TEST(ConfigBuiltin, ReferenceDocumentsEveryKeyAndParam) {
  std::ifstream in(std::string(TUTTI_TEST_SOURCE_DIR) + "/configs/REFERENCE.md");
  ASSERT_TRUE(in) << "configs/REFERENCE.md missing";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const ConfigKeyInfo& k : configSchema())
    EXPECT_NE(text.find(std::string("| `") + k.key + "` |"), std::string::npos) << k.key;
  for (const ParamInfo& p : paramTable()) {
    const std::string def = paramDefaultText(p);
    const std::string row = std::string("| `") + p.name + "` | " + paramTypeName(p.type) + " | " +
                            (def.empty() ? std::string("\"\"") : "`" + def + "`") + " |";
    EXPECT_NE(text.find(row), std::string::npos) << row;
  }
}

TEST(ConfigParse, FileOverlaysDefaultWithOrigins) {
  Config c;
  ASSERT_EQ(configParse("plugins:\n  net:\n    - socket\n", "/cfg/a.yaml", &c), ncclSuccess) << lastErrorText();
  EXPECT_EQ(labels(c.nets), (std::vector<std::string>{"socket"}));
  EXPECT_EQ(c.nets[0].origin.kind, ParamOrigin::File);
  EXPECT_EQ(c.nets[0].where.str(), "/cfg/a.yaml:3:7");
  // Kinds the file leaves out keep the built-in lists, marked as defaults.
  EXPECT_EQ(labels(c.transports), (std::vector<std::string>{"p2p", "shm"}));
  EXPECT_EQ(c.transports[0].origin.kind, ParamOrigin::Default);
  EXPECT_EQ(c.sourcePath, "/cfg/a.yaml");
}

TEST(ConfigParse, EmptyFileAndEmptyListsAndPaths) {
  Config c;
  ASSERT_EQ(configParse("", "/cfg/empty.yaml", &c), ncclSuccess);
  EXPECT_EQ(labels(c.nets), (std::vector<std::string>{"ib", "socket"}));
  ASSERT_EQ(configParse("plugins:\n  tuner: []\n  net:\n    - path: lib/x.so\n    - path: libnccl-net-y.so\n"
                        "    - path: /abs/z.so\n",
                        "/cfg/b.yaml", &c),
            ncclSuccess)
      << lastErrorText();
  EXPECT_TRUE(c.tuners.empty());
  // Relative paths are taken from the config's folder; bare file names are left to dlopen's search.
  EXPECT_EQ(labels(c.nets), (std::vector<std::string>{"/cfg/lib/x.so", "libnccl-net-y.so", "/abs/z.so"}));
}

TEST_F(ConfigEnv, DiscoveryOrder) {
  // Nothing anywhere: the built-in default (unless this machine has a system config).
  if (!fs::exists("/etc/tutti/tutti.yaml")) {
    EXPECT_EQ(get()->sourcePath, kBuiltinConfigName);
    EXPECT_EQ(get()->discoveredBy, "built-in");
  }
  // ~/.config (HOME) when XDG_CONFIG_HOME is unset.
  writeFile(dir_ / "home/.config/tutti/tutti.yaml", "device: host\n");
  configResetForTest();
  EXPECT_EQ(get()->sourcePath, (dir_ / "home/.config/tutti/tutti.yaml").string());
  // XDG_CONFIG_HOME replaces ~/.config.
  writeFile(dir_ / "xdg/tutti/tutti.yaml", "device: cuda\n");
  setenv("XDG_CONFIG_HOME", (dir_ / "xdg").c_str(), 1);
  configResetForTest();
  EXPECT_EQ(get()->sourcePath, (dir_ / "xdg/tutti/tutti.yaml").string());
  EXPECT_EQ(get()->device, DeviceKind::Cuda);
  EXPECT_EQ(get()->discoveredBy, "XDG_CONFIG_HOME");
  // ./tutti.yaml beats the user's config.
  writeFile(dir_ / "tutti.yaml", "device: host\n");
  configResetForTest();
  EXPECT_EQ(get()->sourcePath, (dir_ / "tutti.yaml").string());
  EXPECT_EQ(get()->device, DeviceKind::Host);
  // $TUTTI_CONFIG beats everything.
  writeFile(dir_ / "explicit.yaml", "device: cuda\n");
  setenv("TUTTI_CONFIG", (dir_ / "explicit.yaml").c_str(), 1);
  configResetForTest();
  EXPECT_EQ(get()->sourcePath, (dir_ / "explicit.yaml").string());
  EXPECT_EQ(get()->discoveredBy, "TUTTI_CONFIG");
}

TEST_F(ConfigEnv, ExplicitMissingFileIsAnError) {
  setenv("TUTTI_CONFIG", (dir_ / "nope.yaml").c_str(), 1);
  writeFile(dir_ / "tutti.yaml", "device: host\n");  // must not be used as a fallback
  const Config* c = nullptr;
  EXPECT_EQ(configGet(&c), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorText()).find("nope.yaml: no such file"), std::string::npos);
  EXPECT_EQ(configGet(&c), ncclInvalidUsage) << "a failed load is remembered";
  // Parameters still work, from their defaults.
  EXPECT_EQ(paramInt("NCCL_BUFFSIZE"), 4194304);
}

TEST_F(ConfigEnv, MalformedDiscoveredFileFails) {
  writeFile(dir_ / "tutti.yaml", "version: 1\ndevice: gpu\n");
  const Config* c = nullptr;
  EXPECT_EQ(configGet(&c), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorText()).find((dir_ / "tutti.yaml").string() + ":2:9: device"), std::string::npos)
      << lastErrorText();
}

TEST_F(ConfigEnv, ParamPrecedenceAndOrigins) {
  writeFile(dir_ / "tutti.yaml", "params:\n  NCCL_BUFFSIZE: 1048576\n  NCCL_ALGO: ring\n");
  // File over default.
  EXPECT_EQ(paramInt("NCCL_BUFFSIZE"), 1048576);
  ParamOrigin o = paramOrigin("NCCL_BUFFSIZE");
  EXPECT_EQ(o.kind, ParamOrigin::File);
  EXPECT_EQ(o.file, (dir_ / "tutti.yaml").string());
  EXPECT_EQ(o.line, 2);
  EXPECT_EQ(o.column, 18);
  EXPECT_TRUE(paramIsSet("NCCL_ALGO"));
  EXPECT_EQ(paramString("NCCL_ALGO"), "ring");
  // Environment over file.
  setenv("NCCL_BUFFSIZE", "0x2000", 1);
  EXPECT_EQ(paramInt("NCCL_BUFFSIZE"), 0x2000);
  EXPECT_EQ(paramOrigin("NCCL_BUFFSIZE").kind, ParamOrigin::Environment);
  // A malformed environment value is ignored (with a warning): the file's value applies.
  setenv("NCCL_BUFFSIZE", "lots", 1);
  EXPECT_EQ(paramInt("NCCL_BUFFSIZE"), 1048576);
  EXPECT_EQ(paramOrigin("NCCL_BUFFSIZE").kind, ParamOrigin::File);
  // Default when neither sets it.
  EXPECT_EQ(paramInt("NCCL_LL_BUFFSIZE"), 262144);
  EXPECT_EQ(paramOrigin("NCCL_LL_BUFFSIZE").kind, ParamOrigin::Default);
  EXPECT_FALSE(paramIsSet("NCCL_LL_BUFFSIZE"));
}

TEST_F(ConfigEnv, NcclDebugFromTheFileReachesTheLogger) {
  writeFile(dir_ / "tutti.yaml", "params:\n  NCCL_DEBUG: INFO\n");
  ASSERT_NE(get(), nullptr);
  EXPECT_EQ(logLevel(), NCCL_LOG_INFO);
  configResetForTest();
  unsetenv("TUTTI_CONFIG");
  fs::remove(dir_ / "tutti.yaml");
  ASSERT_EQ(configUseFile(""), ncclSuccess);  // back to the built-in default
  EXPECT_EQ(logLevel(), NCCL_LOG_NONE);
}

TEST_F(ConfigEnv, UseFileReplacesAndKeepsOldPointersValid) {
  writeFile(dir_ / "a.yaml", "params:\n  NCCL_ALGO: tree\n");
  writeFile(dir_ / "bad.yaml", "params:\n  NCCL_ALGO: [x]\n");
  ASSERT_EQ(configUseFile((dir_ / "a.yaml").string()), ncclSuccess);
  const ConfigParam* p = configParamValue("NCCL_ALGO");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(configUseFile((dir_ / "bad.yaml").string()), ncclInvalidUsage);
  EXPECT_EQ(paramString("NCCL_ALGO"), "tree") << "a failed load keeps the previous config";
  ASSERT_EQ(configUseFile(""), ncclSuccess);
  EXPECT_EQ(p->value, "tree");  // retired, not freed
  EXPECT_EQ(paramString("NCCL_ALGO"), "");
}

TEST_F(ConfigEnv, PluginEnvOverrides) {
  Config c;
  const std::string yaml =
      "plugins:\n  net:\n    - name: ofi\n      options: {FI_PROVIDER: efa}\n    - ib\n    - socket\n"
      "  tuner: [default, mine]\n  profiler: [trace]\n";
  ASSERT_EQ(configParse(yaml, "p.yaml", &c), ncclSuccess) << lastErrorText();
  EXPECT_EQ(labels(c.nets), (std::vector<std::string>{"ofi", "ib", "socket"}));
  EXPECT_TRUE(c.netsOverride.empty());

  // `none` keeps only Tutti's own plugins (NCCL keeps its internal IB / socket and tuning model).
  setenv("NCCL_NET_PLUGIN", "none", 1);
  setenv("NCCL_TUNER_PLUGIN", "NONE", 1);
  setenv("NCCL_PROFILER_PLUGIN", "none", 1);
  ASSERT_EQ(configParse(yaml, "p.yaml", &c), ncclSuccess);
  EXPECT_EQ(labels(c.nets), (std::vector<std::string>{"ib", "socket"}));
  EXPECT_EQ(labels(c.tuners), (std::vector<std::string>{"default"}));
  EXPECT_TRUE(c.profilers.empty());
  EXPECT_EQ(c.netsOverride, "NCCL_NET_PLUGIN");

  // A list: external nets first, then the bundled ones; tuners after the default model.
  setenv("NCCL_NET_PLUGIN", "ofi, libnccl-net-x.so", 1);
  setenv("NCCL_TUNER_PLUGIN", "other", 1);
  setenv("NCCL_PROFILER_PLUGIN", "/opt/prof.so", 1);
  ASSERT_EQ(configParse(yaml, "p.yaml", &c), ncclSuccess);
  EXPECT_EQ(labels(c.nets), (std::vector<std::string>{"ofi", "libnccl-net-x.so", "ib", "socket"}));
  EXPECT_EQ(c.nets[0].origin.kind, ParamOrigin::Environment);
  EXPECT_EQ(c.nets[0].options.size(), 1u) << "the config's entry for the same plugin keeps its options";
  EXPECT_EQ(c.nets[1].path, "libnccl-net-x.so");
  EXPECT_TRUE(c.nets[1].name.empty());
  EXPECT_EQ(c.nets[2].origin.kind, ParamOrigin::File);
  EXPECT_EQ(labels(c.tuners), (std::vector<std::string>{"default", "other"}));
  EXPECT_EQ(labels(c.profilers), (std::vector<std::string>{"/opt/prof.so"}));
  EXPECT_EQ(c.profilers[0].kind, PluginKind::Profiler);

  // The variable may also come from the file's own params.
  unsetenv("NCCL_NET_PLUGIN");
  ASSERT_EQ(configParse("params:\n  NCCL_NET_PLUGIN: none\nplugins:\n  net: [ofi, socket]\n", "q.yaml", &c),
            ncclSuccess);
  EXPECT_EQ(labels(c.nets), (std::vector<std::string>{"socket"}));
}

TEST_F(ConfigEnv, PluginOptionsDoNotOverwriteTheEnvironment) {
  PluginSpec s;
  s.name = "socket";
  s.options = {{"NCCL_SOCKET_NTHREADS", "4"}, {"NCCL_ALGO", "tree"}};
  setenv("NCCL_ALGO", "ring", 1);
  configApplyPluginOptions(s);
  EXPECT_STREQ(std::getenv("NCCL_SOCKET_NTHREADS"), "4");
  EXPECT_STREQ(std::getenv("NCCL_ALGO"), "ring");
}

}  // namespace
}  // namespace tutti
