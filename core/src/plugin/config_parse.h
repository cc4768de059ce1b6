// Internal to the config room: the schema-checked YAML parser behind configParse / configLoadFile.
#pragma once

#include "plugin/config.h"

#include <string>

namespace tutti {

// Overlays the YAML `text` on `cfg` (normally the built-in default). Values get origin `kind` at
// `name`:line:col; relative plugin paths are resolved against `baseDir`. On failure returns false with
// "name:line:col: what was expected" in `error`; `cfg` may then be partly updated.
// "transport" / "net" / "tuner" / "profiler" (as pluginKindName, without linking the loader).
const char* configKindWord(PluginKind k);

bool configParseText(const std::string& text, const std::string& name, ParamOrigin::Kind kind,
                     const std::string& baseDir, Config* cfg, std::string* error);

}  // namespace tutti
