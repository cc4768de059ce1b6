// TUTTI_TRACE_* parsing. The plugin links nothing of the core, so it reads getenv directly.
#include "options.h"

#include <tutti/profiler.h>

#include <strings.h>

#include <cerrno>
#include <cstdlib>

namespace tutti::profilertrace {

namespace {

struct MaskName {
  const char* name;
  int bits;
};

const MaskName kMaskNames[] = {
    {"group", ncclProfileGroup},       {"coll", ncclProfileColl},
    {"p2p", ncclProfileP2p},           {"proxyop", ncclProfileProxyOp},
    {"proxystep", ncclProfileProxyStep}, {"proxyctrl", ncclProfileProxyCtrl},
    {"kernelch", ncclProfileKernelCh}, {"netplugin", ncclProfileNetPlugin},
    {"groupapi", ncclProfileGroupApi}, {"collapi", ncclProfileCollApi},
    {"p2papi", ncclProfileP2pApi},     {"kernellaunch", ncclProfileKernelLaunch},
};

// Event kinds this plugin renders; copy-engine events (v6 CE*) are not drawn.
constexpr int kAllKnown = (ncclProfileKernelLaunch << 1) - 1;

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace

int defaultMask() {
  return ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep |
         ncclProfileKernelCh;
}

bool parseMask(const std::string& text, int* mask, std::string* error) {
  std::string t = trim(text);
  if (t.empty()) {
    *mask = defaultMask();
    return true;
  }
  if (t[0] >= '0' && t[0] <= '9') {
    errno = 0;
    char* end = nullptr;
    unsigned long long x = std::strtoull(t.c_str(), &end, 0);
    if (*end != '\0' || errno != 0 || x > static_cast<unsigned long long>(kAllKnown)) {
      *error = "TUTTI_TRACE_MASK=\"" + text + "\": expected a number in [0, " + std::to_string(kAllKnown) +
               "] or a comma list of event names";
      return false;
    }
    *mask = static_cast<int>(x);
    return true;
  }
  int bits = 0;
  size_t start = 0;
  while (start <= t.size()) {
    size_t comma = t.find(',', start);
    if (comma == std::string::npos) comma = t.size();
    std::string item = trim(t.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;
    if (strcasecmp(item.c_str(), "all") == 0) {
      bits |= kAllKnown;
      continue;
    }
    if (strcasecmp(item.c_str(), "default") == 0) {
      bits |= defaultMask();
      continue;
    }
    bool found = false;
    for (const MaskName& m : kMaskNames) {
      if (strcasecmp(item.c_str(), m.name) == 0) {
        bits |= m.bits;
        found = true;
      }
    }
    if (!found) {
      *error = "TUTTI_TRACE_MASK=\"" + text + "\": unknown event '" + item +
               "' (group, coll, p2p, proxyop, proxystep, proxyctrl, kernelch, netplugin, groupapi, collapi, "
               "p2papi, kernellaunch, all, default)";
      return false;
    }
  }
  *mask = bits;
  return true;
}

ncclResult_t readOptions(Options* out, std::string* error) {
  Options o;
  if (const char* f = std::getenv("TUTTI_TRACE_FILE"); f && *f) o.filePattern = f;
  const char* m = std::getenv("TUTTI_TRACE_MASK");
  if (!parseMask(m ? m : "", &o.mask, error)) return ncclInvalidUsage;
  if (const char* n = std::getenv("TUTTI_TRACE_MAX_EVENTS"); n && *n) {
    errno = 0;
    char* end = nullptr;
    long long x = std::strtoll(n, &end, 0);
    constexpr long long kMost = 1ll << 28;  // ~40 GiB of records: a typo, not a wish
    if (end == n || *end != '\0' || errno != 0 || x < 1 || x > kMost) {
      *error = std::string("TUTTI_TRACE_MAX_EVENTS=\"") + n + "\": expected an integer in [1, " +
               std::to_string(kMost) + "]";
      return ncclInvalidUsage;
    }
    o.maxEvents = static_cast<uint64_t>(x);
  }
  *out = o;
  return ncclSuccess;
}

}  // namespace tutti::profilertrace
