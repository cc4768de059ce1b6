// Entry point of net-ib: the exported ncclNetPlugin_v12 table, logging, init / finalize and getProperties.
// Older ABI tables derive from it (net_compat.h).
#include "netib.h"
#include "options.h"

#include <tutti/net_compat.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace tutti::netib {

namespace {
std::atomic<ncclDebugLogger_t> gLogger{nullptr};
std::mutex gInitMu;
int gRefCount = 0;  // inits not yet finalized (v6..v10 inits are never finalized)
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
  // No device is not a failure: devices() reports 0 and the core moves on to the next net plugin.
  if (ncclResult_t r = discoverDevices(); r != ncclSuccess) return r;
  gRefCount = 1;
  return ncclSuccess;
}

ncclResult_t pluginFinalize() {
  std::lock_guard<std::mutex> lock(gInitMu);
  if (gRefCount > 0 && --gRefCount == 0) releaseDevices();
  return ncclSuccess;
}

ncclResult_t netDevices(int* ndev) {
  if (ndev == nullptr) {
    IB_WARN("NET/IB : devices: NULL ndev");
    return ncclInvalidArgument;
  }
  *ndev = deviceCount();
  return ncclSuccess;
}

ncclResult_t netGetProperties(int dev, ncclNetProperties_v12_t* props) {
  Device* d = device(dev);
  if (d == nullptr || props == nullptr) {
    IB_WARN("NET/IB : getProperties: no device %d (%d devices)", dev, deviceCount());
    return ncclInvalidArgument;
  }
  std::memset(props, 0, sizeof *props);
  props->name = const_cast<char*>(d->name.c_str());
  props->pciPath = d->pciPath.empty() ? nullptr : const_cast<char*>(d->pciPath.c_str());
  props->guid = d->guid;
  props->ptrSupport = NCCL_PTR_HOST;
#ifdef TUTTI_NET_IB_CUDA
  // GPU buffers only through DMA-BUF, when the provider takes it; plain ibv_reg_mr of device memory would need
  // a peer-memory kernel module, which is not detected yet.
  if (d->dmabuf) props->ptrSupport |= NCCL_PTR_CUDA | NCCL_PTR_DMABUF;
#endif
  props->regIsGlobal = 1;  // registrations live in the device's one protection domain
  props->forceFlush = 0;
  props->speed = d->speedMbps;
  props->port = d->port;
  props->latency = 0;
  props->maxComms = d->maxQp > 0 ? d->maxQp : 65536;
  props->maxRecvs = kMaxRecvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  // Single receives carry their size in a 32-bit immediate, and test() reports int sizes.
  props->maxP2pBytes = MAX_NET_SIZE;
  props->maxCollBytes = MAX_COLLNET_SIZE;
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

namespace {

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
ncclResult_t isendV12(void* comm, void* data, size_t size, int tag, void* mhandle, void*, void** request) {
  return netIsend(comm, data, size, tag, mhandle, request);
}
ncclResult_t irecvV12(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**,
                      void** request) {
  return netIrecv(comm, n, data, sizes, tags, mhandles, request);
}

}  // namespace
}  // namespace tutti::netib

namespace nib = tutti::netib;

constexpr ncclNet_v12_t kNet = {
    .name = "IB",
    .init = nib::initV12,
    .devices = nib::netDevices,
    .getProperties = nib::netGetProperties,
    .listen = nib::listenV12,
    .connect = nib::connectV12,
    .accept = nib::acceptV12,
    .regMr = nib::netRegMr,
    .regMrDmaBuf = nib::netRegMrDmaBuf,
    .deregMr = nib::netDeregMr,
    .isend = nib::isendV12,
    .irecv = nib::irecvV12,
    .iflush = nib::netIflush,
    .test = nib::netTest,
    .closeSend = nib::netCloseSend,
    .closeRecv = nib::netCloseRecv,
    .closeListen = nib::netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
    .finalize = nib::finalizeV12,
    .setNetAttr = nullptr,
};

// The native table, and the older ABIs derived from it (sdk/include/tutti/net_compat.h): cores that know
// only v11 .. v6 load the same code.
// Declared extern "C" first, then defined: a const at namespace scope would otherwise be file-local.
#define TUTTI_NET_EXPORT(version, table)                                                         \
  extern "C" __attribute__((visibility("default"))) const ncclNet_##version##_t ncclNetPlugin_##version; \
  const ncclNet_##version##_t ncclNetPlugin_##version = table
TUTTI_NET_EXPORT(v12, kNet);
TUTTI_NET_EXPORT(v11, tutti::netcompat::v11<kNet>());
TUTTI_NET_EXPORT(v10, tutti::netcompat::v10<kNet>());
TUTTI_NET_EXPORT(v9, tutti::netcompat::v9<kNet>());
TUTTI_NET_EXPORT(v8, tutti::netcompat::v8<kNet>());
TUTTI_NET_EXPORT(v7, tutti::netcompat::v7<kNet>());
TUTTI_NET_EXPORT(v6, tutti::netcompat::v6<kNet>());
