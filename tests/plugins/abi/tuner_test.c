/* Minimal tuner plugin for ABI version TEST_TUNER_VERSION (exports only ncclTunerPlugin_v<N>).
 * Table versions (v3+) set cost[RING][SIMPLE] = N; v2 picks Tree/LL128. nChannels becomes N. */
#include <tutti/tuner.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define STR2(x) #x
#define STR(x) STR2(x)
#define V TEST_TUNER_VERSION

static int gCtx = 42;

#if V >= 5
static ncclResult_t init(void** ctx, uint64_t id, size_t nr, size_t nn, ncclDebugLogger_t l,
                         ncclNvlDomainInfo_v5_t* d, ncclTunerConstants_v5_t* c) {
  (void)id; (void)nr; (void)nn; (void)l; (void)d; (void)c; *ctx = &gCtx; return ncclSuccess;
}
#else
static ncclResult_t init(size_t nr, size_t nn, ncclDebugLogger_t l, void** ctx) {
  (void)nr; (void)nn; (void)l; *ctx = &gCtx; return ncclSuccess;
}
#endif

static ncclResult_t fin(void* ctx) { return ctx == &gCtx ? ncclSuccess : ncclInternalError; }

#if V == 2
static ncclResult_t getCollInfo(void* ctx, ncclFunc_t f, size_t n, int cn, int nv, int ops, int* algo, int* proto,
                                int* nch) {
  (void)f; (void)n; (void)cn; (void)nv; (void)ops;
  if (ctx != &gCtx) return ncclInternalError;
  *algo = NCCL_ALGO_TREE; *proto = NCCL_PROTO_LL128; *nch = V; return ncclSuccess;
}
#else
static ncclResult_t getCollInfo(void* ctx, ncclFunc_t f, size_t n, int ops, float** table, int na, int np,
#if V >= 4
                                int reg,
#endif
                                int* nch) {
  (void)f; (void)n; (void)ops; (void)na;
#if V >= 4
  (void)reg;
#endif
  if (ctx != &gCtx) return ncclInternalError;
  float* t = (float*)table;
  t[NCCL_ALGO_RING * np + NCCL_PROTO_SIMPLE] = (float)V;
  *nch = V;
  return ncclSuccess;
}
#endif

#if V >= 6
static ncclResult_t chunk(void* ctx, ncclFunc_t f, size_t n, int a, int p, int nc, size_t* cs) {
  (void)ctx; (void)f; (void)n; (void)a; (void)p; (void)nc; *cs = 12345; return ncclSuccess;
}
#endif

__attribute__((visibility("default"))) const CAT(CAT(ncclTuner_v, V), _t) CAT(ncclTunerPlugin_v, V) = {
  .name = "test-tuner-v" STR(V),
  .init = init,
  .getCollInfo = getCollInfo,
#if V >= 5
  .finalize = fin,
#else
  .destroy = fin,
#endif
#if V >= 6
  .getChunkSize = chunk,
#endif
};
