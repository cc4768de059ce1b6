/* In-process loopback network: the connection and data-path half of the example net plugin.
 * Every function here has the signature of the matching ncclNet_v12_t callback. */
#ifndef TUTTI_EXAMPLE_NET_LOOPBACK_H_
#define TUTTI_EXAMPLE_NET_LOOPBACK_H_

#include <tutti/net.h>

/* Set by init (plugin.c); NULL until then. Used for WARN/TRACE messages only. */
extern ncclDebugLogger_t exampleNetLog;

#define EXAMPLE_NET_LOG(level, ...)                                                 \
  do {                                                                              \
    if (exampleNetLog) exampleNetLog(level, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

ncclResult_t loopbackListen(void* ctx, int dev, void* handle, void** listenComm);
ncclResult_t loopbackConnect(void* ctx, int dev, void* handle, void** sendComm,
                             ncclNetDeviceHandle_v12_t** sendDevComm);
ncclResult_t loopbackAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** recvDevComm);
ncclResult_t loopbackRegMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t loopbackDeregMr(void* comm, void* mhandle);
ncclResult_t loopbackIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                           void** request);
ncclResult_t loopbackIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                           void** phandles, void** request);
ncclResult_t loopbackTest(void* request, int* done, int* sizes);
ncclResult_t loopbackCloseSend(void* sendComm);
ncclResult_t loopbackCloseRecv(void* recvComm);
ncclResult_t loopbackCloseListen(void* listenComm);

#endif /* TUTTI_EXAMPLE_NET_LOOPBACK_H_ */
