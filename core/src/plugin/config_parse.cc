// YAML text -> Config, checked against the schema of config_schema.cc and the parameter table.
// The first problem found stops the parse; its message is "file:line:col: what was expected".
#include "plugin/config.h"
#include "plugin/config_parse.h"
#include "plugin/config_schema.h"

#include <fmt/format.h>
#include <strings.h>
#include <yaml-cpp/yaml.h>

// GCC 12+ flags yaml-cpp 0.7's own operator[] (node/impl.h) with a false -Wdangling-pointer on every
// use; the warning is about the library header's code, not ours.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

namespace tutti {
namespace {

constexpr const char* kAlgorithms[kNumAlgorithms] = {"tree", "ring", "collnet_direct", "collnet_chain",
                                                     "nvls", "nvls_tree", "pat"};
constexpr const char* kProtocols[kNumProtocols] = {"ll", "ll128", "simple"};
constexpr const char* kCollectives[NCCL_NUM_FUNCTIONS] = {"broadcast", "reduce", "allgather",
                                                          "reducescatter", "allreduce"};

std::string joinWords(const char* const* words, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? "|" : "") + std::string(words[i]);
  return s;
}

const char* nodeKind(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    default: return "an undefined node";
  }
}

class Parser {
 public:
  Parser(std::string name, ParamOrigin::Kind kind, std::string baseDir)
      : name_(std::move(name)), kind_(kind), baseDir_(std::move(baseDir)) {}

  bool parse(const std::string& text, Config* cfg);
  const std::string& error() const { return error_; }

 private:
  SourceLoc loc(const YAML::Mark& m) const {
    if (m.is_null()) return SourceLoc{name_, 0, 0};
    return SourceLoc{name_, m.line + 1, m.column + 1};
  }
  ParamOrigin origin(const YAML::Node& n) const {
    SourceLoc l = loc(n.Mark());
    return ParamOrigin{kind_, l.file, l.line, l.column};
  }
  bool fail(const YAML::Mark& m, const std::string& what) {
    error_ = fmt::format("{}: {}", loc(m).str(), what);
    return false;
  }
  bool fail(const YAML::Node& n, const std::string& what) { return fail(n.Mark(), what); }

  bool checkKeys(const YAML::Node& map, const std::string& parent, const std::string& where);
  bool scalar(const YAML::Node& n, const std::string& what, std::string* out);
  bool integer(const YAML::Node& n, const std::string& what, int64_t lo, int64_t hi, int64_t* out);
  bool size(const YAML::Node& n, const std::string& what, bool allowInf, int64_t* out);
  bool boolean(const YAML::Node& n, const std::string& what, bool* out);
  bool word(const YAML::Node& n, const std::string& what, const char* const* words, int count, int* out);
  bool range(const YAML::Node& n, const std::string& what, int64_t* lo, int64_t* hi, bool sizes);

  bool parseRoot(const YAML::Node& root, Config* cfg);
  bool plugins(const YAML::Node& n, Config* cfg);
  bool pluginList(const YAML::Node& n, PluginKind kind, std::vector<PluginSpec>* out);
  bool pluginEntry(const YAML::Node& n, PluginKind kind, PluginSpec* out);
  bool params(const YAML::Node& n, Config* cfg);
  bool tuning(const YAML::Node& n, Config* cfg);
  bool tuningRule(const YAML::Node& n, TuningRule* out);

  std::string name_;
  ParamOrigin::Kind kind_;
  std::string baseDir_;
  std::string error_;
};

// Unknown and duplicate keys are errors; yaml-cpp itself keeps the last of duplicate keys silently.
bool Parser::checkKeys(const YAML::Node& map, const std::string& parent, const std::string& where) {
  std::vector<std::string> allowed = configChildKeys(parent);
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    // A copy: yaml-cpp's it-> returns a temporary proxy, so a reference to its `first` would dangle.
    const YAML::Node key = it->first;
    if (!key.IsScalar()) return fail(key, fmt::format("{} keys must be words", where));
    const std::string& k = key.Scalar();
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
      return fail(key, fmt::format("unknown key '{}' in {} (expected one of: {})", k, where,
                                   fmt::join(allowed, ", ")));
    if (!seen.insert(k).second) return fail(key, fmt::format("duplicate key '{}' in {}", k, where));
  }
  return true;
}

