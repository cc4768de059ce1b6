// tutti.h: host streams.
#include <tutti.h>

#include "api/api.h"
#include "api/argcheck.h"
#include "device/host/stream.h"

using tutti::host::HostStream;

namespace {

ncclResult_t lookup(cudaStream_t s, const char* call, HostStream** out) {
  HostStream* hs = HostStream::fromHandle(s);
  if (!hs) TUTTI_FAIL(ncclInvalidArgument, "{}: {} is not a live host stream", call, static_cast<void*>(s));
  *out = hs;
  return ncclSuccess;
}

}  // namespace

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiStreamCreate(cudaStream_t* stream) {
  return tutti::apiGuard("tuttiStreamCreate", [&]() -> ncclResult_t {
    TUTTI_CHECK(tutti::argCheckPtr(stream, "stream", "tuttiStreamCreate"));
    *stream = (new HostStream())->handle();
    return ncclSuccess;
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiStreamSynchronize(cudaStream_t stream) {
  return tutti::apiGuard("tuttiStreamSynchronize", [&]() -> ncclResult_t {
    HostStream* hs = nullptr;
    TUTTI_CHECK(lookup(stream, "tuttiStreamSynchronize", &hs));
    return hs->synchronize();
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiStreamQuery(cudaStream_t stream) {
  return tutti::apiGuard("tuttiStreamQuery", [&]() -> ncclResult_t {
    HostStream* hs = nullptr;
    TUTTI_CHECK(lookup(stream, "tuttiStreamQuery", &hs));
    return hs->query();
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiStreamDestroy(cudaStream_t stream) {
  return tutti::apiGuard("tuttiStreamDestroy", [&]() -> ncclResult_t {
    HostStream* hs = nullptr;
    TUTTI_CHECK(lookup(stream, "tuttiStreamDestroy", &hs));
    delete hs;
    return ncclSuccess;
  });
}
