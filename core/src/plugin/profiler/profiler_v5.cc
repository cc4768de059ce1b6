// Profiler ABI v5 -> v6: v6 adds copy-engine events only. Those are never passed on (and masked off at
// init); every other descriptor is copied member by member into the v5 layout.
#include "plugin/adapter_slots.h"
#include "plugin/profiler/profiler_adapters.h"

#include <new>

namespace tutti::profiler {
namespace {

using Ctx = WrappedContext<ncclProfiler_v5_t>;
using Slots = AdapterSlots<ncclProfiler_v5_t>;

template <int S>
struct InitV5 {
  static ncclResult_t init(void** ctx, uint64_t commId, int* mask, const char* commName, int nNodes, int nRanks,
                           int rank, ncclDebugLogger_t log) {
    const ncclProfiler_v5_t* t = Slots::table(S);
    auto* w = new (std::nothrow) Ctx{t, nullptr};
    if (w == nullptr) return ncclSystemError;
    ncclResult_t res = t->init(&w->inner, commId, mask, commName, nNodes, nRanks, rank, log);
    if (res != ncclSuccess) {
      delete w;
      return res;
    }
    if (mask != nullptr) *mask &= kV5Events;
    *ctx = w;
    return ncclSuccess;
  }
  static ncclProfiler_v6_t make() {
    ncclProfiler_v6_t p{};
    p.init = init;
    return p;
  }
};

ncclResult_t startEvent(void* ctx, void** eHandle, ncclProfilerEventDescr_v6_t* d) {
  auto* w = static_cast<Ctx*>(ctx);
  *eHandle = nullptr;
  ncclProfilerEventDescr_v5_t o{};
  o.type = d->type;
  o.parentObj = d->parentObj;
  o.rank = d->rank;
  switch (d->type) {
    case ncclProfileGroup: case ncclProfileProxyCtrl: break;
    case ncclProfileGroupApi: o.groupApi.graphCaptured = d->groupApi.graphCaptured; o.groupApi.groupDepth = d->groupApi.groupDepth; break;
    case ncclProfileCollApi:
      o.collApi.func = d->collApi.func; o.collApi.count = d->collApi.count; o.collApi.datatype = d->collApi.datatype;
      o.collApi.root = d->collApi.root; o.collApi.stream = d->collApi.stream;
      o.collApi.graphCaptured = d->collApi.graphCaptured;
      break;
    case ncclProfileP2pApi:
      o.p2pApi.func = d->p2pApi.func; o.p2pApi.count = d->p2pApi.count; o.p2pApi.datatype = d->p2pApi.datatype;
      o.p2pApi.stream = d->p2pApi.stream; o.p2pApi.graphCaptured = d->p2pApi.graphCaptured;
      break;
    case ncclProfileKernelLaunch: o.kernelLaunch.stream = d->kernelLaunch.stream; break;
    case ncclProfileColl:
      o.coll.seqNumber = d->coll.seqNumber; o.coll.func = d->coll.func; o.coll.sendBuff = d->coll.sendBuff;
      o.coll.recvBuff = d->coll.recvBuff; o.coll.count = d->coll.count; o.coll.root = d->coll.root;
      o.coll.datatype = d->coll.datatype; o.coll.nChannels = d->coll.nChannels; o.coll.nWarps = d->coll.nWarps;
      o.coll.algo = d->coll.algo; o.coll.proto = d->coll.proto; o.coll.parentGroup = d->coll.parentGroup;
      break;
    case ncclProfileP2p:
      o.p2p.func = d->p2p.func; o.p2p.buff = d->p2p.buff; o.p2p.datatype = d->p2p.datatype; o.p2p.count = d->p2p.count;
      o.p2p.peer = d->p2p.peer; o.p2p.nChannels = d->p2p.nChannels; o.p2p.parentGroup = d->p2p.parentGroup;
      break;
    case ncclProfileProxyOp:
      o.proxyOp.pid = d->proxyOp.pid; o.proxyOp.channelId = d->proxyOp.channelId; o.proxyOp.peer = d->proxyOp.peer;
      o.proxyOp.nSteps = d->proxyOp.nSteps; o.proxyOp.chunkSize = d->proxyOp.chunkSize; o.proxyOp.isSend = d->proxyOp.isSend;
      break;
    case ncclProfileProxyStep: o.proxyStep.step = d->proxyStep.step; break;
    case ncclProfileKernelCh: o.kernelCh.channelId = d->kernelCh.channelId; o.kernelCh.pTimer = d->kernelCh.pTimer; break;
    case ncclProfileNetPlugin: o.netPlugin.id = d->netPlugin.id; o.netPlugin.data = d->netPlugin.data; break;
    default: return ncclSuccess;  // CE events: unknown to v5
  }
  return w->table->startEvent(w->inner, eHandle, &o);
}

ncclResult_t finalize(void* ctx) {
  auto* w = static_cast<Ctx*>(ctx);
  ncclResult_t res = w->table->finalize(w->inner);
  delete w;
  return res;
}

}  // namespace

int adaptV5(const ncclProfiler_v5_t* in, ncclProfiler_v6_t* out) {
  int slot = Slots::acquire(in);
  if (slot < 0) return -1;
  *out = tableForSlot<ncclProfiler_v6_t, InitV5>(slot);
  out->name = in->name;
  out->startEvent = startEvent;
  out->stopEvent = in->stopEvent;                // event handles are the plugin's own
  out->recordEventState = in->recordEventState;  // v5 and v6 state arguments are the same type
  out->finalize = finalize;
  return slot;
}

void releaseV5Slot(int slot) { Slots::release(slot); }

}  // namespace tutti::profiler
