// Fuzz target: the YAML config loader (configParseText over the built-in default, with the schema and
// parameter-table checks it runs). Arbitrary text must give a Config or an error "fuzz.yaml:line:col: ...".
// Beyond "no crash, leak or hang" it checks:
//  - an error names the file and a 1-based line and column;
//  - an accepted Config satisfies the schema's contracts (ranges, name xor path, declared and well-typed
//    params, positions of values read from the file);
//  - an accepted Config written back as YAML parses again to the same Config.
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "plugin/config.h"
#include "plugin/config_parse.h"
#include "fuzz_common.h"

using namespace tutti;

namespace {

constexpr const char* kName = "fuzz.yaml";

constexpr const char* kFuzzTarget = "fuzz_config";

const Config& builtin() {
  static const Config* base = [] {
    auto* c = new Config();
    std::string err;
    if (!configParseText(configBuiltinText(), kBuiltinConfigName, ParamOrigin::Default, "", c, &err))
      fuzz::failCheck(kFuzzTarget, "the built-in default parses", err);
    return c;
  }();
  return *base;
}

// "fuzz.yaml:<line>:<col>: " with line, col >= 1.
bool hasPosition(const std::string& err) {
  std::string prefix = std::string(kName) + ":";
  if (err.rfind(prefix, 0) != 0) return false;
  size_t i = prefix.size();
  for (int field = 0; field < 2; ++field) {
    size_t start = i;
    while (i < err.size() && std::isdigit(static_cast<unsigned char>(err[i]))) ++i;
    if (i == start || i >= err.size() || err[i] != ':' || std::atoll(err.c_str() + start) < 1) return false;
    ++i;
  }
  return i < err.size() && err[i] == ' ';
}

void checkContracts(const Config& c, const std::string& text) {
  const PluginKind kinds[] = {PluginKind::Transport, PluginKind::Net, PluginKind::Tuner,
                              PluginKind::Profiler};
  for (PluginKind k : kinds) {
    std::set<std::string> labels;
    for (const PluginSpec& s : c.plugins(k)) {
      CHECK_OR_DIE(s.kind == k, text);
      CHECK_OR_DIE(s.name.empty() != s.path.empty(), text);
      for (unsigned char ch : s.name)
        CHECK_OR_DIE(std::isalnum(ch) || ch == '_' || ch == '-' || ch == '.', s.name);
      CHECK_OR_DIE(labels.insert(s.label()).second, s.label());
      std::set<std::string> opts;
      for (const auto& [var, value] : s.options) {
        CHECK_OR_DIE(!var.empty() && opts.insert(var).second, var);
        if (const ParamInfo* p = paramFind(var))
          CHECK_OR_DIE(paramCheckValue(*p, value, nullptr), var + "=" + value);
      }
    }
  }
  std::set<std::string> names;
  for (const ConfigParam& p : c.params) {
    const ParamInfo* info = paramFind(p.name);
    CHECK_OR_DIE(info != nullptr && names.insert(p.name).second, p.name);
    CHECK_OR_DIE(paramCheckValue(*info, p.value, nullptr), p.name + "=" + p.value);
    if (p.origin.kind == ParamOrigin::File)
      CHECK_OR_DIE(p.origin.file == kName && p.origin.line >= 1, p.name);
  }
  for (const TuningRule& r : c.tuning) {
    CHECK_OR_DIE(r.collective >= 0 && r.collective < NCCL_NUM_FUNCTIONS, text);
    CHECK_OR_DIE(r.minBytes >= 0 && r.minBytes < r.maxBytes, text);
    CHECK_OR_DIE(r.minRanks >= 1 && r.minRanks <= r.maxRanks && r.minNodes >= 1 && r.minNodes <= r.maxNodes,
                 text);
    CHECK_OR_DIE(r.algorithm >= -1 && r.algorithm < kNumAlgorithms, text);
    CHECK_OR_DIE(r.protocol >= -1 && r.protocol < kNumProtocols, text);
    CHECK_OR_DIE(r.channels == -1 || (r.channels >= 1 && r.channels <= kMaxChannels), text);
    CHECK_OR_DIE(r.algorithm >= 0 || r.protocol >= 0 || r.channels >= 0, text);
  }
}

// The whole Config as YAML that the loader must read back to the same values.
std::string emit(const Config& c) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "version" << YAML::Value << c.version;
  out << YAML::Key << "device" << YAML::Value << deviceKindName(c.device);
  out << YAML::Key << "plugins" << YAML::Value << YAML::BeginMap;
  for (PluginKind k : {PluginKind::Transport, PluginKind::Net, PluginKind::Tuner, PluginKind::Profiler}) {
    out << YAML::Key << configKindWord(k) << YAML::Value << YAML::BeginSeq;
    for (const PluginSpec& s : c.plugins(k)) {
      out << YAML::BeginMap;
      out << YAML::Key << (s.name.empty() ? "path" : "name") << YAML::Value << YAML::DoubleQuoted
          << (s.name.empty() ? s.path : s.name);
      out << YAML::Key << "required" << YAML::Value << (s.required ? "true" : "false");
      out << YAML::Key << "options" << YAML::Value << YAML::BeginMap;
      for (const auto& [var, value] : s.options)
        out << YAML::Key << var << YAML::Value << YAML::DoubleQuoted << value;
      out << YAML::EndMap << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  out << YAML::Key << "params" << YAML::Value << YAML::BeginMap;
  for (const ConfigParam& p : c.params)
    out << YAML::Key << p.name << YAML::Value << YAML::DoubleQuoted << p.value;
  out << YAML::EndMap;
  out << YAML::Key << "tuning" << YAML::Value << YAML::BeginSeq;
  for (const TuningRule& r : c.tuning) {
    out << YAML::BeginMap << YAML::Key << "collective" << YAML::Value << collectiveName(r.collective);
    out << YAML::Key << "bytes" << YAML::Value << YAML::Flow << YAML::BeginSeq << std::to_string(r.minBytes)
        << (r.maxBytes == INT64_MAX ? std::string("inf") : std::to_string(r.maxBytes)) << YAML::EndSeq;
    out << YAML::Key << "ranks" << YAML::Value << YAML::Flow << YAML::BeginSeq << r.minRanks << r.maxRanks
        << YAML::EndSeq;
    out << YAML::Key << "nodes" << YAML::Value << YAML::Flow << YAML::BeginSeq << r.minNodes << r.maxNodes
        << YAML::EndSeq;
    if (r.algorithm >= 0) out << YAML::Key << "algorithm" << YAML::Value << algorithmName(r.algorithm);
    if (r.protocol >= 0) out << YAML::Key << "protocol" << YAML::Value << protocolName(r.protocol);
    if (r.channels >= 0) out << YAML::Key << "channels" << YAML::Value << r.channels;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return out.c_str();
}

bool sameSpec(const PluginSpec& a, const PluginSpec& b) {
  return a.kind == b.kind && a.name == b.name && a.path == b.path && a.options == b.options &&
         a.required == b.required;
}
bool sameRule(const TuningRule& a, const TuningRule& b) {
  return a.collective == b.collective && a.minBytes == b.minBytes && a.maxBytes == b.maxBytes &&
         a.minRanks == b.minRanks && a.maxRanks == b.maxRanks && a.minNodes == b.minNodes &&
         a.maxNodes == b.maxNodes && a.algorithm == b.algorithm && a.protocol == b.protocol &&
         a.channels == b.channels;
}

// yaml-cpp reads bytes that are not UTF-8 as they are but its emitter writes U+FFFD for them, and it decodes
// an overlong form (E0 8F 8D for U+03CD) and writes the shortest one: only configs whose strings are all
// well-formed UTF-8 (RFC 3629: shortest forms, no surrogates, at most U+10FFFF) can be compared after a round
// trip.
bool utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0 || i + n >= s.size()) return false;
    for (int k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    if (n > 0) {
      const unsigned char c1 = s[i + 1];
      if (c == 0xC0 || c == 0xC1) return false;                // overlong 2-byte form
      if (c == 0xE0 && c1 < 0xA0) return false;                // overlong 3-byte form
      if (c == 0xED && c1 >= 0xA0) return false;               // UTF-16 surrogates
      if (c == 0xF0 && c1 < 0x90) return false;                // overlong 4-byte form
      if (c > 0xF4 || (c == 0xF4 && c1 >= 0x90)) return false;  // beyond U+10FFFF
    }
    i += n + 1;
  }
  return true;
}

bool allUtf8(const Config& c) {
  for (PluginKind k : {PluginKind::Transport, PluginKind::Net, PluginKind::Tuner, PluginKind::Profiler})
    for (const PluginSpec& s : c.plugins(k)) {
      if (!utf8(s.name) || !utf8(s.path)) return false;
      for (const auto& [var, value] : s.options)
        if (!utf8(var) || !utf8(value)) return false;
    }
  for (const ConfigParam& p : c.params)
    if (!utf8(p.value)) return false;
  return true;
}

void checkRoundTrip(const Config& c) {
  if (!allUtf8(c)) return;
  const std::string yaml = emit(c);
  Config again;
  std::string err;
  if (!configParseText(yaml, kName, ParamOrigin::File, "", &again, &err))
    fuzz::failCheck(kFuzzTarget, "re-parse of emitted config", err + "\n" + yaml);
  CHECK_OR_DIE(again.version == c.version && again.device == c.device, yaml);
  for (PluginKind k : {PluginKind::Transport, PluginKind::Net, PluginKind::Tuner, PluginKind::Profiler}) {
    const auto &x = c.plugins(k), &y = again.plugins(k);
    CHECK_OR_DIE(x.size() == y.size(), yaml);
    for (size_t i = 0; i < x.size(); ++i) CHECK_OR_DIE(sameSpec(x[i], y[i]), yaml);
  }
  CHECK_OR_DIE(c.params.size() == again.params.size(), yaml);
  for (size_t i = 0; i < c.params.size(); ++i)
    CHECK_OR_DIE(c.params[i].name == again.params[i].name && c.params[i].value == again.params[i].value,
                 yaml);
  CHECK_OR_DIE(c.tuning.size() == again.tuning.size(), yaml);
  for (size_t i = 0; i < c.tuning.size(); ++i) CHECK_OR_DIE(sameRule(c.tuning[i], again.tuning[i]), yaml);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Config cfg = builtin();
  std::string err;
  if (!configParseText(text, kName, ParamOrigin::File, "", &cfg, &err)) {
    if (!hasPosition(err)) fuzz::failCheck(kFuzzTarget, "an error names fuzz.yaml:line:col", err);
    return 0;
  }
  checkContracts(cfg, text);
  checkRoundTrip(cfg);
  return 0;
}
