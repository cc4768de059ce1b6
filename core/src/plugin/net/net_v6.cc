// Net ABI v6 -> v12: as v7 (process-wide init, int sizes), without device offload: connect/accept take no
// device handle, no getDeviceMr / irecvConsumed, no offload properties.
#include "plugin/adapter_slots.h"
#include "plugin/net/net_adapters.h"

namespace tutti::net {
namespace {

using Slots = AdapterSlots<ncclNet_v6_t>;

template <int S>
struct V6 {
  static const ncclNet_v6_t* p() { return Slots::table(S); }
  static ncclResult_t init(void** ctx, uint64_t, ncclNetCommConfig_v12_t*, ncclDebugLogger_t log, ncclProfilerCallback_t) {
    *ctx = nullptr;
    return Slots::initOnce(S, [&] { return p()->init(log); });
  }
  static ncclResult_t finalize(void*) { return ncclSuccess; }
  static ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* props) {
    ncclNetProperties_v6_t in{};
    TUTTI_CHECK(p()->getProperties(dev, &in));
    copyCommonProps(in, dev, props);
    return ncclSuccess;
  }
  static ncclResult_t listen(void*, int dev, void* handle, void** listenComm) {
    return p()->listen(dev, handle, listenComm);
  }
  static ncclResult_t connect(void*, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** devComm) {
    (void)devComm;  // no offload before v7: leave the core's request unanswered
    return p()->connect(dev, handle, sendComm);
  }
  static ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t**) {
    return p()->accept(listenComm, recvComm);
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
    n.accept = accept;
    return n;
  }
};

}  // namespace

ncclResult_t adaptV6(const ncclNet_v6_t* in, ncclNet_v12_t* out, int* slot) {
  int s = Slots::acquire(in);
  if (s < 0) TUTTI_FAIL(ncclInternalError, "too many v6 net plugins loaded (max {})", kAdapterSlots);
  ncclNet_v12_t n = tableForSlot<ncclNet_v12_t, V6>(s);
  n.name = in->name;
  n.devices = in->devices;
  n.regMrDmaBuf = in->regMrDmaBuf;
  n.deregMr = in->deregMr;
  n.iflush = in->iflush;
  n.test = in->test;
  n.closeSend = in->closeSend;
  n.closeRecv = in->closeRecv;
  n.closeListen = in->closeListen;
  n.getDeviceMr = nullptr;
  n.irecvConsumed = nullptr;
  n.makeVDevice = nullptr;
  n.setNetAttr = nullptr;
  *out = n;
  *slot = s;
  return ncclSuccess;
}

void releaseV6Slot(int slot) { Slots::release(slot); }

}  // namespace tutti::net
