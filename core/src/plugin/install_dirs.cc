// Where the running core and its install are: coreDirectory(), installPrefixOf() and corePrefix() of
// plugin/plugin_library.h. Separate from the plugin loader so that the config layer (and the fuzz targets,
// which link it without the loader) can use them.
#include "plugin/plugin_library.h"

#include <dlfcn.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace tutti {

std::string coreDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&coreDirectory), &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(info.dli_fname, ec);
  if (ec) p = info.dli_fname;
  return p.parent_path().string();
}

std::string installPrefixOf(const std::string& dir) {
  std::filesystem::path d(dir);
  for (const char* rel : {TUTTI_INSTALL_LIBDIR, TUTTI_INSTALL_BINDIR}) {
    std::filesystem::path r(rel);
    if (r.empty() || r.is_absolute()) continue;
    std::filesystem::path p = d;
    bool match = true;
    for (auto it = r.end(); it != r.begin();) {  // strip rel's parts from the end of d, last part first
      --it;
      if (it->empty()) continue;
      if (p.filename() != *it) {
        match = false;
        break;
      }
      p = p.parent_path();
    }
    if (match && !p.empty()) return p.string();
  }
  return {};
}

std::string corePrefix() { return installPrefixOf(coreDirectory()); }

}  // namespace tutti
