/* Example profiler: counts events per type for each communicator and logs a one-line summary when the
 * communicator is finalised. Exports ncclProfiler_v6. Plain C11. */
#include <tutti/profiler.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

#define NUM_EVENT_TYPES 15 /* ncclProfileGroup (bit 0) .. ncclProfileCeBatch (bit 14) */

static const char* const kTypeNames[NUM_EVENT_TYPES] = {
    "Group", "Coll", "P2p", "ProxyOp", "ProxyStep", "ProxyCtrl", "KernelCh", "NetPlugin",
    "GroupApi", "CollApi", "P2pApi", "KernelLaunch", "CeColl", "CeSync", "CeBatch"};

/* Events asked for unless TUTTI_EXAMPLE_PROFILER_MASK says otherwise. Proxy steps and per-channel kernel
 * events are left out: they are many per collective, and an example should cost next to nothing. */
#define DEFAULT_MASK                                                                                \
  (ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp | ncclProfileGroupApi | \
   ncclProfileCollApi | ncclProfileP2pApi | ncclProfileKernelLaunch)

struct exampleProfiler;

/* The handle given back for every event of one type. Counting needs no per-event record, so the handle
 * only has to lead back to the counters; a profiler that measures durations would allocate (or take from
 * a pool) one record per startEvent instead and free it in stopEvent. */
struct eventSlot {
  struct exampleProfiler* owner;
  int type; /* bit index */
};

struct exampleProfiler {
  ncclDebugLogger_t log;
  uint64_t commId;
  int rank;
  int nranks;
  char commName[64];
  struct eventSlot slots[NUM_EVENT_TYPES];
  /* startEvent/stopEvent come from the application's threads and the proxy thread at once: atomics. */
  atomic_ullong started[NUM_EVENT_TYPES];
  atomic_ullong stopped[NUM_EVENT_TYPES];
  atomic_ullong stateUpdates;
};

#define PROF_LOG(p, level, ...) \
  do { if ((p)->log) (p)->log(level, NCCL_INIT | NCCL_PROFILE, __FILE__, __LINE__, __VA_ARGS__); } while (0)

static int typeIndex(uint64_t type) {
  for (int i = 0; i < NUM_EVENT_TYPES; ++i) {
    if (type == (1ULL << i)) return i;
  }
  return -1;
}

static ncclResult_t exampleInit(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                                int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) {
  (void)nNodes;
  struct exampleProfiler* p = calloc(1, sizeof *p);
  if (!p) return ncclSystemError;
  p->log = logfn;
  p->commId = commId;
  p->rank = rank;
  p->nranks = nranks;
  snprintf(p->commName, sizeof p->commName, "%s", commName ? commName : "-");
  for (int i = 0; i < NUM_EVENT_TYPES; ++i) {
    p->slots[i].owner = p;
    p->slots[i].type = i;
    atomic_init(&p->started[i], 0);
    atomic_init(&p->stopped[i], 0);
  }
  atomic_init(&p->stateUpdates, 0);

  int mask = DEFAULT_MASK;
  const char* env = getenv("TUTTI_EXAMPLE_PROFILER_MASK");
  if (env && *env) {
    char* end = NULL;
    errno = 0;
    long v = strtol(env, &end, 0);
    if (errno != 0 || *end != '\0' || v < 0 || v >= (1L << NUM_EVENT_TYPES)) {
      PROF_LOG(p, NCCL_LOG_WARN, "example profiler: TUTTI_EXAMPLE_PROFILER_MASK=%s is not a mask of event bits "
               "(0..0x%x); using 0x%x", env, (1 << NUM_EVENT_TYPES) - 1, DEFAULT_MASK);
    } else {
      mask = (int)v;
    }
  }
  *eActivationMask = mask;
  *context = p;
  return ncclSuccess;
}

static ncclResult_t exampleStartEvent(void* context, void** eHandle, ncclProfilerEventDescr_v6_t* eDescr) {
  struct exampleProfiler* p = context;
  int i = typeIndex(eDescr->type);
  if (i < 0) {
    *eHandle = NULL; /* a type this plugin does not know: ignore it, the core sends nothing more for it */
    return ncclSuccess;
  }
  atomic_fetch_add_explicit(&p->started[i], 1, memory_order_relaxed);
  *eHandle = &p->slots[i];
  return ncclSuccess;
}

static ncclResult_t exampleStopEvent(void* eHandle) {
  struct eventSlot* s = eHandle;
  if (!s) return ncclSuccess;
  atomic_fetch_add_explicit(&s->owner->stopped[s->type], 1, memory_order_relaxed);
  return ncclSuccess;
}

static ncclResult_t exampleRecordEventState(void* eHandle, ncclProfilerEventState_v6_t eState,
                                            ncclProfilerEventStateArgs_v6_t* eStateArgs) {
  (void)eState;
  (void)eStateArgs;
  struct eventSlot* s = eHandle;
  if (s) atomic_fetch_add_explicit(&s->owner->stateUpdates, 1, memory_order_relaxed);
  return ncclSuccess;
}

static ncclResult_t exampleFinalize(void* context) {
  struct exampleProfiler* p = context;
  if (!p) return ncclSuccess;
  /* One line: "<Type>=<count>" for every type seen, then state updates and events never stopped. */
  char line[512];
  size_t used = 0;
  unsigned long long open = 0;
  for (int i = 0; i < NUM_EVENT_TYPES; ++i) {
    unsigned long long started = atomic_load(&p->started[i]);
    unsigned long long stopped = atomic_load(&p->stopped[i]);
    open += started > stopped ? started - stopped : 0;
    if (started == 0 || used >= sizeof line) continue;
    int n = snprintf(line + used, sizeof line - used, " %s=%llu", kTypeNames[i], started);
    if (n > 0) used += (size_t)n;
  }
  if (used == 0) snprintf(line, sizeof line, " no events");
  PROF_LOG(p, NCCL_LOG_INFO, "example profiler: comm %s (id %llx) rank %d/%d:%s stateUpdates=%llu open=%llu",
           p->commName, (unsigned long long)p->commId, p->rank, p->nranks, line,
           (unsigned long long)atomic_load(&p->stateUpdates), open);
  free(p);
  return ncclSuccess;
}

EXPORT const ncclProfiler_v6_t ncclProfiler_v6 = {
  .name = "example-counter",
  .init = exampleInit,
  .startEvent = exampleStartEvent,
  .stopEvent = exampleStopEvent,
  .recordEventState = exampleRecordEventState,
  .finalize = exampleFinalize,
};
