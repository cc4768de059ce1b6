// tutti.h: host streams.
#include <tutti.h>

#include "api/api.h"
#include "api/argcheck.h"
#include "device/host/stream.h"

using tutti::host::HostStream;
using tutti::host::StreamEvent;
using tutti::host::StreamGraph;

namespace {

ncclResult_t lookup(cudaStream_t s, const char* call, HostStream** out) {
  HostStream* hs = HostStream::fromHandle(s);
  if (!hs) TUTTI_FAIL(ncclInvalidArgument, "{}: {} is not a live host stream", call, static_cast<void*>(s));
  *out = hs;
  return ncclSuccess;
}

ncclResult_t lookupEvent(tuttiEvent_t e, const char* call, StreamEvent** out) {
  *out = StreamEvent::fromHandle(e);
  if (!*out) TUTTI_FAIL(ncclInvalidArgument, "{}: {} is not a live event (tuttiEventCreate)", call, static_cast<void*>(e));
  return ncclSuccess;
}

ncclResult_t lookupGraph(tuttiGraph_t g, const char* call, StreamGraph** out) {
  *out = StreamGraph::fromHandle(g);
  if (!*out) TUTTI_FAIL(ncclInvalidArgument, "{}: {} is not a live graph (tuttiStreamEndCapture)", call, static_cast<void*>(g));
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

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiEventCreate(tuttiEvent_t* event) {
  return tutti::apiGuard("tuttiEventCreate", [&]() -> ncclResult_t {
    TUTTI_CHECK(tutti::argCheckPtr(event, "event", "tuttiEventCreate"));
    *event = reinterpret_cast<tuttiEvent_t>(new StreamEvent());
    return ncclSuccess;
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiEventDestroy(tuttiEvent_t event) {
  return tutti::apiGuard("tuttiEventDestroy", [&]() -> ncclResult_t {
    StreamEvent* e = nullptr;
    TUTTI_CHECK(lookupEvent(event, "tuttiEventDestroy", &e));
    delete e;
    return ncclSuccess;
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiEventRecord(tuttiEvent_t event, cudaStream_t stream) {
  return tutti::apiGuard("tuttiEventRecord", [&]() -> ncclResult_t {
    StreamEvent* e = nullptr;
    HostStream* hs = nullptr;
    TUTTI_CHECK(lookupEvent(event, "tuttiEventRecord", &e));
    TUTTI_CHECK(lookup(stream, "tuttiEventRecord", &hs));
    return hs->recordEvent(e);
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiStreamWaitEvent(cudaStream_t stream, tuttiEvent_t event) {
  return tutti::apiGuard("tuttiStreamWaitEvent", [&]() -> ncclResult_t {
    StreamEvent* e = nullptr;
    HostStream* hs = nullptr;
    TUTTI_CHECK(lookupEvent(event, "tuttiStreamWaitEvent", &e));
    TUTTI_CHECK(lookup(stream, "tuttiStreamWaitEvent", &hs));
    return hs->waitEvent(e);
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiEventQuery(tuttiEvent_t event) {
  return tutti::apiGuard("tuttiEventQuery", [&]() -> ncclResult_t {
    StreamEvent* e = nullptr;
    TUTTI_CHECK(lookupEvent(event, "tuttiEventQuery", &e));
    return e->query();
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiEventSynchronize(tuttiEvent_t event) {
  return tutti::apiGuard("tuttiEventSynchronize", [&]() -> ncclResult_t {
    StreamEvent* e = nullptr;
    TUTTI_CHECK(lookupEvent(event, "tuttiEventSynchronize", &e));
    return e->synchronize();
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiLaunchHostFunc(cudaStream_t stream, void (*fn)(void*), void* arg) {
  return tutti::apiGuard("tuttiLaunchHostFunc", [&]() -> ncclResult_t {
    HostStream* hs = nullptr;
    TUTTI_CHECK(lookup(stream, "tuttiLaunchHostFunc", &hs));
    if (!fn) TUTTI_FAIL(ncclInvalidArgument, "tuttiLaunchHostFunc: fn is NULL");
    hs->enqueue([fn, arg] {
      fn(arg);
      return ncclSuccess;
    });
    return ncclSuccess;
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiStreamBeginCapture(cudaStream_t stream) {
  return tutti::apiGuard("tuttiStreamBeginCapture", [&]() -> ncclResult_t {
    HostStream* hs = nullptr;
    TUTTI_CHECK(lookup(stream, "tuttiStreamBeginCapture", &hs));
    return hs->beginCapture();
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiStreamEndCapture(cudaStream_t stream, tuttiGraph_t* graph) {
  return tutti::apiGuard("tuttiStreamEndCapture", [&]() -> ncclResult_t {
    HostStream* hs = nullptr;
    TUTTI_CHECK(lookup(stream, "tuttiStreamEndCapture", &hs));
    TUTTI_CHECK(tutti::argCheckPtr(graph, "graph", "tuttiStreamEndCapture"));
    StreamGraph* g = nullptr;
    TUTTI_CHECK(hs->endCapture(&g));
    *graph = reinterpret_cast<tuttiGraph_t>(g);
    return ncclSuccess;
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiStreamIsCapturing(cudaStream_t stream, int* capturing) {
  return tutti::apiGuard("tuttiStreamIsCapturing", [&]() -> ncclResult_t {
    HostStream* hs = nullptr;
    TUTTI_CHECK(lookup(stream, "tuttiStreamIsCapturing", &hs));
    TUTTI_CHECK(tutti::argCheckPtr(capturing, "capturing", "tuttiStreamIsCapturing"));
    *capturing = hs->capturing() ? 1 : 0;
    return ncclSuccess;
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiGraphLaunch(tuttiGraph_t graph, cudaStream_t stream) {
  return tutti::apiGuard("tuttiGraphLaunch", [&]() -> ncclResult_t {
    StreamGraph* g = nullptr;
    HostStream* hs = nullptr;
    TUTTI_CHECK(lookupGraph(graph, "tuttiGraphLaunch", &g));
    TUTTI_CHECK(lookup(stream, "tuttiGraphLaunch", &hs));
    g->launch(hs);
    return ncclSuccess;
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiGraphDestroy(tuttiGraph_t graph) {
  return tutti::apiGuard("tuttiGraphDestroy", [&]() -> ncclResult_t {
    StreamGraph* g = nullptr;
    TUTTI_CHECK(lookupGraph(graph, "tuttiGraphDestroy", &g));
    delete g;
    return ncclSuccess;
  });
}
