// Tuner plugins (NCCL tuner ABI v2..v6) seen by the core through the native v6 function table.
#pragma once

#include <tutti/tuner.h>

#include "plugin/plugin_library.h"

#include <memory>
#include <string>
#include <vector>

namespace tutti {

inline constexpr int kTunerAbiOldest = 2;
inline constexpr int kTunerAbiNative = 6;

// A loaded tuner. `tuner` is the v6 table; for an older plugin init/getCollInfo/finalize are adapters
// whose context wraps the plugin's own (v2's algorithm/protocol answer becomes a zero cost in the table,
// as NCCL does), and getChunkSize is NULL. Each init() returns an independent context, so one loaded
// tuner serves many communicators and several tuners can form a chain. Destroying the object unloads
// the library: finalize every context first.
class TunerPlugin {
 public:
  ncclTuner_v6_t tuner{};
  int abiVersion = 0;
  std::string path;
  bool stateless = false;  // exports tuttiTunerStateless = 1 (tutti/tuner.h)

  TunerPlugin() = default;
  ~TunerPlugin();
  TunerPlugin(const TunerPlugin&) = delete;
  TunerPlugin& operator=(const TunerPlugin&) = delete;

  int adapterSlot = -1;
  std::unique_ptr<PluginLibrary> library;
};

// Same contract as netPluginLoad: empty / "none" loads nothing and succeeds with *out reset.
ncclResult_t tunerPluginLoad(const std::string& spec, std::unique_ptr<TunerPlugin>* out);

// The symbols probed, newest first.
const std::vector<PluginSymbol>& tunerPluginSymbols();

}  // namespace tutti
