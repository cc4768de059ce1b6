// Profiler events emitted by the core (NCCL profiler ABI, seen through the native v6 table).
//
// Every profiler of the config's `plugins.profiler:` list is initialised per communicator; comm->profiler
// is null when none is (then every emission site costs one predictable branch and nothing else).
//
// Hierarchy (parentObj): GroupApi -> CollApi -> Coll -> {KernelCh, ProxyOp -> ProxyStep}, GroupApi ->
// P2pApi -> P2p -> {KernelCh, ProxyOp -> ProxyStep}, GroupApi -> KernelLaunch; Group (no parent) is the
// coll/p2p descriptors' parentGroup. Events are reference counted: a child holds its parent (and a
// coll/p2p its group) until it stops, so every plugin sees strictly nested start/stop pairs whatever
// thread (application, executor, proxy) emits them. Consequence: an API event ends when the work it issued
// is done, not when the call returns; a Coll / P2p ends when its last channel and proxy operation ends.
#pragma once

#include <tutti/profiler.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

struct ncclComm;

namespace tutti {

class ProfilerPlugin;
struct CollPlan;
struct Task;

inline constexpr int kMaxCommProfilers = 8;

// The profilers of one communicator whose init succeeded. Immutable after init except the activation
// masks, which a plugin may change at run time (read on every emission).
class CommProfiler {
 public:
  struct Entry {
    std::shared_ptr<ProfilerPlugin> plugin;
    void* ctx = nullptr;
    int mask = 0;
    std::atomic<bool> warned{false};  // a failed startEvent is reported once per plugin and communicator
  };
  ~CommProfiler();  // finalizes every context: no event of this communicator may still be open
  // Whether any plugin currently wants one of the `types` (ncclProfile* bits).
  bool wants(uint64_t types) const;

  Entry entries[kMaxCommProfilers];
  int n = 0;
  int rank = 0;
};

// One event as the core holds it: the handle each plugin returned (NULL where the plugin did not ask for
// this type or ignored it).
struct ProfEvent {
  std::atomic<int> refs{1};
  CommProfiler* prof = nullptr;
  ProfEvent* parent = nullptr;  // held (one reference) until this event stops
  ProfEvent* group = nullptr;   // coll / p2p: the Group event, held likewise
  void* handles[kMaxCommProfilers] = {};
};

// Loads the config's profilers (once per process) and initialises them for `comm`; sets comm->profiler
// (null when no profiler is active). A profiler that fails to load or init is logged and skipped, unless
// the config marks it required.
ncclResult_t profilerCommInit(ncclComm* comm);

// Starts an event for every plugin whose mask has d->type; fills d->parentObj (and coll/p2p parentGroup)
// per plugin. Returns the event with one reference owned by the caller. Never null.
ProfEvent* profStart(CommProfiler* p, ProfEvent* parent, ProfEvent* group, ncclProfilerEventDescr_v6_t* d);
void profRetain(ProfEvent* e);
// Drops a reference; the last one stops the event (every plugin handle), then releases its parents.
void profRelease(ProfEvent* e);
void profRecordState(ProfEvent* e, ncclProfilerEventState_v6_t state, ncclProfilerEventStateArgs_v6_t* args);

// Owning reference to an event (null when profiling is off: copies and destruction cost one branch).
class ProfRef {
 public:
  ProfRef() = default;
  explicit ProfRef(ProfEvent* adopt) : e_(adopt) {}
  ProfRef(const ProfRef& o) : e_(o.e_) {
    if (e_) [[unlikely]] profRetain(e_);
  }
  ProfRef(ProfRef&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  ProfRef& operator=(ProfRef o) noexcept {
    std::swap(e_, o.e_);
    return *this;
  }
  ~ProfRef() {
    if (e_) [[unlikely]] profRelease(e_);
  }
  ProfEvent* get() const { return e_; }
  explicit operator bool() const { return e_ != nullptr; }

 private:
  ProfEvent* e_ = nullptr;
};

// Host clock in ns (CLOCK_MONOTONIC): the host executor's KernelCh pTimer.
uint64_t profHostTimerNs();

// ---- emission helpers for the sites (each called only when comm->profiler is set) ----------------------

// API call of `task` (CollApi or P2pApi) under `groupApi`; returns the event (one reference, caller's).
ProfEvent* profApiCallStart(ncclComm* comm, ProfEvent* groupApi, const Task& task);
ProfEvent* profGroupApiStart(ncclComm* comm, int groupDepth);
ProfEvent* profGroupStart(ncclComm* comm);
ProfEvent* profKernelLaunchStart(ncclComm* comm, ProfEvent* groupApi);
// Starts the Coll event of a planned collective into plan->task.prof (parent: plan->task.api).
void profCollStart(CollPlan* plan, ProfEvent* group);
// Starts the Coll event of a deterministic call (comm/det_coll.h) into task->prof: algo "Deterministic"; its steps'
// channel and proxy events are its children. `seq`: the collective count its first step takes.
void profDetCollStart(Task* task, ProfEvent* group, uint64_t seq);
// Starts the P2p event of a send/recv task into task->prof (parent: task->api).
void profP2pStart(Task* task, ProfEvent* group);
// KernelCh of `channel` under `parent` (a Coll or P2p event); stopped with profKernelChStop. `timerNs`: when it
// started / stopped on the CLOCK_MONOTONIC scale (a kernel's own clock); 0: now.
ProfEvent* profKernelChStart(ProfEvent* parent, int channel, uint64_t timerNs = 0);
void profKernelChStop(ProfEvent* kernelCh, uint64_t timerNs = 0);
// ProxyOp under `parent` for a proxied connection end; one reference, caller's.
ProfEvent* profProxyOpStart(ProfEvent* parent, int channel, int peer, int nSteps, int chunkSize, bool isSend);

}  // namespace tutti
