/* Recording profiler for ABI version REC_VERSION (exports only ncclProfiler_v<N>). Every call is appended, in
 * order and under a lock (the core calls from application, executor and proxy threads), to a log the test
 * reads through recorderLog(). Handles are event ids (1-based), so the test can match parents and stops.
 * Environment, read at init: REC_ENV_PREFIX "_MASK" (activation mask, default all), "_FAIL" (init fails). */
#include <tutti/profiler.h>
#include <tutti/profiler_v4.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define STR2(x) #x
#define STR(x) STR2(x)
#define V REC_VERSION
#define EXPORT __attribute__((visibility("default")))

typedef CAT(CAT(ncclProfilerEventDescr_v, V), _t) Descr;
typedef CAT(CAT(ncclProfilerEventStateArgs_v, V), _t) StateArgs;
typedef CAT(CAT(ncclProfilerEventState_v, V), _t) State;

static pthread_mutex_t gMutex = PTHREAD_MUTEX_INITIALIZER;
static char* gLog;
static size_t gLen, gCap;
static long gNextId;
static int gContexts[64];
static int gInits, gFinalizes;

static void append(const char* line) {
  size_t n = strlen(line);
  if (gLen + n + 1 > gCap) {
    size_t cap = gCap ? gCap * 2 : 1 << 16;
    while (cap < gLen + n + 1) cap *= 2;
    char* p = (char*)realloc(gLog, cap);
    if (!p) return;
    gLog = p;
    gCap = cap;
  }
  memcpy(gLog + gLen, line, n + 1);
  gLen += n;
}

/* The whole log ("" when empty); valid until the next event. */
EXPORT const char* recorderLog(void) { return gLog ? gLog : ""; }
EXPORT int recorderInits(void) { return gInits; }
EXPORT int recorderFinalizes(void) { return gFinalizes; }

static int envInt(const char* suffix, int dflt) {
  char name[128];
  snprintf(name, sizeof name, "%s%s", REC_ENV_PREFIX, suffix);
  const char* v = getenv(name);
  return v && *v ? (int)strtol(v, NULL, 0) : dflt;
}

static ncclResult_t initCommon(void** ctx, int* mask, int rank) {
  if (envInt("_FAIL", 0)) return ncclInternalError;
  pthread_mutex_lock(&gMutex);
  int slot = gInits++ % 64;
  gContexts[slot] = rank;
  char line[96];
  snprintf(line, sizeof line, "INIT rank=%d\n", rank);
  append(line);
  pthread_mutex_unlock(&gMutex);
  *mask = envInt("_MASK", -1);
  *ctx = &gContexts[slot];
  return ncclSuccess;
}

#if V >= 5
static ncclResult_t init(void** ctx, uint64_t id, int* mask, const char* name, int nn, int nr, int r,
                         ncclDebugLogger_t l) {
#else
static ncclResult_t init(void** ctx, int* mask, const char* name, uint64_t id, int nn, int nr, int r,
                         ncclDebugLogger_t l) {
#endif
  (void)id; (void)name; (void)nn; (void)nr; (void)l;
  return initCommon(ctx, mask, r);
}

static ncclResult_t start(void* ctx, void** h, Descr* d) {
  char line[512];
  int n;
  pthread_mutex_lock(&gMutex);
  long id = ++gNextId;
  long parent = (long)(intptr_t)d->parentObj;
  n = snprintf(line, sizeof line, "START id=%ld type=%ld parent=%ld rank=%d ctxrank=%d", id, (long)d->type, parent,
               d->rank, *(int*)ctx);
  switch (d->type) {
    case ncclProfileColl:
      n += snprintf(line + n, sizeof line - n, " seq=%llu func=%s count=%zu root=%d dtype=%s nch=%d nwarps=%d algo=%s "
                    "proto=%s send=%p recv=%p", (unsigned long long)d->coll.seqNumber, d->coll.func, d->coll.count,
                    d->coll.root, d->coll.datatype, d->coll.nChannels, d->coll.nWarps, d->coll.algo, d->coll.proto,
                    d->coll.sendBuff, (void*)d->coll.recvBuff);
#if V >= 5
      n += snprintf(line + n, sizeof line - n, " group=%ld", (long)(intptr_t)d->coll.parentGroup);
#endif
      break;
    case ncclProfileP2p:
      n += snprintf(line + n, sizeof line - n, " func=%s count=%zu peer=%d dtype=%s nch=%d", d->p2p.func, d->p2p.count,
                    d->p2p.peer, d->p2p.datatype, d->p2p.nChannels);
#if V >= 5
      n += snprintf(line + n, sizeof line - n, " group=%ld", (long)(intptr_t)d->p2p.parentGroup);
#endif
      break;
    case ncclProfileProxyOp:
      n += snprintf(line + n, sizeof line - n, " ch=%d peer=%d nsteps=%d chunk=%d send=%d", d->proxyOp.channelId,
                    d->proxyOp.peer, d->proxyOp.nSteps, d->proxyOp.chunkSize, d->proxyOp.isSend);
      break;
    case ncclProfileProxyStep:
      n += snprintf(line + n, sizeof line - n, " step=%d", d->proxyStep.step);
      break;
    case ncclProfileKernelCh:
      n += snprintf(line + n, sizeof line - n, " ch=%d timer=%llu", d->kernelCh.channelId,
                    (unsigned long long)d->kernelCh.pTimer);
      break;
#if V >= 5
    case ncclProfileGroupApi:
      n += snprintf(line + n, sizeof line - n, " depth=%d", d->groupApi.groupDepth);
      break;
    case ncclProfileCollApi:
      n += snprintf(line + n, sizeof line - n, " func=%s count=%zu", d->collApi.func, d->collApi.count);
      break;
    case ncclProfileP2pApi:
      n += snprintf(line + n, sizeof line - n, " func=%s count=%zu", d->p2pApi.func, d->p2pApi.count);
      break;
#endif
    default: break;
  }
  snprintf(line + n, sizeof line - n, "\n");
  append(line);
  pthread_mutex_unlock(&gMutex);
  *h = (void*)(intptr_t)id;
  return ncclSuccess;
}

static ncclResult_t stop(void* h) {
  char line[64];
  snprintf(line, sizeof line, "STOP id=%ld\n", (long)(intptr_t)h);
  pthread_mutex_lock(&gMutex);
  append(line);
  pthread_mutex_unlock(&gMutex);
  return ncclSuccess;
}

static ncclResult_t record(void* h, State s, StateArgs* a) {
  char line[96];
  snprintf(line, sizeof line, "STATE id=%ld state=%d size=%zu\n", (long)(intptr_t)h, (int)s,
           a && (s >= ncclProfilerProxyStepSendGPUWait && s <= ncclProfilerProxyStepRecvGPUWait) ? a->proxyStep.transSize
                                                                                                    : (size_t)0);
  pthread_mutex_lock(&gMutex);
  append(line);
  pthread_mutex_unlock(&gMutex);
  return ncclSuccess;
}

static ncclResult_t fin(void* ctx) {
  (void)ctx;
  pthread_mutex_lock(&gMutex);
  gFinalizes++;
  append("FINALIZE\n");
  pthread_mutex_unlock(&gMutex);
  return ncclSuccess;
}

EXPORT const CAT(CAT(ncclProfiler_v, V), _t) CAT(ncclProfiler_v, V) = {
  .name = "recorder-v" STR(V),
  .init = init,
  .startEvent = start,
  .stopEvent = stop,
  .recordEventState = record,
  .finalize = fin,
};
