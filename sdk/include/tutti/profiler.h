/* NCCL profiler plugin ABI, every version Tutti loads (v4..v6), with v6 pinned as the current one. C. */
#ifndef TUTTI_SDK_PROFILER_H_
#define TUTTI_SDK_PROFILER_H_

#include <tutti/profiler_common.h>
#include <tutti/profiler_v6.h>

typedef ncclProfiler_v6_t ncclProfiler_t;
typedef ncclProfilerEventDescr_v6_t ncclProfilerEventDescr_t;
typedef ncclProfilerEventStateArgs_v6_t ncclProfilerEventStateArgs_t;

#endif /* TUTTI_SDK_PROFILER_H_ */
