// One adapter per old tuner ABI version (tuner_v2.cc .. tuner_v5.cc), filling the native v6 table.
// Every call but init carries a context: adapters wrap the plugin's context, and only init is taken from
// an adapter slot (adapter_slots.h). Adapters needing a slot return it (-1: none free) and give it back
// with releaseVNSlot().
#pragma once

#include <tutti/tuner.h>

namespace tutti::tuner {

void adaptV5(const ncclTuner_v5_t* in, ncclTuner_v6_t* out);
int adaptV4(const ncclTuner_v4_t* in, ncclTuner_v6_t* out);
int adaptV3(const ncclTuner_v3_t* in, ncclTuner_v6_t* out);
int adaptV2(const ncclTuner_v2_t* in, ncclTuner_v6_t* out);
void releaseV4Slot(int slot);
void releaseV3Slot(int slot);
void releaseV2Slot(int slot);

// Context the adapters hand to the core: the old table and the plugin's own context.
template <typename Old>
struct WrappedContext {
  const Old* table;
  void* inner;
};

}  // namespace tutti::tuner
