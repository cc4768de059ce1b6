// The older NCCL net ABIs (v11 .. v6) as thin shims over the same code: each table reuses the v12-shaped
// entry points where the signatures agree and converts properties, sizes and init where they differ.
#include "netib.h"

#include <climits>
#include <cstring>

namespace tutti::netib {
namespace {

// ---- properties: every older struct is a prefix-compatible subset of v12, field by field.
template <typename P>
void copyCommonProps(const ncclNetProperties_v12_t& v, P* p) {
  p->name = v.name;
  p->pciPath = v.pciPath;
  p->guid = v.guid;
  p->ptrSupport = v.ptrSupport;
  p->speed = v.speed;
  p->port = v.port;
  p->latency = v.latency;
  p->maxComms = v.maxComms;
  p->maxRecvs = v.maxRecvs;
}

template <typename P>
void copyVProps(const ncclNetProperties_v12_t& v, P* p) {
  constexpr int cap = static_cast<int>(sizeof p->vProps.devs / sizeof p->vProps.devs[0]);
  p->vProps.ndevs = v.vProps.ndevs < cap ? v.vProps.ndevs : cap;
  for (int i = 0; i < p->vProps.ndevs; i++) p->vProps.devs[i] = v.vProps.devs[i];
}

// v9..v11: everything up to maxCollBytes (v11 adds maxMultiRequestSize).
template <typename P>
ncclResult_t propsV9Plus(int dev, P* p) {
  ncclNetProperties_v12_t v;
  if (ncclResult_t r = netGetProperties(dev, &v); r != ncclSuccess) return r;
  std::memset(p, 0, sizeof *p);
  copyCommonProps(v, p);
  p->regIsGlobal = v.regIsGlobal;
  p->forceFlush = v.forceFlush;
  p->netDeviceType = v.netDeviceType;
  p->netDeviceVersion = v.netDeviceVersion;
  copyVProps(v, p);
  p->maxP2pBytes = v.maxP2pBytes;
  p->maxCollBytes = v.maxCollBytes;
  return ncclSuccess;
}

ncclResult_t propsV11(int dev, ncclNetProperties_v11_t* p) {
  if (ncclResult_t r = propsV9Plus(dev, p); r != ncclSuccess) return r;
  p->maxMultiRequestSize = 1;
  return ncclSuccess;
}
ncclResult_t propsV10(int dev, ncclNetProperties_v10_t* p) { return propsV9Plus(dev, p); }
ncclResult_t propsV9(int dev, ncclNetProperties_v9_t* p) { return propsV9Plus(dev, p); }

ncclResult_t propsV8(int dev, ncclNetProperties_v8_t* p) {
  ncclNetProperties_v12_t v;
  if (ncclResult_t r = netGetProperties(dev, &v); r != ncclSuccess) return r;
  std::memset(p, 0, sizeof *p);
  copyCommonProps(v, p);
  p->regIsGlobal = v.regIsGlobal;
  p->netDeviceType = v.netDeviceType;
  p->netDeviceVersion = v.netDeviceVersion;
  return ncclSuccess;
}
ncclResult_t propsV7(int dev, ncclNetProperties_v7_t* p) {
  ncclNetProperties_v12_t v;
  if (ncclResult_t r = netGetProperties(dev, &v); r != ncclSuccess) return r;
  std::memset(p, 0, sizeof *p);
  copyCommonProps(v, p);
  p->netDeviceType = v.netDeviceType;
  p->netDeviceVersion = v.netDeviceVersion;
  return ncclSuccess;
}
ncclResult_t propsV6(int dev, ncclNetProperties_v6_t* p) {
  ncclNetProperties_v12_t v;
  if (ncclResult_t r = netGetProperties(dev, &v); r != ncclSuccess) return r;
  std::memset(p, 0, sizeof *p);
  copyCommonProps(v, p);
  return ncclSuccess;
}

// ---- init: v11 is per communicator like v12; v10 and older are process-wide and never finalized.
struct ContextV11 {
  uint64_t commId;
};
ncclResult_t initV11(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t*, ncclDebugLogger_t logger,
                     ncclProfilerCallback_t) {
  if (ctx == nullptr) return ncclInvalidArgument;
  if (ncclResult_t r = pluginInit(logger); r != ncclSuccess) return r;
  *ctx = new ContextV11{commId};
  return ncclSuccess;
}
ncclResult_t finalizeV11(void* ctx) {
  delete static_cast<ContextV11*>(ctx);
  return pluginFinalize();
}
ncclResult_t initV10(ncclDebugLogger_t logger, ncclProfilerCallback_t) { return pluginInit(logger); }
ncclResult_t initV6to9(ncclDebugLogger_t logger) { return pluginInit(logger); }

// ---- listen / connect / accept.
ncclResult_t listenCtx(void*, int dev, void* handle, void** listenComm) { return netListen(dev, handle, listenComm); }
ncclResult_t listenNoCtx(int dev, void* handle, void** listenComm) { return netListen(dev, handle, listenComm); }
ncclResult_t connectV11(void*, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v11_t**) {
  return netConnect(dev, handle, sendComm);
}
ncclResult_t connectV10(int dev, ncclNetCommConfig_v10_t*, void* handle, void** sendComm, ncclNetDeviceHandle_v10_t**) {
  return netConnect(dev, handle, sendComm);
}
// v7..v9 device handles are the same type.
ncclResult_t connectV7to9(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v7_t**) {
  return netConnect(dev, handle, sendComm);
}
ncclResult_t connectV6(int dev, void* handle, void** sendComm) { return netConnect(dev, handle, sendComm); }
ncclResult_t acceptDev(void* listenComm, void** recvComm, ncclNetDeviceHandle_v7_t**) {
  return netAccept(listenComm, recvComm);
}
ncclResult_t acceptV6(void* listenComm, void** recvComm) { return netAccept(listenComm, recvComm); }

// ---- data path.
ncclResult_t isendProf(void* comm, void* data, size_t size, int tag, void* mh, void*, void** request) {
  return netIsend(comm, data, size, tag, mh, request);
}
ncclResult_t irecvProf(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs, void**, void** request) {
  return netIrecv(comm, n, data, sizes, tags, mhs, request);
}
ncclResult_t isendV9(void* comm, void* data, size_t size, int tag, void* mh, void** request) {
  return netIsend(comm, data, size, tag, mh, request);
}
ncclResult_t irecvV9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs, void** request) {
  return netIrecv(comm, n, data, sizes, tags, mhs, request);
}
// v6..v8 carry int sizes.
ncclResult_t isendInt(void* comm, void* data, int size, int tag, void* mh, void** request) {
  if (size < 0) {
    IB_WARN("NET/IB : isend: negative size %d", size);
    return ncclInvalidArgument;
  }
  return netIsend(comm, data, static_cast<size_t>(size), tag, mh, request);
}
ncclResult_t irecvInt(void* comm, int n, void** data, int* sizes, int* tags, void** mhs, void** request) {
  if (n < 1 || n > kMaxRecvs || sizes == nullptr) {
    IB_WARN("NET/IB : irecv: %d buffers (1..%d) or NULL sizes", n, kMaxRecvs);
    return ncclInvalidArgument;
  }
  size_t s[kMaxRecvs];
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) {
      IB_WARN("NET/IB : irecv: negative size %d", sizes[i]);
      return ncclInvalidArgument;
    }
    s[i] = static_cast<size_t>(sizes[i]);
  }
  return netIrecv(comm, n, data, s, tags, mhs, request);
}
ncclResult_t regMrInt(void* comm, void* data, int size, int type, void** mhandle) {
  if (size < 0) {
    IB_WARN("NET/IB : regMr: negative size %d", size);
    return ncclInvalidArgument;
  }
  return netRegMr(comm, data, static_cast<size_t>(size), type, mhandle);
}

}  // namespace
}  // namespace tutti::netib

