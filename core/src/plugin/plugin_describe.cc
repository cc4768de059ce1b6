// describePlugin: what tutti-info shows for a plugin spec, without keeping the library loaded.
#include "plugin/net_plugin.h"
#include "plugin/plugin_library.h"
#include "plugin/profiler_plugin.h"
#include "plugin/tuner_plugin.h"
#include "util/check.h"

namespace tutti {

PluginDescription describePlugin(PluginKind kind, const std::string& spec) {
  PluginDescription d;
  d.kind = kind;
  if (pluginSpecDisabled(spec)) {
    d.disabled = true;
    return d;
  }
  const std::vector<PluginSymbol>* symbols = nullptr;
  switch (kind) {
    case PluginKind::Net: symbols = &netPluginSymbols(); break;
    case PluginKind::Tuner: symbols = &tunerPluginSymbols(); break;
    case PluginKind::Profiler: symbols = &profilerPluginSymbols(); break;
    case PluginKind::Transport:
      d.error = "transport plugins are described by the transport loader";
      return d;
  }
  std::unique_ptr<PluginLibrary> lib;
  void* sym = nullptr;
  ncclResult_t res = openPluginSymbol(kind, spec, *symbols, &lib, &sym, &d.abiVersion);
  if (lib) d.path = lib->path();
  if (res != ncclSuccess) {
    d.error = lastErrorText();
    d.abiVersion = 0;
    return d;
  }
  // Every version of every kind starts with `const char* name`.
  const char* name = *static_cast<const char* const*>(sym);
  d.name = name != nullptr ? name : "";
  return d;
}

}  // namespace tutti
