// params.h: the table of params.def, and the lookup environment > YAML `params:` > default.
#include "plugin/params.h"

#include "plugin/config.h"
#include "proxy/affinity.h"
#include "util/log.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace tutti {
namespace {
#define TUTTI_PARAM_Int(v) "", (v)
#define TUTTI_PARAM_String(v) (v), 0
#define TUTTI_PARAM(name, type, def, desc) {#name, ParamType::type, TUTTI_PARAM_##type(def), desc},
const ParamInfo kParams[] = {
#include "plugin/params.def"
};
#undef TUTTI_PARAM
#undef TUTTI_PARAM_Int
#undef TUTTI_PARAM_String

bool parseInt(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}

// A malformed Int in the environment is reported once per name, then ignored (NCCL does the same).
void warnBadEnvOnce(const char* name, const char* value) {
  static std::mutex m;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(m);
    if (!warned.insert(name).second) return;
  }
  TUTTI_WARN("Ignoring {}={}: an integer was expected", name, value);
}

const ParamInfo& declared(const char* name) {
  static const ParamInfo kUnknown{"", ParamType::String, "", 0, ""};
  if (const ParamInfo* p = paramFind(name)) return *p;
  // Reading a name that params.def does not declare is a programming error.
  TUTTI_WARN("Parameter {} is not declared in params.def", name);
  return kUnknown;
}
}  // namespace

std::span<const ParamInfo> paramTable() { return kParams; }

const ParamInfo* paramFind(std::string_view name) {
  for (const auto& p : kParams)
    if (name == p.name) return &p;
  return nullptr;
}

const char* paramTypeName(ParamType t) { return t == ParamType::Int ? "int" : "string"; }

std::string paramDefaultText(const ParamInfo& p) {
  return p.type == ParamType::Int ? std::to_string(p.defaultInt) : std::string(p.defaultText);
}

bool paramCheckValue(const ParamInfo& p, const std::string& text, std::string* why) {
  int64_t v;
  if (p.type == ParamType::Int && !parseInt(text, &v)) {
    if (why) *why = fmt::format("{} takes an integer, got '{}'", p.name, text);
    return false;
  }
  // String parameters with a grammar are checked here too, so a config file's typo is reported at its line.
  if (std::string_view(p.name) == "TUTTI_PROXY_AFFINITY") {
    ProxyAffinity affinity;
    std::string wrong;
    if (!parseProxyAffinity(text, &affinity, &wrong)) {
      if (why) *why = fmt::format("{}: {}", p.name, wrong);
      return false;
    }
  }
  return true;
}

int64_t paramInt(const char* name) {
  const ParamInfo& p = declared(name);
  int64_t v;
  if (const char* e = std::getenv(name); e && *e) {
    if (parseInt(e, &v)) return v;
    warnBadEnvOnce(name, e);
  }
  // Config values were type-checked when the file was parsed.
  if (const ConfigParam* c = configParamValue(name); c && parseInt(c->value, &v)) return v;
  if (p.type == ParamType::String) return parseInt(p.defaultText, &v) ? v : 0;
  return p.defaultInt;
}

std::string paramString(const char* name) {
  const ParamInfo& p = declared(name);
  if (const char* e = std::getenv(name)) return e;
  if (const ConfigParam* c = configParamValue(name)) return c->value;
  return paramDefaultText(p);
}

bool paramIsSet(const char* name) { return std::getenv(name) != nullptr || configParamValue(name) != nullptr; }

ParamOrigin paramOrigin(const char* name) {
  // Must agree with paramInt / paramString: an empty or malformed Int in the environment does not win.
  const ParamInfo* p = paramFind(name);
  int64_t v;
  if (const char* e = std::getenv(name); e && (!p || p->type == ParamType::String || parseInt(e, &v)))
    return ParamOrigin{ParamOrigin::Environment, "", 0, 0};
  if (const ConfigParam* c = configParamValue(name)) return c->origin;
  return ParamOrigin{};
}

}  // namespace tutti
