/* A net plugin for the tests: net-socket (ABI v12, WRAPPED_NET) whose isend and irecv turn every other call away as
 * busy (success with a null request, which the ABI allows: the caller posts again later), and which exports
 * net-socket's blocking wait (tuttiNetWait_v1). Ranks then have steps they made ready that the plugin has not taken
 * while they sleep in the plugin's wait. Requests pass through unwrapped; the count of calls is per process. */
#include <tutti/net.h>
#include <tutti/net_wait.h>

#include <dlfcn.h>
#include <stddef.h>

static const ncclNet_v12_t* real;
static const tuttiNetWait_v1_t* realWait;
static unsigned long sendCalls, recvCalls;  /* updated atomically: the rank's thread and the proxy thread post */

static int turnedAway(unsigned long* calls) { return __atomic_fetch_add(calls, 1, __ATOMIC_RELAXED) % 2 == 0; }

static ncclResult_t bInit(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t log,
                          ncclProfilerCallback_t prof) {
  if (!real) {
    void* lib = dlopen(WRAPPED_NET, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return ncclSystemError;
    real = (const ncclNet_v12_t*)dlsym(lib, "ncclNetPlugin_v12");
    realWait = (const tuttiNetWait_v1_t*)dlsym(lib, TUTTI_NET_WAIT_SYMBOL);
    if (!real || !realWait) return ncclSystemError;
  }
  return real->init(ctx, commId, config, log, prof);
}
static ncclResult_t bDevices(int* n) { return real->devices(n); }
static ncclResult_t bProps(int d, ncclNetProperties_v12_t* p) { return real->getProperties(d, p); }
static ncclResult_t bListen(void* c, int d, void* h, void** l) { return real->listen(c, d, h, l); }
static ncclResult_t bConnect(void* c, int d, void* h, void** s, ncclNetDeviceHandle_v12_t** dh) {
  return real->connect(c, d, h, s, dh);
}
static ncclResult_t bAccept(void* l, void** r, ncclNetDeviceHandle_v12_t** dh) { return real->accept(l, r, dh); }
static ncclResult_t bRegMr(void* c, void* d, size_t s, int t, void** m) { return real->regMr(c, d, s, t, m); }
static ncclResult_t bDeregMr(void* c, void* m) { return real->deregMr(c, m); }
static ncclResult_t bIsend(void* s, void* d, size_t n, int t, void* m, void* ph, void** r) {
  if (turnedAway(&sendCalls)) {
    *r = NULL;
    return ncclSuccess;
  }
  return real->isend(s, d, n, t, m, ph, r);
}
static ncclResult_t bIrecv(void* rc, int n, void** d, size_t* s, int* t, void** m, void** ph, void** req) {
  if (turnedAway(&recvCalls)) {
    *req = NULL;
    return ncclSuccess;
  }
  return real->irecv(rc, n, d, s, t, m, ph, req);
}
static ncclResult_t bTest(void* req, int* done, int* sizes) { return real->test(req, done, sizes); }
static ncclResult_t bIflush(void* rc, int n, void** d, int* s, void** m, void** req) {
  return real->iflush(rc, n, d, s, m, req);
}
static ncclResult_t bCloseSend(void* c) { return real->closeSend(c); }
static ncclResult_t bCloseRecv(void* c) { return real->closeRecv(c); }
static ncclResult_t bCloseListen(void* c) { return real->closeListen(c); }
static ncclResult_t bFinalize(void* c) { return real->finalize(c); }

__attribute__((visibility("default"))) const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = "busy-socket",
    .init = bInit,
    .devices = bDevices,
    .getProperties = bProps,
    .listen = bListen,
    .connect = bConnect,
    .accept = bAccept,
    .regMr = bRegMr,
    .regMrDmaBuf = NULL,
    .deregMr = bDeregMr,
    .isend = bIsend,
    .irecv = bIrecv,
    .iflush = bIflush,
    .test = bTest,
    .closeSend = bCloseSend,
    .closeRecv = bCloseRecv,
    .closeListen = bCloseListen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = bFinalize,
    .setNetAttr = NULL,
};

static ncclResult_t bWait(void* const* comms, int nComms, int timeoutUs, int* ready) {
  return realWait->waitComms(comms, nComms, timeoutUs, ready);
}
__attribute__((visibility("default"))) const tuttiNetWait_v1_t tuttiNetWait_v1 = {.waitComms = bWait};
