// Environment parsing for net-socket. The plugin links nothing of the core, so it reads getenv directly.
#include "options.h"

#include "connect.h"

#include <sys/socket.h>

#include <cerrno>
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
  long long x = o.nThreads;
  if (ncclResult_t r = readInt("NCCL_SOCKET_NTHREADS", 0, kMaxThreads, &x); r != ncclSuccess) return r;
  o.nThreads = static_cast<int>(x);
  x = o.nSocksPerThread;
  if (ncclResult_t r = readInt("NCCL_NSOCKS_PERTHREAD", 0, kMaxSockets, &x); r != ncclSuccess) return r;
  o.nSocksPerThread = static_cast<int>(x);
  if (o.nThreads * o.nSocksPerThread > kMaxSockets) {
    // As in NCCL: keep the thread count, trim the sockets per thread to the total limit.
    o.nSocksPerThread = kMaxSockets / o.nThreads;
    SOCK_WARN("NET/Socket : more than %d sockets per comm requested, using NCCL_NSOCKS_PERTHREAD=%d", kMaxSockets,
              o.nSocksPerThread);
  }
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
  *out = o;
  return ncclSuccess;
}

const Options& options() { return gOptions; }
void setOptions(const Options& o) { gOptions = o; }

}  // namespace tutti::netsock
