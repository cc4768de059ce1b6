/* NCCL net plugin ABI, version 12 (exported symbol: ncclNetPlugin_v12). Tutti's native net ABI.
 * All calls return ncclSuccess or an error; on error the outputs are unspecified and the core treats the
 * connection (or, for init/devices, the plugin) as failed. Unless stated, pointers are non-NULL and no
 * callback may be NULL. Thread-safety: the core serialises calls per comm object; different comms may be
 * used from different threads. C. */
#ifndef TUTTI_SDK_NET_V12_H_
#define TUTTI_SDK_NET_V12_H_

#include <tutti/net_common.h>

#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8

/* A virtual NIC fusing several physical devices (indices into the plugin's device list). */
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1

/* Per-communicator network settings passed to init. */
typedef struct {
  int trafficClass; /* plugin-specific traffic class, NCCL_NET_TRAFFIC_CLASS_UNDEF for the default */
} ncclNetCommConfig_v12_t;

/* What getProperties reports about one device. Strings stay owned by the plugin and must live until
 * finalize. */
typedef struct {
  char* name;                      /* for logs */
  char* pciPath;                   /* /sys path of the PCI device, used to place the NIC in the topology */
  uint64_t guid;                   /* same value for every port/function of one NIC chip */
  int ptrSupport;                  /* NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF */
  int regIsGlobal;                 /* 1: a registration is valid for every comm, not only the one given */
  int forceFlush;                  /* 1: the core must call iflush after every receive into GPU memory */
  int speed;                       /* port speed in Mbps */
  int port;                        /* port number */
  float latency;                   /* network latency in microseconds */
  int maxComms;                    /* most comms the device can hold */
  int maxRecvs;                    /* most buffers one irecv may post (grouped receive) */
  ncclNetDeviceType netDeviceType; /* offload type, NCCL_NET_DEVICE_HOST for none */
  int netDeviceVersion;            /* version of that offload */
  ncclNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;              /* largest single point-to-point transfer */
  size_t maxCollBytes;             /* largest single collective transfer */
  int maxMultiRequestSize;         /* most requests merged in one multi-request */
  int16_t railId;                  /* rail of this device, NCCL_NET_ID_UNDEF if unknown */
  int16_t planeId;                 /* plane of this device, NCCL_NET_ID_UNDEF if unknown */
} ncclNetProperties_v12_t;

#define NCCL_NET_ATTR_UNDEF -1
#define NCCL_NET_ID_UNDEF -1

/* Initialiser for ncclNetAttr_v12_t: every field "undefined". */
#define NCCL_NET_ATTR_INIT                                                                           \
  {                                                                                                  \
    {NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF},            \
    {NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF},            \
    (uint32_t)NCCL_NET_ATTR_UNDEF, (uint32_t)NCCL_NET_ATTR_UNDEF, (uint32_t)NCCL_NET_ATTR_UNDEF,     \
  }

/* Expected traffic shape on one side of the upcoming operations (hint). */
typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v12_t;

/* Hint passed to setNetAttr before a phase of operations. */
typedef struct {
  ncclNetCommAttr_v12_t sendCommAttr;
  ncclNetCommAttr_v12_t recvCommAttr;
  uint32_t op;    /* ncclFunc_t of the operation, or NCCL_NET_ATTR_UNDEF */
  uint32_t algo;  /* NCCL_ALGO_* or NCCL_NET_ATTR_UNDEF */
  uint32_t proto; /* NCCL_PROTO_* or NCCL_NET_ATTR_UNDEF */
} ncclNetAttr_v12_t;

typedef struct {
  /* Network name, for logs and for selecting a plugin by NCCL_NET. Owned by the plugin. */
  const char* name;
  /* Called once per communicator before anything else. Out: *ctx, the plugin's context for this
   * communicator (may be NULL if unused). commId identifies the communicator; config may be NULL
   * (defaults); logFunction is the core's logger (plugins must not print on their own); profFunction may be
   * NULL when no profiler is active. Failure: the plugin is not used. */
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t logFunction,
                       ncclProfilerCallback_t profFunction);
  /* Out: *ndev, number of devices (0 is valid: the plugin is then not used). */
  ncclResult_t (*devices)(int* ndev);
  /* Fills *props for device dev (0 <= dev < ndev). */
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  /* Creates a listening endpoint on dev. Out: handle (caller buffer of NCCL_NET_HANDLE_MAXSIZE bytes,
   * sent to the peer), *listenComm. */
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  /* Connects to a peer's handle without blocking: returns ncclSuccess with *sendComm == NULL until the
   * connection is up, then a non-NULL *sendComm. sendDevComm: if *sendDevComm is non-NULL the core asks
   * for device offload and the plugin fills it; may be NULL. */
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** sendDevComm);
  /* Non-blocking counterpart of connect on the listening side: *recvComm stays NULL until established. */
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** recvDevComm);
  /* Registers [data, data+size) of memory type `type` (NCCL_PTR_*) with a send or recv comm.
   * Out: *mhandle, passed to isend/irecv/iflush and released with deregMr. */
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  /* As regMr for a DMA-BUF (fd, offset). May be NULL when NCCL_PTR_DMABUF is not in ptrSupport. */
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  /* Releases a registration. */
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* Posts a send of size bytes with `tag`. phandle: the core's profiler parent for net events (may be NULL).
   * Out: *request, or NULL when the plugin cannot take it now (the core retries later). */
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  /* Posts n receives (n <= maxRecvs) into data[i] of at most sizes[i] bytes matching tags[i]. Out: *request
   * or NULL (retry later). */
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  /* Makes received GPU data visible to the GPU. Out: *request (NULL: nothing to flush). May be NULL when
   * the plugin never needs a flush. */
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  /* Polls a request. Out: *done (1 when complete, the request is then freed by the plugin); sizes, if not
   * NULL, receives the byte counts (one per buffer for a grouped irecv). */
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  /* Close comm objects; all their requests must be complete. */
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  /* Device offload: converts mhandle into the form device code uses. May be NULL without offload. */
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  /* Device offload: tells the plugin the device consumed a receive. May be NULL without offload. */
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  /* Creates a virtual NIC from props. Out: *d, its device index. May be NULL (no virtual NICs). */
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  /* Releases the context init returned; called once per successful init. */
  ncclResult_t (*finalize)(void* ctx);
  /* Hint about the coming traffic (see ncclNetAttr_v12_t). May be NULL; failure is logged and ignored. */
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v12_t* netAttr);
} ncclNet_v12_t;

#endif /* TUTTI_SDK_NET_V12_H_ */
