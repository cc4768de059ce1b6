/* Tutti intra-node transport ABI.
 *
 * An intra-node transport moves data between two ranks of one host (same process: p2p; other process:
 * shm; ...). The core owns the protocol logic; a transport only provides, for each connection, memory both
 * ends can reach: the receiver's FIFO buffers (one per protocol) and a control block with the step
 * counters. The core then reads and writes that memory directly.
 *
 * A plugin exports one symbol, `tuttiTransport_v1`, of type tuttiTransport_v1_t. The struct starts with
 * its own size and ABI version so it can grow: the core reads only the fields that fit in `size`, and
 * fields added later are appended at the end. All callbacks return ncclSuccess or an ncclResult_t error;
 * on error, outputs are left untouched and the plugin has logged the reason through the logger it was
 * given in init. Callbacks are called from the core's threads, never concurrently for the same
 * connection; `ctx`-level callbacks may be called concurrently for different connections.
 */
#ifndef TUTTI_SDK_TRANSPORT_H_
#define TUTTI_SDK_TRANSPORT_H_

#include <tutti/common.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TUTTI_TRANSPORT_ABI_VERSION 1
#define TUTTI_TRANSPORT_SYMBOL "tuttiTransport_v1"

/* Protocol indices, NCCL's values. */
#define TUTTI_NUM_PROTOCOLS 3
#define TUTTI_PROTO_LL 0
#define TUTTI_PROTO_LL128 1
#define TUTTI_PROTO_SIMPLE 2

/* Slots per connection FIFO (NCCL_STEPS). */
#define TUTTI_STEPS 8

/* Opaque bytes a transport may use to describe one end of a connection to the other end. */
#define TUTTI_CONNECT_INFO_BYTES 256

/* Where a rank lives. Filled by the core for every rank of a communicator. */
typedef struct {
  int rank;              /* rank in the communicator */
  int cudaDev;           /* CUDA device ordinal, -1 on the host backend */
  uint64_t hostHash;     /* equal for ranks on the same host */
  uint64_t pidHash;      /* equal for ranks in the same process (includes hostHash) */
  int64_t busId;         /* PCI bus id of the device, -1 if none */
  int pid;               /* process id */
  int backend;           /* 0 = host backend, 1 = CUDA backend */
  /* Appended fields: a plugin written before them never reads them. */
  uint64_t pidNs;        /* pid namespace of the process (0: unknown): `pid` names it only where this matches */
} tuttiPeerInfo_t;

/* Control block of one connection, placed by the transport in memory both ends can reach. The layout is
 * fixed by this ABI: the core accesses it with atomic operations (64-bit counters, 32-bit futex words).
 * The sender owns `tail` (steps posted), the receiver owns `head` (steps consumed). Each counter has its
 * own 64-byte line so the two ends never write the same cache line. */
typedef struct {
  uint64_t tail;           /* steps the sender has made visible */
  uint32_t tailWaiters;    /* receivers sleeping on tailSeq */
  uint32_t tailSeq;        /* futex word bumped when tail advances and a waiter sleeps */
  uint32_t senderClosed;   /* sender end is gone (abort or peer death) */
  uint32_t pad0[11];
  uint64_t head;           /* steps the receiver has consumed */
  uint32_t headWaiters;
  uint32_t headSeq;
  uint32_t receiverClosed; /* receiver end is gone */
  uint32_t pad1a;
  uint64_t recvWanted;     /* steps the receiver's operations will consume so far (lets a proxy post
                              receives only for data that is expected) */
  uint32_t pad1[8];
  int64_t sizes[TUTTI_STEPS]; /* bytes carried by each slot, written by the sender before tail */
  int32_t protos[TUTTI_STEPS]; /* protocol (TUTTI_PROTO_*) of each slot's current use, written with sizes */
} tuttiConnCtrl_t;

/* Bytes of a device-memory handle (tuttiDeviceMem_t.exportHandle), sent to the peer inside the connect info. */
#define TUTTI_DEVMEM_HANDLE_BYTES 128

/* The core's device memory, offered to transports when a connection belongs to a device backend (sim, cuda):
 * FIFOs placed there are written and read by the GPU's kernels at device speed (host memory works too, the
 * core registers it with the device, but every access then crosses the host link). Memory from alloc() can be
 * exported to another process of the host and mapped there (cuMem POSIX fd or CUDA IPC on cuda, memfd on the
 * sim). Device memory is not host-addressable on a GPU: a transport reaches it only through these calls. */
typedef struct {
  ncclResult_t (*alloc)(void** ptr, size_t bytes);   /* zeroed */
  ncclResult_t (*free)(void* ptr);
  ncclResult_t (*exportHandle)(void* ptr, void* handle);            /* TUTTI_DEVMEM_HANDLE_BYTES */
  ncclResult_t (*importHandle)(const void* handle, void** ptr);     /* in another process of the host */
  ncclResult_t (*closeImport)(void* ptr);
  /* A DMA-BUF fd of [ptr, ptr + bytes) inside memory from alloc(), for a NIC to register directly (the net
   * plugin's regMrDmaBuf); the caller closes it. *fd = -1 with ncclSuccess: no DMA-BUF here (driver or GPU
   * without it), register the pointer as NCCL_PTR_CUDA instead. */
  ncclResult_t (*dmabufFd)(void* ptr, size_t bytes, int* fd, uint64_t* offset);
} tuttiDeviceMem_t;

