// Net ABI v9 -> v12: init is process-wide (run once, no profiler callback), no per-communicator context or
// config, isend/irecv take no profiler handles, no finalize / setNetAttr.
#include "plugin/adapter_slots.h"
#include "plugin/net/net_adapters.h"

namespace tutti::net {
namespace {

using Slots = AdapterSlots<ncclNet_v9_t>;

template <int S>
struct V9 {
  static const ncclNet_v9_t* p() { return Slots::table(S); }
  static ncclResult_t init(void** ctx, uint64_t, ncclNetCommConfig_v12_t*, ncclDebugLogger_t log, ncclProfilerCallback_t) {
    *ctx = nullptr;
    return Slots::initOnce(S, [&] { return p()->init(log); });
  }
  static ncclResult_t finalize(void*) { return ncclSuccess; }
  static ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* props) {
    ncclNetProperties_v9_t in{};
    TUTTI_CHECK(p()->getProperties(dev, &in));
    copyCommonProps(in, dev, props);
    props->regIsGlobal = in.regIsGlobal;
    props->forceFlush = in.forceFlush;
    props->netDeviceType = in.netDeviceType;
    props->netDeviceVersion = in.netDeviceVersion;
    props->vProps.ndevs = in.vProps.ndevs;
    for (int i = 0; i < in.vProps.ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC_V9; ++i) props->vProps.devs[i] = in.vProps.devs[i];
    props->maxP2pBytes = in.maxP2pBytes;
    props->maxCollBytes = in.maxCollBytes;
    return ncclSuccess;
  }
  static ncclResult_t listen(void*, int dev, void* handle, void** listenComm) {
    return p()->listen(dev, handle, listenComm);
  }
  static ncclResult_t connect(void*, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** devComm) {
    return p()->connect(dev, handle, sendComm, devComm);
  }
  static ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mh, void*, void** request) {
    return p()->isend(comm, data, size, tag, mh, request);
  }
  static ncclResult_t irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs, void**, void** request) {
    return p()->irecv(comm, n, data, sizes, tags, mhs, request);
  }
  static ncclResult_t makeVDevice(int* d, ncclNetVDeviceProps_v12_t* props) {
    if (props->ndevs < 0 || props->ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V9) {
      TUTTI_FAIL(ncclInvalidArgument, "net plugin {} (v9): virtual NIC of {} devices (max {})", p()->name,
                 props->ndevs, NCCL_NET_MAX_DEVS_PER_NIC_V9);
    }
    ncclNetVDeviceProps_v9_t v{};
    v.ndevs = props->ndevs;
    for (int i = 0; i < v.ndevs; ++i) v.devs[i] = props->devs[i];
    return p()->makeVDevice(d, &v);
  }
  static ncclNet_v12_t make() {
    ncclNet_v12_t n{};
    n.init = init;
    n.finalize = finalize;
    n.getProperties = getProperties;
    n.listen = listen;
    n.connect = connect;
    n.isend = isend;
    n.irecv = irecv;
    n.makeVDevice = makeVDevice;
    return n;
  }
};

}  // namespace

ncclResult_t adaptV9(const ncclNet_v9_t* in, ncclNet_v12_t* out, int* slot) {
  int s = Slots::acquire(in);
  if (s < 0) TUTTI_FAIL(ncclInternalError, "too many v9 net plugins loaded (max {})", kAdapterSlots);
  ncclNet_v12_t n = tableForSlot<ncclNet_v12_t, V9>(s);
  n.name = in->name;
  n.devices = in->devices;
  n.accept = in->accept;
  n.regMr = in->regMr;
  n.regMrDmaBuf = in->regMrDmaBuf;
  n.deregMr = in->deregMr;
  n.iflush = in->iflush;
  n.test = in->test;
  n.closeSend = in->closeSend;
  n.closeRecv = in->closeRecv;
  n.closeListen = in->closeListen;
  n.getDeviceMr = in->getDeviceMr;
  n.irecvConsumed = in->irecvConsumed;
  n.setNetAttr = nullptr;
  if (in->makeVDevice == nullptr) n.makeVDevice = nullptr;
  *out = n;
  *slot = s;
  return ncclSuccess;
}

void releaseV9Slot(int slot) { Slots::release(slot); }

}  // namespace tutti::net
