#include "plugin/transport_plugin.h"

#include "plugin/config.h"
#include "plugin/plugin_library.h"
#include "proxy/net_transport.h"
#include "util/check.h"

#include <cstring>
#include <mutex>

namespace tutti {

TransportPlugin::~TransportPlugin() {
  if (ctx_ && api_.finalize) api_.finalize(ctx_);
}

const std::string& TransportPlugin::path() const {
  static const std::string kBuiltin = "(built into the core)";
  return lib_ ? lib_->path() : kBuiltin;
}

ncclResult_t TransportPlugin::builtin(const tuttiTransport_v1_t& table, std::unique_ptr<TransportPlugin>* out) {
  std::unique_ptr<TransportPlugin> p(new TransportPlugin());
  p->api_ = table;
  p->name_ = table.name;
  TUTTI_CHECK(p->api_.init(tuttiPluginLogger, &p->ctx_));
  *out = std::move(p);
  return ncclSuccess;
}

ncclResult_t TransportPlugin::load(const std::string& spec, std::unique_ptr<TransportPlugin>* out) {
  std::unique_ptr<PluginLibrary> lib;
  void* sym = nullptr;
  int version = 0;
  TUTTI_CHECK(openPluginSymbol(PluginKind::Transport, spec, {{TUTTI_TRANSPORT_SYMBOL, 1}}, &lib, &sym, &version));
  const auto* t = static_cast<const tuttiTransport_v1_t*>(sym);
  // The struct may grow: accept any size at least as large as the v1 fields we read.
  constexpr size_t kV1Size = offsetof(tuttiTransport_v1_t, finalize) + sizeof(void*);
  if (t->size < kV1Size || t->version < 1) {
    TUTTI_FAIL(ncclInvalidUsage, "transport plugin {}: {} has size {} and version {}, expected size >= {} and "
               "version >= 1", spec, lib->path(), t->size, t->version, kV1Size);
  }
  if (!t->name || !t->init || !t->canConnect || !t->recvSetup || !t->sendSetup || !t->recvConnect ||
      !t->sendConnect || !t->free) {
    TUTTI_FAIL(ncclInvalidUsage, "transport plugin {} ({}): a required callback is NULL", spec, lib->path());
  }
  std::unique_ptr<TransportPlugin> p(new TransportPlugin());
  std::memcpy(&p->api_, t, std::min(sizeof(p->api_), t->size));
  p->name_ = t->name;
  ncclResult_t res = p->api_.init(tuttiPluginLogger, &p->ctx_);
  if (res != ncclSuccess) {
    TUTTI_FAIL(res, "transport plugin {} ({}): init failed with error {}", p->name_, lib->path(),
               static_cast<int>(res));
  }
  p->lib_ = std::move(lib);
  TUTTI_INFO(NCCL_INIT, "transport plugin {} loaded from {} (ABI v{})", p->name_, p->lib_->path(), version);
  *out = std::move(p);
  return ncclSuccess;
}

ncclResult_t transportPlugins(const std::vector<TransportPlugin*>** out) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<TransportPlugin>>* owned = nullptr;  // process lifetime
  static std::vector<TransportPlugin*> list;
  std::lock_guard<std::mutex> lock(mutex);
  if (!owned) {
    const Config* cfg = nullptr;
    TUTTI_CHECK(configGet(&cfg));
    auto* loaded = new std::vector<std::unique_ptr<TransportPlugin>>();
    for (const PluginSpec& spec : cfg->transports) {
      std::unique_ptr<TransportPlugin> p;
      ncclResult_t res = TransportPlugin::load(spec.path.empty() ? spec.name : spec.path, &p);
      if (res != ncclSuccess) {
        if (spec.required) {
          delete loaded;
          return res;
        }
        TUTTI_WARN("transport {} ({}) could not be loaded and is skipped: {}", spec.label(), spec.where.str(),
                   lastErrorText());
        continue;
      }
      list.push_back(p.get());
      loaded->push_back(std::move(p));
    }
    std::unique_ptr<TransportPlugin> net;
    TUTTI_CHECK(TransportPlugin::builtin(netTransportTable(), &net));
    list.push_back(net.get());
    loaded->push_back(std::move(net));
    owned = loaded;
  }
  *out = &list;
  return ncclSuccess;
}

}  // namespace tutti
