/* Definitions shared by every version of the NCCL net plugin ABI (values identical to NCCL's).
 * Included by net_v6.h .. net_v12.h; plugins normally include <tutti/net.h>. C. */
#ifndef TUTTI_SDK_NET_COMMON_H_
#define TUTTI_SDK_NET_COMMON_H_

#include <tutti/common.h>

/* Opaque connection handle exchanged out of band between ranks: listen() writes at most this many bytes. */
#define NCCL_NET_HANDLE_MAXSIZE 128
/* Largest maxP2pBytes / maxCollBytes the core accepts (1 TiB). */
#define NCCL_MAX_NET_SIZE_BYTES (1 * 1024 * 1024 * 1024 * 1024L)
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_NET_MULTI_REQUEST 0x2

/* Transfer limits assumed for plugins too old to report them (v6..v8). */
#define MAX_NET_SIZE (1024 * 1024 * 1024L)
#define MAX_COLLNET_SIZE (512 * 1024 * 1024L)

/* ptrSupport bits and the `type` of regMr: where a buffer lives. */
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

#define NCCL_NET_MR_FLAG_FORCE_SO (1 << 0)
#define NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET (1 << 1)
#define NCCL_NET_SIGNAL_OP_INC 0x1
#define NCCL_NET_SIGNAL_OP_ADD 0x2

/* Most requests outstanding per comm (v7+); v6 plugins were limited to 8. */
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_REQUESTS_V6 8

#ifndef NCCL_NET_MAX_PLUGINS
#define NCCL_NET_MAX_PLUGINS 16
#endif

/* Device-side (offloaded) networking. */
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_MTU_SIZE 4096
#define NCCL_NET_DEVICE_UNPACK_VERSION 0x7

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3,
  NCCL_NET_DEVICE_GIN_GPI = 4
} ncclNetDeviceType;

/* Returned by connect/accept when the core asked for device offload. Owned by the plugin. */
typedef struct {
  ncclNetDeviceType netDeviceType; /* offload type */
  int netDeviceVersion;            /* must match the core's version for that type */
  void* handle;                    /* plugin data for the device code */
  size_t size;                     /* bytes at handle */
  int needsProxyProgress;          /* non-zero: the proxy must keep calling test() */
} ncclNetDeviceHandle_v7_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v9_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v10_t ncclNetDeviceHandle_v11_t;
typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_v12_t;
typedef ncclNetDeviceHandle_v12_t ncclNetDeviceHandle_t;

#ifndef TUTTI_NCCL_PROFILER_CALLBACK_DEFINED
#define TUTTI_NCCL_PROFILER_CALLBACK_DEFINED
/* `type` argument of ncclProfilerCallback_t. */
enum {
  ncclProfilerNetEventStart = 0,
  ncclProfilerNetEventStop,
  ncclProfilerNetEventUpdate,
  ncclProfilerNetEventUpdateAndStop
};
/* Handed to net plugins (v10+) so they can report their own events to the profiler. Start: *eHandle
 * receives the new event (pHandle = the core's parent handle from isend/irecv's phandle, pluginId and
 * extData describe it); Stop/Update act on *eHandle. May be called from any thread. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* pHandle, int64_t pluginId,
                                               void* extData);
#endif

#endif /* TUTTI_SDK_NET_COMMON_H_ */