namespace ns = tutti::netib;

#define TUTTI_NET_EXPORT extern "C" __attribute__((visibility("default")))

TUTTI_NET_EXPORT const ncclNet_v11_t ncclNetPlugin_v11;
const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = "IB",
    .init = ns::initV11,
    .devices = ns::netDevices,
    .getProperties = ns::propsV11,
    .listen = ns::listenCtx,
    .connect = ns::connectV11,
    .accept = ns::acceptDev,
    .regMr = ns::netRegMr,
    .regMrDmaBuf = ns::netRegMrDmaBuf,
    .deregMr = ns::netDeregMr,
    .isend = ns::isendProf,
    .irecv = ns::irecvProf,
    .iflush = ns::netIflush,
    .test = ns::netTest,
    .closeSend = ns::netCloseSend,
    .closeRecv = ns::netCloseRecv,
    .closeListen = ns::netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
    .finalize = ns::finalizeV11,
    .setNetAttr = nullptr,
};

TUTTI_NET_EXPORT const ncclNet_v10_t ncclNetPlugin_v10;
const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = "IB",
    .init = ns::initV10,
    .devices = ns::netDevices,
    .getProperties = ns::propsV10,
    .listen = ns::listenNoCtx,
    .connect = ns::connectV10,
    .accept = ns::acceptDev,
    .regMr = ns::netRegMr,
    .regMrDmaBuf = ns::netRegMrDmaBuf,
    .deregMr = ns::netDeregMr,
    .isend = ns::isendProf,
    .irecv = ns::irecvProf,
    .iflush = ns::netIflush,
    .test = ns::netTest,
    .closeSend = ns::netCloseSend,
    .closeRecv = ns::netCloseRecv,
    .closeListen = ns::netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};

