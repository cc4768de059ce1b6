/* In-process loopback network. listen() registers a listener in a process-wide table and writes its id
 * into the handle; connect() looks the id up and queues a new connection on the listener; accept() takes
 * it. Each connection is one ordered message stream: the n-th isend matches the n-th irecv, and the copy
 * happens as soon as both are posted (under the connection's lock), so test() only has to report. */
#include "loopback.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOOPBACK_HANDLE_MAGIC 0x6c6f6f706261636bULL /* "loopback" */

/* What listen() writes into the NCCL_NET_HANDLE_MAXSIZE-byte handle the core sends to the peer. */
struct loopbackHandle {
  uint64_t magic;
  uint64_t listenId;
  int32_t pid; /* pointers and ids mean nothing in another process: connect() checks this */
};
_Static_assert(sizeof(struct loopbackHandle) <= NCCL_NET_HANDLE_MAXSIZE, "handle too large");

struct loopbackConn;

struct loopbackRequest {
  struct loopbackEnd* end;
  void* data;
  size_t size;      /* bytes to send, or capacity of the receive buffer */
  size_t received;  /* bytes actually moved, valid once done */
  int done;
  ncclResult_t status;
  struct loopbackRequest* next; /* in the connection's send or receive queue */
};

/* One side of a connection: what the core holds as sendComm or recvComm. */
struct loopbackEnd {
  struct loopbackConn* conn;
  int isSend;
  int outstanding; /* requests posted and not yet reported done by test(); guarded by conn->lock */
};

struct loopbackQueue {
  struct loopbackRequest* head;
  struct loopbackRequest* tail;
};

/* Shared by the two ends; freed when the last reference (send end, receive side) goes away. */
struct loopbackConn {
  pthread_mutex_t lock;
  int refs;
  struct loopbackQueue sends;
  struct loopbackQueue recvs;
  struct loopbackConn* nextPending; /* in the listener's accept queue; guarded by gListenLock */
};

struct loopbackListen {
  uint64_t id;
  struct loopbackConn* pendingHead; /* connections waiting for accept(), oldest first */
  struct loopbackConn* pendingTail;
  struct loopbackListen* next;
};

/* Listeners of the whole process, so that connect() can find one from its handle. */
static pthread_mutex_t gListenLock = PTHREAD_MUTEX_INITIALIZER;
static struct loopbackListen* gListeners = NULL;
static uint64_t gNextListenId = 1;

static void queuePush(struct loopbackQueue* q, struct loopbackRequest* r) {
  r->next = NULL;
  if (q->tail) q->tail->next = r; else q->head = r;
  q->tail = r;
}

static struct loopbackRequest* queuePop(struct loopbackQueue* q) {
  struct loopbackRequest* r = q->head;
  if (r) {
    q->head = r->next;
    if (!q->head) q->tail = NULL;
  }
  return r;
}

