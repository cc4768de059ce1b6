// Profiler plugin loading: probe ncclProfiler_v6 .. _v4, check mandatory callbacks, adapt to v6.
#include "plugin/profiler_plugin.h"

#include "plugin/adapter_slots.h"
#include "plugin/profiler/profiler_adapters.h"
#include "util/check.h"

namespace tutti {

namespace {

const std::vector<PluginSymbol> kProfilerSymbols = {
    {"ncclProfiler_v6", 6}, {"ncclProfiler_v5", 5}, {"ncclProfiler_v4", 4}};

template <typename T>
ncclResult_t checkMandatory(const T* t, const std::string& path, int version) {
  if (t->name == nullptr || t->init == nullptr || t->startEvent == nullptr || t->stopEvent == nullptr ||
      t->recordEventState == nullptr || t->finalize == nullptr) {
    TUTTI_FAIL(ncclInvalidUsage, "profiler plugin {} (ncclProfiler_v{}) leaves a mandatory entry NULL (name, init, "
               "startEvent, stopEvent, recordEventState, finalize)", path, version);
  }
  return ncclSuccess;
}

}  // namespace

const std::vector<PluginSymbol>& profilerPluginSymbols() { return kProfilerSymbols; }

ProfilerPlugin::~ProfilerPlugin() {
  if (adapterSlot < 0) return;
  if (abiVersion == 5) profiler::releaseV5Slot(adapterSlot);
  if (abiVersion == 4) profiler::releaseV4Slot(adapterSlot);
}

ncclResult_t profilerPluginLoad(const std::string& spec, std::unique_ptr<ProfilerPlugin>* out) {
  out->reset();
  if (pluginSpecDisabled(spec)) return ncclSuccess;
  auto plugin = std::make_unique<ProfilerPlugin>();
  void* sym = nullptr;
  TUTTI_CHECK(openPluginSymbol(PluginKind::Profiler, spec, kProfilerSymbols, &plugin->library, &sym,
                               &plugin->abiVersion));
  plugin->path = plugin->library->path();
  const int v = plugin->abiVersion;
  int slot = -1;
  if (v == 6) {
    auto* t = static_cast<const ncclProfiler_v6_t*>(sym);
    TUTTI_CHECK(checkMandatory(t, plugin->path, v));
    plugin->profiler = *t;
  } else if (v == 5) {
    auto* t = static_cast<const ncclProfiler_v5_t*>(sym);
    TUTTI_CHECK(checkMandatory(t, plugin->path, v));
    slot = profiler::adaptV5(t, &plugin->profiler);
  } else {
    auto* t = static_cast<const ncclProfiler_v4_t*>(sym);
    TUTTI_CHECK(checkMandatory(t, plugin->path, v));
    slot = profiler::adaptV4(t, &plugin->profiler);
  }
  if (v != 6 && slot < 0) {
    TUTTI_FAIL(ncclInternalError, "too many v{} profiler plugins loaded (max {})", v, kAdapterSlots);
  }
  plugin->adapterSlot = slot;
  TUTTI_INFO(NCCL_INIT | NCCL_PROFILE, "profiler plugin '{}' loaded from {} (ABI v{})", plugin->profiler.name,
             plugin->path, v);
  *out = std::move(plugin);
  return ncclSuccess;
}

}  // namespace tutti
