/* A deliberately broken net plugin for the tutti-plugin-check tests: it wraps net-socket (ABI v12) and
 * flips one byte of every received message larger than 1 KiB, so the tool must report the transfer
 * checks for those sizes as failed and pass the small ones. */
#include <tutti/net.h>

#include <dlfcn.h>
#include <stdlib.h>

static const ncclNet_v12_t* real;

struct wrapRecv {
  void* inner;
  unsigned char* data[8];
  int n;
};

static ncclResult_t wInit(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t log,
                          ncclProfilerCallback_t prof) {
  if (!real) {
    void* lib = dlopen(CORRUPT_NET_WRAPPED, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return ncclSystemError;
    real = (const ncclNet_v12_t*)dlsym(lib, "ncclNetPlugin_v12");
    if (!real) return ncclSystemError;
  }
  return real->init(ctx, commId, config, log, prof);
}
static ncclResult_t wDevices(int* n) { return real->devices(n); }
static ncclResult_t wProps(int d, ncclNetProperties_v12_t* p) { return real->getProperties(d, p); }
static ncclResult_t wListen(void* c, int d, void* h, void** l) { return real->listen(c, d, h, l); }
static ncclResult_t wConnect(void* c, int d, void* h, void** s, ncclNetDeviceHandle_v12_t** dh) {
  return real->connect(c, d, h, s, dh);
}
static ncclResult_t wAccept(void* l, void** r, ncclNetDeviceHandle_v12_t** dh) { return real->accept(l, r, dh); }
static ncclResult_t wRegMr(void* c, void* d, size_t s, int t, void** m) { return real->regMr(c, d, s, t, m); }
static ncclResult_t wDeregMr(void* c, void* m) { return real->deregMr(c, m); }
/* Send requests pass through untouched; receive requests are wrapped and listed in `live`, which is how
 * test() tells them apart (the tool drives one connection at a time, from one thread). */
static ncclResult_t wIsend(void* s, void* d, size_t n, int t, void* m, void* ph, void** r) {
  return real->isend(s, d, n, t, m, ph, r);
}
static struct wrapRecv* live[64];
static ncclResult_t wIrecv(void* rc, int n, void** d, size_t* s, int* t, void** m, void** ph, void** req) {
  void* inner = NULL;
  ncclResult_t r = real->irecv(rc, n, d, s, t, m, ph, &inner);
  if (r != ncclSuccess || !inner) {
    *req = inner;
    return r;
  }
  struct wrapRecv* w = calloc(1, sizeof *w);
  if (!w) return ncclSystemError;
  w->inner = inner;
  w->n = n < 8 ? n : 8;
  for (int i = 0; i < w->n; i++) w->data[i] = d[i];
  for (int i = 0; i < 64; i++)
    if (!live[i]) {
      live[i] = w;
      break;
    }
  *req = w;
  return ncclSuccess;
}
static int isWrapped(void* req) {
  for (int i = 0; i < 64; i++)
    if (live[i] == req) return i;
  return -1;
}
static ncclResult_t wTest(void* req, int* done, int* sizes) {
  int slot = isWrapped(req);
  if (slot < 0) return real->test(req, done, sizes);
  struct wrapRecv* w = req;
  int local[8] = {0};
  int* sz = sizes ? sizes : local;
  ncclResult_t r = real->test(w->inner, done, sz);
  if (r != ncclSuccess || !*done) return r;
  for (int i = 0; i < w->n; i++)
    if (sz[i] > 1024) w->data[i][sz[i] / 2] ^= 0x5a; /* the bug under test */
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
    .name = "corrupt",
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
