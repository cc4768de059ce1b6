// Tuner ABI v3 -> v6: v3 lacks init's communicator id, NVLink info and constants, and getCollInfo's regBuff;
// destroy becomes finalize. The cost table is passed through unchanged (same layout).
#include "plugin/adapter_slots.h"
#include "plugin/tuner/tuner_adapters.h"

#include <new>

namespace tutti::tuner {
namespace {

using Ctx = WrappedContext<ncclTuner_v3_t>;

using Slots = AdapterSlots<ncclTuner_v3_t>;

// Only init lacks a context, so only init is instantiated per slot; it wraps the plugin's context.
template <int S>
struct InitV3 {
  static ncclResult_t init(void** ctx, uint64_t, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                           ncclNvlDomainInfo_v6_t*, ncclTunerConstants_v6_t*) {
    const ncclTuner_v3_t* t = Slots::table(S);
    auto* w = new (std::nothrow) Ctx{t, nullptr};
    if (w == nullptr) return ncclSystemError;
    ncclResult_t res = t->init(nRanks, nNodes, log, &w->inner);
    if (res != ncclSuccess) {
      delete w;
      return res;
    }
    *ctx = w;
    return ncclSuccess;
  }
  static ncclTuner_v6_t make() {
    ncclTuner_v6_t t{};
    t.init = init;
    return t;
  }
};

ncclResult_t getCollInfo(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** costTable,
                         int numAlgo, int numProto, int /*regBuff: v3 has no such hint*/, int* nChannels) {
  auto* w = static_cast<Ctx*>(ctx);
  return w->table->getCollInfo(w->inner, collType, nBytes, numPipeOps, costTable, numAlgo, numProto, nChannels);
}

ncclResult_t finalize(void* ctx) {
  auto* w = static_cast<Ctx*>(ctx);
  ncclResult_t res = w->table->destroy(w->inner);
  delete w;
  return res;
}

}  // namespace

int adaptV3(const ncclTuner_v3_t* in, ncclTuner_v6_t* out) {
  int slot = Slots::acquire(in);
  if (slot < 0) return -1;
  *out = tableForSlot<ncclTuner_v6_t, InitV3>(slot);
  out->name = in->name;
  out->getCollInfo = getCollInfo;
  out->finalize = finalize;
  out->getChunkSize = nullptr;
  return slot;
}

void releaseV3Slot(int slot) { Slots::release(slot); }

}  // namespace tutti::tuner
