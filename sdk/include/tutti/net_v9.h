/* NCCL net plugin ABI, version 9 (symbol ncclNetPlugin_v9). Semantics as in net_v12.h; differences:
 * process-wide init without profiler callback, no comm config, no profiler handles in isend/irecv,
 * no finalize or setNetAttr. C. */
#ifndef TUTTI_SDK_NET_V9_H_
#define TUTTI_SDK_NET_V9_H_

#include <tutti/net_common.h>

#define NCCL_NET_MAX_DEVS_PER_NIC_V9 4

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V9];
} ncclNetVDeviceProps_v9_t;

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
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v9_t;

typedef struct {
  const char* name;
  /* Process-wide initialisation (once per load). */
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Non-blocking; *sendComm NULL until established. */
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v9_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v9_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  /* May be NULL without NCCL_PTR_DMABUF support. */
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
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
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclNet_v9_t;

#endif /* TUTTI_SDK_NET_V9_H_ */
