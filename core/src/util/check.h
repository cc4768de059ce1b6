// Error propagation inside the core: functions return ncclResult_t; failures are logged once, where they
// are detected, with what the user needs to fix them (TUTTI_FAIL), and passed up unchanged (TUTTI_CHECK).
// C++ exceptions never cross the C API or a plugin boundary (see api/ entry-point wrapper).
#pragma once

#include "util/log.h"

#include <string>

namespace tutti {

// Records `msg` as the text ncclGetLastError returns, and logs it at WARN.
void reportError(ncclResult_t code, const char* file, int line, std::string msg);
// Text for ncclGetLastError (the most recent error of any thread).
const char* lastErrorText();
void clearLastError();
// Puts back a text saved from lastErrorText() (no log line).
void restoreLastError(const std::string& text);
// While > 0 on a thread, its errors are logged but not recorded for ncclGetLastError (LastErrorKeeper).
void quietErrors(int delta);

// Keeps ncclGetLastError's text across best-effort work whose own failures are only consequences of the
// error being reported (e.g. telling a dead peer why we abort): errors of this thread in the scope are
// logged, never recorded. (Saving and restoring the text instead would race with other threads' errors.)
class LastErrorKeeper {
 public:
  LastErrorKeeper() { quietErrors(+1); }
  ~LastErrorKeeper() { quietErrors(-1); }
  LastErrorKeeper(const LastErrorKeeper&) = delete;
  LastErrorKeeper& operator=(const LastErrorKeeper&) = delete;
};

}  // namespace tutti

// Returns `code` from the enclosing function after logging a formatted message.
#define TUTTI_FAIL(code, ...)                                                           \
  do {                                                                                  \
    ::tutti::reportError((code), __FILE__, __LINE__, ::fmt::format(__VA_ARGS__));       \
    return (code);                                                                      \
  } while (0)

// Propagates a failure (anything but ncclSuccess / ncclInProgress) unchanged.
#define TUTTI_CHECK(call)                                                               \
  do {                                                                                  \
    ncclResult_t tuttiRes_ = (call);                                                    \
    if (tuttiRes_ != ncclSuccess && tuttiRes_ != ncclInProgress) {                      \
      TUTTI_TRACE(NCCL_ALL, "{} -> {}", #call, static_cast<int>(tuttiRes_));            \
      return tuttiRes_;                                                                 \
    }                                                                                   \
  } while (0)

// Checks a POSIX call returning -1/errno; fails with ncclSystemError naming the call.
#define TUTTI_SYSCHECK(call, what)                                                      \
  do {                                                                                  \
    if ((call) == -1) {                                                                 \
      int tuttiErr_ = errno;                                                            \
      TUTTI_FAIL(ncclSystemError, "{} failed: {}", (what), ::std::strerror(tuttiErr_)); \
    }                                                                                   \
  } while (0)
