// libtutti-profiler-trace.so: writes one Chrome/Perfetto trace (JSON) per rank and communicator at
// finalize. Exports ncclProfiler_v6 (name "trace"); the core adapts nothing. Per event it takes one
// preallocated record and reads the clock: no lock, no allocation (but once per 4096 events), no I/O.
#include "trace.h"

#include <unistd.h>

#include <cstring>
#include <ctime>
#include <new>

namespace tutti::profilertrace {

#define TRACE_LOG(logger, level, ...) \
  do { if (logger) (logger)(level, NCCL_PROFILE, __FILE__, __LINE__, __VA_ARGS__); } while (0)

int64_t realtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

RecordPool::RecordPool(size_t capacity)
    : capacity_(capacity),
      nBlocks_((capacity + kBlock - 1) / kBlock),
      blocks_(new std::atomic<Record*>[nBlocks_]) {
  for (size_t b = 0; b < nBlocks_; ++b) blocks_[b].store(nullptr, std::memory_order_relaxed);
  if (nBlocks_ > 0) blocks_[0].store(new Record[kBlock], std::memory_order_release);
}

RecordPool::~RecordPool() {
  for (size_t b = 0; b < nBlocks_; ++b) delete[] blocks_[b].load(std::memory_order_relaxed);
}

Record* RecordPool::acquire() {
  size_t i = next_.fetch_add(1, std::memory_order_relaxed);
  if (i >= capacity_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  std::atomic<Record*>& slot = blocks_[i / kBlock];
  Record* block = slot.load(std::memory_order_acquire);
  if (block == nullptr) {
    std::lock_guard<std::mutex> lock(growMutex_);
    block = slot.load(std::memory_order_acquire);
    if (block == nullptr) {
      block = new (std::nothrow) Record[kBlock];
      if (block == nullptr) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
      }
      slot.store(block, std::memory_order_release);
    }
  }
  Record* r = &block[i % kBlock];
  r->index = static_cast<uint32_t>(i);
  return r;
}

size_t RecordPool::used() const {
  size_t n = next_.load(std::memory_order_acquire);
  return n < capacity_ ? n : capacity_;
}

Record* RecordPool::at(size_t i) const {
  Record* block = blocks_[i / kBlock].load(std::memory_order_acquire);
  return block ? &block[i % kBlock] : nullptr;
}

namespace {

void copyName(char (&dst)[kNameLen], const char* src) {
  if (src == nullptr) src = "";
  size_t n = strnlen(src, kNameLen - 1);
  std::memcpy(dst, src, n);
  dst[n] = '\0';
}

ncclResult_t init(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                  int nRanks, int rank, ncclDebugLogger_t logfn) {
  if (context == nullptr || eActivationMask == nullptr || nRanks <= 0 || rank < 0 || rank >= nRanks) {
    TRACE_LOG(logfn, NCCL_LOG_WARN, "profiler trace: bad init arguments (rank %d of %d)", rank, nRanks);
    return ncclInvalidArgument;
  }
  Options options;
  std::string error;
  try {
    if (ncclResult_t r = readOptions(&options, &error); r != ncclSuccess) {
      TRACE_LOG(logfn, NCCL_LOG_WARN, "profiler trace: %s", error.c_str());
      return r;
    }
    auto* ctx = new Context(options.maxEvents);
    ctx->commId = commId;
    ctx->commName = commName ? commName : "";
    ctx->rank = rank;
    ctx->nRanks = nRanks;
    ctx->nNodes = nNodes;
    ctx->pid = static_cast<int>(getpid());
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
    ctx->host = host;
    if (size_t dot = ctx->host.find('.'); dot != std::string::npos && dot > 0) ctx->host.resize(dot);
    ctx->initNs = realtimeNs();
    ctx->options = options;
    ctx->log = logfn;
    *eActivationMask = options.mask;
    *context = ctx;
    TRACE_LOG(logfn, NCCL_LOG_INFO, "profiler trace: rank %d/%d comm 0x%llx, mask 0x%x, at most %llu events, file %s",
              rank, nRanks, static_cast<unsigned long long>(commId), options.mask,
              static_cast<unsigned long long>(options.maxEvents),
              expandPattern(options.filePattern, rank, ctx->pid, ctx->host, commId).c_str());
  } catch (const std::bad_alloc&) {
    TRACE_LOG(logfn, NCCL_LOG_WARN, "profiler trace: out of memory for %llu event records",
              static_cast<unsigned long long>(options.maxEvents));
    return ncclSystemError;
  } catch (...) {
    return ncclInternalError;
  }
  return ncclSuccess;
}

ncclResult_t startEvent(void* context, void** eHandle, ncclProfilerEventDescr_v6_t* d) {
  if (eHandle == nullptr) return ncclInvalidArgument;
  *eHandle = nullptr;
  auto* ctx = static_cast<Context*>(context);
  if (ctx == nullptr || d == nullptr) return ncclInvalidArgument;
  if ((d->type & static_cast<uint64_t>(ctx->options.mask)) == 0) return ncclSuccess;
  Record* r = ctx->pool.acquire();
  if (r == nullptr) return ncclSuccess;  // over TUTTI_TRACE_MAX_EVENTS: counted, not traced
  r->type = d->type;
  r->parent = static_cast<Record*>(d->parentObj);
  r->stopNs = 0;
  r->nStates = 0;
  r->channel = kUnknownChannel;
  switch (d->type) {
    case ncclProfileColl:
      // The slice nests under the group on the collectives track (parentObj is the API event, elsewhere).
      if (d->coll.parentGroup) r->parent = static_cast<Record*>(d->coll.parentGroup);
      r->u.coll.seq = d->coll.seqNumber;
      r->u.coll.count = d->coll.count;
      r->u.coll.root = d->coll.root;
      r->u.coll.nChannels = d->coll.nChannels;
      r->u.coll.nWarps = d->coll.nWarps;
      copyName(r->u.coll.func, d->coll.func);
      copyName(r->u.coll.datatype, d->coll.datatype);
      copyName(r->u.coll.algo, d->coll.algo);
      copyName(r->u.coll.proto, d->coll.proto);
      break;
    case ncclProfileP2p:
      if (d->p2p.parentGroup) r->parent = static_cast<Record*>(d->p2p.parentGroup);
      r->u.p2p.count = d->p2p.count;
      r->u.p2p.peer = d->p2p.peer;
      r->u.p2p.nChannels = d->p2p.nChannels;
      copyName(r->u.p2p.func, d->p2p.func);
      copyName(r->u.p2p.datatype, d->p2p.datatype);
      break;
    case ncclProfileProxyOp:
      r->channel = d->proxyOp.channelId;
      r->u.proxyOp.pid = d->proxyOp.pid;
      r->u.proxyOp.peer = d->proxyOp.peer;
      r->u.proxyOp.nSteps = d->proxyOp.nSteps;
      r->u.proxyOp.chunkSize = d->proxyOp.chunkSize;
      r->u.proxyOp.isSend = d->proxyOp.isSend;
      break;
    case ncclProfileProxyStep:
      if (r->parent) r->channel = r->parent->channel;
      r->u.proxyStep.step = d->proxyStep.step;
      r->u.proxyStep.transSize = 0;
      break;
    case ncclProfileNetPlugin:
      if (r->parent) r->channel = r->parent->channel;
      r->u.netPlugin.id = d->netPlugin.id;
      break;
    case ncclProfileKernelCh:
      r->channel = d->kernelCh.channelId;
      r->u.kernelCh.chStopNs = 0;
      r->u.kernelCh.pTimerStart = d->kernelCh.pTimer;
      r->u.kernelCh.pTimerStop = 0;
      break;
    case ncclProfileCollApi:
      r->u.api.count = d->collApi.count;
      r->u.api.root = d->collApi.root;
      copyName(r->u.api.func, d->collApi.func);
      copyName(r->u.api.datatype, d->collApi.datatype);
      break;
    case ncclProfileP2pApi:
      r->u.api.count = d->p2pApi.count;
      copyName(r->u.api.func, d->p2pApi.func);
      copyName(r->u.api.datatype, d->p2pApi.datatype);
      break;
    case ncclProfileGroupApi:
      r->u.api.groupDepth = d->groupApi.groupDepth;
      break;
    default:
      break;
  }
  r->startNs = realtimeNs();  // last: the slice starts after the bookkeeping above
  *eHandle = r;
  return ncclSuccess;
}

ncclResult_t stopEvent(void* eHandle) {
  if (eHandle == nullptr) return ncclSuccess;
  static_cast<Record*>(eHandle)->stopNs = realtimeNs();
  return ncclSuccess;
}

ncclResult_t recordEventState(void* eHandle, ncclProfilerEventState_v6_t eState,
                              ncclProfilerEventStateArgs_v6_t* args) {
  if (eHandle == nullptr) return ncclSuccess;
  auto* r = static_cast<Record*>(eHandle);
  int64_t now = realtimeNs();
  if (r->type == ncclProfileKernelCh && eState == ncclProfilerKernelChStop) {
    r->u.kernelCh.chStopNs = now;
    if (args) r->u.kernelCh.pTimerStop = args->kernelCh.pTimer;
    return ncclSuccess;
  }
  if (r->type == ncclProfileProxyStep && args) r->u.proxyStep.transSize = args->proxyStep.transSize;
  if (r->nStates < kMaxStates) r->states[r->nStates++] = StateMark{now, static_cast<int32_t>(eState)};
  return ncclSuccess;
}

ncclResult_t finalize(void* context) {
  auto* ctx = static_cast<Context*>(context);
  if (ctx == nullptr) return ncclInvalidArgument;
  std::string path, error;
  bool ok = false;
  try {
    ok = writeTrace(*ctx, &path, &error);
  } catch (const std::bad_alloc&) {
    error = "out of memory while writing the trace";
  } catch (...) {
    error = "unexpected failure while writing the trace";
  }
  if (ok) {
    TRACE_LOG(ctx->log, NCCL_LOG_INFO, "profiler trace: rank %d wrote %zu events to %s (%llu dropped)", ctx->rank,
              ctx->pool.used(), path.c_str(), static_cast<unsigned long long>(ctx->pool.dropped()));
  } else {
    TRACE_LOG(ctx->log, NCCL_LOG_WARN, "profiler trace: rank %d: %s", ctx->rank, error.c_str());
  }
  delete ctx;
  return ok ? ncclSuccess : ncclSystemError;
}

constexpr ncclProfiler_v6_t makeTable() {
  ncclProfiler_v6_t t{};
  t.name = "trace";
  t.init = init;
  t.startEvent = startEvent;
  t.stopEvent = stopEvent;
  t.recordEventState = recordEventState;
  t.finalize = finalize;
  return t;
}

}  // namespace
}  // namespace tutti::profilertrace

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v6_t ncclProfiler_v6 =
    tutti::profilertrace::makeTable();
