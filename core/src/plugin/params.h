// Typed access to the NCCL_* / TUTTI_* variables declared in params.def.
// Precedence: real environment > YAML `params:` > table default. Thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tutti {

// Where an effective value came from (for tutti-info and logs).
struct ParamOrigin {
  enum Kind { Default, File, Environment } kind = Default;
  std::string file;  // File: config path
  int line = 0, column = 0;
};

// `name` must be declared in params.def; an undeclared name is a programming error (aborts in debug).
int64_t paramInt(const char* name);
std::string paramString(const char* name);
bool paramIsSet(const char* name);  // set by environment or config (not just the default)
ParamOrigin paramOrigin(const char* name);

// The declarations of params.def, in file order (tutti-info, the config parser, the reference).
enum class ParamType { Int, String };
struct ParamInfo {
  const char* name;
  ParamType type;
  const char* defaultText;  // String default ("" allowed)
  int64_t defaultInt;       // Int default
  const char* description;
};
std::span<const ParamInfo> paramTable();
const ParamInfo* paramFind(std::string_view name);  // nullptr when not declared
const char* paramTypeName(ParamType t);              // "int" / "string"
std::string paramDefaultText(const ParamInfo& p);
// Whether `text` is a valid value for `p` (an Int takes a whole decimal, 0x hex or 0 octal integer).
// On failure `why` says what was expected.
bool paramCheckValue(const ParamInfo& p, const std::string& text, std::string* why);

}  // namespace tutti
