// The variables the trace profiler reads (TUTTI_TRACE_*). A YAML entry's `options:` map sets them in the
// environment before the plugin loads; a real environment variable wins. Read at every init.
#pragma once

#include <tutti/common.h>

#include <cstdint>
#include <string>

namespace tutti::profilertrace {

struct Options {
  std::string filePattern = "tutti-trace-%h-%p-r%r.json";  // TUTTI_TRACE_FILE
  int mask = 0;                                            // TUTTI_TRACE_MASK (ncclProfile* bits)
  uint64_t maxEvents = 262144;                             // TUTTI_TRACE_MAX_EVENTS, per communicator
};

// Group | Coll | P2p | ProxyOp | ProxyStep | KernelCh.
int defaultMask();

// Parses a mask: a number (decimal or 0x hex) or a comma list of event names (group, coll, p2p, proxyop,
// proxystep, proxyctrl, kernelch, netplugin, groupapi, collapi, p2papi, kernellaunch, all, default).
bool parseMask(const std::string& text, int* mask, std::string* error);

// Parses the environment over the defaults. A malformed value: *error names the variable and the
// result is ncclInvalidUsage.
ncclResult_t readOptions(Options* out, std::string* error);

}  // namespace tutti::profilertrace
