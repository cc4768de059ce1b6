// Entry point of net-socket: the exported ncclNetPlugin_v12 table, init / finalize, device discovery
// (NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY) and getProperties. Older ABI tables derive from it (net_compat.h).
#include "connect.h"
#include "options.h"

#include <tutti/net_compat.h>
#include <tutti/net_wait.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace tutti::netsock {

namespace {

std::atomic<ncclDebugLogger_t> gLogger{nullptr};
std::mutex gInitMu;
int gRefCount = 0;            // inits not yet finalized (v6..v10 inits are never finalized)
std::vector<Device> gDevices;  // rebuilt when the first init after the last finalize runs

// NCCL_SOCKET_IFNAME syntax: "^" excludes, "=" matches whole names, else each entry is a name prefix.
struct IfFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;

  explicit IfFilter(std::string spec) {
    if (!spec.empty() && spec[0] == '^') {
      exclude = true;
      spec.erase(0, 1);
    }
    if (!spec.empty() && spec[0] == '=') {
      exact = true;
      spec.erase(0, 1);
    }
    size_t pos = 0;
    while (pos <= spec.size()) {
      size_t comma = spec.find(',', pos);
      if (comma == std::string::npos) comma = spec.size();
      if (comma > pos) names.push_back(spec.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  bool matches(const std::string& ifname) const {
    bool hit = false;
    for (const std::string& n : names) hit = hit || (exact ? ifname == n : ifname.compare(0, n.size(), n) == 0);
    return exclude ? !hit : hit;
  }
};

int readSpeedMbps(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/speed");
  long v = 0;
  if (f >> v && v > 0 && v < INT_MAX) return static_cast<int>(v);
  return 10000;  // virtual interfaces (lo, veth) report nothing usable
}

std::string pciPathOf(const std::string& ifname) {
  std::string p = "/sys/class/net/" + ifname + "/device";
  char* real = ::realpath(p.c_str(), nullptr);
  std::string out = real ? real : "";
  std::free(real);
  return out;
}

// Interfaces that pass `filter` and the family setting, one device per interface name, at most `max`.
std::vector<Device> findInterfaces(const IfFilter& filter, int family, int max) {
  std::vector<Device> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    SOCK_WARN("NET/Socket : getifaddrs failed: %s", std::strerror(errno));
    return out;
  }
  for (ifaddrs* ia = list; ia != nullptr && static_cast<int>(out.size()) < max; ia = ia->ifa_next) {
    if (ia->ifa_addr == nullptr || !(ia->ifa_flags & IFF_UP)) continue;
    int fam = ia->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (family != 0 && fam != family) continue;
    if (fam == AF_INET6) {
      // Link-local addresses need a scope id the peer cannot know; NCCL skips them too.
      auto* s6 = reinterpret_cast<const sockaddr_in6*>(ia->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) continue;
    }
    std::string name = ia->ifa_name;
    if (!filter.matches(name)) continue;
    bool seen = false;
    for (const Device& d : out) seen = seen || d.name == name;
    if (seen) continue;
    Device d;
    std::memset(&d.addr, 0, sizeof d.addr);
    std::memcpy(&d.addr, ia->ifa_addr, fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    d.name = name;
    d.pciPath = pciPathOf(name);
    d.speedMbps = readSpeedMbps(name);
    out.push_back(d);
  }
  ::freeifaddrs(list);
  return out;
}

ncclResult_t discoverDevices(const Options& o) {
  std::vector<Device> devs;
  if (!o.ifname.empty()) {
    devs = findInterfaces(IfFilter(o.ifname), o.family, o.maxDevices);
  } else {
    devs = findInterfaces(IfFilter("^docker,lo"), o.family, o.maxDevices);
    if (devs.empty()) devs = findInterfaces(IfFilter("lo"), o.family, o.maxDevices);
  }
  if (devs.empty()) {
    SOCK_WARN("NET/Socket : no usable interface (NCCL_SOCKET_IFNAME=\"%s\", NCCL_SOCKET_FAMILY=%s)",
              o.ifname.c_str(), o.family == AF_INET ? "AF_INET" : o.family == AF_INET6 ? "AF_INET6" : "any");
    return ncclSystemError;
  }
  std::string line;
  for (size_t i = 0; i < devs.size(); i++)
    line += " [" + std::to_string(i) + "]" + devs[i].name + ":" + addrToString(devs[i].addr);
  SOCK_INFO(NCCL_INIT | NCCL_NET, "NET/Socket : Using%s", line.c_str());
  gDevices = std::move(devs);
  return ncclSuccess;
}

}  // namespace

void setLogger(ncclDebugLogger_t logger) {
  if (logger) gLogger.store(logger);
}

void logMsg(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  ncclDebugLogger_t logger = gLogger.load();
  if (logger == nullptr) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  logger(level, flags, file, line, "%s", buf);
}

std::string addrToString(const SockAddr& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (a.sa.sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &a.sin.sin_addr, host, sizeof host);
    port = ntohs(a.sin.sin_port);
  } else if (a.sa.sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &a.sin6.sin6_addr, host, sizeof host);
    port = ntohs(a.sin6.sin6_port);
  }
  return std::string(host) + "<" + std::to_string(port) + ">";
}