/* Drops one reference; frees the connection (and requests nobody can complete any more) on the last. */
static void connRelease(struct loopbackConn* c) {
  pthread_mutex_lock(&c->lock);
  int left = --c->refs;
  pthread_mutex_unlock(&c->lock);
  if (left > 0) return;
  struct loopbackRequest* r;
  while ((r = queuePop(&c->sends)) != NULL) free(r);
  while ((r = queuePop(&c->recvs)) != NULL) free(r);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* Matches posted sends with posted receives in order and copies the bytes. Caller holds c->lock. */
static void connProgress(struct loopbackConn* c) {
  while (c->sends.head && c->recvs.head) {
    struct loopbackRequest* s = queuePop(&c->sends);
    struct loopbackRequest* r = queuePop(&c->recvs);
    if (s->size > r->size) {
      /* The core never sends more than the receiver posted; if it does, fail both sides loudly. */
      EXAMPLE_NET_LOG(NCCL_LOG_WARN, "loopback: message truncated: send of %zu bytes into a %zu-byte receive",
                      s->size, r->size);
      s->status = r->status = ncclInternalError;
    } else {
      if (s->size > 0) memcpy(r->data, s->data, s->size);
      s->received = r->received = s->size;
    }
    s->done = r->done = 1;
  }
}

ncclResult_t loopbackListen(void* ctx, int dev, void* handle, void** listenComm) {
  (void)ctx;
  if (dev != 0) {
    EXAMPLE_NET_LOG(NCCL_LOG_WARN, "loopback: listen on device %d, but there is only device 0", dev);
    return ncclInvalidArgument;
  }
  struct loopbackListen* l = calloc(1, sizeof *l);
  if (!l) return ncclSystemError;
  pthread_mutex_lock(&gListenLock);
  l->id = gNextListenId++;
  l->next = gListeners;
  gListeners = l;
  pthread_mutex_unlock(&gListenLock);

  struct loopbackHandle h = {LOOPBACK_HANDLE_MAGIC, l->id, (int32_t)getpid()};
  memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  memcpy(handle, &h, sizeof h);
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t loopbackConnect(void* ctx, int dev, void* handle, void** sendComm,
                             ncclNetDeviceHandle_v12_t** sendDevComm) {
  (void)ctx;
  (void)sendDevComm; /* no device offload: the core only asks when the device type is not HOST */
  *sendComm = NULL;
  struct loopbackHandle h;
  memcpy(&h, handle, sizeof h);
  if (dev != 0 || h.magic != LOOPBACK_HANDLE_MAGIC || h.pid != (int32_t)getpid()) {
    EXAMPLE_NET_LOG(NCCL_LOG_WARN,
                    "loopback: cannot connect: device %d, handle from pid %d (this is pid %d); the loopback "
                    "network only connects ranks of one process on device 0", dev, (int)h.pid, (int)getpid());
    return ncclInvalidArgument;
  }
  struct loopbackConn* c = calloc(1, sizeof *c);
  struct loopbackEnd* e = calloc(1, sizeof *e);
  if (!c || !e) {
    free(c);
    free(e);
    return ncclSystemError;
  }
  pthread_mutex_init(&c->lock, NULL);
  c->refs = 2; /* this send end + the receive side (pending on the listener, then the accepted end) */
  e->conn = c;
  e->isSend = 1;

  pthread_mutex_lock(&gListenLock);
  struct loopbackListen* l = gListeners;
  while (l && l->id != h.listenId) l = l->next;
  if (l) {
    if (l->pendingTail) l->pendingTail->nextPending = c; else l->pendingHead = c;
    l->pendingTail = c;
  }
  pthread_mutex_unlock(&gListenLock);
  if (!l) {
    EXAMPLE_NET_LOG(NCCL_LOG_WARN, "loopback: cannot connect: listener %llu is closed",
                    (unsigned long long)h.listenId);
    pthread_mutex_destroy(&c->lock);
    free(c);
    free(e);
    return ncclRemoteError;
  }
  /* Non-blocking by construction: the connection exists as soon as it is queued. */
  *sendComm = e;
  return ncclSuccess;
}

ncclResult_t loopbackAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** recvDevComm) {
  (void)recvDevComm;
  struct loopbackListen* l = listenComm;
  *recvComm = NULL;
  struct loopbackEnd* e = calloc(1, sizeof *e);
  if (!e) return ncclSystemError;
  pthread_mutex_lock(&gListenLock);
  struct loopbackConn* c = l->pendingHead;
  if (c) {
    l->pendingHead = c->nextPending;
    if (!l->pendingHead) l->pendingTail = NULL;
    c->nextPending = NULL;
  }
  pthread_mutex_unlock(&gListenLock);
  if (!c) {
    free(e); /* nobody connected yet: the core calls accept again later */
    return ncclSuccess;
  }
  e->conn = c;
  e->isSend = 0;
  *recvComm = e;
  return ncclSuccess;
}

/* A registration only remembers the range, so isend/irecv can check the buffer lies inside it. */
struct loopbackMr {
  char* base;
  size_t size;
};

ncclResult_t loopbackRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  (void)comm;
  if (type != NCCL_PTR_HOST) {
    EXAMPLE_NET_LOG(NCCL_LOG_WARN, "loopback: cannot register memory of type %d (only NCCL_PTR_HOST)", type);
    return ncclInvalidArgument;
  }
  struct loopbackMr* mr = malloc(sizeof *mr);
  if (!mr) return ncclSystemError;
  mr->base = data;
  mr->size = size;
  *mhandle = mr;
  return ncclSuccess;
}

ncclResult_t loopbackDeregMr(void* comm, void* mhandle) {
  (void)comm;
  free(mhandle);
  return ncclSuccess;
}

static int inRegistration(const void* mhandle, const void* data, size_t size) {
  const struct loopbackMr* mr = mhandle;
  if (!mr || size == 0) return 1; /* nothing registered to check against, or nothing to touch */
  const char* p = data;
  return p >= mr->base && size <= mr->size && (size_t)(p - mr->base) <= mr->size - size;
}

