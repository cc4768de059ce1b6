#include "plugin/config_schema.h"

#include <cstring>

namespace tutti {
namespace {
const ConfigKeyInfo kSchema[] = {
    {"version", "int", "1", "Schema version; this build reads version 1"},
    {"device", "auto|host|cuda|sim", "auto", "Backend for new communicators (auto: cuda when a GPU is visible, else host; sim: the CUDA kernels on the CPU emulator)"},
    {"deterministic", "bool", "false",
     "AllReduce, ReduceScatter and Reduce of floating types give the same bits whatever the size, position, "
     "algorithm, protocol, transport or backend (a fixed reduction order; TUTTI_DETERMINISTIC overrides it)"},
    {"plugins", "map", "built-in default.yaml", "Plugins by kind; a kind left out keeps the built-in list"},
    {"plugins.transport", "list of plugin entries", "p2p, shm",
     "Intra-node transports, tried in this order for each peer pair"},
    {"plugins.net", "list of plugin entries", "ib, socket",
     "Network plugins in order; the first that initialises with a device is used"},
    {"plugins.tuner", "list of plugin entries", "default", "Tuner chain, applied in order"},
    {"plugins.profiler", "list of plugin entries", "[] (none)", "Profilers; several may be loaded"},
    {"plugins.*[]", "map, or a bare name", "-", "One plugin: `name:` or `path:`, plus options/required"},
    {"plugins.*[].name", "string [A-Za-z0-9_.-]", "-",
     "Plugin name, resolved to libtutti-<kind>-<name>.so then libnccl-<kind>-<name>.so"},
    {"plugins.*[].path", "string", "-", "Explicit .so; a relative path is taken from the config file's folder"},
    {"plugins.*[].options", "map NAME: scalar", "{}",
     "Environment variables set (without overwriting) before this plugin loads; params.def names are "
     "type-checked"},
    {"plugins.*[].required", "bool", "false", "A load failure is an error instead of a warning and a skip"},
    {"params", "map NAME: scalar", "{}",
     "Defaults for NCCL_*/TUTTI_* variables of the parameter table; a real environment variable wins"},
    {"tuning", "list of rules", "[]", "Overrides per collective and size range, applied as the last tuner"},
    {"tuning[].collective", "broadcast|reduce|allgather|reducescatter|allreduce", "required",
     "Collective the rule applies to"},
    {"tuning[].bytes", "[min, max) sizes", "[0, inf)",
     "Message size range in bytes; integers or K/M/G/T suffixes (1K = 1024), max may be inf"},
    {"tuning[].ranks", "[min, max] ints >= 1", "all", "Communicator size range, inclusive"},
    {"tuning[].nodes", "[min, max] ints >= 1", "all", "Node count range, inclusive"},
    {"tuning[].algorithm", "ring|tree|collnet_direct|collnet_chain|nvls|nvls_tree|pat", "unset",
     "Algorithm to use"},
    {"tuning[].protocol", "ll|ll128|simple", "unset", "Protocol to use"},
    {"tuning[].channels", "int 1..64", "unset", "Number of channels"},
};
}  // namespace

std::span<const ConfigKeyInfo> configSchema() { return kSchema; }

std::vector<std::string> configChildKeys(const std::string& parent) {
  std::vector<std::string> out;
  for (const auto& k : kSchema) {
    std::string key = k.key;
    if (parent.empty()) {
      if (key.find('.') == std::string::npos && key.find('[') == std::string::npos) out.push_back(key);
      continue;
    }
    std::string prefix = parent + ".";
    if (key.rfind(prefix, 0) != 0) continue;
    std::string rest = key.substr(prefix.size());
    if (rest.find('.') == std::string::npos && rest.find('[') == std::string::npos) out.push_back(rest);
  }
  return out;
}

}  // namespace tutti
