// Generic plugin loading shared by every plugin kind (net, tuner, profiler, intra-node transport):
// name resolution (NCCL's rules plus Tutti's own file names and search directories) and a shared-library
// handle that turns every loader failure into an ncclResult_t with a message naming the file.
#pragma once

#include <tutti/common.h>

#include <memory>
#include <string>
#include <vector>

namespace tutti {

enum class PluginKind { Net, Tuner, Profiler, Transport };

// "net", "tuner", "profiler", "transport": the <kind> part of libnccl-<kind>-<name>.so.
const char* pluginKindName(PluginKind kind);

// True when `spec` switches the kind off ("none", any case). An empty spec also loads nothing.
bool pluginSpecDisabled(const std::string& spec);

// The spec the user asked for: the kind's environment variable (NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN,
// NCCL_PROFILER_PLUGIN) when set, else `configSpec` (from the YAML config). Transport has no variable.
std::string pluginSpecFor(PluginKind kind, const std::string& configSpec);

// Directory of the object file holding the core: libnccl.so.2 (found with dladdr), or the executable when
// the core is linked statically (tools, tests).
std::string coreDirectory();

// The install prefix of a directory <prefix>/<libdir> or <prefix>/<bindir> (the build's relative
// CMAKE_INSTALL_LIBDIR / BINDIR), "" for any other directory. corePrefix() is that of coreDirectory().
std::string installPrefixOf(const std::string& dir);
std::string corePrefix();

// Directories searched for plugin files, in order: TUTTI_PLUGIN_PATH entries, coreDirectory(),
// <corePrefix()>/<libdir>/tutti when the core is installed, the build tree's lib/ (compiled in).
// Duplicates and empty entries are dropped.
std::vector<std::string> pluginSearchDirs();

// File names tried for a plugin *name*: libnccl-<kind>-<name>.so then libtutti-<kind>-<name>.so
// (transport: only libtutti-transport-<name>.so). A name that already ends in ".so" is tried as is first.
std::vector<std::string> pluginFileNames(PluginKind kind, const std::string& name);

// Outcome of resolving a spec to something dlopen can take.
struct PluginResolution {
  std::string path;                // absolute/relative path, or a bare file name for the system loader
  bool viaSystemLoader = false;    // true: nothing found in the search dirs; `candidates` go to dlopen
  std::vector<std::string> candidates;  // bare file names left to the system loader (viaSystemLoader)
  std::vector<std::string> tried;  // every path looked at, for error messages
};

// Resolves `spec` (non-empty, not "none"): a spec containing '/' is an exact path and must exist; any other
// spec is a name looked up with pluginFileNames() in pluginSearchDirs(), first match wins. When no
// directory holds it, the result is marked viaSystemLoader (LD_LIBRARY_PATH, ld.so.cache decide).
// Fails (ncclInvalidArgument / ncclSystemError) only for an exact path that does not exist.
ncclResult_t resolvePlugin(PluginKind kind, const std::string& spec, PluginResolution* out);

// An open shared library. Keeps the handle (and thus every function pointer taken from it) alive until
// destroyed. Not copyable; thread-safe for concurrent symbol() calls.
class PluginLibrary {
 public:
  // Opens `path` with RTLD_NOW | RTLD_LOCAL. A missing file, a file that is not a loadable library or
  // an unresolved dependency fails with ncclSystemError and a message naming `path` and the loader's
  // reason. `systemSearch` lets the dynamic loader search its own path for a bare file name.
  static ncclResult_t open(const std::string& path, bool systemSearch, std::unique_ptr<PluginLibrary>* out);

  // Opens what resolvePlugin() found (trying each system-loader candidate in turn).
  static ncclResult_t open(PluginKind kind, const PluginResolution& res, std::unique_ptr<PluginLibrary>* out);

  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  // Address of exported data/function `name`, or nullptr when the library does not export it.
  void* symbol(const char* name) const;
  // The file actually opened (resolved by the loader to an absolute path when possible).
  const std::string& path() const { return path_; }

 private:
  struct Impl;
  PluginLibrary(std::unique_ptr<Impl> impl, std::string path);
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

// What tutti-info shows for one plugin: loaded, inspected and closed again (init is not called).
struct PluginDescription {
  PluginKind kind = PluginKind::Net;
  std::string name;       // the plugin's own name string (its struct's `name`), empty if not loaded
  std::string path;       // file found, empty if none
  int abiVersion = 0;     // ABI version of the symbol found (e.g. 12 for ncclNetPlugin_v12), 0 if none
  std::string error;      // empty on success; otherwise why it could not be used
  bool disabled = false;  // spec was "none" or empty
};

// Resolves and opens `spec` for `kind`, finds the newest supported symbol, reads the plugin's name, and
// closes it again. Never fails: problems are reported in `error`. Transport is not described here.
PluginDescription describePlugin(PluginKind kind, const std::string& spec);

// Shared by the kind loaders: resolves+opens `spec` and returns the newest of `symbols` (ordered newest
// first, paired with their ABI versions) that the library exports. On failure logs one error naming the
// file and every symbol probed.
struct PluginSymbol {
  const char* name;
  int abiVersion;
};
ncclResult_t openPluginSymbol(PluginKind kind, const std::string& spec, const std::vector<PluginSymbol>& symbols,
                              std::unique_ptr<PluginLibrary>* lib, void** symbol, int* abiVersion);

}  // namespace tutti