/* What the core asks for when it opens a connection. */
typedef struct {
  int channel;                             /* channel index */
  int connIndex;                           /* 0: collectives, 1: point-to-point */
  int peer;                                /* rank at the other end */
  size_t buffSizes[TUTTI_NUM_PROTOCOLS];   /* bytes of FIFO per protocol (0: protocol unused) */
  int shared;                              /* process-shared futexes required (peer in another process) */
  /* Appended fields: a plugin written before them never reads them. */
  const tuttiDeviceMem_t* devMem;          /* device backends: where FIFOs may go (NULL on the host backend) */
} tuttiConnectRequest_t;

/* One end of an established connection, as mapped in the caller's process. */
typedef struct {
  void* buffs[TUTTI_NUM_PROTOCOLS];        /* the receiver's FIFO buffers (NULL where size is 0) */
  size_t buffSizes[TUTTI_NUM_PROTOCOLS];
  tuttiConnCtrl_t* ctrl;                   /* the connection's control block */
  int shared;                              /* futex words live in memory shared between processes */
  uint32_t flags;                          /* TUTTI_CONN_* */
} tuttiConnector_t;

/* The transport guarantees a reader never sees an LL128 flag before its 120 data bytes. */
#define TUTTI_CONN_LL128_SAFE 0x1
/* Data reaches the receiver through a proxy (network): each slot arrives whole, whatever its protocol, in
 * the receiver's SIMPLE buffer, slot i at i x (largest buffSizes[p] / TUTTI_STEPS); tail (not the line
 * flags) says when it is complete. The sender writes its slots in each protocol's own buffer as usual. */
#define TUTTI_CONN_PROXIED 0x2

typedef struct {
  /* sizeof(tuttiTransport_v1_t) as the plugin was compiled; the core ignores fields beyond it. */
  size_t size;
  /* TUTTI_TRANSPORT_ABI_VERSION the plugin was written for. */
  uint32_t version;
  /* Short name used in logs and in the config (e.g. "p2p"). Never NULL. */
  const char* name;

  /* Called once per process before any other callback. `logger` is the core's logger; the plugin keeps
   * it and never prints on its own. Returns a context passed to the other calls. Required. */
  ncclResult_t (*init)(ncclDebugLogger_t logger, void** ctx);

  /* Sets *ret to 1 when this transport can connect `self` to `peer` (both filled by the core), else 0.
   * Must not allocate. Required. */
  ncclResult_t (*canConnect)(void* ctx, const tuttiPeerInfo_t* self, const tuttiPeerInfo_t* peer, int* ret);

  /* Receiving end, step 1: allocate the FIFO buffers of req->buffSizes and a tuttiConnCtrl_t zeroed,
   * and describe them in `info` (TUTTI_CONNECT_INFO_BYTES, sent to the sender as is). *res receives the
   * plugin's resource handle for this end. Required. */
  ncclResult_t (*recvSetup)(void* ctx, const tuttiConnectRequest_t* req, const tuttiPeerInfo_t* self,
                            const tuttiPeerInfo_t* peer, void* info, void** res);
  /* Sending end, step 1: prepare, and describe this end in `info` (may be left empty). Required. */
  ncclResult_t (*sendSetup)(void* ctx, const tuttiConnectRequest_t* req, const tuttiPeerInfo_t* self,
                            const tuttiPeerInfo_t* peer, void* info, void** res);

  /* Step 2, each end: given the other end's `peerInfo` from step 1, fill `conn` with pointers valid in
   * this process. The receiver's conn points at its own buffers; the sender's at the receiver's.
   * Required. */
  ncclResult_t (*recvConnect)(void* res, const void* peerInfo, tuttiConnector_t* conn);
  ncclResult_t (*sendConnect)(void* res, const void* peerInfo, tuttiConnector_t* conn);

  /* Releases one end (either side). Called after both ends stopped using the connection, or on abort.
   * Must tolerate the other end being gone. Required. */
  ncclResult_t (*free)(void* res);

  /* Optional (may be NULL): progresses transport-side work (e.g. copy engines) for one end. *done set
   * when nothing is pending. */
  ncclResult_t (*proxyProgress)(void* res, int* done);

  /* Called once at process teardown (may be NULL). */
  ncclResult_t (*finalize)(void* ctx);

  /* TUTTI_TRANSPORT_CAP_* bits. A plugin built before this field existed reads as 0 (its `size` ends
   * before it). */
  uint32_t caps;
} tuttiTransport_v1_t;

/* Every connector this transport returns guarantees LL128 ordering (TUTTI_CONN_LL128_SAFE or
 * TUTTI_CONN_PROXIED). A communicator offers LL128 only when the transport chosen for every pair of its
 * ranks declares this, so every rank reaches the same answer before any connection exists. */
#define TUTTI_TRANSPORT_CAP_LL128 0x1u

typedef tuttiTransport_v1_t tuttiTransport_t;

#ifdef __cplusplus
}
#endif

#endif /* TUTTI_SDK_TRANSPORT_H_ */
