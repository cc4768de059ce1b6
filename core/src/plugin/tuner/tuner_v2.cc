// Tuner ABI v2 -> v6: the v2 tuner names an algorithm and protocol instead of editing the cost table; the
// adapter makes that pair the cheapest (cost 0) if the core allows it, as NCCL does. destroy -> finalize.
#include "plugin/adapter_slots.h"
#include "plugin/tuner/tuner_adapters.h"

#include <new>

namespace tutti::tuner {
namespace {

using Ctx = WrappedContext<ncclTuner_v2_t>;

using Slots = AdapterSlots<ncclTuner_v2_t>;

// Only init lacks a context, so only init is instantiated per slot; it wraps the plugin's context.
template <int S>
struct InitV2 {
  static ncclResult_t init(void** ctx, uint64_t, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                           ncclNvlDomainInfo_v6_t*, ncclTunerConstants_v6_t*) {
    const ncclTuner_v2_t* t = Slots::table(S);
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
                         int numAlgo, int numProto, int /*regBuff*/, int* nChannels) {
  auto* w = static_cast<Ctx*>(ctx);
  // The table is one contiguous [numAlgo][numProto] block behind the float**.
  float* table = reinterpret_cast<float*>(costTable);
  auto cost = [&](int a, int p) -> float {
    return (a < numAlgo && p < numProto) ? table[a * numProto + p] : static_cast<float>(NCCL_ALGO_PROTO_IGNORE);
  };
  int nvlsSupport = (cost(NCCL_ALGO_NVLS, NCCL_PROTO_SIMPLE) != NCCL_ALGO_PROTO_IGNORE ||
                     cost(NCCL_ALGO_NVLS_TREE, NCCL_PROTO_SIMPLE) != NCCL_ALGO_PROTO_IGNORE) ? 1 : 0;
  int collNetSupport = cost(NCCL_ALGO_COLLNET_CHAIN, NCCL_PROTO_SIMPLE) != NCCL_ALGO_PROTO_IGNORE ? 1 : 0;
  int algo = NCCL_ALGO_UNDEF, proto = NCCL_PROTO_UNDEF;
  ncclResult_t res = w->table->getCollInfo(w->inner, collType, nBytes, collNetSupport, nvlsSupport, numPipeOps,
                                           &algo, &proto, nChannels);
  if (res != ncclSuccess) return res;
  if (algo >= 0 && algo < numAlgo && proto >= 0 && proto < numProto &&
      table[algo * numProto + proto] != NCCL_ALGO_PROTO_IGNORE) {
    table[algo * numProto + proto] = 0.0f;
  }
  return ncclSuccess;
}

ncclResult_t finalize(void* ctx) {
  auto* w = static_cast<Ctx*>(ctx);
  ncclResult_t res = w->table->destroy(w->inner);
  delete w;
  return res;
}

}  // namespace

int adaptV2(const ncclTuner_v2_t* in, ncclTuner_v6_t* out) {
  int slot = Slots::acquire(in);
  if (slot < 0) return -1;
  *out = tableForSlot<ncclTuner_v6_t, InitV2>(slot);
  out->name = in->name;
  out->getCollInfo = getCollInfo;
  out->finalize = finalize;
  out->getChunkSize = nullptr;
  return slot;
}

void releaseV2Slot(int slot) { Slots::release(slot); }

}  // namespace tutti::tuner