TUTTI_NET_EXPORT const ncclNet_v9_t ncclNetPlugin_v9;
const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = "IB",
    .init = ns::initV6to9,
    .devices = ns::netDevices,
    .getProperties = ns::propsV9,
    .listen = ns::listenNoCtx,
    .connect = ns::connectV7to9,
    .accept = ns::acceptDev,
    .regMr = ns::netRegMr,
    .regMrDmaBuf = ns::netRegMrDmaBuf,
    .deregMr = ns::netDeregMr,
    .isend = ns::isendV9,
    .irecv = ns::irecvV9,
    .iflush = ns::netIflush,
    .test = ns::netTest,
    .closeSend = ns::netCloseSend,
    .closeRecv = ns::netCloseRecv,
    .closeListen = ns::netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};

TUTTI_NET_EXPORT const ncclNet_v8_t ncclNetPlugin_v8;
const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "IB",
    .init = ns::initV6to9,
    .devices = ns::netDevices,
    .getProperties = ns::propsV8,
    .listen = ns::listenNoCtx,
    .connect = ns::connectV7to9,
    .accept = ns::acceptDev,
    .regMr = ns::netRegMr,
    .regMrDmaBuf = ns::netRegMrDmaBuf,
    .deregMr = ns::netDeregMr,
    .isend = ns::isendInt,
    .irecv = ns::irecvInt,
    .iflush = ns::netIflush,
    .test = ns::netTest,
    .closeSend = ns::netCloseSend,
    .closeRecv = ns::netCloseRecv,
    .closeListen = ns::netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
};

TUTTI_NET_EXPORT const ncclNet_v7_t ncclNetPlugin_v7;
const ncclNet_v7_t ncclNetPlugin_v7 = {
    .name = "IB",
    .init = ns::initV6to9,
    .devices = ns::netDevices,
    .getProperties = ns::propsV7,
    .listen = ns::listenNoCtx,
    .connect = ns::connectV7to9,
    .accept = ns::acceptDev,
    .regMr = ns::regMrInt,
    .regMrDmaBuf = ns::netRegMrDmaBuf,
    .deregMr = ns::netDeregMr,
    .isend = ns::isendInt,
    .irecv = ns::irecvInt,
    .iflush = ns::netIflush,
    .test = ns::netTest,
    .closeSend = ns::netCloseSend,
    .closeRecv = ns::netCloseRecv,
    .closeListen = ns::netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
};

TUTTI_NET_EXPORT const ncclNet_v6_t ncclNetPlugin_v6;
const ncclNet_v6_t ncclNetPlugin_v6 = {
    .name = "IB",
    .init = ns::initV6to9,
    .devices = ns::netDevices,
    .getProperties = ns::propsV6,
    .listen = ns::listenNoCtx,
    .connect = ns::connectV6,
    .accept = ns::acceptV6,
    .regMr = ns::regMrInt,
    .regMrDmaBuf = ns::netRegMrDmaBuf,
    .deregMr = ns::netDeregMr,
    .isend = ns::isendInt,
    .irecv = ns::irecvInt,
    .iflush = ns::netIflush,
    .test = ns::netTest,
    .closeSend = ns::netCloseSend,
    .closeRecv = ns::netCloseRecv,
    .closeListen = ns::netCloseListen,
};
