/* Types shared by every Tutti plugin ABI. Values are NCCL's, so NCCL plugins and Tutti agree on them.
 * This header is C (plugins may be written in C) and may be included together with nccl.h. */
#ifndef TUTTI_SDK_COMMON_H_
#define TUTTI_SDK_COMMON_H_

#include <stddef.h>
#include <stdint.h>

#ifndef TUTTI_NCCL_RESULT_DEFINED
#define TUTTI_NCCL_RESULT_DEFINED
/* Same names and values as nccl.h. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;
#endif

#ifndef TUTTI_NCCL_DEBUG_TYPES_DEFINED
#define TUTTI_NCCL_DEBUG_TYPES_DEFINED
typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

/* Subsystem flags, as NCCL_DEBUG_SUBSYS names them. */
typedef enum {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_PROFILE = 0x4000,
  NCCL_RAS = 0x8000,
  NCCL_DESTROY = 0x10000,
  NCCL_ALLOC_HOST = 0x20000,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

/* The core's logger, handed to every plugin in init. `fmt` is printf-style. Plugins never print on
 * their own; they call this. */
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);
#endif

#ifndef TUTTI_NCCL_FUNC_DEFINED
#define TUTTI_NCCL_FUNC_DEFINED
/* Collective kinds as tuner and profiler plugins see them. */
#define NCCL_NUM_FUNCTIONS 5 /* Broadcast..AllReduce; send/recv are not tuned */
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclFuncAlltoAll = 8,
  ncclFuncScatter = 9,
  ncclFuncGather = 10,
  ncclFuncAllGatherV = 11,
  ncclFuncPutSignal = 12,
  ncclFuncSignal = 13,
  ncclFuncWaitSignal = 14,
  ncclNumFuncs = 15
} ncclFunc_t;
#endif

#endif /* TUTTI_SDK_COMMON_H_ */
