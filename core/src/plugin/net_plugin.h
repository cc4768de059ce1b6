// Net plugins (NCCL net ABI v6..v12) seen by the core through the native v12 function table.
#pragma once

#include <tutti/net.h>

#include "plugin/plugin_library.h"

#include <memory>
#include <string>
#include <vector>

namespace tutti {

// Oldest and newest net ABI versions loaded (symbols ncclNetPlugin_v6 .. ncclNetPlugin_v12).
inline constexpr int kNetAbiOldest = 6;
inline constexpr int kNetAbiNative = 12;

// A loaded net plugin. `net` is always the v12 table: for an older plugin every entry is an adapter
// that converts arguments and results (entries the old ABI lacks are NULL, e.g. setNetAttr before v11,
// makeVDevice before v9, getDeviceMr/irecvConsumed in v6). The core calls net.init() itself, passing
// tuttiPluginLogger; init is not called by the loader. Destroying the object unloads the library, so
// finalize every context first. Not copyable.
class NetPlugin {
 public:
  ncclNet_v12_t net{};
  int abiVersion = 0;  // version of the symbol found
  std::string path;    // file loaded

  NetPlugin() = default;
  ~NetPlugin();
  NetPlugin(const NetPlugin&) = delete;
  NetPlugin& operator=(const NetPlugin&) = delete;

  // Internal: adapter bookkeeping released on destruction (see net/net_adapters.h).
  int adapterSlot = -1;
  std::unique_ptr<PluginLibrary> library;
};

// Loads the net plugin named by `spec` (a path or a name, see resolvePlugin). An empty or "none" spec
// loads nothing: *out is reset and ncclSuccess returned. Errors (not found, no known symbol, not a
// library) log one message naming the file and the symbols probed; *out is only set on success.
ncclResult_t netPluginLoad(const std::string& spec, std::unique_ptr<NetPlugin>* out);

// The symbols probed, newest first (also used by describePlugin).
const std::vector<PluginSymbol>& netPluginSymbols();

}  // namespace tutti
