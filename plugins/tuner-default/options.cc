// TUTTI_TUNER_* parsing. The plugin links nothing of the core, so it reads getenv directly.
#include "options.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace tutti::tunerdefault {

namespace {

// Defaults: see README.md ("Where the defaults come from"). Lists are LL,LL128,Simple.
const OptionInfo kOptions[] = {
    {"TUTTI_TUNER_INTRA_LINK", "auto",
     "Intra-node link the model assumes: process (threads, p2p), shm, net, or auto (net when NCCL_SHM_DISABLE and "
     "NCCL_P2P_DISABLE are both set, else shm)"},
    {"TUTTI_TUNER_OVERHEAD_PROCESS", "0,0,0",
     "Fixed time per call (us) inside one process, for LL,LL128,Simple"},
    {"TUTTI_TUNER_OVERHEAD_SHM", "0.146,0.466,0.0647",
     "Fixed time per call (us) over shared memory, for LL,LL128,Simple"},
    {"TUTTI_TUNER_OVERHEAD_NET", "2.88,8.78,4.9",
     "Fixed time per call (us) over the network, for LL,LL128,Simple"},
    {"TUTTI_TUNER_LATENCY_PROCESS", "1.51,1.46,1.47",
     "Per-step latency (us) inside one process, for LL,LL128,Simple"},
    {"TUTTI_TUNER_LATENCY_SHM", "0.322,0.353,0.482",
     "Per-step latency (us) over shared memory, for LL,LL128,Simple"},
    {"TUTTI_TUNER_LATENCY_NET", "12,8.59,13",
     "Per-step latency (us) over the network, for LL,LL128,Simple"},
    {"TUTTI_TUNER_BANDWIDTH_PROCESS", "2.42,2.59,4.09",
     "Data bandwidth (GB/s) inside one process, LL,LL128,Simple"},
    {"TUTTI_TUNER_BANDWIDTH_SHM", "1.8,3.87,7.68",
     "Data bandwidth (GB/s) over shared memory, LL,LL128,Simple"},
    {"TUTTI_TUNER_BANDWIDTH_NET", "0.814,1.43,2.5",
     "Data bandwidth (GB/s) over the network, LL,LL128,Simple"},
    {"TUTTI_TUNER_TREE_LATENCY_FACTOR", "3,1.41,0.362",
     "Tree per-step latency as a multiple of the link's (ring) latency: one number, or process,shm,net"},
    {"TUTTI_TUNER_TREE_BANDWIDTH_FACTOR", "1.3,1.07,0.931",
     "Tree bandwidth as a multiple of the link's (ring) bandwidth: one number, or process,shm,net"},
    {"TUTTI_TUNER_TREE_FILL_FACTOR", "1,0.0718,0.0907",
     "Weight of the tree's pipeline fill ((2 depth - 1) chunk times): one number, or process,shm,net"},
    {"TUTTI_TUNER_TREE_SHALLOW_TRAFFIC", "1,1.39,1.27",
     "Bytes per byte of the collective a tree of depth 1 (two ranks) moves, against 2 for deeper trees: one "
     "number, or process,shm,net"},
    {"TUTTI_TUNER_CORES", "auto",
     "Cores the ranks of one node share, or auto (this process's CPU count); 0 ignores oversubscription"},
    {"TUTTI_TUNER_OVERSUBSCRIBED", "1.84,1.07",
     "With more ranks per node than cores: step latency factor, and exponent e of the bandwidth divisor "
     "(ranks/cores)^e"},
    {"TUTTI_TUNER_CHANNEL_BYTES", "262144", "Bytes of a collective per suggested channel (>= 1)"},
    {"TUTTI_TUNER_MAX_CHANNELS", "64", "Most channels suggested, 1..64 (the core clamps to its own limit)"},
};
constexpr int kNumOptions = sizeof(kOptions) / sizeof(kOptions[0]);

const char* valueOf(const char* name) {
  const char* v = std::getenv(name);
  if (v && *v) return v;
  for (const OptionInfo& o : kOptions)
    if (std::strcmp(o.name, name) == 0) return o.defaultText;
  return "";
}

// "a,b,c": three finite numbers, each > 0 (a zero bandwidth or negative latency has no meaning), or >= 0
// where zero is meaningful (a per-call overhead).
bool parseTriple(const char* name, double* out, std::string* error, bool allowZero = false) {
  const char* text = valueOf(name);
  const char* p = text;
  for (int i = 0; i < NCCL_NUM_PROTOCOLS; ++i) {
    errno = 0;
    char* end = nullptr;
    double x = std::strtod(p, &end);
    if (end == p || errno != 0 || !std::isfinite(x) || x < 0 || (x == 0 && !allowZero)) {
      *error = std::string(name) + "=\"" + text + "\": expected three " +
               (allowZero ? "non-negative" : "positive") + " numbers for LL,LL128,Simple";
      return false;
    }
    out[i] = x;
    p = end;
    if (i + 1 < NCCL_NUM_PROTOCOLS) {
      if (*p != ',') {
        *error = std::string(name) + "=\"" + text + "\": expected three comma-separated numbers";
        return false;
      }
      ++p;
    }
  }
  if (*p != '\0') {
    *error = std::string(name) + "=\"" + text + "\": trailing text after three numbers";
    return false;
  }
  return true;
}

// One finite number > 0 for every link, or three comma-separated ones: process,shm,net.
bool parseFactor(const char* name, double (&out)[kNumLinks], std::string* error, bool allowZero = false) {
  const char* text = valueOf(name);
  const char* p = text;
  double x[kNumLinks];
  int n = 0;
  for (; n < kNumLinks; ++n) {
    errno = 0;
    char* end = nullptr;
    x[n] = std::strtod(p, &end);
    if (end == p || errno != 0 || !std::isfinite(x[n]) || x[n] < 0 || (x[n] == 0 && !allowZero)) break;
    p = end;
    if (*p != ',') {
      ++n;
      break;
    }
    ++p;
  }
  if (*p != '\0' || (n != 1 && n != kNumLinks)) {
    *error = std::string(name) + "=\"" + text + "\": expected a " + (allowZero ? "non-negative" : "positive") +
             " number, or three for process,shm,net";
    return false;
  }
  for (int l = 0; l < kNumLinks; ++l) out[l] = n == 1 ? x[0] : x[l];
  return true;
}

// NCCL's boolean variables: set and not 0.
bool envFlag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strtoll(v, nullptr, 0) != 0;
}

