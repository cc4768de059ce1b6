// Plugin name resolution and the Boost.DLL-backed library handle. Every Boost / std exception is caught
// here and becomes an ncclResult_t with a message naming the file: nothing thrown crosses this file.
#include "plugin/plugin_library.h"

#include "plugin/params.h"
#include "util/check.h"

#include <boost/dll/shared_library.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

namespace tutti {

struct PluginLibrary::Impl {
  boost::dll::shared_library lib;
};

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string joinList(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

const char* envVariable(PluginKind kind) {
  switch (kind) {
    case PluginKind::Net: return "NCCL_NET_PLUGIN";
    case PluginKind::Tuner: return "NCCL_TUNER_PLUGIN";
    case PluginKind::Profiler: return "NCCL_PROFILER_PLUGIN";
    case PluginKind::Transport: return nullptr;
  }
  return nullptr;
}

}  // namespace

const char* pluginKindName(PluginKind kind) {
  switch (kind) {
    case PluginKind::Net: return "net";
    case PluginKind::Tuner: return "tuner";
    case PluginKind::Profiler: return "profiler";
    case PluginKind::Transport: return "transport";
  }
  return "unknown";
}

bool pluginSpecDisabled(const std::string& spec) { return spec.empty() || lower(spec) == "none"; }

std::string pluginSpecFor(PluginKind kind, const std::string& configSpec) {
  const char* var = envVariable(kind);
  if (var != nullptr) {
    // A real environment variable wins over the YAML config (params precedence keeps that order too).
    std::string v = paramString(var);
    if (paramIsSet(var)) return v;
  }
  return configSpec;
}

std::vector<std::string> pluginSearchDirs() {
  std::vector<std::string> dirs;
  auto add = [&dirs](const std::string& d) {
    if (!d.empty() && std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  };
  std::string extra = paramString("TUTTI_PLUGIN_PATH");
  size_t start = 0;
  while (start <= extra.size()) {
    size_t end = extra.find(':', start);
    if (end == std::string::npos) end = extra.size();
    add(extra.substr(start, end - start));
    start = end + 1;
  }
  std::string core = coreDirectory();
  add(core);
  // Installed: plugins live in <prefix>/<libdir>/tutti, found from where the core is, so a prefix chosen
  // at install time, a DESTDIR staging or a moved tree all work.
  if (std::string prefix = installPrefixOf(core); !prefix.empty()) add(prefix + "/" TUTTI_INSTALL_LIBDIR "/tutti");
#ifdef TUTTI_PLUGIN_BUILD_DIR
  add(TUTTI_PLUGIN_BUILD_DIR);  // a build tree (tests, tools linked with the static core)
#endif
  return dirs;
}

std::vector<std::string> pluginFileNames(PluginKind kind, const std::string& name) {
  std::vector<std::string> names;
  if (endsWith(name, ".so") || name.find(".so.") != std::string::npos) names.push_back(name);
  std::string k = pluginKindName(kind);
  if (kind != PluginKind::Transport) names.push_back("libnccl-" + k + "-" + name + ".so");
  names.push_back("libtutti-" + k + "-" + name + ".so");
  return names;
}

ncclResult_t resolvePlugin(PluginKind kind, const std::string& spec, PluginResolution* out) {
  PluginResolution res;
  std::error_code ec;
  if (spec.find('/') != std::string::npos) {
    res.tried.push_back(spec);
    if (!std::filesystem::exists(spec, ec)) {
      TUTTI_FAIL(ncclInvalidArgument, "{} plugin '{}': no such file", pluginKindName(kind), spec);
    }
    res.path = spec;
    *out = std::move(res);
    return ncclSuccess;
  }
  std::vector<std::string> names = pluginFileNames(kind, spec);
  for (const auto& dir : pluginSearchDirs()) {
    for (const auto& n : names) {
      std::string candidate = dir + "/" + n;
      res.tried.push_back(candidate);
      if (std::filesystem::is_regular_file(candidate, ec)) {
        res.path = candidate;
        *out = std::move(res);
        return ncclSuccess;
      }
    }
  }
  res.viaSystemLoader = true;
  res.candidates = names;
  res.path = names.front();
  for (const auto& n : names) res.tried.push_back(n + " (system loader path)");
  *out = std::move(res);
  return ncclSuccess;
}

PluginLibrary::PluginLibrary(std::unique_ptr<Impl> impl, std::string path) : impl_(std::move(impl)), path_(std::move(path)) {}

PluginLibrary::~PluginLibrary() {
  try {
    impl_.reset();
  } catch (const std::exception& e) {
    TUTTI_WARN("unloading plugin {} failed: {}", path_, e.what());
  }
}

ncclResult_t PluginLibrary::open(const std::string& path, bool systemSearch, std::unique_ptr<PluginLibrary>* out) {
  auto impl = std::make_unique<Impl>();
  std::string why;
  try {
    auto mode = boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local;
    if (systemSearch) mode = mode | boost::dll::load_mode::search_system_folders;
    dlerror();  // clear, so the reason below is this load's
    boost::system::error_code bec;
    impl->lib.load(boost::dll::fs::path(path), mode, bec);
    if (!bec && impl->lib.is_loaded()) {
      std::string actual = path;
      try {
        actual = impl->lib.location().string();
      } catch (const std::exception&) {
        // keep the requested path: location() only fails for exotic loaders
      }
      out->reset(new PluginLibrary(std::move(impl), actual));
      return ncclSuccess;
    }
    const char* dl = dlerror();
    why = dl != nullptr ? dl : bec.message();
  } catch (const std::exception& e) {
    why = e.what();
  }
  TUTTI_FAIL(ncclSystemError, "cannot load plugin library {}: {}", path, why);
}

ncclResult_t PluginLibrary::open(PluginKind kind, const PluginResolution& res, std::unique_ptr<PluginLibrary>* out) {
  if (!res.viaSystemLoader) return open(res.path, false, out);
  // Nothing in our directories: let the dynamic loader search, quietly, and report once if all fail.
  for (const auto& name : res.candidates) {
    auto impl = std::make_unique<Impl>();
    try {
      boost::system::error_code bec;
      impl->lib.load(boost::dll::fs::path(name),
                     boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local |
                         boost::dll::load_mode::search_system_folders,
                     bec);
      if (!bec && impl->lib.is_loaded()) {
        out->reset(new PluginLibrary(std::move(impl), name));
        return ncclSuccess;
      }
    } catch (const std::exception&) {
      // not found there either; reported below with every place tried
    }
  }
  TUTTI_FAIL(ncclSystemError, "{} plugin not found; tried: {}", pluginKindName(kind), joinList(res.tried));
}

void* PluginLibrary::symbol(const char* name) const {
  try {
    if (!impl_->lib.has(name)) return nullptr;
    // get<char> yields a reference to the symbol itself; its address is what callers want (data or code).
    return static_cast<void*>(&impl_->lib.get<char>(name));
  } catch (const std::exception&) {
    return nullptr;
  }
}

ncclResult_t openPluginSymbol(PluginKind kind, const std::string& spec, const std::vector<PluginSymbol>& symbols,
                              std::unique_ptr<PluginLibrary>* lib, void** symbol, int* abiVersion) {
  PluginResolution res;
  TUTTI_CHECK(resolvePlugin(kind, spec, &res));
  std::unique_ptr<PluginLibrary> l;
  TUTTI_CHECK(PluginLibrary::open(kind, res, &l));
  std::vector<std::string> probed;
  for (const auto& s : symbols) {
    if (void* p = l->symbol(s.name)) {
      TUTTI_INFO(NCCL_INIT, "{} plugin {}: using {}", pluginKindName(kind), l->path(), s.name);
      *symbol = p;
      *abiVersion = s.abiVersion;
      *lib = std::move(l);
      return ncclSuccess;
    }
    probed.push_back(s.name);
  }
  TUTTI_FAIL(ncclInvalidUsage, "{} plugin {} exports none of the supported symbols ({}); it was built for an "
             "unsupported ABI version or is not a {} plugin", pluginKindName(kind), l->path(), joinList(probed),
             pluginKindName(kind));
}

}  // namespace tutti
