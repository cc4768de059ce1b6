/* NCCL tuner plugin ABI, version 3 (symbol ncclTunerPlugin_v3): the tuner edits the core's cost table. C. */
#ifndef TUTTI_SDK_TUNER_V3_H_
#define TUTTI_SDK_TUNER_V3_H_

#include <tutti/common.h>

typedef struct {
  /* Tuner name, for logs. Owned by the plugin. */
  const char* name;
  /* Per-communicator setup; out: *context. Failure: the tuner is not used for this communicator. */
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  /* collCostTable: one contiguous float[numAlgo][numProto] block (row length numProto) passed as float**;
   * entries set to NCCL_ALGO_PROTO_IGNORE (-1) are unavailable and must stay so. The tuner may lower or
   * raise the others (the core picks the cheapest) and set *nChannels (0 keeps the core's choice).
   * Failure: the core's table is used unchanged. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int* nChannels);
  /* Releases the context. */
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v3_t;

#endif /* TUTTI_SDK_TUNER_V3_H_ */
