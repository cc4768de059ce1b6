/* Deliberately broken tuner plugins (ABI v6) for the tutti-plugin-check tests, one bug per build:
 *   BAD_TUNER_OVERFLOW  writes one float past the cost table for messages of 1 MiB and more
 *   BAD_TUNER_REVIVE    gives every unavailable (-1) entry a cost
 *   BAD_TUNER_CRASH     dereferences NULL in getCollInfo for AllGather
 *   BAD_TUNER_HANG      never returns from getCollInfo for Reduce */
#include <tutti/tuner.h>

#include <stdlib.h>
#include <unistd.h>

static ncclResult_t badInit(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                            ncclNvlDomainInfo_v6_t* nvl, ncclTunerConstants_v6_t* constants) {
  (void)commId, (void)nRanks, (void)nNodes, (void)log, (void)nvl, (void)constants;
  *ctx = malloc(1);
  return *ctx ? ncclSuccess : ncclSystemError;
}

static ncclResult_t badGetCollInfo(void* ctx, ncclFunc_t coll, size_t nBytes, int numPipeOps, float** costTable,
                                   int numAlgo, int numProto, int regBuff, int* nChannels) {
  (void)ctx, (void)numPipeOps, (void)regBuff, (void)nChannels, (void)nBytes, (void)coll;
  float* t = (float*)costTable;
#if defined(BAD_TUNER_OVERFLOW)
  if (nBytes >= (1u << 20)) t[numAlgo * numProto] = 0.0f;
#elif defined(BAD_TUNER_REVIVE)
  for (int i = 0; i < numAlgo * numProto; i++)
    if (t[i] < 0) t[i] = 1.0f;
#elif defined(BAD_TUNER_CRASH)
  if (coll == ncclFuncAllGather) *(volatile int*)(uintptr_t)(nBytes & 0) = 1;
#elif defined(BAD_TUNER_HANG)
  while (coll == ncclFuncReduce) sleep(1);
#endif
  (void)t, (void)numAlgo, (void)numProto;
  return ncclSuccess;
}

static ncclResult_t badFinalize(void* ctx) {
  free(ctx);
  return ncclSuccess;
}

__attribute__((visibility("default"))) const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    .name = "bad",
    .init = badInit,
    .getCollInfo = badGetCollInfo,
    .finalize = badFinalize,
    .getChunkSize = NULL,
};
