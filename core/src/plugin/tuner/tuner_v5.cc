// Tuner ABI v5 -> v6: same calls; v5 has no getChunkSize, so the core keeps its own chunk size.
#include "plugin/tuner/tuner_adapters.h"

namespace tutti::tuner {

void adaptV5(const ncclTuner_v5_t* in, ncclTuner_v6_t* out) {
  *out = ncclTuner_v6_t{};
  out->name = in->name;
  out->init = in->init;  // ncclTunerConstants_v6_t / ncclNvlDomainInfo_v6_t are the v5 types
  out->getCollInfo = in->getCollInfo;
  out->finalize = in->finalize;
  out->getChunkSize = nullptr;
}

}  // namespace tutti::tuner
