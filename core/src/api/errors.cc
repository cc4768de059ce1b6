// Version and error reporting entry points, and the exception sink of apiGuard.
#include "api/api.h"
#include "util/check.h"
#include "util/log.h"

namespace tutti::detail {

void reportEscapedException(const char* entryPoint, const char* what) noexcept {
  try {
    reportError(ncclInternalError, __FILE__, __LINE__,
                fmt::format("{}: internal error: unexpected exception: {}", entryPoint, what ? what : "?"));
  } catch (...) {
    // Formatting or recording failed (out of memory): the caller still returns ncclInternalError.
  }
}

}  // namespace tutti::detail

NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  if (version == nullptr) TUTTI_FAIL(ncclInvalidArgument, "ncclGetVersion: version argument is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (a CUDA call failed)";
    case ncclSystemError: return "unhandled system error (a system call, network or memory failure)";
    case ncclInternalError: return "internal error - please report this issue to the Tutti developers";
    case ncclInvalidArgument: return "invalid argument (see the last error message for details)";
    case ncclInvalidUsage: return "invalid usage (see the last error message for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "operation in progress";
    case ncclTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}

// The text is process-wide (the most recent failure of any thread), as in NCCL; comm is accepted for
// API compatibility and may be NULL.
NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  (void)comm;
  const char* text = tutti::lastErrorText();
  return text ? text : "";
}
