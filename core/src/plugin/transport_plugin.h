// Intra-node transport plugins (sdk/include/tutti/transport.h): loading, ABI checks, and the process-wide
// list in config order. A transport is loaded and initialised once per process and shared by every
// communicator; it lives until process exit.
#pragma once

#include <tutti/transport.h>

#include <memory>
#include <string>
#include <vector>

namespace tutti {

class PluginLibrary;

class TransportPlugin {
 public:
  // Opens `spec` (name -> libtutti-transport-<name>.so, or a path), checks the struct's size and version,
  // and calls init with the core's logger.
  static ncclResult_t load(const std::string& spec, std::unique_ptr<TransportPlugin>* out);
  // Wraps a transport built into the core (the network path); init is called here too.
  static ncclResult_t builtin(const tuttiTransport_v1_t& table, std::unique_ptr<TransportPlugin>* out);
  ~TransportPlugin();

  const tuttiTransport_v1_t& api() const { return api_; }
  void* ctx() const { return ctx_; }
  const std::string& name() const { return name_; }
  const std::string& path() const;

 private:
  TransportPlugin() = default;
  std::unique_ptr<PluginLibrary> lib_;
  tuttiTransport_v1_t api_{};
  void* ctx_ = nullptr;
  std::string name_;
};

// The transports of the effective config, in order, then the core's network transport, loaded on first
// call. A transport that fails to load is skipped with a WARN, unless the config marks it required.
// Thread-safe.
ncclResult_t transportPlugins(const std::vector<TransportPlugin*>** out);

}  // namespace tutti
