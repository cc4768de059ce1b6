// Logging: NCCL_DEBUG / NCCL_DEBUG_SUBSYS / NCCL_DEBUG_FILE semantics, formatted with fmt.
// Lines look like NCCL's ("host:pid:tid [rank] NCCL INFO ...") so existing log tooling keeps working.
#pragma once

#include <tutti/common.h>

#include <fmt/format.h>

#include <atomic>
#include <string>

namespace tutti {

// Reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE from the environment. Called lazily by the
// first log call; logReconfigure() re-reads them (e.g. after the YAML config supplied defaults through
// setenv-free lookups: the lookup callback below).
void logReconfigure();

// Optional source of NCCL_DEBUG* values when the environment has none (the YAML config installs one).
using LogParamLookup = const char* (*)(const char* name);
void logSetParamLookup(LogParamLookup lookup);

// Current threshold and subsystem mask (after lazy init).
ncclDebugLogLevel logLevel();
unsigned long logSubsysMask();

inline bool logEnabled(ncclDebugLogLevel level, unsigned long flags) {
  extern std::atomic<int> gLogLevelCache;  // -1 until initialised
  int cached = gLogLevelCache.load(std::memory_order_relaxed);
  if (cached < 0) {
    logReconfigure();
    cached = gLogLevelCache.load(std::memory_order_relaxed);
  }
  if (level > cached) return false;
  if (level == NCCL_LOG_WARN || level == NCCL_LOG_VERSION) return true;
  return (flags & logSubsysMask()) != 0;
}

// Writes one already-formatted line (adds the prefix and newline).
void logWriteLine(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, std::string_view msg);

// Rank shown in the prefix for log lines from this thread (-1: none).
void logSetThreadRank(int rank);

template <typename... Args>
void logFmt(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
            fmt::format_string<Args...> f, Args&&... args) {
  if (!logEnabled(level, flags)) return;
  logWriteLine(level, flags, file, line, fmt::format(f, std::forward<Args>(args)...));
}

// printf-style logger handed to plugins in their init (ncclDebugLogger_t).
extern "C" void tuttiPluginLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...) __attribute__((format(printf, 5, 6)));

}  // namespace tutti

#define TUTTI_WARN(...) ::tutti::logFmt(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define TUTTI_INFO(flags, ...) ::tutti::logFmt(NCCL_LOG_INFO, (flags), __FILE__, __LINE__, __VA_ARGS__)
#define TUTTI_TRACE(flags, ...) ::tutti::logFmt(NCCL_LOG_TRACE, (flags), __FILE__, __LINE__, __VA_ARGS__)
