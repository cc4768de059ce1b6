// Net ABI v10 -> v12: init is process-wide (run once), the comm config moves from init to connect (kept
// in the context the adapter's init returns), and there is no finalize / setNetAttr.
#include "plugin/adapter_slots.h"
#include "plugin/net/net_adapters.h"

namespace tutti::net {
namespace {

using Slots = AdapterSlots<ncclNet_v10_t>;

// Context handed to the core: the comm config v10 wants at every connect.
struct Ctx {
  ncclNetCommConfig_v10_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  bool hasConfig = false;
};

template <int S>
struct V10 {
  static const ncclNet_v10_t* p() { return Slots::table(S); }
  static ncclResult_t init(void** ctx, uint64_t, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t log,
                           ncclProfilerCallback_t prof) {
    TUTTI_CHECK(Slots::initOnce(S, [&] { return p()->init(log, prof); }));
    auto* c = new Ctx;
    if (config != nullptr) {
      c->config.trafficClass = config->trafficClass;
      c->hasConfig = true;
    }
    *ctx = c;
    return ncclSuccess;
  }
  static ncclResult_t finalize(void* ctx) {
    delete static_cast<Ctx*>(ctx);
    return ncclSuccess;
  }
  static ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* props) {
    ncclNetProperties_v10_t in{};
    TUTTI_CHECK(p()->getProperties(dev, &in));
    copyCommonProps(in, dev, props);
    props->regIsGlobal = in.regIsGlobal;
    props->forceFlush = in.forceFlush;
    props->netDeviceType = in.netDeviceType;
    props->netDeviceVersion = in.netDeviceVersion;
    props->vProps.ndevs = in.vProps.ndevs;
    for (int i = 0; i < in.vProps.ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC_V10; ++i) props->vProps.devs[i] = in.vProps.devs[i];
    props->maxP2pBytes = in.maxP2pBytes;
    props->maxCollBytes = in.maxCollBytes;
    return ncclSuccess;
  }
  static ncclResult_t listen(void*, int dev, void* handle, void** listenComm) {
    return p()->listen(dev, handle, listenComm);
  }
  static ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** devComm) {
    auto* c = static_cast<Ctx*>(ctx);
    return p()->connect(dev, c != nullptr && c->hasConfig ? &c->config : nullptr, handle, sendComm, devComm);
  }
  static ncclResult_t makeVDevice(int* d, ncclNetVDeviceProps_v12_t* props) {
    if (props->ndevs < 0 || props->ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V10) {
      TUTTI_FAIL(ncclInvalidArgument, "net plugin {} (v10): virtual NIC of {} devices (max {})", p()->name,
                 props->ndevs, NCCL_NET_MAX_DEVS_PER_NIC_V10);
    }
    ncclNetVDeviceProps_v10_t v{};
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
    n.makeVDevice = makeVDevice;
    return n;
  }
};

}  // namespace

ncclResult_t adaptV10(const ncclNet_v10_t* in, ncclNet_v12_t* out, int* slot) {
  int s = Slots::acquire(in);
  if (s < 0) TUTTI_FAIL(ncclInternalError, "too many v10 net plugins loaded (max {})", kAdapterSlots);
  ncclNet_v12_t n = tableForSlot<ncclNet_v12_t, V10>(s);
  n.name = in->name;
  n.devices = in->devices;
  n.accept = in->accept;
  n.regMr = in->regMr;
  n.regMrDmaBuf = in->regMrDmaBuf;
  n.deregMr = in->deregMr;
  n.isend = in->isend;
  n.irecv = in->irecv;
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

void releaseV10Slot(int slot) { Slots::release(slot); }

}  // namespace tutti::net
