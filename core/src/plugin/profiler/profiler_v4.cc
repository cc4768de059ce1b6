// Profiler ABI v4 -> v6: no API-level or CE events (skipped and masked off), an 8-bit type, the
// communicator hash in a different init position, coll/p2p parented to their group, and only the states
// v4 defines are recorded.
#include "plugin/adapter_slots.h"
#include "plugin/profiler/profiler_adapters.h"

#include <new>

namespace tutti::profiler {
namespace {

using Ctx = WrappedContext<ncclProfiler_v4_t>;
using Slots = AdapterSlots<ncclProfiler_v4_t>;

template <int S>
struct PerSlotV4 {
  static ncclResult_t init(void** ctx, uint64_t commId, int* mask, const char* commName, int nNodes, int nRanks,
                           int rank, ncclDebugLogger_t log) {
    const ncclProfiler_v4_t* t = Slots::table(S);
    auto* w = new (std::nothrow) Ctx{t, nullptr};
    if (w == nullptr) return ncclSystemError;
    ncclResult_t res = t->init(&w->inner, mask, commName, commId, nNodes, nRanks, rank, log);
    if (res != ncclSuccess) {
      delete w;
      return res;
    }
    if (mask != nullptr) *mask &= kV4Events;
    *ctx = w;
    return ncclSuccess;
  }
  // State arguments share one layout across v4..v6; only the set of states differs.
  static ncclResult_t recordEventState(void* eHandle, ncclProfilerEventState_v6_t s, ncclProfilerEventStateArgs_v6_t* a) {
    bool known = s == ncclProfilerProxyOpInProgress_v4 || s == ncclProfilerProxyStepSendPeerWait_v4 ||
                 (s >= ncclProfilerProxyStepSendGPUWait && s <= ncclProfilerProxyCtrlAppendEnd) ||
                 s == ncclProfilerNetPluginUpdate || s == ncclProfilerKernelChStop;
    if (!known) return ncclSuccess;
    ncclProfilerEventStateArgs_v4_t o{};
    if (a != nullptr) {
      if (s == ncclProfilerNetPluginUpdate) o.netPlugin.data = a->netPlugin.data;
      else if (s == ncclProfilerKernelChStop) o.kernelCh.pTimer = a->kernelCh.pTimer;
      else if (s >= ncclProfilerProxyCtrlIdle && s <= ncclProfilerProxyCtrlAppendEnd) o.proxyCtrl.appendedProxyOps = a->proxyCtrl.appendedProxyOps;
      else o.proxyStep.transSize = a->proxyStep.transSize;
    }
    return Slots::table(S)->recordEventState(eHandle, s, a != nullptr ? &o : nullptr);
  }
  static ncclProfiler_v6_t make() {
    ncclProfiler_v6_t p{};
    p.init = init;
    p.recordEventState = recordEventState;
    return p;
  }
};

ncclResult_t startEvent(void* ctx, void** eHandle, ncclProfilerEventDescr_v6_t* d) {
  auto* w = static_cast<Ctx*>(ctx);
  *eHandle = nullptr;
  ncclProfilerEventDescr_v4_t o{};
  o.type = static_cast<uint8_t>(d->type);
  o.parentObj = d->parentObj;
  o.rank = d->rank;
  switch (d->type) {
    case ncclProfileGroup: case ncclProfileProxyCtrl: break;
    case ncclProfileColl:
      o.coll.seqNumber = d->coll.seqNumber; o.coll.func = d->coll.func; o.coll.sendBuff = d->coll.sendBuff;
      o.coll.recvBuff = d->coll.recvBuff; o.coll.count = d->coll.count; o.coll.root = d->coll.root;
      o.coll.datatype = d->coll.datatype; o.coll.nChannels = d->coll.nChannels; o.coll.nWarps = d->coll.nWarps;
      o.coll.algo = d->coll.algo; o.coll.proto = d->coll.proto;
      o.parentObj = d->coll.parentGroup;  // v4 has no API events: the group is the parent
      break;
    case ncclProfileP2p:
      o.p2p.func = d->p2p.func; o.p2p.buff = d->p2p.buff; o.p2p.datatype = d->p2p.datatype; o.p2p.count = d->p2p.count;
      o.p2p.peer = d->p2p.peer; o.p2p.nChannels = d->p2p.nChannels;
      o.parentObj = d->p2p.parentGroup;
      break;
    case ncclProfileProxyOp:
      o.proxyOp.pid = d->proxyOp.pid; o.proxyOp.channelId = d->proxyOp.channelId; o.proxyOp.peer = d->proxyOp.peer;
      o.proxyOp.nSteps = d->proxyOp.nSteps; o.proxyOp.chunkSize = d->proxyOp.chunkSize; o.proxyOp.isSend = d->proxyOp.isSend;
      break;
    case ncclProfileProxyStep: o.proxyStep.step = d->proxyStep.step; break;
    case ncclProfileKernelCh: o.kernelCh.channelId = d->kernelCh.channelId; o.kernelCh.pTimer = d->kernelCh.pTimer; break;
    case ncclProfileNetPlugin: o.netPlugin.id = d->netPlugin.id; o.netPlugin.data = d->netPlugin.data; break;
    default: return ncclSuccess;  // API-level and CE events: unknown to v4
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

int adaptV4(const ncclProfiler_v4_t* in, ncclProfiler_v6_t* out) {
  int slot = Slots::acquire(in);
  if (slot < 0) return -1;
  *out = tableForSlot<ncclProfiler_v6_t, PerSlotV4>(slot);
  out->name = in->name;
  out->startEvent = startEvent;
  out->stopEvent = in->stopEvent;
  out->finalize = finalize;
  return slot;
}

void releaseV4Slot(int slot) { Slots::release(slot); }

}  // namespace tutti::profiler
