/* NCCL tuner plugin ABI, version 2 (symbol ncclTunerPlugin_v2). The tuner picks algorithm and protocol
 * directly instead of editing a cost table. C. */
#ifndef TUTTI_SDK_TUNER_V2_H_
#define TUTTI_SDK_TUNER_V2_H_

#include <tutti/common.h>

typedef struct {
  /* Tuner name, for logs. Owned by the plugin. */
  const char* name;
  /* Per-communicator setup. In: number of ranks and nodes, the core's logger. Out: *context, passed to
   * every other call. Failure: the tuner is not used for this communicator. */
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  /* For one collective of nBytes (numPipeOps collectives in the group; collNetSupport / nvlsSupport say
   * whether those algorithms may be chosen). Out: *algorithm (NCCL_ALGO_*), *protocol (NCCL_PROTO_*) and
   * *nChannels; leaving an output unchanged (-1 / 0) keeps the core's choice. Failure: default tuning. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                              int numPipeOps, int* algorithm, int* protocol, int* nChannels);
  /* Releases the context. */
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v2_t;

#endif /* TUTTI_SDK_TUNER_V2_H_ */
