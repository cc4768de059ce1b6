// What every fuzz target shares: an invariant check that aborts (libFuzzer then keeps the input as a crash)
// after printing which target, which condition and the input's detail. A target defines
// `constexpr const char* kFuzzTarget = "<its name>";` before its first CHECK_OR_DIE.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tutti::fuzz {

[[noreturn]] inline void failCheck(const char* target, const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: invariant violated: %s\n  %s\n", target, what, detail.c_str());
  std::abort();
}

}  // namespace tutti::fuzz

#define CHECK_OR_DIE(cond, detail)                                     \
  do {                                                                 \
    if (!(cond)) ::tutti::fuzz::failCheck(kFuzzTarget, #cond, detail); \
  } while (0)