bool parseInt(const char* name, long long lo, long long hi, long long* out, std::string* error) {
  const char* text = valueOf(name);
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(text, &end, 0);
  if (end == text || *end != '\0' || errno != 0 || x < lo || x > hi) {
    *error = std::string(name) + "=\"" + text + "\": expected an integer in [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]";
    return false;
  }
  *out = x;
  return true;
}

}  // namespace

const OptionInfo* optionTable(int* count) {
  *count = kNumOptions;
  return kOptions;
}

ncclResult_t readOptions(Options* out, std::string* error) {
  Options o;
  const char* link = valueOf("TUTTI_TUNER_INTRA_LINK");
  if (strcasecmp(link, "process") == 0) {
    o.intraLink = kLinkProcess;
  } else if (strcasecmp(link, "shm") == 0) {
    o.intraLink = kLinkShm;
  } else if (strcasecmp(link, "net") == 0) {
    o.intraLink = kLinkNet;
  } else if (strcasecmp(link, "auto") == 0) {
    // With both intra-node transports disabled, ranks of one host talk through the network plugin.
    o.intraLink = envFlag("NCCL_SHM_DISABLE") && envFlag("NCCL_P2P_DISABLE") ? kLinkNet : kLinkShm;
  } else {
    *error = std::string("TUTTI_TUNER_INTRA_LINK=\"") + link + "\": expected auto, process, shm or net";
    return ncclInvalidUsage;
  }
  static const char* const kLat[kNumLinks] = {"TUTTI_TUNER_LATENCY_PROCESS", "TUTTI_TUNER_LATENCY_SHM",
                                              "TUTTI_TUNER_LATENCY_NET"};
  static const char* const kOver[kNumLinks] = {"TUTTI_TUNER_OVERHEAD_PROCESS", "TUTTI_TUNER_OVERHEAD_SHM",
                                               "TUTTI_TUNER_OVERHEAD_NET"};
  static const char* const kBw[kNumLinks] = {"TUTTI_TUNER_BANDWIDTH_PROCESS", "TUTTI_TUNER_BANDWIDTH_SHM",
                                             "TUTTI_TUNER_BANDWIDTH_NET"};
  for (int l = 0; l < kNumLinks; ++l) {
    if (!parseTriple(kOver[l], o.overheadUs[l], error, true)) return ncclInvalidUsage;
    if (!parseTriple(kLat[l], o.latencyUs[l], error)) return ncclInvalidUsage;
    if (!parseTriple(kBw[l], o.bandwidthGBs[l], error)) return ncclInvalidUsage;
  }
  if (!parseFactor("TUTTI_TUNER_TREE_LATENCY_FACTOR", o.treeLatencyFactor, error)) return ncclInvalidUsage;
  if (!parseFactor("TUTTI_TUNER_TREE_BANDWIDTH_FACTOR", o.treeBandwidthFactor, error)) return ncclInvalidUsage;
  if (!parseFactor("TUTTI_TUNER_TREE_FILL_FACTOR", o.treeFillFactor, error, true)) return ncclInvalidUsage;
  if (!parseFactor("TUTTI_TUNER_TREE_SHALLOW_TRAFFIC", o.treeShallowTraffic, error)) return ncclInvalidUsage;
  long long x = 0;
  if (const char* cores = valueOf("TUTTI_TUNER_CORES"); strcasecmp(cores, "auto") == 0) {
    o.cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  } else if (!parseInt("TUTTI_TUNER_CORES", 0, 1 << 20, &x, error)) {
    return ncclInvalidUsage;
  } else {
    o.cores = static_cast<int>(x);
  }
  {
    const char* text = valueOf("TUTTI_TUNER_OVERSUBSCRIBED");
    char* end = nullptr;
    errno = 0;
    const double lat = std::strtod(text, &end);
    double expo = -1;
    if (end != text && *end == ',') {
      const char* q = end + 1;
      expo = std::strtod(q, &end);
      if (end == q) expo = -1;
    }
    if (errno != 0 || *end != '\0' || !std::isfinite(lat) || lat <= 0 || !std::isfinite(expo) || expo < 0) {
      *error = std::string("TUTTI_TUNER_OVERSUBSCRIBED=\"") + text +
               "\": expected a positive latency factor and a non-negative exponent, as \"2,0.5\"";
      return ncclInvalidUsage;
    }
    o.oversubLatencyFactor = lat;
    o.oversubBandwidthExponent = expo;
  }
  // The FIFO geometry is the core's (NCCL's variables, 8 slots per buffer); read here only to size the
  // tree's pipeline chunks. Unset or unparsable: the core's defaults.
  static const char* const kBuff[NCCL_NUM_PROTOCOLS] = {"NCCL_LL_BUFFSIZE", "NCCL_LL128_BUFFSIZE",
                                                        "NCCL_BUFFSIZE"};
  static const long long kBuffDefault[NCCL_NUM_PROTOCOLS] = {262144, 4915200, 4194304};
  for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) {
    long long buff = kBuffDefault[p];
    if (const char* v = std::getenv(kBuff[p]); v && *v) {
      char* end = nullptr;
      const long long x = std::strtoll(v, &end, 0);
      if (end != v && *end == '\0' && x > 0) buff = x;
    }
    const long long slot = buff / 8;
    const long long data = p == NCCL_PROTO_LL ? slot / 2 : p == NCCL_PROTO_LL128 ? slot / 128 * 120 : slot;
    o.slotDataBytes[p] = std::max(1LL, data);
  }
  if (!parseInt("TUTTI_TUNER_CHANNEL_BYTES", 1, 1ll << 40, &x, error)) return ncclInvalidUsage;
  o.channelBytes = x;
  if (!parseInt("TUTTI_TUNER_MAX_CHANNELS", 1, 64, &x, error)) return ncclInvalidUsage;
  o.maxChannels = static_cast<int>(x);
  *out = o;
  return ncclSuccess;
}

}  // namespace tutti::tunerdefault
