// Every key of the YAML schema, declared once: the parser checks keys against this table and tutti-info
// / configs/REFERENCE.md print it. A key path uses "." between map levels and "[]" for list items;
// "*" stands for any of the plugin kinds (transport, net, tuner, profiler).
#pragma once

#include <span>
#include <string>
#include <vector>

namespace tutti {

struct ConfigKeyInfo {
  const char* key;          // e.g. "plugins.*[].options"
  const char* type;         // e.g. "list of plugin entries", "int", "auto|host|cuda"
  const char* defaultText;  // what an absent key means
  const char* description;  // one line
};

std::span<const ConfigKeyInfo> configSchema();

// Child key names allowed in the map at `parent` ("" = top level, "plugins", "plugins.*[]",
// "tuning[]"), in table order.
std::vector<std::string> configChildKeys(const std::string& parent);

}  // namespace tutti
