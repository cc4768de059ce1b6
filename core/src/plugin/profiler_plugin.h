// Profiler plugins (NCCL profiler ABI v4..v6) seen by the core through the native v6 function table.
#pragma once

#include <tutti/profiler.h>

#include "plugin/plugin_library.h"

#include <memory>
#include <string>
#include <vector>

namespace tutti {

inline constexpr int kProfilerAbiOldest = 4;
inline constexpr int kProfilerAbiNative = 6;

// A loaded profiler. `profiler` is the v6 table; for an older plugin startEvent translates the event
// descriptor (events the old ABI does not know are skipped: *eHandle = NULL) and init masks off the
// activation bits it cannot receive. Destroying the object unloads the library: finalize first.
class ProfilerPlugin {
 public:
  ncclProfiler_v6_t profiler{};
  int abiVersion = 0;
  std::string path;

  ProfilerPlugin() = default;
  ~ProfilerPlugin();
  ProfilerPlugin(const ProfilerPlugin&) = delete;
  ProfilerPlugin& operator=(const ProfilerPlugin&) = delete;

  int adapterSlot = -1;
  std::unique_ptr<PluginLibrary> library;
};

// Same contract as netPluginLoad: empty / "none" loads nothing and succeeds with *out reset.
ncclResult_t profilerPluginLoad(const std::string& spec, std::unique_ptr<ProfilerPlugin>* out);

// The symbols probed, newest first.
const std::vector<PluginSymbol>& profilerPluginSymbols();

}  // namespace tutti
