// Environment parsing for net-ib. The plugin links nothing of the core, so it reads getenv directly.
#include "options.h"

#include "netib.h"

#include <cerrno>
#include <cstdlib>

namespace tutti::netib {

namespace {

Options gOptions;

// Reads an integer variable in [lo, hi]; unset or empty keeps *out.
ncclResult_t readInt(const char* name, long lo, long hi, int* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return ncclSuccess;
  errno = 0;
  char* end = nullptr;
  long x = std::strtol(v, &end, 0);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
    IB_WARN("NET/IB : %s=\"%s\" is not an integer in [%ld, %ld]", name, v, lo, hi);
    return ncclInvalidUsage;
  }
  *out = static_cast<int>(x);
  return ncclSuccess;
}

}  // namespace

ncclResult_t readOptions(Options* out) {
  Options o;
  int disable = 0;
  if (ncclResult_t r = readInt("NCCL_IB_DISABLE", 0, 1, &disable); r != ncclSuccess) return r;
  o.disable = disable != 0;
  if (const char* v = std::getenv("NCCL_IB_HCA")) o.hcaSpec = v;
  std::string why;
  if (!parseHcaFilter(o.hcaSpec, &o.hca, &why)) {
    IB_WARN("NET/IB : NCCL_IB_HCA=\"%s\": %s", o.hcaSpec.c_str(), why.c_str());
    return ncclInvalidUsage;
  }
  // NCCL documents -1 for "default" on TC/SL; both mean 0 on the wire.
  int tc = -1, sl = -1;
  struct {
    const char* name;
    long lo, hi;
    int* out;
  } ints[] = {
      {"NCCL_IB_GID_INDEX", -1, 255, &o.gidIndex},
      {"NCCL_IB_TC", -1, 255, &tc},
      {"NCCL_IB_SL", -1, 15, &sl},
      {"NCCL_IB_TIMEOUT", 1, 31, &o.timeout},
      {"NCCL_IB_RETRY_CNT", 0, 7, &o.retryCount},
      {"NCCL_IB_QPS_PER_CONNECTION", 1, kMaxQps, &o.qpsPerConnection},
      {"NCCL_IB_ADAPTIVE_ROUTING", -2, 1, &o.adaptiveRouting},
      {"TUTTI_NET_IB_TIMEOUT_MS", 1, 3600 * 1000, &o.timeoutMs},
  };
  for (auto& i : ints)
    if (ncclResult_t r = readInt(i.name, i.lo, i.hi, i.out); r != ncclSuccess) return r;
  if (o.adaptiveRouting == -1) {
    IB_WARN("NET/IB : NCCL_IB_ADAPTIVE_ROUTING=-1 is not a setting (1 on, 0 off, -2 auto)");
    return ncclInvalidUsage;
  }
  o.trafficClass = tc < 0 ? 0 : tc;
  o.serviceLevel = sl < 0 ? 0 : sl;
  if (const char* v = std::getenv("NCCL_SOCKET_IFNAME")) o.socketIfname = v;
  *out = std::move(o);
  return ncclSuccess;
}

const Options& options() { return gOptions; }
void setOptions(const Options& o) { gOptions = o; }

}  // namespace tutti::netib