bool Parser::scalar(const YAML::Node& n, const std::string& what, std::string* out) {
  if (!n.IsScalar()) return fail(n, fmt::format("{}: expected a value, got {}", what, nodeKind(n)));
  *out = n.Scalar();
  return true;
}

bool Parser::integer(const YAML::Node& n, const std::string& what, int64_t lo, int64_t hi, int64_t* out) {
  std::string s;
  if (!scalar(n, what, &s)) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 0);
  if (s.empty() || errno != 0 || *end != '\0')
    return fail(n, fmt::format("{}: expected an integer, got '{}'", what, s));
  if (v < lo || v > hi)
    return fail(n, hi == INT64_MAX ? fmt::format("{}: expected an integer >= {}, got {}", what, lo, v)
                                   : fmt::format("{}: expected an integer in {}..{}, got {}", what, lo, hi, v));
  *out = v;
  return true;
}

// Sizes: plain integers or K/M/G/T (powers of 1024, optional "iB"/"B"); "inf" where allowed.
bool Parser::size(const YAML::Node& n, const std::string& what, bool allowInf, int64_t* out) {
  std::string s;
  if (!scalar(n, what, &s)) return false;
  if (allowInf && (strcasecmp(s.c_str(), "inf") == 0 || s == ".inf")) {
    *out = INT64_MAX;
    return true;
  }
  if (!s.empty() && s[0] == '-') return fail(n, fmt::format("{}: sizes cannot be negative, got {}", what, s));
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  std::string unit = end ? end : "";
  int shift = -1;
  const char* units[] = {"", "K", "M", "G", "T"};
  for (int i = 0; i < 5; ++i)
    for (const char* suffix : {"", "B", "iB"})
      if (strcasecmp(unit.c_str(), (std::string(units[i]) + (i ? suffix : "")).c_str()) == 0) shift = 10 * i;
  if (s.empty() || end == s.c_str() || errno != 0 || shift < 0)
    return fail(n, fmt::format("{}: expected a size in bytes (e.g. 65536 or 64K{}), got '{}'", what,
                               allowInf ? " or inf" : "", s));
  if (shift && v > (static_cast<unsigned long long>(INT64_MAX) >> shift))
    return fail(n, fmt::format("{}: size {} is too large", what, s));
  if (v > static_cast<unsigned long long>(INT64_MAX)) return fail(n, fmt::format("{}: size {} is too large", what, s));
  *out = static_cast<int64_t>(v << shift);
  return true;
}

bool Parser::boolean(const YAML::Node& n, const std::string& what, bool* out) {
  std::string s;
  if (!scalar(n, what, &s)) return false;
  for (const char* t : {"true", "yes", "on"})
    if (strcasecmp(s.c_str(), t) == 0) return *out = true, true;
  for (const char* f : {"false", "no", "off"})
    if (strcasecmp(s.c_str(), f) == 0) return *out = false, true;
  return fail(n, fmt::format("{}: expected true or false, got '{}'", what, s));
}

bool Parser::word(const YAML::Node& n, const std::string& what, const char* const* words, int count, int* out) {
  std::string s;
  if (!scalar(n, what, &s)) return false;
  for (int i = 0; i < count; ++i)
    if (strcasecmp(s.c_str(), words[i]) == 0) return *out = i, true;
  return fail(n, fmt::format("{}: unknown value '{}' (expected {})", what, s, joinWords(words, count)));
}

// A two-element list [lo, hi]; sizes are [lo, hi) and hi may be inf, counts are [lo, hi] and >= 1.
bool Parser::range(const YAML::Node& n, const std::string& what, int64_t* lo, int64_t* hi, bool sizes) {
  if (!n.IsSequence() || n.size() != 2)
    return fail(n, fmt::format("{}: expected a list [min, max], got {}", what,
                               n.IsSequence() ? fmt::format("{} elements", n.size()) : nodeKind(n)));
  if (sizes) {
    if (!size(n[0], what + " min", false, lo) || !size(n[1], what + " max", true, hi)) return false;
    if (*lo >= *hi)
      return fail(n, fmt::format("{}: min must be below max (the range is [min, max)), got [{}, {}]", what,
                                 *lo, *hi));
  } else {
    if (!integer(n[0], what + " min", 1, INT_MAX, lo) || !integer(n[1], what + " max", 1, INT_MAX, hi))
      return false;
    if (*lo > *hi) return fail(n, fmt::format("{}: min {} is greater than max {}", what, *lo, *hi));
  }
  return true;
}

