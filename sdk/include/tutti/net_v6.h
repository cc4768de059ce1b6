/* NCCL net plugin ABI, version 6 (symbol ncclNetPlugin_v6). As net_v7.h, without device offload:
 * connect/accept take no device handle, properties have no offload fields, and at most
 * NCCL_NET_MAX_REQUESTS_V6 requests may be outstanding per comm. C. */
#ifndef TUTTI_SDK_NET_V6_H_
#define TUTTI_SDK_NET_V6_H_

#include <tutti/net_common.h>

typedef struct {
  char* name;     /* for logs */
  char* pciPath;  /* /sys path of the PCI device */
  uint64_t guid;  /* same for every port/function of one NIC chip */
  int ptrSupport; /* NCCL_PTR_* bits */
  int speed;      /* Mbps */
  int port;
  float latency;  /* microseconds */
  int maxComms;
  int maxRecvs;
} ncclNetProperties_v6_t;

typedef struct {
  const char* name;
  /* Process-wide initialisation (once per load). */
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Non-blocking; *sendComm NULL until established. */
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
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
} ncclNet_v6_t;

#endif /* TUTTI_SDK_NET_V6_H_ */
