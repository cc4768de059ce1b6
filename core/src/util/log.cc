#include "util/log.h"
#include "util/check.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace tutti {

std::atomic<int> gLogLevelCache{-1};

namespace {

struct LogState {
  std::mutex mutex;
  ncclDebugLogLevel level = NCCL_LOG_NONE;
  unsigned long subsys = NCCL_INIT | NCCL_ENV;  // NCCL's default mask
  std::atomic<unsigned long> subsysMask{NCCL_INIT | NCCL_ENV};  // lock-free copy for logEnabled()
  FILE* out = stderr;
  std::string outPath;  // expanded NCCL_DEBUG_FILE currently open ("" = stderr)
  std::string host;
  LogParamLookup lookup = nullptr;
  bool versionPrinted = false;
};

LogState& state() {
  static LogState* s = new LogState();  // never destroyed: logging may run during exit
  return *s;
}

[[gnu::tls_model("initial-exec")]] thread_local int tRank = -1;  // set on every call: no __tls_get_addr

const char* lookupParam(LogState& s, const char* name) {
  if (const char* v = std::getenv(name)) return v;
  return s.lookup ? s.lookup(name) : nullptr;
}

struct SubsysName {
  const char* name;
  unsigned long flag;
};
constexpr SubsysName kSubsys[] = {
    {"INIT", NCCL_INIT},   {"COLL", NCCL_COLL},         {"P2P", NCCL_P2P},           {"SHM", NCCL_SHM},
    {"NET", NCCL_NET},     {"GRAPH", NCCL_GRAPH},       {"TUNING", NCCL_TUNING},     {"ENV", NCCL_ENV},
    {"ALLOC", NCCL_ALLOC}, {"CALL", NCCL_CALL},         {"PROXY", NCCL_PROXY},       {"NVLS", NCCL_NVLS},
    {"BOOTSTRAP", NCCL_BOOTSTRAP}, {"REG", NCCL_REG},   {"PROFILE", NCCL_PROFILE},   {"RAS", NCCL_RAS},
    {"DESTROY", NCCL_DESTROY}, {"ALLOC_HOST", NCCL_ALLOC_HOST}, {"ALL", (unsigned long)NCCL_ALL},
};

// NCCL_DEBUG_SUBSYS: comma list; a leading '^' inverts the whole list.
unsigned long parseSubsys(const char* text) {
  bool invert = text[0] == '^';
  if (invert) ++text;
  unsigned long mask = 0;
  std::string list(text);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    std::string tok = list.substr(pos, end - pos);
    for (const auto& s : kSubsys)
      if (strcasecmp(tok.c_str(), s.name) == 0) mask |= s.flag;
    pos = end + 1;
  }
  return invert ? ~mask : mask;
}

// NCCL_DEBUG_FILE: %h host, %p pid, %% percent.
std::string expandDebugFile(const char* pattern, const std::string& host) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (*p == '%' && p[1]) {
      ++p;
      if (*p == 'h') out += host;
      else if (*p == 'p') out += std::to_string(getpid());
      else out += *p;
    } else {
      out += *p;
    }
  }
  return out;
}

}  // namespace

void logSetParamLookup(LogParamLookup lookup) {
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().lookup = lookup;
  }
  logReconfigure();
}

