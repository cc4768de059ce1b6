// config.h: discovery, the process-wide configuration (loaded once), NCCL_*_PLUGIN overrides and the
// parameter lookups that params.cc and the logger use.
#include "plugin/config.h"

#include "plugin/config_parse.h"
#include "plugin/plugin_library.h"
#include "util/check.h"

#include <fmt/format.h>
#include <strings.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

namespace tutti {

extern const char* const kBuiltinDefaultYaml;  // generated from configs/default.yaml at build time

// Same words as pluginKindName(); local so the config layer does not depend on the loader's code.
const char* configKindWord(PluginKind k) {
  switch (k) {
    case PluginKind::Transport: return "transport";
    case PluginKind::Net: return "net";
    case PluginKind::Tuner: return "tuner";
    default: return "profiler";
  }
}

std::string SourceLoc::str() const {
  return known() ? fmt::format("{}:{}:{}", file, line, column) : file;
}

const char* deviceKindName(DeviceKind k) {
  switch (k) {
    case DeviceKind::Host: return "host";
    case DeviceKind::Cuda: return "cuda";
    case DeviceKind::Sim: return "sim";
    default: return "auto";
  }
}


const ConfigParam* Config::findParam(const std::string& name) const {
  for (const auto& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<PluginSpec>& Config::plugins(PluginKind k) {
  switch (k) {
    case PluginKind::Transport: return transports;
    case PluginKind::Net: return nets;
    case PluginKind::Tuner: return tuners;
    default: return profilers;
  }
}

const std::vector<PluginSpec>& Config::plugins(PluginKind k) const {
  return const_cast<Config*>(this)->plugins(k);
}

std::string originText(const ParamOrigin& o) {
  switch (o.kind) {
    case ParamOrigin::Environment: return "environment";
    case ParamOrigin::File: return o.line > 0 ? fmt::format("{}:{}:{}", o.file, o.line, o.column) : o.file;
    default: return o.line > 0 ? fmt::format("default ({}:{}:{})", o.file, o.line, o.column) : "default";
  }
}

const char* configBuiltinText() { return kBuiltinDefaultYaml; }

namespace {

// Tutti's own plugins of a kind stay in the list when NCCL_<KIND>_PLUGIN names an external one, the way
// NCCL keeps its internal IB / socket transports and its internal tuning model.
bool isBundled(PluginKind kind, const PluginSpec& s) {
  if (!s.path.empty()) return false;
  if (kind == PluginKind::Net) return s.name == "ib" || s.name == "socket";
  if (kind == PluginKind::Tuner) return s.name == "default";
  return false;
}

// NCCL_NET_PLUGIN / NCCL_TUNER_PLUGIN / NCCL_PROFILER_PLUGIN: a comma list of names or library files
// ("lib...", "....so" or a path, as NCCL accepts); `none` leaves only the bundled plugins (net: ib,
// socket; tuner: default; profiler: nothing). External entries come first for net (tried in order),
// after the default model for tuners (they refine its costs). Read from the environment, else from the
// config's own `params:`.
void applyOverride(Config* cfg, PluginKind kind, const char* var, std::string* overriddenBy) {
  std::string value;
  ParamOrigin from{ParamOrigin::Environment, var, 0, 0};
  if (const char* e = std::getenv(var); e && *e) {
    value = e;
  } else if (const ConfigParam* p = cfg->findParam(var); p && !p->value.empty()) {
    value = p->value;
    from = p->origin;
  } else {
    return;
  }
  std::vector<PluginSpec>& list = cfg->plugins(kind);
  std::vector<PluginSpec> bundled, external;
  for (const PluginSpec& s : list)
    if (isBundled(kind, s)) bundled.push_back(s);
  if (strcasecmp(value.c_str(), "none") != 0) {
    std::stringstream ss(value);
    std::string item;
    while (std::getline(ss, item, ',')) {
      item.erase(0, item.find_first_not_of(" \t"));
      item.erase(item.find_last_not_of(" \t") + 1);
      if (item.empty()) continue;
      PluginSpec spec;
      bool isFile = item.rfind("lib", 0) == 0 || item.find('/') != std::string::npos ||
                    (item.size() > 3 && item.compare(item.size() - 3, 3, ".so") == 0);
      (isFile ? spec.path : spec.name) = item;
      // The config's entry for the same plugin keeps its options and `required`.
      for (const PluginSpec& s : list)
        if (s.label() == item) spec = s;
      spec.kind = kind;
      spec.origin = from;
      spec.where = SourceLoc{var, 0, 0};
      bool dup = false;
      for (const PluginSpec& e : external) dup |= e.label() == spec.label();
      if (!dup) external.push_back(std::move(spec));
    }
  }
  std::vector<PluginSpec> result = kind == PluginKind::Tuner ? bundled : external;
  for (const PluginSpec& s : kind == PluginKind::Tuner ? external : bundled) {
    bool dup = false;
    for (const PluginSpec& r : result) dup |= r.label() == s.label();
    if (!dup) result.push_back(s);
  }
  list = std::move(result);
  *overriddenBy = var;
}

void applyOverrides(Config* cfg) {
  applyOverride(cfg, PluginKind::Net, "NCCL_NET_PLUGIN", &cfg->netsOverride);
  applyOverride(cfg, PluginKind::Tuner, "NCCL_TUNER_PLUGIN", &cfg->tunersOverride);
  applyOverride(cfg, PluginKind::Profiler, "NCCL_PROFILER_PLUGIN", &cfg->profilersOverride);
}

// The built-in default with Default origins; it is parsed once and copied under every file.
ncclResult_t builtinConfig(Config* out) {
  static const std::pair<Config, std::string> parsed = [] {
    Config c;
    c.sourcePath = kBuiltinConfigName;
    c.discoveredBy = "built-in";
    std::string err;
    configParseText(kBuiltinDefaultYaml, kBuiltinConfigName, ParamOrigin::Default, "", &c, &err);
    return std::make_pair(c, err);
  }();
  if (!parsed.second.empty())
    TUTTI_FAIL(ncclInternalError, "the built-in default configuration is invalid: {}", parsed.second);
  *out = parsed.first;
  return ncclSuccess;
}

bool isFile(const std::string& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

}  // namespace

ncclResult_t configParse(const std::string& text, const std::string& name, Config* out) {
  Config cfg;
  TUTTI_CHECK(builtinConfig(&cfg));
  std::string baseDir, err;
  if (name != kBuiltinConfigName && !name.empty())
    baseDir = std::filesystem::absolute(name).parent_path().string();
  // Parsing the built-in text by its own name (tests, tutti-info) keeps its values marked as defaults.
  ParamOrigin::Kind kind = name == kBuiltinConfigName ? ParamOrigin::Default : ParamOrigin::File;
  if (!configParseText(text, name, kind, baseDir, &cfg, &err)) TUTTI_FAIL(ncclInvalidUsage, "{}", err);
  cfg.sourcePath = name;
  cfg.discoveredBy = "";
  applyOverrides(&cfg);
  *out = std::move(cfg);
  return ncclSuccess;
}

ncclResult_t configLoadFile(const std::string& path, Config* out) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) TUTTI_FAIL(ncclInvalidUsage, "{}: is a folder, not a config file", path);
  std::ifstream in(path);
  if (!in) TUTTI_FAIL(ncclInvalidUsage, "{}: cannot read the config file ({})", path, std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return configParse(text.str(), path, out);
}

ncclResult_t configDiscover(std::string* path, std::string* how) {
  if (const char* e = std::getenv("TUTTI_CONFIG"); e && *e) {
    if (!isFile(e)) TUTTI_FAIL(ncclInvalidUsage, "TUTTI_CONFIG={}: no such file", e);
    *path = e, *how = "TUTTI_CONFIG";
    return ncclSuccess;
  }
  if (isFile("tutti.yaml")) {
    *path = std::filesystem::absolute("tutti.yaml").string(), *how = "./tutti.yaml";
    return ncclSuccess;
  }
  // XDG base directories: a relative XDG_CONFIG_HOME is invalid and ignored.
  std::string xdg;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && x[0] == '/') xdg = x;
  else if (const char* h = std::getenv("HOME"); h && *h) xdg = std::string(h) + "/.config";
  if (!xdg.empty() && isFile(xdg + "/tutti/tutti.yaml")) {
    *path = xdg + "/tutti/tutti.yaml", *how = "XDG_CONFIG_HOME";
    return ncclSuccess;
  }
  // The install's own configuration, <prefix>/etc/tutti/tutti.yaml next to a relocatable prefix.
  if (std::string prefix = corePrefix(); !prefix.empty()) {
    std::string f = prefix + "/" TUTTI_INSTALL_SYSCONFDIR "/tutti/tutti.yaml";
    if (isFile(f)) {
      *path = f, *how = "install prefix";
      return ncclSuccess;
    }
  }
  if (isFile("/etc/tutti/tutti.yaml")) {
    *path = "/etc/tutti/tutti.yaml", *how = "/etc";
    return ncclSuccess;
  }
  *path = "", *how = "built-in";
  return ncclSuccess;
}

// ---- the process configuration ------------------------------------------------------------------
namespace {

struct Global {
  std::mutex mutex;
  std::atomic<const Config*> current{nullptr};
  std::atomic<bool> failed{false};
  ncclResult_t failure = ncclSuccess;
  std::vector<std::unique_ptr<Config>> retired;  // replaced configs stay alive: callers may hold pointers
};

Global& global() {
  static Global* g = new Global();  // never destroyed: params may be read during exit
  return *g;
}

thread_local bool tLoading = false;  // a param read while this thread loads the config sees no file values

// The logger's NCCL_DEBUG* source when the environment has none. Lock-free: the logger calls it with
// its own mutex held, and a published Config is never freed.
const char* logLookup(const char* name) {
  const Config* c = global().current.load(std::memory_order_acquire);
  if (!c) return nullptr;
  const ConfigParam* p = c->findParam(name);
  return p ? p->value.c_str() : nullptr;
}

ncclResult_t loadDiscovered(const std::string& explicitPath, Config* out) {
  std::string path = explicitPath, how = "--config";
  if (path.empty()) TUTTI_CHECK(configDiscover(&path, &how));
  if (path.empty()) {
    TUTTI_CHECK(builtinConfig(out));
    applyOverrides(out);
  } else {
    TUTTI_CHECK(configLoadFile(path, out));
  }
  out->discoveredBy = how;
  return ncclSuccess;
}

void publish(std::unique_ptr<Config> cfg) {
  Global& g = global();
  const Config* old = g.current.exchange(cfg.release(), std::memory_order_acq_rel);
  if (old) g.retired.emplace_back(const_cast<Config*>(old));
  g.failed = false;
}

}  // namespace

namespace {
// Plugin options reach plugins through the environment (NCCL plugins read getenv). setenv must not race
// with other threads' getenv, so every plugin's options are applied once, while the config is loaded under
// its lock and before any rank reads a parameter through it, never later from concurrent rank threads.
// Messages are returned, to be logged once the config lock is released.
std::vector<std::string> applyAllPluginOptions(const Config& cfg) {
  std::vector<std::string> msgs;
  for (const auto* list : {&cfg.transports, &cfg.nets, &cfg.tuners, &cfg.profilers})
    for (const PluginSpec& spec : *list)
      for (const auto& [name, value] : spec.options) {
        if (const char* e = std::getenv(name.c_str())) {
          msgs.push_back(fmt::format("{} plugin {}: keeping {}={} from the environment (config has {})",
                                     configKindWord(spec.kind), spec.label(), name, e, value));
          continue;
        }
        setenv(name.c_str(), value.c_str(), 0);
        msgs.push_back(fmt::format("{} plugin {}: {} set to {} by the config", configKindWord(spec.kind),
                                   spec.label(), name, value));
      }
  return msgs;
}
}  // namespace

ncclResult_t configGet(const Config** out) {
  Global& g = global();
  if (const Config* c = g.current.load(std::memory_order_acquire)) return *out = c, ncclSuccess;
  bool loaded = false;
  std::vector<std::string> optionMsgs;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    if (g.failed) return g.failure;  // already reported when it failed
    if (!g.current.load()) {
      auto cfg = std::make_unique<Config>();
      tLoading = true;
      ncclResult_t res = loadDiscovered("", cfg.get());
      tLoading = false;
      if (res != ncclSuccess) {
        g.failed = true;
        g.failure = res;
        return res;
      }
      optionMsgs = applyAllPluginOptions(*cfg);
      publish(std::move(cfg));
      loaded = true;
    }
    *out = g.current.load();
  }
  if (loaded) {
    logSetParamLookup(&logLookup);  // outside our lock: the logger takes its own
    for (const auto& m : optionMsgs) TUTTI_INFO(NCCL_ENV, "{}", m);
    TUTTI_INFO(NCCL_INIT | NCCL_ENV, "Configuration from {} ({})", (*out)->sourcePath, (*out)->discoveredBy);
  }
  return ncclSuccess;
}

ncclResult_t configUseFile(const std::string& path) {
  auto cfg = std::make_unique<Config>();
  tLoading = true;
  ncclResult_t res = loadDiscovered(path, cfg.get());
  tLoading = false;
  if (res != ncclSuccess) return res;
  std::vector<std::string> optionMsgs;
  {
    std::lock_guard<std::mutex> lock(global().mutex);
    optionMsgs = applyAllPluginOptions(*cfg);
    publish(std::move(cfg));
  }
  logSetParamLookup(&logLookup);
  for (const auto& m : optionMsgs) TUTTI_INFO(NCCL_ENV, "{}", m);
  return ncclSuccess;
}

void configResetForTest() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (const Config* old = g.current.exchange(nullptr)) g.retired.emplace_back(const_cast<Config*>(old));
  g.failed = false;
  g.failure = ncclSuccess;
}

const ConfigParam* configParamValue(const char* name) {
  if (tLoading) return nullptr;
  const Config* c = global().current.load(std::memory_order_acquire);
  if (!c && (global().failed || configGet(&c) != ncclSuccess)) return nullptr;
  return c->findParam(name);
}

void configApplyPluginOptions(const PluginSpec& spec) {
  for (const auto& [name, value] : spec.options) {
    if (const char* e = std::getenv(name.c_str())) {
      TUTTI_INFO(NCCL_ENV, "{} plugin {}: keeping {}={} from the environment (config has {})",
                 configKindWord(spec.kind), spec.label(), name, e, value);
      continue;
    }
    setenv(name.c_str(), value.c_str(), 0);
    TUTTI_INFO(NCCL_ENV, "{} plugin {}: {} set to {} by the config", configKindWord(spec.kind), spec.label(),
               name, value);
  }
}

}  // namespace tutti
