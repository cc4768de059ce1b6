// Fuzz target: the parsers of environment-variable text. The first input byte picks the parser, the rest
// is the variable's value:
//   0  NCCL_ALGO and NCCL_PROTO (parseAlgoProtoFilter; the two values split at the first '\n')
//   1  NCCL_SOCKET_IFNAME (parseIfaceSpec / ifaceMatches)
//   2  NCCL_SOCKET_FAMILY (parseSocketFamily)
//   3  integer parameters of params.def (paramCheckValue)
// Beyond "no crash": an accepted filter is accepted again identically and its canonical spelling parses
// to the same filter; a rejected one says which variable is wrong; an interface spec re-spelt parses to
// the same spec and every name it lists matches (or, for ^, is excluded); an accepted integer is one.
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bootstrap/ifaces.h"
#include "plan/tuning.h"
#include "plugin/params.h"
#include "util/check.h"
#include "fuzz_common.h"

using namespace tutti;

namespace {

constexpr const char* kFuzzTarget = "fuzz_env_parsers";

bool sameFilter(const AlgoProtoFilter& a, const AlgoProtoFilter& b) {
  return std::memcmp(a.algo, b.algo, sizeof a.algo) == 0 &&
         std::memcmp(a.proto, b.proto, sizeof a.proto) == 0;
}

// "Broadcast:Ring,Tree;Reduce:;..." — every collective's row spelt out explicitly (an empty list
// allows nothing). The first section needs a prefix too, which the grammar allows.
template <int N>
std::string canonical(const bool (&rows)[kNumTunedFuncs][N], const char* (*name)(int)) {
  std::string s;
  for (int f = 0; f < kNumTunedFuncs; ++f) {
    s += std::string(f ? ";" : "") + tunedFuncName(static_cast<ncclFunc_t>(f)) + ":";
    bool first = true;
    for (int e = 0; e < N; ++e)
      if (rows[f][e]) s += std::string(first ? "" : ",") + name(e), first = false;
  }
  return s;
}

void fuzzAlgoProto(const std::string& text) {
  size_t nl = text.find('\n');
  std::string algo = text.substr(0, nl), proto = nl == std::string::npos ? "" : text.substr(nl + 1);
  AlgoProtoFilter f;
  clearLastError();
  if (parseAlgoProtoFilter(algo, proto, &f) != ncclSuccess) {
    std::string err = lastErrorText();
    CHECK_OR_DIE(err.rfind("NCCL_ALGO=", 0) == 0 || err.rfind("NCCL_PROTO=", 0) == 0, text + " -> " + err);
    return;
  }
  AlgoProtoFilter again;
  CHECK_OR_DIE(parseAlgoProtoFilter(algo, proto, &again) == ncclSuccess && sameFilter(f, again), text);
  std::string ca = canonical(f.algo, tunedAlgoName), cp = canonical(f.proto, tunedProtoName);
  AlgoProtoFilter canon;
  CHECK_OR_DIE(parseAlgoProtoFilter(ca, cp, &canon) == ncclSuccess && sameFilter(f, canon),
               text + " vs " + ca + " / " + cp);
}

void fuzzIfname(const std::string& text) {
  IfaceSpec s = parseIfaceSpec(text);
  CHECK_OR_DIE(s.exclude == (!text.empty() && text[0] == '^'), text);
  for (const std::string& n : s.names) {
    CHECK_OR_DIE(!n.empty() && n.front() != ' ' && n.back() != ' ' && n.find(',') == std::string::npos, text);
    CHECK_OR_DIE(ifaceMatches(s, n) != s.exclude, text + " name " + n);
  }
  // Re-spelt with a leading comma, so a first name starting with '=' is not read as the exact marker.
  std::string respelt = std::string(s.exclude ? "^" : "") + (s.exact ? "=" : "");
  for (const std::string& n : s.names) respelt += "," + n;
  IfaceSpec again = parseIfaceSpec(respelt);
  CHECK_OR_DIE(again.exclude == s.exclude && again.exact == s.exact && again.names == s.names,
               text + " vs " + respelt);
  if (s.names.empty()) CHECK_OR_DIE(ifaceMatches(s, "eth0") == s.exclude, text);
}

void fuzzFamily(const std::string& text) {
  int family = -1;
  clearLastError();
  if (parseSocketFamily(text, &family) == ncclSuccess)
    CHECK_OR_DIE(family == AF_UNSPEC || family == AF_INET || family == AF_INET6, text);
  else
    CHECK_OR_DIE(family == -1 && std::strstr(lastErrorText(), "NCCL_SOCKET_FAMILY") != nullptr, text);
}

void fuzzIntParams(const std::string& text) {
  for (const ParamInfo& p : paramTable()) {
    std::string why;
    bool ok = paramCheckValue(p, text, &why);
    if (p.type == ParamType::String) {
      CHECK_OR_DIE(ok, text);
      continue;
    }
    // An Int accepts exactly what strtoll(base 0) consumes whole without overflow. (Text with a NUL
    // cannot come from the environment; the check reads it as C text, like every consumer.)
    errno = 0;
    char* end = nullptr;
    (void)std::strtoll(text.c_str(), &end, 0);
    const bool whole = !text.empty() && errno == 0 && end != text.c_str() && *end == '\0';
    CHECK_OR_DIE(ok == whole || text.find('\0') != std::string::npos, text);
    if (!ok) CHECK_OR_DIE(why.find(p.name) != std::string::npos, text + " -> " + why);
    break;  // every Int shares the same rule; one is enough
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      fuzzAlgoProto(text);
      break;
    case 1:
      fuzzIfname(text);
      break;
    case 2:
      fuzzFamily(text);
      break;
    case 3:
      fuzzIntParams(text);
      break;
  }
  return 0;
}
