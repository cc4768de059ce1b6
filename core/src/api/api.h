// How C entry points are defined. Every function of nccl.h is defined exactly once, with NCCL_API:
//
//   NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
//     return tutti::apiGuard("ncclGetVersion", [&] { ... return ncclSuccess; });
//   }
//
// NCCL_API gives the function C linkage and default visibility (the core is built with hidden
// visibility, so only these symbols leave libnccl.so.2) and defines `pncclGetVersion` as a second name
// of the same code. The `ncclX` name is weak so a profiling/interposition layer linked in front of the
// library can define its own `ncclX` and forward to `pncclX`.
//
// apiGuard runs the body and turns any C++ exception that escapes it into ncclInternalError with a
// message in ncclGetLastError: exceptions never cross the C ABI.
#pragma once

#include <nccl.h>

#include "util/check.h"

#include <exception>
#include <new>
#include <type_traits>

#define TUTTI_API_EXPORT __attribute__((visibility("default")))

// NCCL_API(returnType, name, parameters...) followed by the function body.
#define NCCL_API(ret, func, ...)                                                        \
  extern "C" TUTTI_API_EXPORT __attribute__((weak)) ret func(__VA_ARGS__);              \
  extern "C" TUTTI_API_EXPORT __attribute__((alias(#func))) ret p##func(__VA_ARGS__);   \
  extern "C" TUTTI_API_EXPORT __attribute__((weak)) ret func(__VA_ARGS__)

namespace tutti {

namespace detail {
// Logs the escaped exception and records it for ncclGetLastError (defined in api/errors.cc).
void reportEscapedException(const char* entryPoint, const char* what) noexcept;
}  // namespace detail

// Runs `body` (returning ncclResult_t) and converts an escaping exception to ncclInternalError.
// `entryPoint` names the C function in the message.
template <typename Body>
ncclResult_t apiGuard(const char* entryPoint, Body&& body) noexcept {
  static_assert(std::is_same_v<std::invoke_result_t<Body&>, ncclResult_t>, "body must return ncclResult_t");
  try {
    return body();
  } catch (const std::bad_alloc&) {
    detail::reportEscapedException(entryPoint, "out of host memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    detail::reportEscapedException(entryPoint, e.what());
  } catch (...) {
    detail::reportEscapedException(entryPoint, "unknown exception");
  }
  return ncclInternalError;
}

}  // namespace tutti
