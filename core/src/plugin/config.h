// The YAML configuration: which plugins to load and in which order, per-plugin options, defaults for
// NCCL_* / TUTTI_* variables, and tuning overrides. configs/REFERENCE.md documents every key.
//
// Discovery (first match wins): $TUTTI_CONFIG (must exist), ./tutti.yaml,
// $XDG_CONFIG_HOME/tutti/tutti.yaml (XDG default ~/.config), <prefix>/etc/tutti/tutti.yaml of the install
// holding the core, /etc/tutti/tutti.yaml, else the built-in
// copy of configs/default.yaml. A file overlays the built-in default: a key it leaves out keeps the
// default's value (so a file naming only `plugins.net` still gets the default transports and tuner).
#pragma once

#include "plugin/params.h"
#include "plugin/plugin_library.h"  // PluginKind

#include <tutti/common.h>

#include <climits>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tutti {

// Where a value was written: 1-based line and column, as editors show them.
struct SourceLoc {
  std::string file;
  int line = 0, column = 0;
  bool known() const { return line > 0; }
  std::string str() const;  // "file:line:col" (or just "file" when the position is unknown)
};

// Name shown for values that come from the embedded copy of configs/default.yaml.
inline constexpr const char* kBuiltinConfigName = "<built-in default.yaml>";

enum class DeviceKind { Auto, Host, Cuda, Sim };
const char* deviceKindName(DeviceKind k);

// Values as NCCL's tuner ABI numbers them (NCCL_ALGO_* / NCCL_PROTO_*); -1 = not set.
inline constexpr int kNumAlgorithms = 7;  // tree ring collnet_direct collnet_chain nvls nvls_tree pat
inline constexpr int kNumProtocols = 3;   // ll ll128 simple
const char* algorithmName(int algo);      // "ring", ... ("?" when out of range)
const char* protocolName(int proto);      // "ll", "ll128", "simple"
const char* collectiveName(ncclFunc_t f);  // "allreduce", ... for the five tunable collectives
inline constexpr int kMaxChannels = 64;

struct PluginSpec {
  PluginKind kind = PluginKind::Net;
  std::string name;  // resolved by the plugin host to libtutti-<kind>-<name>.so / libnccl-<kind>-<name>.so
  std::string path;  // explicit library (absolute, relative to the config file's folder, or a bare
                     // file name that dlopen searches); exactly one of name / path is set
  // NCCL_* / TUTTI_* (or any other) variables set with overwrite=0 before the plugin loads.
  std::vector<std::pair<std::string, std::string>> options;
  bool required = false;  // a load failure is an error instead of WARN + skip
  ParamOrigin origin;     // Default (built-in file), File, or Environment (NCCL_*_PLUGIN)
  SourceLoc where;        // position of the entry; for Environment entries `file` names the variable
  // What the plugin host's loaders take as a spec: the path when given, else the name.
  std::string label() const { return name.empty() ? path : name; }
};

// One tuning override; the plan applies matching rules, in file order, as the last tuner of the chain.
struct TuningRule {
  ncclFunc_t collective = ncclFuncAllReduce;
  int64_t minBytes = 0, maxBytes = INT64_MAX;  // [minBytes, maxBytes)
  int minRanks = 1, maxRanks = INT_MAX;        // inclusive
  int minNodes = 1, maxNodes = INT_MAX;        // inclusive
  int algorithm = -1;                          // NCCL_ALGO_* or -1
  int protocol = -1;                           // NCCL_PROTO_* or -1
  int channels = -1;                           // 1..kMaxChannels or -1
  SourceLoc where;
  bool matches(ncclFunc_t f, int64_t bytes, int nRanks, int nNodes) const {
    return f == collective && bytes >= minBytes && bytes < maxBytes && nRanks >= minRanks &&
           nRanks <= maxRanks && nNodes >= minNodes && nNodes <= maxNodes;
  }
};

// A `params:` entry: the text of the value (already checked against its params.def type).
struct ConfigParam {
  std::string name, value;
  ParamOrigin origin;
};

struct Config {
  int version = 1;
  DeviceKind device = DeviceKind::Auto;
  ParamOrigin deviceOrigin;
  // Reductions of floating types in the fixed order of det_reduce.h (TUTTI_DETERMINISTIC overrides it).
  bool deterministic = false;
  ParamOrigin deterministicOrigin;
  std::vector<PluginSpec> transports, nets, tuners, profilers;
  // Which variable replaced a plugin list ("" when the list is the config's own).
  std::string netsOverride, tunersOverride, profilersOverride;
  std::vector<ConfigParam> params;  // in file order, one per name
  std::vector<TuningRule> tuning;
  std::string sourcePath;  // the file read, or kBuiltinConfigName
  std::string discoveredBy;  // "TUTTI_CONFIG", "./tutti.yaml", "XDG_CONFIG_HOME", "install prefix", "/etc", "built-in"

  const ConfigParam* findParam(const std::string& name) const;
  const std::vector<PluginSpec>& plugins(PluginKind k) const;
  std::vector<PluginSpec>& plugins(PluginKind k);
};

// The process's configuration: discovered and loaded on the first call (thread-safe), then the same
// object for the life of the process. Errors are ncclInvalidUsage with "file:line:col: message" in
// ncclGetLastError; a failed load is remembered and returned again on later calls.
ncclResult_t configGet(const Config** out);

// Parses `text` (named `name` in messages) over the built-in default and applies the
// NCCL_{NET,TUNER,PROFILER}_PLUGIN overrides. `out` is written only on success.
ncclResult_t configParse(const std::string& text, const std::string& name, Config* out);
// Same for a file; a missing or unreadable file is an error naming it.
ncclResult_t configLoadFile(const std::string& path, Config* out);
// Which file discovery picks now ("" = the built-in default), and why (see Config::discoveredBy).
// Fails only when $TUTTI_CONFIG names a missing file.
ncclResult_t configDiscover(std::string* path, std::string* how);
// The embedded text of configs/default.yaml.
const char* configBuiltinText();

// Makes `path` (or discovery when empty) the process configuration, replacing any loaded one
// (tutti-info --config and tests). Installs it as the log's parameter lookup.
ncclResult_t configUseFile(const std::string& path);
// Forgets the loaded configuration so the next configGet discovers again. For tests only: objects
// returned earlier stay valid (they are retired, not freed).
void configResetForTest();

// The `params:` value for `name` in the process configuration (loading it if needed); nullptr when
// the config does not set it or failed to load. Used by params.cc; never logs while holding locks.
const ConfigParam* configParamValue(const char* name);

// Sets the spec's options in the process environment with overwrite=0 (a real variable wins) and logs
// each one at INFO ENV. The process configuration's plugins get theirs once, when it is loaded (setenv
// must not race with rank threads' getenv); this is for a config loaded on the side (tools, tests).
void configApplyPluginOptions(const PluginSpec& spec);

// Text for an origin: "default", "default (<built-in default.yaml>:3:5)", "file.yaml:3:5", "environment".
std::string originText(const ParamOrigin& o);

}  // namespace tutti
