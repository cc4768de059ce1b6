#include "comm/profiler.h"

#include "comm/comm.h"
#include "device/common/dtypes.h"
#include "plan/plan.h"
#include "plugin/config.h"
#include "plugin/profiler_plugin.h"
#include "util/check.h"

#include <time.h>
#include <unistd.h>

#include <map>
#include <mutex>

namespace tutti {
namespace {

// Plugins stay loaded for the process (communicators share them); contexts are per communicator.
std::mutex gLoadMutex;
std::map<std::string, std::shared_ptr<ProfilerPlugin>>& loadedProfilers() {
  static auto* m = new std::map<std::string, std::shared_ptr<ProfilerPlugin>>();
  return *m;
}

ncclResult_t loadShared(const PluginSpec& spec, std::shared_ptr<ProfilerPlugin>* out) {
  std::lock_guard<std::mutex> lock(gLoadMutex);
  auto& m = loadedProfilers();
  if (auto it = m.find(spec.label()); it != m.end()) {
    *out = it->second;
    return ncclSuccess;
  }
  std::unique_ptr<ProfilerPlugin> p;
  TUTTI_CHECK(profilerPluginLoad(spec.label(), &p));
  std::shared_ptr<ProfilerPlugin> shared(std::move(p));
  if (shared) m[spec.label()] = shared;
  *out = std::move(shared);
  return ncclSuccess;
}

// Names as NCCL's descriptors spell them (indices are NCCL_ALGO_* / NCCL_PROTO_*).
const char* algoName(int a) {
  static const char* const kNames[] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
  if (a == kAlgoSymmetric) return "Symmetric";
  if (a == kAlgoDetExchange) return "Deterministic";
  if (a == kAlgoDirect) return "Direct";
  if (a == kAlgoOneShot) return "OneShot";
  if (a == kAlgoDoubling) return "RecursiveDoubling";
  return a >= 0 && a < 7 ? kNames[a] : "Unknown";
}
const char* protoName(int p) {
  static const char* const kNames[] = {"LL", "LL128", "Simple"};
  return p >= 0 && p < 3 ? kNames[p] : "Unknown";
}

int loadMask(const CommProfiler::Entry& e) {
  return std::atomic_ref<int>(const_cast<int&>(e.mask)).load(std::memory_order_relaxed);
}

ProfEvent* startSimple(ncclComm* comm, ProfEvent* parent, uint64_t type) {
  ncclProfilerEventDescr_v6_t d{};
  d.type = type;
  d.rank = comm->rank;
  return profStart(comm->profiler.get(), parent, nullptr, &d);
}

}  // namespace

CommProfiler::~CommProfiler() {
  for (int i = 0; i < n; ++i) {
    Entry& e = entries[i];
    if (e.plugin->profiler.finalize(e.ctx) != ncclSuccess)
      TUTTI_WARN("rank {}: profiler '{}' failed to finalize", rank, e.plugin->profiler.name);
  }
}

bool CommProfiler::wants(uint64_t types) const {
  for (int i = 0; i < n; ++i)
    if (static_cast<uint64_t>(loadMask(entries[i])) & types) return true;
  return false;
}

ncclResult_t profilerCommInit(ncclComm* comm) {
  const Config* cfg = nullptr;
  TUTTI_CHECK(configGet(&cfg));
  if (cfg->profilers.empty()) return ncclSuccess;
  auto prof = std::make_unique<CommProfiler>();
  prof->rank = comm->rank;
  for (const PluginSpec& spec : cfg->profilers) {
    std::shared_ptr<ProfilerPlugin> plugin;
    if (ncclResult_t r = loadShared(spec, &plugin); r != ncclSuccess) {
      if (spec.required)
        TUTTI_FAIL(r, "profiler '{}' ({}) is required but failed to load", spec.label(), spec.where.str());
      TUTTI_WARN("profiler '{}' ({}) failed to load; continuing without it", spec.label(), spec.where.str());
      continue;
    }
    if (!plugin) continue;  // "none"
    if (prof->n == kMaxCommProfilers) {
      TUTTI_WARN("profiler '{}' ({}) skipped: at most {} profilers per communicator", spec.label(),
                 spec.where.str(), kMaxCommProfilers);
      continue;
    }
    CommProfiler::Entry& e = prof->entries[prof->n];
    int mask = 0;
    void* ctx = nullptr;
    const ncclResult_t r = plugin->profiler.init(&ctx, comm->commHash, &mask, comm->commName.c_str(), comm->nNodes,
                                                 comm->nRanks, comm->rank, tuttiPluginLogger);
    if (r != ncclSuccess) {
      if (spec.required)
        TUTTI_FAIL(ncclInvalidUsage, "rank {}: profiler '{}' ({}) is required but its init failed ({})", comm->rank,
                   plugin->profiler.name, plugin->path, static_cast<int>(r));
      TUTTI_WARN("rank {}: profiler '{}' ({}) init failed ({}); skipped for this communicator", comm->rank,
                 plugin->profiler.name, plugin->path, static_cast<int>(r));
      continue;
    }
    e.plugin = std::move(plugin);
    e.ctx = ctx;
    e.mask = mask;
    ++prof->n;
    TUTTI_INFO(NCCL_INIT | NCCL_PROFILE, "rank {}: profiler '{}' active, event mask {:#x}", comm->rank,
               e.plugin->profiler.name, mask);
  }
  if (prof->n > 0) comm->profiler = std::move(prof);
  return ncclSuccess;
}

ProfEvent* profStart(CommProfiler* p, ProfEvent* parent, ProfEvent* group, ncclProfilerEventDescr_v6_t* d) {
  auto* e = new ProfEvent();
  e->prof = p;
  e->parent = parent;
  e->group = group;
  if (parent) profRetain(parent);
  if (group) profRetain(group);
  for (int i = 0; i < p->n; ++i) {
    CommProfiler::Entry& en = p->entries[i];
    if (!(static_cast<uint64_t>(loadMask(en)) & d->type)) continue;
    d->parentObj = parent ? parent->handles[i] : nullptr;
    if (d->type == ncclProfileColl) d->coll.parentGroup = group ? group->handles[i] : nullptr;
    if (d->type == ncclProfileP2p) d->p2p.parentGroup = group ? group->handles[i] : nullptr;
    void* h = nullptr;
    if (en.plugin->profiler.startEvent(en.ctx, &h, d) != ncclSuccess) {
      h = nullptr;
      if (!en.warned.exchange(true))
        TUTTI_WARN("rank {}: profiler '{}' failed to start an event of type {:#x}; such failures are not reported "
                   "again", p->rank, en.plugin->profiler.name, d->type);
    }
    e->handles[i] = h;
  }
  return e;
}

void profRetain(ProfEvent* e) { e->refs.fetch_add(1, std::memory_order_relaxed); }

void profRelease(ProfEvent* e) {
  if (e->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  CommProfiler* p = e->prof;
  for (int i = 0; i < p->n; ++i)
    if (e->handles[i]) p->entries[i].plugin->profiler.stopEvent(e->handles[i]);
  ProfEvent* parent = e->parent;
  ProfEvent* group = e->group;
  delete e;
  if (parent) profRelease(parent);
  if (group) profRelease(group);
}

void profRecordState(ProfEvent* e, ncclProfilerEventState_v6_t state, ncclProfilerEventStateArgs_v6_t* args) {
  CommProfiler* p = e->prof;
  for (int i = 0; i < p->n; ++i)
    if (e->handles[i]) p->entries[i].plugin->profiler.recordEventState(e->handles[i], state, args);
}

uint64_t profHostTimerNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

ProfEvent* profGroupApiStart(ncclComm* comm, int groupDepth) {
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileGroupApi;
  d.rank = comm->rank;
  d.groupApi.graphCaptured = false;
  d.groupApi.groupDepth = groupDepth;
  return profStart(comm->profiler.get(), nullptr, nullptr, &d);
}

ProfEvent* profApiCallStart(ncclComm* comm, ProfEvent* groupApi, const Task& t) {
  ncclProfilerEventDescr_v6_t d{};
  d.rank = comm->rank;
  if (t.func == ncclFuncSend || t.func == ncclFuncRecv) {
    d.type = ncclProfileP2pApi;
    d.p2pApi.func = funcName(t.func);
    d.p2pApi.count = t.count;
    d.p2pApi.datatype = dataTypeName(t.datatype);
    d.p2pApi.stream = t.stream;
  } else {
    d.type = ncclProfileCollApi;
    d.collApi.func = funcName(t.func);
    d.collApi.count = t.count;
    d.collApi.datatype = dataTypeName(t.datatype);
    d.collApi.root = t.root;
    d.collApi.stream = t.stream;
  }
  return profStart(comm->profiler.get(), groupApi, nullptr, &d);
}

ProfEvent* profGroupStart(ncclComm* comm) { return startSimple(comm, nullptr, ncclProfileGroup); }

ProfEvent* profKernelLaunchStart(ncclComm* comm, ProfEvent* groupApi) {
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileKernelLaunch;
  d.rank = comm->rank;
  return profStart(comm->profiler.get(), groupApi, nullptr, &d);
}

namespace {

// The Coll event of `t` (parent: t.api), into t.prof.
void collStart(Task* t, ProfEvent* group, uint64_t seq, int nChannels, const char* algo, const char* proto) {
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileColl;
  d.rank = t->comm->rank;
  d.coll.seqNumber = seq;
  d.coll.func = funcName(t->func);
  d.coll.sendBuff = t->sendbuff;
  d.coll.recvBuff = t->recvbuff;
  d.coll.count = t->count;
  d.coll.root = t->root;
  d.coll.datatype = dataTypeName(t->datatype);
  d.coll.nChannels = static_cast<uint8_t>(nChannels);
  d.coll.nWarps = 0;  // host executor: no warps
  d.coll.algo = algo;
  d.coll.proto = proto;
  t->prof = ProfRef(profStart(t->comm->profiler.get(), t->api.get(), group, &d));
}

}  // namespace

void profCollStart(CollPlan* plan, ProfEvent* group) {
  collStart(&plan->task, group, plan->opCount, static_cast<int>(plan->work.size()), algoName(plan->algorithm),
            protoName(plan->protocol));
}

void profDetCollStart(Task* task, ProfEvent* group, uint64_t seq) {
  collStart(task, group, seq, 1, "Deterministic", "Simple");
}

void profP2pStart(Task* t, ProfEvent* group) {
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileP2p;
  d.rank = t->comm->rank;
  d.p2p.func = funcName(t->func);
  d.p2p.buff = t->func == ncclFuncSend ? const_cast<void*>(t->sendbuff) : t->recvbuff;
  d.p2p.datatype = dataTypeName(t->datatype);
  d.p2p.count = t->count;
  d.p2p.peer = t->root;
  d.p2p.nChannels = 1;  // point-to-point runs on channel 0
  t->prof = ProfRef(profStart(t->comm->profiler.get(), t->api.get(), group, &d));
}

ProfEvent* profKernelChStart(ProfEvent* parent, int channel, uint64_t timerNs) {
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileKernelCh;
  d.rank = parent->prof->rank;
  d.kernelCh.channelId = static_cast<uint8_t>(channel);
  d.kernelCh.pTimer = timerNs ? timerNs : profHostTimerNs();
  return profStart(parent->prof, parent, nullptr, &d);
}

void profKernelChStop(ProfEvent* kernelCh, uint64_t timerNs) {
  ncclProfilerEventStateArgs_v6_t a{};
  a.kernelCh.pTimer = timerNs ? timerNs : profHostTimerNs();
  profRecordState(kernelCh, ncclProfilerKernelChStop, &a);
  profRelease(kernelCh);
}

ProfEvent* profProxyOpStart(ProfEvent* parent, int channel, int peer, int nSteps, int chunkSize, bool isSend) {
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileProxyOp;
  d.rank = parent->prof->rank;
  d.proxyOp.pid = getpid();
  d.proxyOp.channelId = static_cast<uint8_t>(channel);
  d.proxyOp.peer = peer;
  d.proxyOp.nSteps = nSteps;
  d.proxyOp.chunkSize = chunkSize;
  d.proxyOp.isSend = isSend ? 1 : 0;
  return profStart(parent->prof, parent, nullptr, &d);
}

}  // namespace tutti
