// Environment parsing for net-socket. The plugin links nothing of the core, so it reads getenv directly.
#include "options.h"

#include "connect.h"

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tutti::netsock {

namespace {

Options gOptions;

// Reads an integer variable in [lo, hi]; unset or empty keeps *out.
ncclResult_t readInt(const char* name, long long lo, long long hi, long long* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return ncclSuccess;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 0);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
    SOCK_WARN("NET/Socket : %s=\"%s\" is not an integer in [%lld, %lld]", name, v, lo, hi);
    return ncclInvalidUsage;
  }
  *out = x;
  return ncclSuccess;
}

// A thread or socket count: 0..hi, or kAutoSockets.
ncclResult_t readSocketCount(const char* name, long long hi, long long* out) {
  long long x = *out;
  if (ncclResult_t r = readInt(name, kAutoSockets, hi, &x); r != ncclSuccess) return r;
  if (x < 0 && x != kAutoSockets) {
    SOCK_WARN("NET/Socket : %s=%lld is not in [0, %lld] (or %d: per NIC)", name, x, hi, kAutoSockets);
    return ncclInvalidUsage;
  }
  *out = x;
  return ncclSuccess;
}

}  // namespace

ncclResult_t readOptions(Options* out) {
  Options o;
  if (const char* v = std::getenv("NCCL_SOCKET_IFNAME")) o.ifname = v;
  if (const char* v = std::getenv("NCCL_SOCKET_FAMILY"); v && *v) {
    if (std::strcmp(v, "AF_INET") == 0) {
      o.family = AF_INET;
    } else if (std::strcmp(v, "AF_INET6") == 0) {
      o.family = AF_INET6;
    } else {
      SOCK_WARN("NET/Socket : NCCL_SOCKET_FAMILY=\"%s\" must be AF_INET or AF_INET6", v);
      return ncclInvalidUsage;
    }
  }
  // -2 (NCCL's value for "detect") is the same as unset.
  long long x = o.nThreads;
  if (ncclResult_t r = readSocketCount("NCCL_SOCKET_NTHREADS", kMaxThreads, &x); r != ncclSuccess) return r;
  o.nThreads = static_cast<int>(x);
  x = o.nSocksPerThread;
  if (ncclResult_t r = readSocketCount("NCCL_NSOCKS_PERTHREAD", kMaxSockets, &x); r != ncclSuccess) return r;
  o.nSocksPerThread = static_cast<int>(x);
  x = static_cast<long long>(o.inlineBytes);
  if (ncclResult_t r = readInt("NCCL_SOCKET_INLINE", 0, 1 << 30, &x); r != ncclSuccess) return r;
  o.inlineBytes = static_cast<size_t>(x);
  x = static_cast<long long>(o.minChunkBytes);
  if (ncclResult_t r = readInt("NCCL_SOCKET_MIN_TASKSIZE", 1, 1 << 30, &x); r != ncclSuccess) return r;
  o.minChunkBytes = static_cast<size_t>(x);
  x = o.maxDevices;
  if (ncclResult_t r = readInt("NCCL_SOCKET_MAX_IFS", 1, 64, &x); r != ncclSuccess) return r;
  o.maxDevices = static_cast<int>(x);
  x = o.timeoutMs;
  if (ncclResult_t r = readInt("TUTTI_NET_SOCKET_TIMEOUT_MS", 1, 3600 * 1000, &x); r != ncclSuccess) return r;
  o.timeoutMs = static_cast<int>(x);
  x = o.delayedAck ? 1 : 0;
  if (ncclResult_t r = readInt("TUTTI_NET_SOCKET_DELAYED_ACK", 0, 1, &x); r != ncclSuccess) return r;
  o.delayedAck = x != 0;
  x = o.holdSmall ? 1 : 0;
  if (ncclResult_t r = readInt("TUTTI_NET_SOCKET_HOLD_SMALL", 0, 1, &x); r != ncclSuccess) return r;
  o.holdSmall = x != 0;
  x = o.sendBufBytes;
  if (ncclResult_t r = readInt("TUTTI_NET_SOCKET_SNDBUF", kSameHostSendBuffer, 1 << 30, &x); r != ncclSuccess) return r;
  o.sendBufBytes = x;
  *out = o;
  return ncclSuccess;
}

void socketCounts(const Options& o, const std::string& ifname, int* nThreads, int* nSocksPerThread) {
  int nt = o.nThreads, ns = o.nSocksPerThread;
  if (nt == kAutoSockets || ns == kAutoSockets) {
    // The NIC's PCI vendor; virtual interfaces (lo, veth, bridges) have none and get the plain defaults.
    char vendor[16] = {};
    if (FILE* f = std::fopen(("/sys/class/net/" + ifname + "/device/vendor").c_str(), "r")) {
      if (std::fgets(vendor, sizeof vendor, f) == nullptr) vendor[0] = '\0';
      std::fclose(f);
    }
    int autoNt = 0, autoNs = 0;
    nicSocketDefaults(vendor, &autoNt, &autoNs);
    if (nt == kAutoSockets) nt = autoNt;
    if (ns == kAutoSockets) ns = autoNs;
  }
  if (nt > 0 && nt * ns > kMaxSockets) {
    // As in NCCL: keep the thread count, trim the sockets per thread to the total limit.
    ns = kMaxSockets / nt;
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      SOCK_WARN("NET/Socket : more than %d sockets per comm requested, using NCCL_NSOCKS_PERTHREAD=%d",
                kMaxSockets, ns);
  }
  *nThreads = nt;
  *nSocksPerThread = ns;
}

const Options& options() { return gOptions; }
void setOptions(const Options& o) { gOptions = o; }

}  // namespace tutti::netsock
