// Every kind of config error, with the exact file:line:col it must point at.
#include "plugin/config.h"
#include "util/check.h"

#include <gtest/gtest.h>

#include <string>

namespace tutti {
namespace {

struct BadCase {
  const char* what;
  const char* yaml;
  const char* message;  // expected prefix of ncclGetLastError after "t.yaml:"
};

const BadCase kBad[] = {
    {"yaml syntax", "plugins:\n  net: [socket\n", "3:1: YAML syntax error"},
    {"yaml bad indentation", "device: host\n  extra: 1\n", "2:8: YAML syntax error"},
    {"top level not a map", "- a\n- b\n", "1:1: the top level must be a map"},
    {"unknown top key", "version: 1\ndevise: host\n", "2:1: unknown key 'devise' in the top level"},
    {"duplicate top key", "device: host\ndevice: cuda\n", "2:1: duplicate key 'device'"},
    {"bad version type", "version: one\n", "1:10: version: expected an integer, got 'one'"},
    {"unsupported version", "version: 2\n", "1:10: unsupported config version 2"},
    {"unknown device", "device: gpu\n", "1:9: device: unknown value 'gpu' (expected auto|host|cuda|sim)"},
    {"device not scalar", "device: [host]\n", "1:9: device: expected a value, got a list"},
    {"plugins not a map", "plugins: [socket]\n", "1:10: plugins: expected a map"},
    {"unknown plugin kind", "plugins:\n  nets: []\n", "2:3: unknown key 'nets' in plugins"},
    {"plugin list not a list", "plugins:\n  net: socket\n", "2:8: plugins.net: expected a list"},
    {"unknown entry key", "plugins:\n  net:\n    - name: socket\n      requird: true\n",
     "4:7: unknown key 'requird' in plugins.net entry"},
    {"entry without name", "plugins:\n  tuner:\n    - required: true\n", "3:7: plugins.tuner entry: name: or path:"},
    {"entry with both", "plugins:\n  net:\n    - name: a\n      path: /x.so\n", "4:13: plugins.net entry: give either"},
    {"bad plugin name", "plugins:\n  net:\n    - name: a/b\n", "3:13: plugins.net entry: plugin name 'a/b'"},
    {"duplicate plugin", "plugins:\n  transport:\n    - name: shm\n    - shm\n",
     "4:7: plugins.transport: duplicate plugin 'shm' (first listed at line 3)"},
    {"name and path alike", "plugins:\n  net:\n    - name: x.so\n    - path: x.so\n",
     "4:7: plugins.net: duplicate plugin 'x.so' (first listed at line 3)"},
    {"required not bool", "plugins:\n  net:\n    - name: ib\n      required: maybe\n",
     "4:17: plugins.net entry required: expected true or false, got 'maybe'"},
    {"options not a map", "plugins:\n  net:\n    - name: ib\n      options: [a]\n", "4:16: plugins.net entry options"},
    {"option bad name", "plugins:\n  net:\n    - name: ib\n      options: {bad-name: 1}\n",
     "4:17: plugins.net entry: option 'bad-name'"},
    {"option wrong type", "plugins:\n  net:\n    - name: ib\n      options:\n        NCCL_BUFFSIZE: big\n",
     "5:24: plugins.net entry option: NCCL_BUFFSIZE takes an integer, got 'big'"},
    {"params not a map", "params: 3\n", "1:9: params: expected a map"},
    {"unknown param", "params:\n  NCCL_BUFSIZE: 1\n", "2:3: params: unknown parameter 'NCCL_BUFSIZE'"},
    {"int param not int", "params:\n  NCCL_BUFFSIZE: abc\n", "2:18: params: NCCL_BUFFSIZE takes an integer, got 'abc'"},
    {"proxy affinity not a CPU list", "params:\n  TUTTI_PROXY_AFFINITY: 0-\n",
     "2:25: params: TUTTI_PROXY_AFFINITY: '0-': expected auto, inherit or a CPU list such as 0-3,8 ('' is not a CPU number)"},
    {"param not scalar", "params:\n  NCCL_ALGO: [ring]\n", "2:14: params.NCCL_ALGO: expected a value, got a list"},
    {"duplicate param", "params:\n  NCCL_ALGO: ring\n  NCCL_ALGO: tree\n", "3:3: params: duplicate parameter"},
    {"TUTTI_CONFIG in file", "params:\n  TUTTI_CONFIG: x.yaml\n", "2:3: params: TUTTI_CONFIG selects"},
    {"tuning not a list", "tuning: {collective: allreduce}\n", "1:9: tuning: expected a list of rules"},
    {"rule not a map", "tuning:\n  - allreduce\n", "2:5: tuning rule: expected a map"},
    {"rule without collective", "tuning:\n  - protocol: ll\n", "2:5: tuning rule: collective: is required"},
    {"unknown collective", "tuning:\n  - collective: alltoall\n    protocol: ll\n",
     "2:17: tuning collective: unknown value 'alltoall' (expected broadcast|reduce|allgather|reducescatter|allreduce)"},
    {"unknown rule key", "tuning:\n  - collective: reduce\n    proto: ll\n", "3:5: unknown key 'proto' in tuning rule"},
    {"unknown algorithm", "tuning:\n  - collective: reduce\n    algorithm: star\n", "3:16: tuning algorithm: unknown value 'star'"},
    {"unknown protocol", "tuning:\n  - collective: reduce\n    protocol: ll64\n", "3:15: tuning protocol: unknown value 'll64'"},
    {"negative size", "tuning:\n  - collective: reduce\n    bytes: [-1, 10]\n    protocol: ll\n",
     "3:13: tuning bytes min: sizes cannot be negative"},
    {"bad size unit", "tuning:\n  - collective: reduce\n    bytes: [0, 10X]\n    protocol: ll\n",
     "3:16: tuning bytes max: expected a size in bytes"},
    {"size min > max", "tuning:\n  - collective: reduce\n    bytes: [4M, 64K]\n    protocol: ll\n",
     "3:12: tuning bytes: min must be below max"},
    {"size range wrong length", "tuning:\n  - collective: reduce\n    bytes: [1]\n    protocol: ll\n",
     "3:12: tuning bytes: expected a list [min, max], got 1 elements"},
    {"ranks min > max", "tuning:\n  - collective: reduce\n    ranks: [8, 2]\n    protocol: ll\n",
     "3:12: tuning ranks: min 8 is greater than max 2"},
    {"nodes zero", "tuning:\n  - collective: reduce\n    nodes: [0, 2]\n    protocol: ll\n",
     "3:13: tuning nodes min: expected an integer in 1..2147483647, got 0"},
    {"channels range", "tuning:\n  - collective: reduce\n    channels: 65\n", "3:15: tuning channels: expected an integer in 1..64"},
    {"rule sets nothing", "tuning:\n  - collective: reduce\n    bytes: [0, 1K]\n", "2:5: tuning rule: sets nothing"},
};

class ConfigError : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigError, ReportsPosition) {
  const BadCase& c = GetParam();
  Config cfg;
  cfg.sourcePath = "untouched";
  clearLastError();
  EXPECT_EQ(configParse(c.yaml, "t.yaml", &cfg), ncclInvalidUsage) << c.what;
  std::string expected = std::string("t.yaml:") + c.message;
  EXPECT_EQ(std::string(lastErrorText()).substr(0, expected.size()), expected) << c.what << "\nfull: " << lastErrorText();
  EXPECT_EQ(cfg.sourcePath, "untouched") << "output written on failure";
}

INSTANTIATE_TEST_SUITE_P(All, ConfigError, ::testing::ValuesIn(kBad), [](const auto& info) {
  std::string n = info.param.what;
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

TEST(ConfigErrorFile, MissingFileNamesIt) {
  Config cfg;
  EXPECT_EQ(configLoadFile("/nonexistent/tutti.yaml", &cfg), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorText()).find("/nonexistent/tutti.yaml: cannot read"), std::string::npos);
}

}  // namespace
}  // namespace tutti
