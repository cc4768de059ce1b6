/* A net plugin for the device backends' GPUDirect path: net-socket (ABI v12) that also takes device memory,
 * as a GPUDirect-capable NIC does. On the sim backend device memory is memfd-backed host memory, so sockets
 * can move it; what this plugin checks is how the core hands it over:
 *   - getProperties adds NCCL_PTR_CUDA, and NCCL_PTR_DMABUF unless GDR_TEST_NO_DMABUF is set;
 *   - regMr with NCCL_PTR_CUDA and regMrDmaBuf are counted; regMrDmaBuf maps the fd at the offset given and
 *     checks that it is the same memory as the pointer (a byte written through one is read through the other);
 *   - iflush calls on device-memory registrations are counted.
 * The test reads the counters through gdrTestCount() (dlopen RTLD_NOLOAD of this library). */
#include <tutti/net.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

enum { kRegHost, kRegCuda, kRegDmabuf, kDmabufAliasBad, kFlushes, kCounters };
static volatile int counters[kCounters];

__attribute__((visibility("default"))) int gdrTestCount(int which) {
  return which >= 0 && which < kCounters ? __atomic_load_n(&counters[which], __ATOMIC_ACQUIRE) : -1;
}
static void count(int which) { __atomic_add_fetch(&counters[which], 1, __ATOMIC_ACQ_REL); }

static const ncclNet_v12_t* real;

/* A memory handle: the inner one, and whether it is device memory. */
struct gdrMr {
  void* inner;
  int device;
};

static ncclResult_t gInit(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t log,
                          ncclProfilerCallback_t prof) {
  if (!real) {
    void* lib = dlopen(WRAPPED_NET, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return ncclSystemError;
    real = (const ncclNet_v12_t*)dlsym(lib, "ncclNetPlugin_v12");
    if (!real) return ncclSystemError;
  }
  return real->init(ctx, commId, config, log, prof);
}
static ncclResult_t gDevices(int* n) { return real->devices(n); }
static ncclResult_t gProps(int d, ncclNetProperties_v12_t* p) {
  ncclResult_t r = real->getProperties(d, p);
  if (r == ncclSuccess) p->ptrSupport |= NCCL_PTR_CUDA | (getenv("GDR_TEST_NO_DMABUF") ? 0 : NCCL_PTR_DMABUF);
  return r;
}
static ncclResult_t gListen(void* c, int d, void* h, void** l) { return real->listen(c, d, h, l); }
static ncclResult_t gConnect(void* c, int d, void* h, void** s, ncclNetDeviceHandle_v12_t** dh) {
  return real->connect(c, d, h, s, dh);
}
static ncclResult_t gAccept(void* l, void** r, ncclNetDeviceHandle_v12_t** dh) { return real->accept(l, r, dh); }

static ncclResult_t wrapMr(void* c, void* d, size_t s, int device, void** m) {
  struct gdrMr* mr = calloc(1, sizeof *mr);
  if (!mr) return ncclSystemError;
  ncclResult_t r = real->regMr(c, d, s, NCCL_PTR_HOST, &mr->inner); /* sim device memory is host-addressable */
  if (r != ncclSuccess) {
    free(mr);
    return r;
  }
  mr->device = device;
  *m = mr;
  return ncclSuccess;
}
static ncclResult_t gRegMr(void* c, void* d, size_t s, int t, void** m) {
  if (t != NCCL_PTR_HOST && t != NCCL_PTR_CUDA) return ncclInvalidArgument;
  count(t == NCCL_PTR_CUDA ? kRegCuda : kRegHost);
  return wrapMr(c, d, s, t == NCCL_PTR_CUDA, m);
}
static ncclResult_t gRegMrDmaBuf(void* c, void* d, size_t s, int t, uint64_t offset, int fd, void** m) {
  if (fd < 0) return gRegMr(c, d, s, t, m);
  count(kRegDmabuf);
  /* The fd must map the very memory at d: write through the mapping, read through the pointer, restore. */
  const long page = sysconf(_SC_PAGESIZE);
  const uint64_t start = offset & ~(uint64_t)(page - 1);
  const size_t len = (size_t)(offset - start) + s;
  unsigned char* map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
  if (map == MAP_FAILED) {
    count(kDmabufAliasBad);
  } else {
    volatile unsigned char* through = map + (offset - start);
    volatile unsigned char* direct = (volatile unsigned char*)d;
    const unsigned char saved = *direct;
    *through = (unsigned char)(saved ^ 0xa5);
    if (*direct != (unsigned char)(saved ^ 0xa5)) count(kDmabufAliasBad);
    *through = saved;
    munmap(map, len);
  }
  return wrapMr(c, d, s, 1, m);
}
static ncclResult_t gDeregMr(void* c, void* m) {
  struct gdrMr* mr = m;
  ncclResult_t r = real->deregMr(c, mr->inner);
  free(mr);
  return r;
}
static ncclResult_t gIsend(void* s, void* d, size_t n, int t, void* m, void* ph, void** r) {
  return real->isend(s, d, n, t, ((struct gdrMr*)m)->inner, ph, r);
}
static ncclResult_t gIrecv(void* rc, int n, void** d, size_t* s, int* t, void** m, void** ph, void** req) {
  void* inner[8];
  if (n < 1 || n > 8) return ncclInvalidArgument;
  for (int i = 0; i < n; i++) inner[i] = ((struct gdrMr*)m[i])->inner;
  return real->irecv(rc, n, d, s, t, inner, ph, req);
}
static ncclResult_t gIflush(void* rc, int n, void** d, int* s, void** m, void** req) {
  (void)rc, (void)d, (void)s;
  for (int i = 0; i < n; i++)
    if (((struct gdrMr*)m[i])->device) count(kFlushes);
  *req = NULL; /* nothing to order on the CPU: done at once */
  return ncclSuccess;
}
static ncclResult_t gTest(void* req, int* done, int* sizes) { return real->test(req, done, sizes); }
static ncclResult_t gCloseSend(void* c) { return real->closeSend(c); }
static ncclResult_t gCloseRecv(void* c) { return real->closeRecv(c); }
static ncclResult_t gCloseListen(void* c) { return real->closeListen(c); }
static ncclResult_t gFinalize(void* c) { return real->finalize(c); }

__attribute__((visibility("default"))) const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = "gdr-socket",
    .init = gInit,
    .devices = gDevices,
    .getProperties = gProps,
    .listen = gListen,
    .connect = gConnect,
    .accept = gAccept,
    .regMr = gRegMr,
    .regMrDmaBuf = gRegMrDmaBuf,
    .deregMr = gDeregMr,
    .isend = gIsend,
    .irecv = gIrecv,
    .iflush = gIflush,
    .test = gTest,
    .closeSend = gCloseSend,
    .closeRecv = gCloseRecv,
    .closeListen = gCloseListen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = gFinalize,
    .setNetAttr = NULL,
};
