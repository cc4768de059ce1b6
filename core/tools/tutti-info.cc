// tutti-info: what this installation of Tutti would do, and why. Prints the version, the config file
// used, the effective configuration with the origin of every value, the parameter table and every
// plugin of the config with the file it resolves to and its ABI version. Exit status: 0 when the
// config is valid and every `required` plugin loads, 1 for a config error (printed as
// file:line:col: message), 2 when a required plugin fails, 64 for bad command-line usage.
#include "comm/comm.h"
#include "device/runtime.h"
#include "device/sim/kernels.h"
#include "device/sim/kernels.h"
#include "plugin/config.h"
#include "plugin/config_schema.h"
#include "plugin/params.h"
#include "tools/tutti_info.h"
#include "util/check.h"

#include <nccl.h>
#include <nccl_version.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace tutti {
namespace {

void usage(FILE* out) {
  std::fputs(
      "Usage: tutti-info [options]\n"
      "Shows Tutti's version, the configuration in effect with the origin of every value, the\n"
      "parameter table, and the plugins the configuration names.\n\n"
      "  --config FILE   use FILE instead of discovery ($TUTTI_CONFIG, ./tutti.yaml,\n"
      "                  $XDG_CONFIG_HOME/tutti/tutti.yaml, /etc/tutti/tutti.yaml, built-in default)\n"
      "  --params        print only the parameter table\n"
      "  --no-plugins    do not load plugins\n"
      "  --reference     print the key and parameter tables as Markdown (configs/REFERENCE.md)\n"
      "  --help          this text\n\n"
      "Exit status: 0 ok, 1 configuration error, 2 a required plugin failed to load, 64 usage error.\n",
      out);
}

std::string pluginLine(const PluginSpec& s) {
  std::string line = s.name.empty() ? "path: " + s.path : s.name;
  if (s.required) line += "  (required)";
  for (const auto& [k, v] : s.options) line += fmt::format("  {}={}", k, v);
  return line;
}

void printConfig(const Config& c) {
  fmt::print("Effective configuration (value  [origin]):\n");
  fmt::print("  {:<44} [{}]\n", fmt::format("device: {}", deviceKindName(c.device)), originText(c.deviceOrigin));
  fmt::print("  {:<44} [{}]\n", fmt::format("deterministic: {}", c.deterministic), originText(c.deterministicOrigin));
  const std::pair<PluginKind, const std::string*> kinds[] = {{PluginKind::Transport, nullptr},
                                                             {PluginKind::Net, &c.netsOverride},
                                                             {PluginKind::Tuner, &c.tunersOverride},
                                                             {PluginKind::Profiler, &c.profilersOverride}};
  for (const auto& [kind, override] : kinds) {
    const auto& list = c.plugins(kind);
    std::string note = override && !override->empty() ? fmt::format("  (set by {})", *override) : "";
    fmt::print("  plugins.{}:{}{}\n", pluginKindName(kind), list.empty() ? " []" : "", note);
    for (const PluginSpec& s : list) {
      std::string where = s.origin.kind == ParamOrigin::Environment ? "environment " + s.where.file : originText(s.origin);
      fmt::print("    - {:<40} [{}]\n", pluginLine(s), where);
    }
  }
  fmt::print("  tuning:{}\n", c.tuning.empty() ? " []" : "");
  for (const TuningRule& r : c.tuning) {
    std::string range = r.maxBytes == INT64_MAX ? fmt::format("bytes [{}, inf)", r.minBytes)
                                                : fmt::format("bytes [{}, {})", r.minBytes, r.maxBytes);
    if (r.minRanks != 1 || r.maxRanks != INT_MAX) range += fmt::format(" ranks [{}, {}]", r.minRanks, r.maxRanks);
    if (r.minNodes != 1 || r.maxNodes != INT_MAX) range += fmt::format(" nodes [{}, {}]", r.minNodes, r.maxNodes);
    std::string sets;
    if (r.algorithm >= 0) sets += fmt::format(" algorithm={}", algorithmName(r.algorithm));
    if (r.protocol >= 0) sets += fmt::format(" protocol={}", protocolName(r.protocol));
    if (r.channels >= 0) sets += fmt::format(" channels={}", r.channels);
    fmt::print("    - {} {} ->{}  [{}]\n", collectiveName(r.collective), range, sets, r.where.str());
  }
}

// Which backend a communicator created now gets, and what this build can run.
void printBackends() {
  fmt::print("Backends:\n");
  Backend b;
  std::string from, error;
  if (backendOfNewComms(&b, &from, &error))
    fmt::print("  new communicators: {}  [{}]\n", backendName(b), from);
  else
    fmt::print("  new communicators: none: {}\n", error);
  bool det = false;
  if (deterministicOfNewComms(&det, &from, &error))
    fmt::print("  deterministic reductions: {}  [{}]\n", det ? "on" : "off", from);
  else
    fmt::print("  deterministic reductions: {}\n", error);
  fmt::print("  host: the host backend (CPU primitives over host memory)\n");
  if (sim::available()) {
    const std::string filter = sim::simKernelFilter();
    fmt::print("  sim:  the device kernels on the CPU SIMT emulator, {} kernel instances{}; TUTTI_SIM_SEED={}, "
               "TUTTI_SIM_NTHREADS={}\n", sim::simKernelCount(),
               filter.empty() ? " (every datatype)" : " (TUTTI_KERNELS=" + filter + ")", paramInt("TUTTI_SIM_SEED"),
               paramInt("TUTTI_SIM_NTHREADS"));
  } else {
    fmt::print("  sim:  not built (TUTTI_WITH_SIM=OFF)\n");
  }
#ifdef TUTTI_CUDA_TARGETS
  std::string why, gpu = "usable";
  rt::Runtime* cuda = rt::cudaRuntime();
  if (cuda->usable(&why)) {
    int dev = 0, arch = 0;
    std::string name;
    if (cuda->currentDevice(&dev) == ncclSuccess && cuda->deviceArch(dev, &arch) == ncclSuccess &&
        cuda->deviceName(dev, &name) == ncclSuccess)
      gpu = fmt::format("GPU {} {} (sm_{})", dev, name, arch);
  } else {
    gpu = "no usable GPU: " + why;
  }
  fmt::print("  cuda: kernels compiled for {} (NN: sm_NN code and compute_NN PTX; NN-real: code only); {}\n",
             TUTTI_CUDA_TARGETS, gpu);
  if (std::string_view(TUTTI_CUDA_FAST_COMPILE_LEVEL) != "0")
    fmt::print("        at nvcc fast-compile level {} (TUTTI_CUDA_FAST_COMPILE: a test build; measure GPU speed with a "
               "build at 0)\n", TUTTI_CUDA_FAST_COMPILE_LEVEL);
#else
  fmt::print("  cuda: not built (no CUDA toolkit found, or TUTTI_WITH_CUDA=OFF)\n");
#endif
}

void printParams() {
  fmt::print("Parameters (environment > config params: > default):\n");
  fmt::print("  {:<26} {:<7} {:<22} {}\n", "NAME", "TYPE", "VALUE", "ORIGIN");
  for (const ParamInfo& p : paramTable()) {
    std::string value = paramString(p.name);
    if (p.type == ParamType::Int) value = std::to_string(paramInt(p.name));
    fmt::print("  {:<26} {:<7} {:<22} {}\n", p.name, paramTypeName(p.type), value.empty() ? "\"\"" : value,
               originText(paramOrigin(p.name)));
  }
}

// A table cell: '|' would end the cell.
std::string md(std::string s) {
  for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.insert(i, "\\");
  return s;
}

// Markdown tables kept in configs/REFERENCE.md (regenerate with `tutti-info --reference`).
void printReference() {
  fmt::print("## Keys\n\n| key | type | default | description |\n|---|---|---|---|\n");
  for (const ConfigKeyInfo& k : configSchema())
    fmt::print("| `{}` | {} | {} | {} |\n", k.key, md(k.type), md(k.defaultText), md(k.description));
  fmt::print("\n## Parameters (`params:` and the environment)\n\n| name | type | default | description |\n"
             "|---|---|---|---|\n");
  for (const ParamInfo& p : paramTable()) {
    std::string def = paramDefaultText(p);
    fmt::print("| `{}` | {} | {} | {} |\n", p.name, paramTypeName(p.type), def.empty() ? "\"\"" : "`" + md(def) + "`",
               md(p.description));
  }
}

int run(int argc, char** argv) {
  std::string configPath;
  bool onlyParams = false, plugins = true;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!std::strcmp(a, "--help") || !std::strcmp(a, "-h")) return usage(stdout), 0;
    if (!std::strcmp(a, "--params")) onlyParams = true;
    else if (!std::strcmp(a, "--no-plugins")) plugins = false;
    else if (!std::strcmp(a, "--reference")) return printReference(), 0;
    else if (!std::strcmp(a, "--config") && i + 1 < argc) configPath = argv[++i];
    else if (!std::strncmp(a, "--config=", 9)) configPath = a + 9;
    else {
      std::fprintf(stderr, "tutti-info: unknown or incomplete option '%s'\n\n", a);
      usage(stderr);
      return 64;
    }
  }

  fmt::print("Tutti {} (NCCL API {}.{}.{})\n", TUTTI_VERSION_STRING, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  const Config* cfg = nullptr;
  ncclResult_t res = configPath.empty() ? configGet(&cfg) : configUseFile(configPath);
  if (res == ncclSuccess && !cfg) res = configGet(&cfg);
  if (res != ncclSuccess) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", lastErrorText());
    return 1;
  }
  if (!onlyParams) {
    fmt::print("Config: {} (found by: {})\n\n", cfg->sourcePath, cfg->discoveredBy);
    printConfig(*cfg);
    fmt::print("\n");
    printBackends();
    fmt::print("\n");
  }
  printParams();
  if (onlyParams || !plugins) return 0;
  fmt::print("\n");
  std::fflush(stdout);
  return printPlugins(*cfg) ? 0 : 2;
}

}  // namespace
}  // namespace tutti

int main(int argc, char** argv) {
  try {
    return tutti::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tutti-info: %s\n", e.what());
    return 70;
  }
}
