/* Minimal net plugin for ABI version TEST_NET_VERSION: exports only ncclNetPlugin_v<N>. Its name is
 * "test-net-v<N>", device 0 reports speed 1000*N Mbps and port N, and isend records the size it got. */
#include <tutti/net.h>
#include <tutti/net_wait.h> /* the optional extension's header builds as C too (not exported here) */

#include <string.h>

_Static_assert(sizeof(tuttiNetWait_v1_t) == sizeof(void*), "tuttiNetWait_v1_t is one function pointer");

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define STR2(x) #x
#define STR(x) STR2(x)
#define V TEST_NET_VERSION

static ncclResult_t devices(int* n) { *n = 1; return ncclSuccess; }
static ncclResult_t fail() { return ncclInternalError; }

#define FILL_PROPS(p)                       \
  memset((p), 0, sizeof(*(p)));             \
  (p)->name = (char*)"test-dev";            \
  (p)->pciPath = (char*)"/sys/test";        \
  (p)->guid = 0x1234;                       \
  (p)->ptrSupport = NCCL_PTR_HOST;          \
  (p)->speed = 1000 * V;                    \
  (p)->port = V;                            \
  (p)->latency = 1.5f;                      \
  (p)->maxComms = 64;                       \
  (p)->maxRecvs = 1

static int gInitCalls;
static long gLastSendSize = -1;
__attribute__((visibility("default"))) int testNetInitCalls(void) { return gInitCalls; }
__attribute__((visibility("default"))) long testNetLastSendSize(void) { return gLastSendSize; }

static ncclResult_t getProperties(int dev, CAT(CAT(ncclNetProperties_v, V), _t) * p) {
  (void)dev;
  FILL_PROPS(p);
#if V >= 9
  p->maxP2pBytes = 4096;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = 7;
#endif
#if V >= 11
  p->maxMultiRequestSize = 5;
#endif
#if V >= 12
  p->railId = 3;
  p->planeId = 4;
#endif
  return ncclSuccess;
}

#if V >= 11
static ncclResult_t init(void** ctx, uint64_t id, CAT(CAT(ncclNetCommConfig_v, V), _t) * c, ncclDebugLogger_t l,
                         ncclProfilerCallback_t pf) {
  (void)id; (void)c; (void)l; (void)pf; gInitCalls++; *ctx = &gInitCalls; return ncclSuccess;
}
#elif V == 10
static ncclResult_t init(ncclDebugLogger_t l, ncclProfilerCallback_t p) { (void)l; (void)p; gInitCalls++; return ncclSuccess; }
#else
static ncclResult_t init(ncclDebugLogger_t l) { (void)l; gInitCalls++; return ncclSuccess; }
#endif

#if V >= 10
static ncclResult_t isend(void* c, void* d, size_t s, int t, void* m, void* ph, void** r) {
  (void)c; (void)d; (void)t; (void)m; (void)ph; gLastSendSize = (long)s; *r = &gLastSendSize; return ncclSuccess;
}
#elif V == 9
static ncclResult_t isend(void* c, void* d, size_t s, int t, void* m, void** r) {
  (void)c; (void)d; (void)t; (void)m; gLastSendSize = (long)s; *r = &gLastSendSize; return ncclSuccess;
}
#else
static ncclResult_t isend(void* c, void* d, int s, int t, void* m, void** r) {
  (void)c; (void)d; (void)t; (void)m; gLastSendSize = s; *r = &gLastSendSize; return ncclSuccess;
}
#endif

__attribute__((visibility("default"))) const CAT(CAT(ncclNet_v, V), _t) CAT(ncclNetPlugin_v, V) = {
  .name = "test-net-v" STR(V),
  .init = init,
  .devices = devices,
  .getProperties = getProperties,
  .listen = (void*)fail,
  .connect = (void*)fail,
  .accept = (void*)fail,
  .regMr = (void*)fail,
  .deregMr = (void*)fail,
  .isend = isend,
  .irecv = (void*)fail,
  .test = (void*)fail,
  .closeSend = (void*)fail,
  .closeRecv = (void*)fail,
  .closeListen = (void*)fail,
};