bool Parser::parse(const std::string& text, Config* cfg) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return fail(e.mark, fmt::format("YAML syntax error: {}", e.msg));
  } catch (const YAML::Exception& e) {
    return fail(e.mark, fmt::format("YAML error: {}", e.msg));
  }
  return parseRoot(root, cfg);
}

bool Parser::parseRoot(const YAML::Node& root, Config* cfg) {
  if (root.IsNull()) return true;  // an empty file keeps every default
  if (!root.IsMap()) return fail(root, fmt::format("the top level must be a map of keys, got {}", nodeKind(root)));
  if (!checkKeys(root, "", "the top level")) return false;
  try {
    if (auto v = root["version"]) {
      int64_t ver;
      if (!integer(v, "version", 0, INT64_MAX, &ver)) return false;
      if (ver != 1) return fail(v, fmt::format("unsupported config version {} (this build reads version 1)", ver));
      cfg->version = 1;
    }
    if (auto d = root["device"]) {
      constexpr const char* kDevices[] = {"auto", "host", "cuda", "sim"};  // DeviceKind order
      int dev;
      if (!word(d, "device", kDevices, 4, &dev)) return false;
      cfg->device = static_cast<DeviceKind>(dev);
      cfg->deviceOrigin = origin(d);
    }
    if (auto d = root["deterministic"]) {
      if (!boolean(d, "deterministic", &cfg->deterministic)) return false;
      cfg->deterministicOrigin = origin(d);
    }
    if (auto p = root["plugins"]; p && !plugins(p, cfg)) return false;
    if (auto p = root["params"]; p && !params(p, cfg)) return false;
    if (auto t = root["tuning"]; t && !tuning(t, cfg)) return false;
  } catch (const YAML::Exception& e) {
    // Not expected (every access is type-checked first), but never let an exception escape.
    return fail(e.mark, fmt::format("YAML error: {}", e.msg));
  }
  return true;
}

bool Parser::plugins(const YAML::Node& n, Config* cfg) {
  if (n.IsNull()) return true;
  if (!n.IsMap()) return fail(n, fmt::format("plugins: expected a map of plugin kinds, got {}", nodeKind(n)));
  if (!checkKeys(n, "plugins", "plugins")) return false;
  const std::pair<const char*, PluginKind> kinds[] = {{"transport", PluginKind::Transport},
                                                      {"net", PluginKind::Net},
                                                      {"tuner", PluginKind::Tuner},
                                                      {"profiler", PluginKind::Profiler}};
  for (const auto& [key, kind] : kinds) {
    YAML::Node list = n[key];
    if (!list) continue;
    std::vector<PluginSpec> specs;
    if (!pluginList(list, kind, &specs)) return false;
    cfg->plugins(kind) = std::move(specs);  // replaces the built-in default's list
  }
  return true;
}

bool Parser::pluginList(const YAML::Node& n, PluginKind kind, std::vector<PluginSpec>* out) {
  std::string what = fmt::format("plugins.{}", configKindWord(kind));
  if (n.IsNull()) return true;  // `profiler:` with nothing after it: an empty list
  if (!n.IsSequence())
    return fail(n, fmt::format("{}: expected a list of plugin entries (- name: x), got {}", what, nodeKind(n)));
  for (const YAML::Node& e : n) {
    PluginSpec spec;
    if (!pluginEntry(e, kind, &spec)) return false;
    // Plugins are told apart by label (name, or path where there is no name) everywhere after this (the
    // NCCL_NET_PLUGIN-style overrides, logs), so `name: x` and `path: x` are the same entry twice.
    for (const PluginSpec& prev : *out)
      if (prev.label() == spec.label())
        return fail(e, fmt::format("{}: duplicate plugin '{}' (first listed at line {})", what, spec.label(),
                                   prev.where.line));
    out->push_back(std::move(spec));
  }
  return true;
}

