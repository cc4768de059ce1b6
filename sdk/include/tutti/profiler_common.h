/* Definitions shared by every version of the NCCL profiler plugin ABI (values identical to NCCL's). C. */
#ifndef TUTTI_SDK_PROFILER_COMMON_H_
#define TUTTI_SDK_PROFILER_COMMON_H_

#include <tutti/common.h>

#include <sys/types.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

typedef pid_t ncclPid_t;

/* Event type bits: ncclProfilerEventDescr_vN_t.type and the activation mask set in init. */
enum {
  ncclProfileGroup = (1 << 0),        /* group of operations */
  ncclProfileColl = (1 << 1),         /* one collective */
  ncclProfileP2p = (1 << 2),          /* one send or receive */
  ncclProfileProxyOp = (1 << 3),      /* proxy operation for one channel and peer */
  ncclProfileProxyStep = (1 << 4),    /* one step of a proxy operation */
  ncclProfileProxyCtrl = (1 << 5),    /* proxy thread state */
  ncclProfileKernelCh = (1 << 6),     /* one channel of a kernel */
  ncclProfileNetPlugin = (1 << 7),    /* events defined by the net plugin */
  ncclProfileGroupApi = (1 << 8),     /* ncclGroupStart/End (v5+) */
  ncclProfileCollApi = (1 << 9),      /* collective API call (v5+) */
  ncclProfileP2pApi = (1 << 10),      /* send/recv API call (v5+) */
  ncclProfileKernelLaunch = (1 << 11),/* kernel launch (v5+) */
  ncclProfileCeColl = (1 << 12),      /* copy-engine collective (v6) */
  ncclProfileCeSync = (1 << 13),      /* copy-engine synchronisation (v6) */
  ncclProfileCeBatch = (1 << 14)      /* copy-engine batch (v6) */
};

/* States passed to recordEventState. */
typedef enum {
  ncclProfilerProxyOpSendPosted = 0, /* 0..7: states of versions before v4 */
  ncclProfilerProxyOpSendRemFifoWait = 1,
  ncclProfilerProxyOpSendTransmitted = 2,
  ncclProfilerProxyOpSendDone = 3,
  ncclProfilerProxyOpRecvPosted = 4,
  ncclProfilerProxyOpRecvReceived = 5,
  ncclProfilerProxyOpRecvTransmitted = 6,
  ncclProfilerProxyOpRecvDone = 7,
  ncclProfilerProxyOpInProgress_v4 = 19,

  ncclProfilerProxyStepSendGPUWait = 8,
  ncclProfilerProxyStepSendPeerWait_v4 = 20,
  ncclProfilerProxyStepSendWait = 9,
  ncclProfilerProxyStepRecvWait = 10,
  ncclProfilerProxyStepRecvFlushWait = 11,
  ncclProfilerProxyStepRecvGPUWait = 12,

  ncclProfilerProxyCtrlIdle = 13,
  ncclProfilerProxyCtrlActive = 14,
  ncclProfilerProxyCtrlSleep = 15,
  ncclProfilerProxyCtrlWakeup = 16,
  ncclProfilerProxyCtrlAppend = 17,
  ncclProfilerProxyCtrlAppendEnd = 18,

  ncclProfilerNetPluginUpdate = 21,
  ncclProfilerKernelChStop = 22,
  ncclProfilerGroupStartApiStop = 23,
  ncclProfilerGroupEndApiStart = 24,

  ncclProfilerCeCollStart = 25,
  ncclProfilerCeCollComplete = 26,
  ncclProfilerCeSyncStart = 27,
  ncclProfilerCeSyncComplete = 28,
  ncclProfilerCeBatchStart = 29,
  ncclProfilerCeBatchComplete = 30
} ncclProfilerEventState_t;

typedef ncclProfilerEventState_t ncclProfilerEventState_v4_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v5_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v6_t;

/* Net plugin event ids (ncclProfilerEventDescr.netPlugin.id): type in the high 16 bits, version low. */
#define NCCL_PROFILER_NET_VER_BITS (16)
#define NCCL_PROFILER_NET_VER_MASK (~0U >> NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_TYPE_MASK (~0U << NCCL_PROFILER_NET_VER_BITS)

typedef enum {
  NCCL_PROFILER_NET_TYPE_IB = (1U << NCCL_PROFILER_NET_VER_BITS),
  NCCL_PROFILER_NET_TYPE_SOCK = (2U << NCCL_PROFILER_NET_VER_BITS)
} ncclProfilerNetType;

#endif /* TUTTI_SDK_PROFILER_COMMON_H_ */
