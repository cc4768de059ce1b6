// Pieces of tutti-info kept in their own files.
#pragma once

#include "plugin/config.h"

namespace tutti {

// Loads each plugin of `cfg` (after applying its options), prints the resolved file and ABI version or
// the reason it cannot be used, and for net plugins the device count ("no device" is not an error).
// Returns false when a plugin marked `required` failed.
bool printPlugins(const Config& cfg);

}  // namespace tutti
