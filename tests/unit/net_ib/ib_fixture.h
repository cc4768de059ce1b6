// Shared by the net-ib plugin tests: loads libtutti-net-ib.so with dlopen (as a core would) and records what
// the plugin logs through the logger handed to init.
#pragma once

#include <gtest/gtest.h>

#include <dirent.h>
#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include <tutti/net.h>

namespace ibtest {

struct LogLine {
  ncclDebugLogLevel level;
  std::string text;
};
inline std::mutex gLogMu;
inline std::vector<LogLine> gLog;

inline void testLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(gLogMu);
  gLog.push_back({level, buf});
}

inline int countLog(ncclDebugLogLevel level, const std::string& needle = "") {
  std::lock_guard<std::mutex> lock(gLogMu);
  int n = 0;
  for (const LogLine& l : gLog) n += l.level == level && l.text.find(needle) != std::string::npos;
  return n;
}

inline void clearLog() {
  std::lock_guard<std::mutex> lock(gLogMu);
  gLog.clear();
}

inline void* pluginLib() {
  static void* lib = [] {
    std::string path = std::string(TUTTI_TEST_LIB_DIR) + "/libtutti-net-ib.so";
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) ADD_FAILURE() << "dlopen " << path << ": " << dlerror();
    return h;
  }();
  return lib;
}

template <typename T>
const T* symbol(const char* name) {
  void* lib = pluginLib();
  return lib ? static_cast<const T*>(dlsym(lib, name)) : nullptr;
}

inline const ncclNet_v12_t* net() { return symbol<ncclNet_v12_t>("ncclNetPlugin_v12"); }

// Number of RDMA devices the kernel exposes (0 when /sys/class/infiniband is absent or empty).
inline int sysfsHcaCount() {
  DIR* d = opendir("/sys/class/infiniband");
  if (d == nullptr) return 0;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

}  // namespace ibtest
