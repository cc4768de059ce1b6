/* NCCL tuner plugin ABI, version 4 (symbol ncclTunerPlugin_v4): v3 plus the regBuff hint. C. */
#ifndef TUTTI_SDK_TUNER_V4_H_
#define TUTTI_SDK_TUNER_V4_H_

#include <tutti/common.h>

typedef struct {
  /* Tuner name, for logs. Owned by the plugin. */
  const char* name;
  /* Per-communicator setup; out: *context. Failure: the tuner is not used for this communicator. */
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  /* As v3 (see tuner_v3.h); regBuff is non-zero when the user buffers can be registered. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  /* Releases the context. */
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

#endif /* TUTTI_SDK_TUNER_V4_H_ */
