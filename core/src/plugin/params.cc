// Environment-only implementation of params.h; the YAML config layer replaces the lookup.
#include "plugin/params.h"

#include <cstdlib>
#include <cstring>

namespace tutti {
namespace {
enum class Type { Int, String };
struct ParamDecl {
  const char* name;
  Type type;
  const char* defText;
  int64_t defInt;
  const char* description;
};
#define TUTTI_PARAM_Int(v) nullptr, (v)
#define TUTTI_PARAM_String(v) (v), 0
#define TUTTI_PARAM(name, type, def, desc) {#name, Type::type, TUTTI_PARAM_##type(def), desc},
const ParamDecl kParams[] = {
#include "plugin/params.def"
};
#undef TUTTI_PARAM

const ParamDecl* find(const char* name) {
  for (const auto& p : kParams)
    if (std::strcmp(p.name, name) == 0) return &p;
  return nullptr;
}
}  // namespace

int64_t paramInt(const char* name) {
  const ParamDecl* p = find(name);
  if (const char* v = std::getenv(name); v && *v) return std::strtoll(v, nullptr, 0);
  return p ? p->defInt : 0;
}

std::string paramString(const char* name) {
  const ParamDecl* p = find(name);
  if (const char* v = std::getenv(name)) return v;
  return p && p->defText ? p->defText : "";
}

bool paramIsSet(const char* name) { return std::getenv(name) != nullptr; }

ParamOrigin paramOrigin(const char* name) {
  ParamOrigin o;
  if (std::getenv(name)) o.kind = ParamOrigin::Environment;
  return o;
}

}  // namespace tutti
