/* Minimal profiler plugin for ABI version TEST_PROFILER_VERSION (exports only ncclProfiler_v<N>).
 * init asks for every event; startEvent returns a handle encoding the type and records the last
 * descriptor's type/rank/coll.count; testProfilerInitCalls() counts inits. */
#include <tutti/profiler.h>
#include <tutti/profiler_v4.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define STR2(x) #x
#define STR(x) STR2(x)
#define V TEST_PROFILER_VERSION

static int gInit, gCtx, gStates;
static long gLastType = -1, gLastCount = -1;
static void* gLastParent;
__attribute__((visibility("default"))) int testProfilerInitCalls(void) { return gInit; }
__attribute__((visibility("default"))) long testProfilerLastType(void) { return gLastType; }
__attribute__((visibility("default"))) long testProfilerLastCount(void) { return gLastCount; }
__attribute__((visibility("default"))) void* testProfilerLastParent(void) { return gLastParent; }
__attribute__((visibility("default"))) int testProfilerStates(void) { return gStates; }

#if V >= 5
static ncclResult_t init(void** ctx, uint64_t id, int* mask, const char* name, int nn, int nr, int r,
                         ncclDebugLogger_t l) {
  (void)id;
#else
static ncclResult_t init(void** ctx, int* mask, const char* name, uint64_t id, int nn, int nr, int r,
                         ncclDebugLogger_t l) {
  (void)id;
#endif
  (void)name; (void)nn; (void)nr; (void)r; (void)l;
  *mask = ~0; *ctx = &gCtx; gInit++; return ncclSuccess;
}

static ncclResult_t start(void* ctx, void** h, CAT(CAT(ncclProfilerEventDescr_v, V), _t) * d) {
  if (ctx != &gCtx) return ncclInternalError;
  gLastType = (long)d->type;
  gLastParent = d->parentObj;
  if (d->type == ncclProfileColl) gLastCount = (long)d->coll.count;
  *h = (void*)(uintptr_t)(d->type + 1);
  return ncclSuccess;
}
static ncclResult_t stop(void* h) { (void)h; return ncclSuccess; }
static ncclResult_t record(void* h, CAT(CAT(ncclProfilerEventState_v, V), _t) s,
                           CAT(CAT(ncclProfilerEventStateArgs_v, V), _t) * a) {
  (void)h; (void)s; (void)a; gStates++; return ncclSuccess;
}
static ncclResult_t fin(void* ctx) { return ctx == &gCtx ? ncclSuccess : ncclInternalError; }

__attribute__((visibility("default"))) const CAT(CAT(ncclProfiler_v, V), _t) CAT(ncclProfiler_v, V) = {
  .name = "test-profiler-v" STR(V),
  .init = init,
  .startEvent = start,
  .stopEvent = stop,
  .recordEventState = record,
  .finalize = fin,
};