void logReconfigure() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  if (char* dot = std::strchr(host, '.')) *dot = '\0';
  s.host = host;

  s.level = NCCL_LOG_NONE;
  if (const char* d = lookupParam(s, "NCCL_DEBUG")) {
    if (strcasecmp(d, "VERSION") == 0) s.level = NCCL_LOG_VERSION;
    else if (strcasecmp(d, "WARN") == 0) s.level = NCCL_LOG_WARN;
    else if (strcasecmp(d, "INFO") == 0) s.level = NCCL_LOG_INFO;
    else if (strcasecmp(d, "ABORT") == 0) s.level = NCCL_LOG_ABORT;
    else if (strcasecmp(d, "TRACE") == 0) s.level = NCCL_LOG_TRACE;
  }
  s.subsys = NCCL_INIT | NCCL_ENV;
  if (const char* m = lookupParam(s, "NCCL_DEBUG_SUBSYS")) s.subsys = parseSubsys(m);

  // Reopen only when the target changed: re-reading the settings must not truncate the current log.
  std::string path;
  if (const char* f = lookupParam(s, "NCCL_DEBUG_FILE"); f && *f && s.level > NCCL_LOG_NONE)
    path = expandDebugFile(f, s.host);
  if (path != s.outPath) {
    if (s.out != stderr && s.out != stdout) std::fclose(s.out);
    s.out = stderr;
    s.outPath.clear();
    if (!path.empty()) {
      if (FILE* fp = std::fopen(path.c_str(), "w")) {
        setvbuf(fp, nullptr, _IOLBF, 4096);
        s.out = fp;
        s.outPath = path;
      }
    }
  }
  s.subsysMask.store(s.subsys, std::memory_order_relaxed);
  gLogLevelCache.store(s.level, std::memory_order_relaxed);
}

ncclDebugLogLevel logLevel() {
  if (gLogLevelCache.load(std::memory_order_relaxed) < 0) logReconfigure();
  return state().level;
}

unsigned long logSubsysMask() { return state().subsysMask.load(std::memory_order_relaxed); }

void logSetThreadRank(int rank) { tRank = rank; }

void logWriteLine(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, std::string_view msg) {
  LogState& s = state();
  const char* levelName = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_TRACE ? "TRACE" : "INFO";
  std::string text;
  long tid = syscall(SYS_gettid);
  std::string where = tRank >= 0 ? fmt::format("[{}] ", tRank) : std::string();
  if (level == NCCL_LOG_WARN) {
    const char* base = file ? std::strrchr(file, '/') : nullptr;
    text = fmt::format("{}:{}:{} {}NCCL WARN {}:{} {}\n", s.host, getpid(), tid, where,
                       base ? base + 1 : (file ? file : "?"), line, msg);
  } else if (level == NCCL_LOG_VERSION) {
    text = fmt::format("{}\n", msg);
  } else {
    text = fmt::format("{}:{}:{} {}NCCL {} {}\n", s.host, getpid(), tid, where, levelName, msg);
  }
  (void)flags;
  std::lock_guard<std::mutex> lock(s.mutex);
  std::fwrite(text.data(), 1, text.size(), s.out);
  std::fflush(s.out);
}

extern "C" void tuttiPluginLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* f, ...) {
  if (!logEnabled(level, flags)) return;
  char buf[2048];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  logWriteLine(level, flags, file, line, buf);
}

// ---- last error -------------------------------------------------------------------------------
namespace {
std::mutex gErrMutex;
char gLastError[1024] = "";
thread_local int tQuietErrors = 0;
}  // namespace

void quietErrors(int delta) { tQuietErrors += delta; }

void reportError(ncclResult_t code, const char* file, int line, std::string msg) {
  if (tQuietErrors == 0) {
    std::lock_guard<std::mutex> lock(gErrMutex);
    std::snprintf(gLastError, sizeof gLastError, "%s", msg.c_str());
  }
  (void)code;
  if (logEnabled(NCCL_LOG_WARN, NCCL_ALL)) logWriteLine(NCCL_LOG_WARN, NCCL_ALL, file, line, msg);
}

// Returns a per-thread copy so a reader never races with a writer on the shared buffer.
const char* lastErrorText() {
  thread_local char copy[sizeof gLastError];
  std::lock_guard<std::mutex> lock(gErrMutex);
  std::memcpy(copy, gLastError, sizeof copy);
  return copy;
}

void restoreLastError(const std::string& text) {
  std::lock_guard<std::mutex> lock(gErrMutex);
  std::snprintf(gLastError, sizeof gLastError, "%s", text.c_str());
}

void clearLastError() {
  std::lock_guard<std::mutex> lock(gErrMutex);
  gLastError[0] = '\0';
}

}  // namespace tutti
