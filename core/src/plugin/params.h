// Typed access to the NCCL_* / TUTTI_* variables declared in params.def.
// Precedence: real environment > YAML `params:` > table default. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace tutti
