// Tuner plugin loading: probe ncclTunerPlugin_v6 .. _v2, check mandatory callbacks, adapt to v6.
#include "plugin/tuner_plugin.h"

#include "plugin/adapter_slots.h"
#include "plugin/tuner/tuner_adapters.h"
#include "util/check.h"

namespace tutti {

namespace {

const std::vector<PluginSymbol> kTunerSymbols = {{"ncclTunerPlugin_v6", 6}, {"ncclTunerPlugin_v5", 5},
                                                 {"ncclTunerPlugin_v4", 4}, {"ncclTunerPlugin_v3", 3},
                                                 {"ncclTunerPlugin_v2", 2}};

template <typename T>
ncclResult_t checkMandatory(const T* t, void* fin, const std::string& path, int version) {
  if (t->name == nullptr || t->init == nullptr || t->getCollInfo == nullptr || fin == nullptr) {
    TUTTI_FAIL(ncclInvalidUsage, "tuner plugin {} (ncclTunerPlugin_v{}) leaves name, init, getCollInfo or "
               "finalize/destroy NULL", path, version);
  }
  return ncclSuccess;
}

}  // namespace

const std::vector<PluginSymbol>& tunerPluginSymbols() { return kTunerSymbols; }

TunerPlugin::~TunerPlugin() {
  if (adapterSlot < 0) return;
  if (abiVersion == 4) tuner::releaseV4Slot(adapterSlot);
  if (abiVersion == 3) tuner::releaseV3Slot(adapterSlot);
  if (abiVersion == 2) tuner::releaseV2Slot(adapterSlot);
}

ncclResult_t tunerPluginLoad(const std::string& spec, std::unique_ptr<TunerPlugin>* out) {
  out->reset();
  if (pluginSpecDisabled(spec)) return ncclSuccess;
  auto plugin = std::make_unique<TunerPlugin>();
  void* sym = nullptr;
  TUTTI_CHECK(openPluginSymbol(PluginKind::Tuner, spec, kTunerSymbols, &plugin->library, &sym, &plugin->abiVersion));
  plugin->path = plugin->library->path();
  if (const void* stateless = plugin->library->symbol(TUTTI_TUNER_STATELESS_SYMBOL))
    plugin->stateless = *static_cast<const int*>(stateless) == 1;
  const int v = plugin->abiVersion;
  int slot = -1;
  switch (v) {
    case 6: {
      auto* t = static_cast<const ncclTuner_v6_t*>(sym);
      TUTTI_CHECK(checkMandatory(t, reinterpret_cast<void*>(t->finalize), plugin->path, v));
      plugin->tuner = *t;
      break;
    }
    case 5: {
      auto* t = static_cast<const ncclTuner_v5_t*>(sym);
      TUTTI_CHECK(checkMandatory(t, reinterpret_cast<void*>(t->finalize), plugin->path, v));
      tuner::adaptV5(t, &plugin->tuner);
      break;
    }
#define TUTTI_TUNER_ADAPT(N)                                                                   \
  case N: {                                                                                    \
    auto* t = static_cast<const ncclTuner_v##N##_t*>(sym);                                     \
    TUTTI_CHECK(checkMandatory(t, reinterpret_cast<void*>(t->destroy), plugin->path, v));      \
    slot = tuner::adaptV##N(t, &plugin->tuner);                                                \
    if (slot < 0) {                                                                            \
      TUTTI_FAIL(ncclInternalError, "too many v{} tuner plugins loaded (max {})", v, kAdapterSlots); \
    }                                                                                          \
    break;                                                                                     \
  }
    TUTTI_TUNER_ADAPT(4)
    TUTTI_TUNER_ADAPT(3)
    TUTTI_TUNER_ADAPT(2)
#undef TUTTI_TUNER_ADAPT
    default:
      TUTTI_FAIL(ncclInternalError, "tuner plugin {}: no adapter for ABI v{}", plugin->path, v);
  }
  plugin->adapterSlot = slot;
  TUTTI_INFO(NCCL_INIT | NCCL_TUNING, "tuner plugin '{}' loaded from {} (ABI v{})", plugin->tuner.name,
             plugin->path, v);
  *out = std::move(plugin);
  return ncclSuccess;
}

}  // namespace tutti
