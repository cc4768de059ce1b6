// Net plugin loading: probe ncclNetPlugin_v12 .. _v6, check the mandatory callbacks, adapt to v12.
#include "plugin/net_plugin.h"

#include "plugin/net/net_adapters.h"
#include "util/check.h"

namespace tutti {

namespace {

const std::vector<PluginSymbol> kNetSymbols = {
    {"ncclNetPlugin_v12", 12}, {"ncclNetPlugin_v11", 11}, {"ncclNetPlugin_v10", 10}, {"ncclNetPlugin_v9", 9},
    {"ncclNetPlugin_v8", 8},   {"ncclNetPlugin_v7", 7},   {"ncclNetPlugin_v6", 6}};

// Callbacks no version may leave NULL (the others are optional, see net_v12.h).
template <typename T>
ncclResult_t checkMandatory(const T* t, const std::string& path, int version) {
  std::string missing;
  auto need = [&missing](const void* fn, const char* name) {
    if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  need(reinterpret_cast<const void*>(t->init), "init");
  need(reinterpret_cast<const void*>(t->devices), "devices");
  need(reinterpret_cast<const void*>(t->getProperties), "getProperties");
  need(reinterpret_cast<const void*>(t->listen), "listen");
  need(reinterpret_cast<const void*>(t->connect), "connect");
  need(reinterpret_cast<const void*>(t->accept), "accept");
  need(reinterpret_cast<const void*>(t->regMr), "regMr");
  need(reinterpret_cast<const void*>(t->deregMr), "deregMr");
  need(reinterpret_cast<const void*>(t->isend), "isend");
  need(reinterpret_cast<const void*>(t->irecv), "irecv");
  need(reinterpret_cast<const void*>(t->test), "test");
  need(reinterpret_cast<const void*>(t->closeSend), "closeSend");
  need(reinterpret_cast<const void*>(t->closeRecv), "closeRecv");
  need(reinterpret_cast<const void*>(t->closeListen), "closeListen");
  if (t->name == nullptr) missing += (missing.empty() ? "" : ", ") + std::string("name");
  if (!missing.empty()) {
    TUTTI_FAIL(ncclInvalidUsage, "net plugin {} (ncclNetPlugin_v{}) leaves mandatory entries NULL: {}", path, version,
               missing);
  }
  return ncclSuccess;
}

}  // namespace

const std::vector<PluginSymbol>& netPluginSymbols() { return kNetSymbols; }

NetPlugin::~NetPlugin() {
  if (adapterSlot < 0) return;
  switch (abiVersion) {
    case 11: net::releaseV11Slot(adapterSlot); break;
    case 10: net::releaseV10Slot(adapterSlot); break;
    case 9: net::releaseV9Slot(adapterSlot); break;
    case 8: net::releaseV8Slot(adapterSlot); break;
    case 7: net::releaseV7Slot(adapterSlot); break;
    case 6: net::releaseV6Slot(adapterSlot); break;
    default: break;
  }
}

ncclResult_t netPluginLoad(const std::string& spec, std::unique_ptr<NetPlugin>* out) {
  out->reset();
  if (pluginSpecDisabled(spec)) return ncclSuccess;
  auto plugin = std::make_unique<NetPlugin>();
  void* sym = nullptr;
  TUTTI_CHECK(openPluginSymbol(PluginKind::Net, spec, kNetSymbols, &plugin->library, &sym, &plugin->abiVersion));
  plugin->path = plugin->library->path();
  int v = plugin->abiVersion;
  int slot = -1;
  switch (v) {
    case 12: {
      auto* t = static_cast<const ncclNet_v12_t*>(sym);
      TUTTI_CHECK(checkMandatory(t, plugin->path, v));
      plugin->net = *t;
      break;
    }
#define TUTTI_NET_ADAPT(N)                                               \
  case N: {                                                              \
    auto* t = static_cast<const ncclNet_v##N##_t*>(sym);                 \
    TUTTI_CHECK(checkMandatory(t, plugin->path, v));                     \
    TUTTI_CHECK(net::adaptV##N(t, &plugin->net, &slot));                 \
    break;                                                               \
  }
    TUTTI_NET_ADAPT(11)
    TUTTI_NET_ADAPT(10)
    TUTTI_NET_ADAPT(9)
    TUTTI_NET_ADAPT(8)
    TUTTI_NET_ADAPT(7)
    TUTTI_NET_ADAPT(6)
#undef TUTTI_NET_ADAPT
    default:
      TUTTI_FAIL(ncclInternalError, "net plugin {}: no adapter for ABI v{}", plugin->path, v);
  }
  plugin->adapterSlot = slot;
  TUTTI_INFO(NCCL_INIT | NCCL_NET, "net plugin '{}' loaded from {} (ABI v{})", plugin->net.name, plugin->path, v);
  *out = std::move(plugin);
  return ncclSuccess;
}

}  // namespace tutti