bool Parser::pluginEntry(const YAML::Node& n, PluginKind kind, PluginSpec* out) {
  std::string what = fmt::format("plugins.{} entry", configKindWord(kind));
  out->kind = kind;
  out->origin = origin(n);
  out->where = loc(n.Mark());
  if (!n.IsScalar() && !n.IsMap())
    return fail(n, fmt::format("{}: expected a map with name: or path:, got {}", what, nodeKind(n)));
  if (n.IsMap() && !checkKeys(n, "plugins.*[]", what)) return false;
  // Copies bind to the looked-up node; a missing key gives an undefined node (IsDefined() false).
  const YAML::Node nameNode = n.IsScalar() ? n : n["name"];  // a bare scalar is shorthand for name:
  const YAML::Node pathNode = n.IsMap() ? n["path"] : YAML::Node(YAML::NodeType::Undefined);
  const bool hasName = nameNode.IsDefined(), hasPath = n.IsMap() && pathNode.IsDefined();
  if (hasName && hasPath) return fail(pathNode, fmt::format("{}: give either name: or path:, not both", what));
  if (!hasName && !hasPath) return fail(n, fmt::format("{}: name: or path: is required", what));
  if (hasName) {
    if (!scalar(nameNode, what + " name", &out->name)) return false;
    bool ok = !out->name.empty() && std::all_of(out->name.begin(), out->name.end(), [](unsigned char c) {
      return std::isalnum(c) || c == '_' || c == '-' || c == '.';
    });
    if (!ok)
      return fail(nameNode, fmt::format("{}: plugin name '{}' may use only letters, digits, '_', '-', '.' "
                                        "(use path: for a file)", what, out->name));
  } else {
    if (!scalar(pathNode, what + " path", &out->path)) return false;
    if (out->path.empty()) return fail(pathNode, fmt::format("{}: path is empty", what));
    // A bare file name is left for dlopen's search path; a relative path is taken from the config's folder.
    if (out->path.find('/') != std::string::npos && out->path[0] != '/' && !baseDir_.empty())
      out->path = (std::filesystem::path(baseDir_) / out->path).lexically_normal().string();
  }
  if (!n.IsMap()) return true;
  if (auto r = n["required"]; r && !boolean(r, what + " required", &out->required)) return false;
  if (auto opts = n["options"]) {
    if (opts.IsNull()) return true;
    if (!opts.IsMap()) return fail(opts, fmt::format("{} options: expected a map NAME: value, got {}", what,
                                                     nodeKind(opts)));
    for (auto it = opts.begin(); it != opts.end(); ++it) {
      std::string var, value;
      if (!scalar(it->first, what + " option name", &var) || !scalar(it->second, what + " option " + var, &value))
        return false;
      bool envName = !var.empty() && !std::isdigit(static_cast<unsigned char>(var[0])) &&
                     std::all_of(var.begin(), var.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
      if (!envName)
        return fail(it->first, fmt::format("{}: option '{}' is not an environment variable name", what, var));
      for (const auto& [prev, unused] : out->options)
        if (prev == var) return fail(it->first, fmt::format("{}: duplicate option '{}'", what, var));
      std::string why;
      if (const ParamInfo* p = paramFind(var); p && !paramCheckValue(*p, value, &why))
        return fail(it->second, fmt::format("{} option: {}", what, why));
      out->options.emplace_back(var, value);
    }
  }
  return true;
}

bool Parser::params(const YAML::Node& n, Config* cfg) {
  if (n.IsNull()) return true;
  if (!n.IsMap()) return fail(n, fmt::format("params: expected a map NCCL_NAME: value, got {}", nodeKind(n)));
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string name, value;
    if (!scalar(it->first, "params key", &name)) return false;
    const ParamInfo* p = paramFind(name);
    if (!p) return fail(it->first, fmt::format("params: unknown parameter '{}' (not declared in params.def; "
                                               "`tutti-info --params` lists them)", name));
    if (name == "TUTTI_CONFIG")
      return fail(it->first, "params: TUTTI_CONFIG selects the config file and can only be set in the environment");
    if (!seen.insert(name).second) return fail(it->first, fmt::format("params: duplicate parameter '{}'", name));
    if (!scalar(it->second, "params." + name, &value)) return false;
    std::string why;
    if (!paramCheckValue(*p, value, &why)) return fail(it->second, fmt::format("params: {}", why));
    ConfigParam cp{name, value, origin(it->second)};
    auto old = std::find_if(cfg->params.begin(), cfg->params.end(), [&](const ConfigParam& c) { return c.name == name; });
    if (old != cfg->params.end()) *old = std::move(cp);  // the file overrides the built-in default's value
    else cfg->params.push_back(std::move(cp));
  }
  return true;
}

