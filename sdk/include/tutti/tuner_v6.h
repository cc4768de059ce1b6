/* NCCL tuner plugin ABI, version 6 (symbol ncclTunerPlugin_v6). Tutti's native tuner ABI: v5 plus the
 * optional getChunkSize. C. */
#ifndef TUTTI_SDK_TUNER_V6_H_
#define TUTTI_SDK_TUNER_V6_H_

#include <tutti/tuner_v5.h>

typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;

typedef struct {
  /* Tuner name, for logs. Owned by the plugin. */
  const char* name;
  /* Per-communicator setup. In: commId, nRanks, nNodes, the core's logger, nvlDomainInfo (may be NULL).
   * In/out: constants (may be NULL). Out: *ctx, passed to every other call. Failure: the tuner is not used
   * for this communicator. Several communicators (and threads) may hold contexts at once. */
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v6_t* nvlDomainInfo, ncclTunerConstants_v6_t* constants);
  /* For one collective of nBytes (numPipeOps collectives in the group; regBuff non-zero when user buffers
   * can be registered). In/out: collCostTable, one contiguous float[numAlgo][numProto] block passed as
   * float** (cast it to float (*)[NCCL_NUM_PROTOCOLS]); NCCL_ALGO_PROTO_IGNORE entries are unavailable
   * and must stay so; the core picks the cheapest entry. Out: *nChannels (leave unchanged to keep the
   * core's choice). Failure: the core's table is used as it was before the call. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  /* Releases the context; called once per successful init. */
  ncclResult_t (*finalize)(void* context);
  /* Optional (may be NULL). After the choice of algo/proto/nChannels, may change *chunkSize (bytes, the
   * core's value on entry); the core clamps it to what the protocol's buffers allow. Failure: the core's
   * chunk size is kept. */
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo, int proto, int nChannels,
                               size_t* chunkSize);
} ncclTuner_v6_t;

#endif /* TUTTI_SDK_TUNER_V6_H_ */
