// Net ABI v11 -> v12: identical calls; properties lack rail/plane ids and hold 4 virtual-NIC devices.
#include "plugin/adapter_slots.h"
#include "plugin/net/net_adapters.h"

namespace tutti::net {
namespace {

using Slots = AdapterSlots<ncclNet_v11_t>;

template <int S>
struct V11 {
  static const ncclNet_v11_t* p() { return Slots::table(S); }
  static ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t log,
                           ncclProfilerCallback_t prof) {
    ncclNetCommConfig_v11_t c{};
    if (config != nullptr) c.trafficClass = config->trafficClass;
    return p()->init(ctx, commId, config != nullptr ? &c : nullptr, log, prof);
  }
  static ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* props) {
    ncclNetProperties_v11_t in{};
    TUTTI_CHECK(p()->getProperties(dev, &in));
    copyCommonProps(in, dev, props);
    props->regIsGlobal = in.regIsGlobal;
    props->forceFlush = in.forceFlush;
    props->netDeviceType = in.netDeviceType;
    props->netDeviceVersion = in.netDeviceVersion;
    props->vProps.ndevs = in.vProps.ndevs;
    for (int i = 0; i < in.vProps.ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC_V11; ++i) props->vProps.devs[i] = in.vProps.devs[i];
    props->maxP2pBytes = in.maxP2pBytes;
    props->maxCollBytes = in.maxCollBytes;
    props->maxMultiRequestSize = in.maxMultiRequestSize;
    return ncclSuccess;
  }
  static ncclResult_t makeVDevice(int* d, ncclNetVDeviceProps_v12_t* props) {
    if (props->ndevs < 0 || props->ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V11) {
      TUTTI_FAIL(ncclInvalidArgument, "net plugin {} (v11): virtual NIC of {} devices (max {})", p()->name,
                 props->ndevs, NCCL_NET_MAX_DEVS_PER_NIC_V11);
    }
    ncclNetVDeviceProps_v11_t v{};
    v.ndevs = props->ndevs;
    for (int i = 0; i < v.ndevs; ++i) v.devs[i] = props->devs[i];
    return p()->makeVDevice(d, &v);
  }
  static ncclResult_t setNetAttr(void* ctx, ncclNetAttr_v12_t* attr) {
    static_assert(sizeof(ncclNetAttr_v11_t) == sizeof(ncclNetAttr_v12_t));
    ncclNetAttr_v11_t a{};
    a.sendCommAttr = {attr->sendCommAttr.maxConcurrentPeers, attr->sendCommAttr.minConcurrentPeers,
                      attr->sendCommAttr.maxFlowsPerPeer, attr->sendCommAttr.minFlowsPerPeer};
    a.recvCommAttr = {attr->recvCommAttr.maxConcurrentPeers, attr->recvCommAttr.minConcurrentPeers,
                      attr->recvCommAttr.maxFlowsPerPeer, attr->recvCommAttr.minFlowsPerPeer};
    a.op = attr->op;
    a.algo = attr->algo;
    a.proto = attr->proto;
    return p()->setNetAttr(ctx, &a);
  }
  static ncclNet_v12_t make() {
    ncclNet_v12_t n{};
    n.init = init;
    n.getProperties = getProperties;
    n.makeVDevice = makeVDevice;
    n.setNetAttr = setNetAttr;
    return n;
  }
};

}  // namespace

ncclResult_t adaptV11(const ncclNet_v11_t* in, ncclNet_v12_t* out, int* slot) {
  int s = Slots::acquire(in);
  if (s < 0) TUTTI_FAIL(ncclInternalError, "too many v11 net plugins loaded (max {})", kAdapterSlots);
  ncclNet_v12_t n = tableForSlot<ncclNet_v12_t, V11>(s);
  // Calls whose signature did not change go straight to the plugin.
  n.name = in->name;
  n.devices = in->devices;
  n.listen = in->listen;
  n.connect = in->connect;
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
  n.finalize = in->finalize;
  if (in->makeVDevice == nullptr) n.makeVDevice = nullptr;
  if (in->setNetAttr == nullptr) n.setNetAttr = nullptr;
  *out = n;
  *slot = s;
  return ncclSuccess;
}

void releaseV11Slot(int slot) { Slots::release(slot); }

}  // namespace tutti::net