socklen_t addrLen(const SockAddr& a) {
  return a.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

int deviceCount() { return static_cast<int>(gDevices.size()); }

const Device* device(int dev) {
  if (dev < 0 || dev >= deviceCount()) return nullptr;
  return &gDevices[dev];
}

ncclResult_t pluginInit(ncclDebugLogger_t logger) {
  setLogger(logger);
  std::lock_guard<std::mutex> lock(gInitMu);
  if (gRefCount > 0) {
    gRefCount++;
    return ncclSuccess;
  }
  Options o;
  if (ncclResult_t r = readOptions(&o); r != ncclSuccess) return r;
  setOptions(o);
  if (ncclResult_t r = discoverDevices(o); r != ncclSuccess) return r;
  gRefCount = 1;
  return ncclSuccess;
}

ncclResult_t pluginFinalize() {
  std::lock_guard<std::mutex> lock(gInitMu);
  if (gRefCount > 0) gRefCount--;
  return ncclSuccess;
}

ncclResult_t netDevices(int* ndev) {
  if (ndev == nullptr) return ncclInvalidArgument;
  *ndev = deviceCount();
  return ncclSuccess;
}

ncclResult_t netGetProperties(int dev, ncclNetProperties_v12_t* props) {
  const Device* d = device(dev);
  if (d == nullptr || props == nullptr) {
    SOCK_WARN("NET/Socket : getProperties: no device %d (%d devices)", dev, deviceCount());
    return ncclInvalidArgument;
  }
  std::memset(props, 0, sizeof *props);
  props->name = const_cast<char*>(d->name.c_str());
  props->pciPath = d->pciPath.empty() ? nullptr : const_cast<char*>(d->pciPath.c_str());
  props->guid = static_cast<uint64_t>(dev);
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = d->speedMbps;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = NCCL_MAX_NET_SIZE_BYTES;
  props->maxCollBytes = MAX_COLLNET_SIZE;
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

namespace {

// v12 wrappers: the per-communicator context only carries the comm id (for logs).
struct Context {
  uint64_t commId;
};

ncclResult_t initV12(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t*, ncclDebugLogger_t logger,
                     ncclProfilerCallback_t) {
  if (ctx == nullptr) return ncclInvalidArgument;
  if (ncclResult_t r = pluginInit(logger); r != ncclSuccess) return r;
  *ctx = new Context{commId};
  return ncclSuccess;
}
ncclResult_t finalizeV12(void* ctx) {
  delete static_cast<Context*>(ctx);
  return pluginFinalize();
}
ncclResult_t listenV12(void*, int dev, void* handle, void** listenComm) { return netListen(dev, handle, listenComm); }
ncclResult_t connectV12(void*, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t**) {
  return netConnect(dev, handle, sendComm);
}
ncclResult_t acceptV12(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t**) {
  return netAccept(listenComm, recvComm);
}
ncclResult_t isendV12(void* comm, void* data, size_t size, int, void*, void*, void** request) {
  return netIsend(comm, data, size, request);
}
ncclResult_t irecvV12(void* comm, int n, void** data, size_t* sizes, int*, void**, void**, void** request) {
  return netIrecv(comm, n, data, sizes, request);
}

}  // namespace
}  // namespace tutti::netsock

namespace ns = tutti::netsock;

constexpr ncclNet_v12_t kNet = {
    .name = "Socket",
    .init = ns::initV12,
    .devices = ns::netDevices,
    .getProperties = ns::netGetProperties,
    .listen = ns::listenV12,
    .connect = ns::connectV12,
    .accept = ns::acceptV12,
    .regMr = ns::netRegMr,
    .regMrDmaBuf = nullptr,
    .deregMr = ns::netDeregMr,
    .isend = ns::isendV12,
    .irecv = ns::irecvV12,
    .iflush = ns::netIflush,
    .test = ns::netTest,
    .closeSend = ns::netCloseSend,
    .closeRecv = ns::netCloseRecv,
    .closeListen = ns::netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
    .finalize = ns::finalizeV12,
    .setNetAttr = nullptr,
};

// The native table, and the older ABIs derived from it (sdk/include/tutti/net_compat.h): cores that know
// only v11 .. v6 load the same code.
// Declared extern "C" first, then defined: a const at namespace scope would otherwise be file-local.
#define TUTTI_NET_EXPORT(version, table)                                                         \
  extern "C" __attribute__((visibility("default"))) const ncclNet_##version##_t ncclNetPlugin_##version; \
  const ncclNet_##version##_t ncclNetPlugin_##version = table
TUTTI_NET_EXPORT(v12, kNet);

// The blocking wait (tutti/net_wait.h): a rank waiting for a transfer sleeps in poll on the control sockets.
extern "C" __attribute__((visibility("default"))) const tuttiNetWait_v1_t tuttiNetWait_v1;
const tuttiNetWait_v1_t tuttiNetWait_v1 = {.waitComms = ns::netWaitComms};
TUTTI_NET_EXPORT(v11, tutti::netcompat::v11<kNet>());
TUTTI_NET_EXPORT(v10, tutti::netcompat::v10<kNet>());
TUTTI_NET_EXPORT(v9, tutti::netcompat::v9<kNet>());
TUTTI_NET_EXPORT(v8, tutti::netcompat::v8<kNet>());
TUTTI_NET_EXPORT(v7, tutti::netcompat::v7<kNet>());
TUTTI_NET_EXPORT(v6, tutti::netcompat::v6<kNet>());
