/* NCCL profiler plugin ABI, version 5 (symbol ncclProfiler_v5). Adds API-level events (group, collective and p2p calls, kernel launch)
 * and a 64-bit type. C. */
#ifndef TUTTI_SDK_PROFILER_V5_H_
#define TUTTI_SDK_PROFILER_V5_H_

#include <tutti/profiler_v4.h>

/* Describes an event at startEvent; only the union member named by `type` is valid. Strings and
 * pointers are owned by the core and valid only during the call. */
typedef struct {
  uint64_t type;   /* one ncclProfile* bit */
  void* parentObj; /* eHandle of the parent event (e.g. the API event of a collective), may be NULL */
  int rank;        /* originating rank */
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
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
      void* parentGroup; /* the group event (the parent is the API event) */
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
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
} ncclProfilerEventDescr_v5_t;

typedef union {
  struct {
    size_t transSize; /* bytes moved by the step so far */
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer; /* GPU global timer at stop */
  } kernelCh;
} ncclProfilerEventStateArgs_v5_t;

typedef struct {
  /* Plugin name, for logs. */
  const char* name;
  /* Per communicator. In: commId, commName (may be NULL), nNodes, nranks, rank, the core's logger.
   * In/out: *eActivationMask, the ncclProfile* event types the plugin wants (0: none; may change at
   * run time, the core re-reads it). Out: *context. Failure: no profiling for that communicator. */
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  /* Starts an event. Out: *eHandle, the plugin's handle (NULL: the event is ignored and no further call
   * names it). Failure is logged by the core; the operation itself proceeds. */
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* eDescr);
  /* Ends an event started with a non-NULL handle; the handle is not used afterwards. */
  ncclResult_t (*stopEvent)(void* eHandle);
  /* Records a state change of a live event; eStateArgs carries the member matching eState (may be NULL
   * for states without arguments). */
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v5_t eState,
                                   ncclProfilerEventStateArgs_v5_t* eStateArgs);
  /* Releases the context; called once per successful init. */
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v5_t;

#endif /* TUTTI_SDK_PROFILER_V5_H_ */
