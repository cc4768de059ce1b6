/* NCCL net plugin ABI, version 10 (symbol ncclNetPlugin_v10). Semantics as in net_v12.h; differences:
 * init has no per-communicator context, the comm config travels with connect, and there is no finalize
 * or setNetAttr. C. */
#ifndef TUTTI_SDK_NET_V10_H_
#define TUTTI_SDK_NET_V10_H_

#include <tutti/net_common.h>

#define NCCL_NET_MAX_DEVS_PER_NIC_V10 4
#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V10];
} ncclNetVDeviceProps_v10_t;

typedef struct {
  int trafficClass; /* plugin-specific traffic class, NCCL_NET_TRAFFIC_CLASS_UNDEF for the default */
} ncclNetCommConfig_v10_t;

typedef struct {
  char* name;                      /* for logs */
  char* pciPath;                   /* /sys path of the PCI device */
  uint64_t guid;                   /* same for every port/function of one NIC chip */
  int ptrSupport;                  /* NCCL_PTR_* bits */
  int regIsGlobal;                 /* registration valid for every comm */
  int forceFlush;                  /* flush after every GPU receive */
  int speed;                       /* Mbps */
  int port;
  float latency;                   /* microseconds */
  int maxComms;
  int maxRecvs;                    /* most buffers per grouped irecv */
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v10_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v10_t;

typedef struct {
  const char* name;
  /* Process-wide initialisation (once per load). profFunction may be NULL. */
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  /* handle: NCCL_NET_HANDLE_MAXSIZE bytes written for the peer. */
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Non-blocking; *sendComm NULL until established. config may be NULL. */
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v10_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v10_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  /* May be NULL without NCCL_PTR_DMABUF support. */
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* *request NULL: retry later. phandle: profiler parent, may be NULL. */
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  /* May be NULL when no flush is ever needed. */
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  /* Device offload only; may be NULL. */
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  /* May be NULL (no virtual NICs). */
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclNet_v10_t;

#endif /* TUTTI_SDK_NET_V10_H_ */