/* Posts one request on the end's queue; *request stays NULL when the end already has the most requests
 * the ABI allows in flight (the core then retries later). */
static ncclResult_t post(struct loopbackEnd* e, void* data, size_t size, void** request) {
  *request = NULL;
  struct loopbackConn* c = e->conn;
  pthread_mutex_lock(&c->lock);
  if (e->outstanding >= NCCL_NET_MAX_REQUESTS) {
    pthread_mutex_unlock(&c->lock);
    return ncclSuccess;
  }
  struct loopbackRequest* r = calloc(1, sizeof *r);
  if (!r) {
    pthread_mutex_unlock(&c->lock);
    return ncclSystemError;
  }
  r->end = e;
  r->data = data;
  r->size = size;
  r->status = ncclSuccess;
  queuePush(e->isSend ? &c->sends : &c->recvs, r);
  e->outstanding++;
  connProgress(c);
  pthread_mutex_unlock(&c->lock);
  *request = r;
  return ncclSuccess;
}

ncclResult_t loopbackIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                           void** request) {
  (void)tag;     /* one ordered stream per connection: sends match receives in posting order */
  (void)phandle; /* no profiler events of our own */
  if (size > MAX_NET_SIZE || !inRegistration(mhandle, data, size)) {
    EXAMPLE_NET_LOG(NCCL_LOG_WARN, "loopback: isend of %zu bytes at %p: larger than %ld bytes or outside its "
                    "registered buffer", size, data, (long)MAX_NET_SIZE);
    return ncclInvalidArgument;
  }
  return post(sendComm, data, size, request);
}

ncclResult_t loopbackIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                           void** phandles, void** request) {
  (void)tags;
  (void)phandles;
  if (n != 1) {
    EXAMPLE_NET_LOG(NCCL_LOG_WARN, "loopback: irecv of %d buffers, but maxRecvs is 1", n);
    return ncclInvalidArgument;
  }
  if (!inRegistration(mhandles ? mhandles[0] : NULL, data[0], sizes[0])) {
    EXAMPLE_NET_LOG(NCCL_LOG_WARN, "loopback: irecv buffer %p (%zu bytes) lies outside its registration",
                    data[0], sizes[0]);
    return ncclInvalidArgument;
  }
  return post(recvComm, data[0], sizes[0], request);
}

ncclResult_t loopbackTest(void* request, int* done, int* sizes) {
  struct loopbackRequest* r = request;
  struct loopbackEnd* e = r->end;
  pthread_mutex_lock(&e->conn->lock);
  connProgress(e->conn);
  *done = r->done;
  if (!r->done) {
    pthread_mutex_unlock(&e->conn->lock);
    return ncclSuccess;
  }
  e->outstanding--;
  pthread_mutex_unlock(&e->conn->lock);
  /* The size fits: isend refuses more than MAX_NET_SIZE (1 GiB) bytes. */
  if (sizes) sizes[0] = (int)r->received;
  ncclResult_t status = r->status;
  free(r); /* a completed request belongs to nobody any more */
  return status;
}

static ncclResult_t closeEnd(struct loopbackEnd* e) {
  if (!e) return ncclSuccess;
  pthread_mutex_lock(&e->conn->lock);
  int outstanding = e->outstanding;
  pthread_mutex_unlock(&e->conn->lock);
  if (outstanding > 0) {
    EXAMPLE_NET_LOG(NCCL_LOG_WARN, "loopback: closing a %s comm with %d requests not completed",
                    e->isSend ? "send" : "receive", outstanding);
  }
  connRelease(e->conn);
  free(e);
  return ncclSuccess;
}

ncclResult_t loopbackCloseSend(void* sendComm) { return closeEnd(sendComm); }
ncclResult_t loopbackCloseRecv(void* recvComm) { return closeEnd(recvComm); }

ncclResult_t loopbackCloseListen(void* listenComm) {
  struct loopbackListen* l = listenComm;
  if (!l) return ncclSuccess;
  pthread_mutex_lock(&gListenLock);
  struct loopbackListen** p = &gListeners;
  while (*p && *p != l) p = &(*p)->next;
  if (*p) *p = l->next;
  struct loopbackConn* pending = l->pendingHead;
  pthread_mutex_unlock(&gListenLock);
  /* Connections never accepted lose their receive side. */
  while (pending) {
    struct loopbackConn* next = pending->nextPending;
    connRelease(pending);
    pending = next;
  }
  free(l);
  return ncclSuccess;
}
