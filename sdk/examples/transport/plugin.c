/* Example intra-node transport: connects two ranks of the same process through plain heap memory.
 * Exports tuttiTransport_v1. Plain C11.
 *
 * A connection is one allocation made by the receiving end:
 *   [ header | tuttiConnCtrl_t ] [ LL FIFO ] [ LL128 FIFO ] [ Simple FIFO ]   (each part page-aligned)
 * The receiver describes it to the sender by address (valid only within this process); both ends hold a
 * reference, and whichever end is freed last releases the memory, whatever order ranks tear down in. */
#include <tutti/transport.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#define PAGE 4096
#define INFO_MAGIC 0x6578616d706c6531ULL /* "example1" */

static ncclDebugLogger_t gLog = NULL;
#define LOG_WARN(...) \
  do { if (gLog) gLog(NCCL_LOG_WARN, NCCL_SHM, __FILE__, __LINE__, __VA_ARGS__); } while (0)

/* First bytes of the allocation; the control block follows on its own 64-byte line. */
struct connMemory {
  atomic_int refs;
  size_t offsets[TUTTI_NUM_PROTOCOLS]; /* from the start of the allocation, 0 when the size is 0 */
  size_t sizes[TUTTI_NUM_PROTOCOLS];
};
#define CTRL_OFFSET 64
_Static_assert(sizeof(struct connMemory) <= CTRL_OFFSET, "header overlaps the control block");
_Static_assert(CTRL_OFFSET + sizeof(tuttiConnCtrl_t) <= PAGE, "control block does not fit in the first page");

/* What recvSetup writes into the TUTTI_CONNECT_INFO_BYTES the core carries to the sender. */
struct connectInfo {
  uint64_t magic;
  int32_t pid;
  struct connMemory* mem;
};
_Static_assert(sizeof(struct connectInfo) <= TUTTI_CONNECT_INFO_BYTES, "connect info too large");

/* The resource handle of one end. */
struct connEnd {
  struct connMemory* mem; /* the receiver's allocation; NULL on the sender until sendConnect */
};

static size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

static void memoryRelease(struct connMemory* m) {
  if (m && atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1) free(m);
}

static void fillConnector(struct connMemory* m, tuttiConnector_t* conn) {
  memset(conn, 0, sizeof *conn);
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
    conn->buffs[p] = m->sizes[p] ? (char*)m + m->offsets[p] : NULL;
    conn->buffSizes[p] = m->sizes[p];
  }
  conn->ctrl = (tuttiConnCtrl_t*)((char*)m + CTRL_OFFSET);
  conn->shared = 0; /* one process: private futexes are enough */
  /* Ordinary coherent memory: once a reader sees a flag it also sees the data stored before it. */
  conn->flags = TUTTI_CONN_LL128_SAFE;
}

static ncclResult_t exampleInit(ncclDebugLogger_t logger, void** ctx) {
  gLog = logger;
  *ctx = NULL; /* nothing process-wide to keep */
  return ncclSuccess;
}

static ncclResult_t exampleCanConnect(void* ctx, const tuttiPeerInfo_t* self, const tuttiPeerInfo_t* peer,
                                      int* ret) {
  (void)ctx;
  const char* off = getenv("TUTTI_EXAMPLE_TRANSPORT_DISABLE");
  /* Host backend only, and the peer must live in this very process (pidHash includes the host). */
  *ret = !(off && atoi(off) != 0) && self->backend == 0 && peer->backend == 0 &&
         self->hostHash == peer->hostHash && self->pidHash == peer->pidHash;
  return ncclSuccess;
}

static ncclResult_t exampleRecvSetup(void* ctx, const tuttiConnectRequest_t* req, const tuttiPeerInfo_t* self,
                                     const tuttiPeerInfo_t* peer, void* info, void** res) {
  (void)ctx;
  (void)self;
  size_t total = PAGE;
  size_t offsets[TUTTI_NUM_PROTOCOLS] = {0};
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
    if (req->buffSizes[p] == 0) continue;
    offsets[p] = total;
    total += roundUp(req->buffSizes[p], PAGE);
  }
  struct connEnd* end = malloc(sizeof *end);
  struct connMemory* m = aligned_alloc(PAGE, total); /* total is a multiple of PAGE, as C11 requires */
  if (!end || !m) {
    LOG_WARN("example transport: cannot allocate %zu bytes for channel %d, peer %d", total, req->channel,
             peer->rank);
    free(end);
    free(m);
    return ncclSystemError;
  }
  memset(m, 0, PAGE); /* header and control block start zeroed; FIFO contents need no initial value */
  atomic_init(&m->refs, 1);
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
    m->offsets[p] = offsets[p];
    m->sizes[p] = req->buffSizes[p];
  }
  struct connectInfo ci = {INFO_MAGIC, (int32_t)getpid(), m};
  memcpy(info, &ci, sizeof ci);
  end->mem = m;
  *res = end;
  return ncclSuccess;
}

static ncclResult_t exampleSendSetup(void* ctx, const tuttiConnectRequest_t* req, const tuttiPeerInfo_t* self,
                                     const tuttiPeerInfo_t* peer, void* info, void** res) {
  (void)ctx;
  (void)req;
  (void)self;
  (void)peer;
  (void)info; /* the receiver needs nothing from the sender */
  struct connEnd* end = calloc(1, sizeof *end);
  if (!end) return ncclSystemError;
  *res = end;
  return ncclSuccess;
}

static ncclResult_t exampleRecvConnect(void* res, const void* peerInfo, tuttiConnector_t* conn) {
  (void)peerInfo;
  fillConnector(((struct connEnd*)res)->mem, conn);
  return ncclSuccess;
}

static ncclResult_t exampleSendConnect(void* res, const void* peerInfo, tuttiConnector_t* conn) {
  struct connectInfo ci;
  memcpy(&ci, peerInfo, sizeof ci);
  /* An address is only meaningful in the process that made it. */
  if (ci.magic != INFO_MAGIC || ci.pid != (int32_t)getpid() || !ci.mem) {
    LOG_WARN("example transport: connect info is not from this process (magic %llx, pid %d, this pid %d)",
             (unsigned long long)ci.magic, (int)ci.pid, (int)getpid());
    return ncclInvalidUsage;
  }
  atomic_fetch_add_explicit(&ci.mem->refs, 1, memory_order_relaxed);
  ((struct connEnd*)res)->mem = ci.mem;
  fillConnector(ci.mem, conn);
  return ncclSuccess;
}

static ncclResult_t exampleFree(void* res) {
  struct connEnd* end = res;
  if (!end) return ncclSuccess;
  memoryRelease(end->mem);
  free(end);
  return ncclSuccess;
}

EXPORT const tuttiTransport_v1_t tuttiTransport_v1 = {
  .size = sizeof(tuttiTransport_v1_t),
  .version = TUTTI_TRANSPORT_ABI_VERSION,
  .name = "example",
  .init = exampleInit,
  .canConnect = exampleCanConnect,
  .recvSetup = exampleRecvSetup,
  .sendSetup = exampleSendSetup,
  .recvConnect = exampleRecvConnect,
  .sendConnect = exampleSendConnect,
  .free = exampleFree,
  .proxyProgress = NULL, /* the core's threads copy directly; nothing to progress */
  .finalize = NULL,      /* nothing process-wide to release */
};
