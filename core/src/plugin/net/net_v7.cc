// Net ABI v7 -> v12: as v8 (process-wide init, int sizes in isend/irecv), plus an int size in regMr and no
// regIsGlobal property.
#include "plugin/adapter_slots.h"
#include "plugin/net/net_adapters.h"

namespace tutti::net {
namespace {

using Slots = AdapterSlots<ncclNet_v7_t>;

template <int S>
struct V7 {
  static const ncclNet_v7_t* p() { return Slots::table(S); }
  static ncclResult_t init(void** ctx, uint64_t, ncclNetCommConfig_v12_t*, ncclDebugLogger_t log, ncclProfilerCallback_t) {
    *ctx = nullptr;
    return Slots::initOnce(S, [&] { return p()->init(log); });
  }
  static ncclResult_t finalize(void*) { return ncclSuccess; }
  static ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* props) {
    ncclNetProperties_v7_t in{};
    TUTTI_CHECK(p()->getProperties(dev, &in));
    copyCommonProps(in, dev, props);
    props->netDeviceType = in.netDeviceType;
    props->netDeviceVersion = in.netDeviceVersion;
    return ncclSuccess;
  }
  static ncclResult_t listen(void*, int dev, void* handle, void** listenComm) {
    return p()->listen(dev, handle, listenComm);
  }
  static ncclResult_t connect(void*, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** devComm) {
    return p()->connect(dev, handle, sendComm, devComm);
  }
  static ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mh, void*, void** request) {
    int s;
    TUTTI_CHECK(narrowSize(size, &s));
    return p()->isend(comm, data, s, tag, mh, request);
  }
  static ncclResult_t irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs, void**, void** request) {
    int s[NCCL_NET_MAX_REQUESTS];
    TUTTI_CHECK(narrowSizes(n, sizes, s));
    return p()->irecv(comm, n, data, s, tags, mhs, request);
  }
  static ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
    int s;
    TUTTI_CHECK(narrowSize(size, &s));
    return p()->regMr(comm, data, s, type, mhandle);
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
    n.regMr = regMr;
    return n;
  }
};

}  // namespace

ncclResult_t adaptV7(const ncclNet_v7_t* in, ncclNet_v12_t* out, int* slot) {
  int s = Slots::acquire(in);
  if (s < 0) TUTTI_FAIL(ncclInternalError, "too many v7 net plugins loaded (max {})", kAdapterSlots);
  ncclNet_v12_t n = tableForSlot<ncclNet_v12_t, V7>(s);
  n.name = in->name;
  n.devices = in->devices;
  n.accept = in->accept;
  n.regMrDmaBuf = in->regMrDmaBuf;
  n.deregMr = in->deregMr;
  n.iflush = in->iflush;
  n.test = in->test;
  n.closeSend = in->closeSend;
  n.closeRecv = in->closeRecv;
  n.closeListen = in->closeListen;
  n.getDeviceMr = in->getDeviceMr;
  n.irecvConsumed = in->irecvConsumed;
  n.makeVDevice = nullptr;
  n.setNetAttr = nullptr;
  *out = n;
  *slot = s;
  return ncclSuccess;
}

void releaseV7Slot(int slot) { Slots::release(slot); }

}  // namespace tutti::net
