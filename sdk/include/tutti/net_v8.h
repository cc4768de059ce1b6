/* NCCL net plugin ABI, version 8 (symbol ncclNetPlugin_v8). As net_v9.h, but sizes in isend/irecv are
 * int (transfers must stay below 2 GiB), properties have no forceFlush / vProps / size limits, and there
 * are no virtual NICs. C. */
#ifndef TUTTI_SDK_NET_V8_H_
#define TUTTI_SDK_NET_V8_H_

#include <tutti/net_common.h>

typedef struct {
  char* name;                      /* for logs */
  char* pciPath;                   /* /sys path of the PCI device */
  uint64_t guid;                   /* same for every port/function of one NIC chip */
  int ptrSupport;                  /* NCCL_PTR_* bits */
  int regIsGlobal;                 /* registration valid for every comm */
  int speed;                       /* Mbps */
  int port;
  float latency;                   /* microseconds */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
  const char* name;
  /* Process-wide initialisation (once per load). */
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Non-blocking; *sendComm NULL until established. */
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  /* May be NULL without NCCL_PTR_DMABUF support. */
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  /* May be NULL when no flush is ever needed. */
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  /* Device offload only; may be NULL. */
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

#endif /* TUTTI_SDK_NET_V8_H_ */
