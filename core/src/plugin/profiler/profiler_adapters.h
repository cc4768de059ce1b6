// One adapter per old profiler ABI version (profiler_v4.cc, profiler_v5.cc), filling the native v6 table.
// init takes an adapter slot (it has no context); it wraps the plugin's context so startEvent finds the
// plugin. Adapters return the slot (-1: none free) and give it back with releaseVNSlot().
#pragma once

#include <tutti/profiler.h>
#include <tutti/profiler_v4.h>

namespace tutti::profiler {

int adaptV5(const ncclProfiler_v5_t* in, ncclProfiler_v6_t* out);
int adaptV4(const ncclProfiler_v4_t* in, ncclProfiler_v6_t* out);
void releaseV5Slot(int slot);
void releaseV4Slot(int slot);

template <typename Old>
struct WrappedContext {
  const Old* table;
  void* inner;
};

// Event types each old version can receive; init masks the rest off.
inline constexpr int kV4Events = ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                                 ncclProfileProxyStep | ncclProfileProxyCtrl | ncclProfileKernelCh |
                                 ncclProfileNetPlugin;
inline constexpr int kV5Events = kV4Events | ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
                                 ncclProfileKernelLaunch;

}  // namespace tutti::profiler
