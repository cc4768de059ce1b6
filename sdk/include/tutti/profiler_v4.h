/* NCCL profiler plugin ABI, version 4 (symbol ncclProfiler_v4). Semantics as in profiler_v6.h; the
 * descriptor has an 8-bit type and no API-level or copy-engine events. C. */
#ifndef TUTTI_SDK_PROFILER_V4_H_
#define TUTTI_SDK_PROFILER_V4_H_

#include <tutti/profiler_common.h>

typedef struct {
  uint8_t type;    /* one ncclProfile* bit */
  void* parentObj; /* handle of the parent event (a coll/p2p's group), may be NULL */
  int rank;        /* originating rank */
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      ncclPid_t pid;     /* process that posted the operation */
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;     /* bytes per step */
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;   /* GPU global timer at start */
    } kernelCh;
    struct {
      int64_t id;        /* NCCL_PROFILER_NET_TYPE_* | version */
      void* data;        /* plugin-defined */
    } netPlugin;
  };
} ncclProfilerEventDescr_v4_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} ncclProfilerEventStateArgs_v4_t;

typedef struct {
  const char* name;
  /* Per communicator. In/out: *eActivationMask, the event types wanted (ncclProfile* bits). commHash
   * identifies the communicator. Out: *context. Failure: no profiling for that communicator. */
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  /* Out: *eHandle (NULL: the plugin ignores this event and gets no further calls for it). */
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v4_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v4_t eState,
                                   ncclProfilerEventStateArgs_v4_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v4_t;

#endif /* TUTTI_SDK_PROFILER_V4_H_ */
