/* NCCL tuner plugin ABI, version 5 (symbol ncclTunerPlugin_v5): v4 plus the communicator id, NVLink
 * domain description and the core's tuning constants at init. C. */
#ifndef TUTTI_SDK_TUNER_V5_H_
#define TUTTI_SDK_TUNER_V5_H_

#include <tutti/common.h>

typedef struct {
  int nNvlDomains;          /* number of NVLink domains */
  int minRanksPerNvlDomain; /* fewest ranks in one domain */
  int maxRanksPerNvlDomain; /* most ranks in one domain */
} ncclNvlDomainInfo_v5_t;

#define NCCL_NUM_ALGORITHMS_V5 7    /* Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT */
#define NCCL_NUM_PROTOCOLS_V5 3     /* LL, LL128, Simple */
#define NCCL_NUM_HW_LINKS_V5 3      /* NVLink, PCI, network */
#define NCCL_NUM_COMPCAPS_V5 4      /* Volta, Ampere, Hopper, Blackwell */
#define NCCL_NUM_TUNING_SCALES_V5 3 /* 1 node, 2 nodes, 4+ nodes */

/* The core's model constants (latencies in microseconds, bandwidths in GB/s), which the tuner may edit
 * in init to change the core's own cost model. */
typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double llMaxBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;

typedef struct {
  /* Tuner name, for logs. Owned by the plugin. */
  const char* name;
  /* Per-communicator setup. In: commId, rank/node counts, logger, nvlDomainInfo (may be NULL).
   * In/out: constants (may be NULL; the tuner may adjust them). Out: *ctx. Failure: tuner unused. */
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v5_t* nvlDomainInfo, ncclTunerConstants_v5_t* constants);
  /* As v4 (see tuner_v3.h for the cost table contract). */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  /* Releases the context. */
  ncclResult_t (*finalize)(void* context);
} ncclTuner_v5_t;

#endif /* TUTTI_SDK_TUNER_V5_H_ */
