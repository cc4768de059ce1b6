// tutti-info's plugin section, through the plugin host API (plugin_library.h, net_plugin.h).
#include "plugin/net_plugin.h"
#include "plugin/plugin_library.h"
#include "plugin/transport_plugin.h"
#include "tools/tutti_info.h"
#include "util/check.h"
#include "util/log.h"

#include <fmt/format.h>

namespace tutti {
namespace {

// Initialises a net plugin once to count its devices; a plugin that finds no hardware reports 0.
std::string netDevices(const PluginSpec& s) {
  std::unique_ptr<NetPlugin> net;
  if (netPluginLoad(s.label(), &net) != ncclSuccess || !net) return fmt::format("load failed: {}", lastErrorText());
  void* ctx = nullptr;
  if (!net->net.init || net->net.init(&ctx, 0, nullptr, tuttiPluginLogger, nullptr) != ncclSuccess)
    return "no device (init failed)";
  int ndev = 0;
  std::string out;
  if (!net->net.devices || net->net.devices(&ndev) != ncclSuccess) out = "no device (devices() failed)";
  else out = ndev == 0 ? "no device" : fmt::format("{} device{}", ndev, ndev == 1 ? "" : "s");
  if (net->net.finalize) net->net.finalize(ctx);
  return out;
}

// Intra-node transports have Tutti's own ABI; their loader checks size/version and calls init.
PluginDescription describeTransport(const PluginSpec& s) {
  PluginDescription d;
  d.kind = PluginKind::Transport;
  std::unique_ptr<TransportPlugin> t;
  if (TransportPlugin::load(s.label(), &t) != ncclSuccess || !t) {
    d.error = lastErrorText();
    return d;
  }
  d.name = t->name();
  d.path = t->path();
  d.abiVersion = static_cast<int>(t->api().version);
  return d;
}

}  // namespace

bool printPlugins(const Config& cfg) {
  bool ok = true;
  fmt::print("Plugins (in config order):\n");
  for (PluginKind kind : {PluginKind::Transport, PluginKind::Net, PluginKind::Tuner, PluginKind::Profiler}) {
    for (const PluginSpec& s : cfg.plugins(kind)) {
      configApplyPluginOptions(s);  // as the core does right before loading it
      clearLastError();
      PluginDescription d = kind == PluginKind::Transport ? describeTransport(s) : describePlugin(kind, s.label());
      std::string status;
      if (!d.error.empty()) {
        status = "ERROR: " + d.error;
        if (s.required) ok = false;
      } else {
        status = fmt::format("ABI v{}", d.abiVersion);
        if (!d.name.empty()) status += fmt::format(", name \"{}\"", d.name);
        if (kind == PluginKind::Net) status += ", " + netDevices(s);
      }
      fmt::print("  {:<9} {:<12} {}\n", pluginKindName(kind), s.label(), d.path.empty() ? "(not found)" : d.path);
      fmt::print("  {:<9} {:<12} {}{}\n", "", "", status, s.required && !d.error.empty() ? "  [required]" : "");
    }
  }
  if (!ok) fmt::print("A required plugin could not be loaded.\n");
  return ok;
}

}  // namespace tutti
