/* Test net plugins for the tutti-plugin-check tests: each wraps net-socket (ABI v12), one change per build:
 *   WRAP_CORRUPT  flips one byte of every received message larger than 1 KiB (the tool must FAIL those
 *                 transfers and PASS the small ones)
 *   WRAP_GROUPED  announces maxRecvs = 4 and serves a grouped irecv as one inner irecv per buffer, so
 *                 the tool's grouped-receive check runs against a correct plugin
 *   WRAP_DEAF_WAIT exports a tuttiNetWait_v1 that sleeps its whole timeout and reports 0 (nothing to move)
 *                 whatever arrived: the tool must FAIL net.wait */
#include <tutti/net.h>
#include <tutti/net_wait.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

#define MAX_GROUP 8

static const ncclNet_v12_t* real;

/* A receive request: the inner request of each buffer. Send requests pass through unwrapped; receive
 * requests are listed in `live`, which is how test() tells them apart (the tool drives one connection at
 * a time, from one thread). */
struct wrapRecv {
  void* inner[MAX_GROUP];
  int done[MAX_GROUP];
  int sizes[MAX_GROUP];
  unsigned char* data[MAX_GROUP];
  int n;
};
static struct wrapRecv* live[64];

static ncclResult_t wInit(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t log,
                          ncclProfilerCallback_t prof) {
  if (!real) {
    void* lib = dlopen(WRAPPED_NET, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return ncclSystemError;
    real = (const ncclNet_v12_t*)dlsym(lib, "ncclNetPlugin_v12");
    if (!real) return ncclSystemError;
  }
  return real->init(ctx, commId, config, log, prof);
}
static ncclResult_t wDevices(int* n) { return real->devices(n); }
static ncclResult_t wProps(int d, ncclNetProperties_v12_t* p) {
  ncclResult_t r = real->getProperties(d, p);
#ifdef WRAP_GROUPED
  if (r == ncclSuccess) p->maxRecvs = 4;
#endif
  return r;
}
static ncclResult_t wListen(void* c, int d, void* h, void** l) { return real->listen(c, d, h, l); }
static ncclResult_t wConnect(void* c, int d, void* h, void** s, ncclNetDeviceHandle_v12_t** dh) {
  return real->connect(c, d, h, s, dh);
}
static ncclResult_t wAccept(void* l, void** r, ncclNetDeviceHandle_v12_t** dh) { return real->accept(l, r, dh); }
static ncclResult_t wRegMr(void* c, void* d, size_t s, int t, void** m) { return real->regMr(c, d, s, t, m); }
static ncclResult_t wDeregMr(void* c, void* m) { return real->deregMr(c, m); }
static ncclResult_t wIsend(void* s, void* d, size_t n, int t, void* m, void* ph, void** r) {
  return real->isend(s, d, n, t, m, ph, r);
}
static ncclResult_t wIrecv(void* rc, int n, void** d, size_t* s, int* t, void** m, void** ph, void** req) {
  if (n < 1 || n > MAX_GROUP) return ncclInvalidArgument;
  struct wrapRecv* w = calloc(1, sizeof *w);
  if (!w) return ncclSystemError;
  w->n = n;
  for (int i = 0; i < n; i++) {
    w->data[i] = d[i];
    ncclResult_t r = real->irecv(rc, 1, &d[i], &s[i], &t[i], &m[i], &ph[i], &w->inner[i]);
    if (r != ncclSuccess || !w->inner[i]) {
      free(w);
      if (r == ncclSuccess && i == 0) {
        *req = NULL; /* nothing posted yet: the caller retries */
        return ncclSuccess;
      }
      return r != ncclSuccess ? r : ncclInternalError; /* half a group posted: give up (test plugin) */
    }
  }
  for (int i = 0; i < 64; i++)
    if (!live[i]) {
      live[i] = w;
      *req = w;
      return ncclSuccess;
    }
  free(w);
  return ncclInternalError;
}
static ncclResult_t wTest(void* req, int* done, int* sizes) {
  int slot = -1;
  for (int i = 0; i < 64; i++)
    if (live[i] == req) slot = i;
  if (slot < 0) return real->test(req, done, sizes);
  struct wrapRecv* w = req;
  int all = 1;
  for (int i = 0; i < w->n; i++) {
    if (w->done[i]) continue;
    ncclResult_t r = real->test(w->inner[i], &w->done[i], &w->sizes[i]);
    if (r != ncclSuccess) return r;
    if (!w->done[i]) all = 0;
  }
  *done = all;
  if (!all) return ncclSuccess;
  for (int i = 0; i < w->n; i++) {
#ifdef WRAP_CORRUPT
    if (w->sizes[i] > 1024) w->data[i][w->sizes[i] / 2] ^= 0x5a; /* the bug under test */
#endif
    if (sizes) sizes[i] = w->sizes[i];
  }
  live[slot] = NULL;
  free(w);
  return ncclSuccess;
}
static ncclResult_t wIflush(void* rc, int n, void** d, int* s, void** m, void** req) {
  return real->iflush(rc, n, d, s, m, req);
}
static ncclResult_t wCloseSend(void* c) { return real->closeSend(c); }
static ncclResult_t wCloseRecv(void* c) { return real->closeRecv(c); }
static ncclResult_t wCloseListen(void* c) { return real->closeListen(c); }
static ncclResult_t wFinalize(void* c) { return real->finalize(c); }

__attribute__((visibility("default"))) const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = "wrapped-socket",
    .init = wInit,
    .devices = wDevices,
    .getProperties = wProps,
    .listen = wListen,
    .connect = wConnect,
    .accept = wAccept,
    .regMr = wRegMr,
    .regMrDmaBuf = NULL,
    .deregMr = wDeregMr,
    .isend = wIsend,
    .irecv = wIrecv,
    .iflush = wIflush,
    .test = wTest,
    .closeSend = wCloseSend,
    .closeRecv = wCloseRecv,
    .closeListen = wCloseListen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = wFinalize,
    .setNetAttr = NULL,
};

#ifdef WRAP_DEAF_WAIT
static ncclResult_t deafWait(void* const* comms, int nComms, int timeoutUs, int* ready) {
  (void)comms;
  (void)nComms;
  struct timespec ts = {timeoutUs / 1000000, (long)(timeoutUs % 1000000) * 1000};
  nanosleep(&ts, NULL);
  *ready = 0;
  return ncclSuccess;
}
__attribute__((visibility("default"))) const tuttiNetWait_v1_t tuttiNetWait_v1 = {.waitComms = deafWait};
#endif