bool Parser::tuning(const YAML::Node& n, Config* cfg) {
  if (n.IsNull()) return true;
  if (!n.IsSequence()) return fail(n, fmt::format("tuning: expected a list of rules, got {}", nodeKind(n)));
  for (const YAML::Node& r : n) {
    TuningRule rule;
    if (!tuningRule(r, &rule)) return false;
    cfg->tuning.push_back(rule);
  }
  return true;
}

bool Parser::tuningRule(const YAML::Node& n, TuningRule* out) {
  if (!n.IsMap()) return fail(n, fmt::format("tuning rule: expected a map (collective:, bytes:, ...), got {}",
                                             nodeKind(n)));
  if (!checkKeys(n, "tuning[]", "tuning rule")) return false;
  out->where = loc(n.Mark());
  YAML::Node c = n["collective"];
  if (!c) return fail(n, "tuning rule: collective: is required");
  int coll, v;
  if (!word(c, "tuning collective", kCollectives, NCCL_NUM_FUNCTIONS, &coll)) return false;
  out->collective = static_cast<ncclFunc_t>(coll);
  int64_t lo, hi;
  if (auto b = n["bytes"]) {
    if (!range(b, "tuning bytes", &lo, &hi, true)) return false;
    out->minBytes = lo, out->maxBytes = hi;
  }
  if (auto r = n["ranks"]) {
    if (!range(r, "tuning ranks", &lo, &hi, false)) return false;
    out->minRanks = static_cast<int>(lo), out->maxRanks = static_cast<int>(hi);
  }
  if (auto r = n["nodes"]) {
    if (!range(r, "tuning nodes", &lo, &hi, false)) return false;
    out->minNodes = static_cast<int>(lo), out->maxNodes = static_cast<int>(hi);
  }
  if (auto a = n["algorithm"]) {
    if (!word(a, "tuning algorithm", kAlgorithms, kNumAlgorithms, &v)) return false;
    out->algorithm = v;
  }
  if (auto p = n["protocol"]) {
    if (!word(p, "tuning protocol", kProtocols, kNumProtocols, &v)) return false;
    out->protocol = v;
  }
  if (auto ch = n["channels"]) {
    if (!integer(ch, "tuning channels", 1, kMaxChannels, &lo)) return false;
    out->channels = static_cast<int>(lo);
  }
  if (out->algorithm < 0 && out->protocol < 0 && out->channels < 0)
    return fail(n, "tuning rule: sets nothing (give algorithm:, protocol: or channels:)");
  return true;
}

}  // namespace

const char* algorithmName(int algo) { return algo >= 0 && algo < kNumAlgorithms ? kAlgorithms[algo] : "?"; }
const char* protocolName(int proto) { return proto >= 0 && proto < kNumProtocols ? kProtocols[proto] : "?"; }
const char* collectiveName(ncclFunc_t f) {
  return f >= 0 && f < NCCL_NUM_FUNCTIONS ? kCollectives[f] : "?";
}

bool configParseText(const std::string& text, const std::string& name, ParamOrigin::Kind kind,
                     const std::string& baseDir, Config* cfg, std::string* error) {
  Parser p(name, kind, baseDir);
  if (p.parse(text, cfg)) return true;
  *error = p.error();
  return false;
}

}  // namespace tutti
