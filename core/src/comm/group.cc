#include "comm/group.h"

#include "comm/comm.h"
#include "comm/det_coll.h"
#include "device/enqueue.h"
#include "device/host/launch.h"
#include "device/host/oneshot.h"
#include "comm/callcheck.h"
#include "device/common/dtypes.h"
#include "device/host/stream.h"
#include "plan/plan.h"
#include "plan/simulate.h"
#include "plan/tuning.h"
#include "plugin/config.h"
#include "util/check.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>

namespace tutti {

const char* funcName(ncclFunc_t func) {
  switch (func) {
    case ncclFuncBroadcast: return "Broadcast";
    case ncclFuncReduce: return "Reduce";
    case ncclFuncAllGather: return "AllGather";
    case ncclFuncReduceScatter: return "ReduceScatter";
    case ncclFuncAllReduce: return "AllReduce";
    case ncclFuncSend: return "Send";
    case ncclFuncRecv: return "Recv";
    case ncclFuncAlltoAll: return "AlltoAll";
    case ncclFuncGather: return "Gather";
    case ncclFuncScatter: return "Scatter";
    default: return "?";
  }
}

namespace {

struct GroupState {
  std::vector<Task> tasks;
  std::vector<host::WorkItem> initJobs;
  std::vector<std::function<void()>> asyncInits;  // starters of nonblocking inits (return at once)
  std::vector<std::function<ncclResult_t()>> rmaPuts, rmaWaits;  // groupAddRmaOp
  std::vector<std::pair<ncclComm*, size_t>> scratchTaken;        // groupScratchOffset, per communicator
};
thread_local GroupState tGroup;
// The thread's ncclGroupStart nesting, read by every API call. Apart from tGroup: a trivially initialized
// initial-exec variable is one load from the thread pointer, where tGroup's first-use guard costs a
// __tls_get_addr call per access.
[[gnu::tls_model("initial-exec")]] thread_local int tGroupDepth = 0;

// Containers one launch fills, kept per thread and reused so a call outside a group allocates nothing
// here once warm. launchGroup never runs twice at once on one thread (work it starts on this thread
// makes no API call), so one set suffices.
struct LaunchScratch {
  std::vector<host::CommLaunch> launches;  // [0, used) hold this launch; the rest keep their capacity
  std::vector<host::WorkItem> items;
};
thread_local LaunchScratch tScratch;

// Rebinds a recycled launch to `t`'s communicator: every field back to its default (whatever fields
// CommLaunch grows), but its vectors keep their capacity.
void resetLaunch(host::CommLaunch& l, const Task& t) {
  std::vector<CollPlan> colls = std::move(l.colls);
  std::vector<Task> p2p = std::move(l.p2p);
  colls.clear();
  p2p.clear();
  l = host::CommLaunch{};
  l.comm = t.comm;
  l.stream = t.stream;
  l.colls = std::move(colls);
  l.p2p = std::move(p2p);
}

// The COLL line of a collective as it is launched. Checked first so the names are not even looked up when it is off.
void logColl(const Task& t, uint64_t opCount, size_t nBytes, int algorithm, int protocol, size_t channels,
             std::string_view decider) {
  if (!logEnabled(NCCL_LOG_INFO, NCCL_COLL)) [[likely]] return;
  // A one-shot plan's binomial tree (an AllReduce's or ReduceScatter's to rank 0 and back, a Broadcast's) shows as
  // TREE: kAlgoDoubling covers every path of log2 n or fewer messages a rank; a deterministic AllReduce's one-shot
  // ReduceScatter then AllGather, as SCATTERGATHER.
  if (algorithm == kAlgoDoubling &&
      (t.func == ncclFuncBroadcast ||
       (t.func == ncclFuncAllReduce && logAllReduce(t.comm, nBytes, detReduces(t)) == LogAllReduce::kTree) ||
       (t.func == ncclFuncReduceScatter && treeReduceScatterWanted(t.comm, nBytes, detReduces(t)))))
    algorithm = NCCL_ALGO_TREE;
  if (algorithm == kAlgoDoubling && t.func == ncclFuncAllReduce &&
      logAllReduce(t.comm, nBytes, detReduces(t)) == LogAllReduce::kScatterGather)
    algorithm = kAlgoScatterGather;
  TUTTI_INFO(NCCL_COLL, "{}: opCount {} count {} bytes {} datatype {} op {} root {} comm {} [nranks={}] algo {} "
             "proto {} channels {} tuner {}{}", funcName(t.func), opCount, t.count, nBytes, dataTypeName(t.datatype),
             static_cast<int>(t.op), t.root, static_cast<void*>(t.comm), t.comm->nRanks, tunedAlgoName(algorithm),
             tunedProtoName(protocol), channels, decider,
             !detReduces(t) ? "" : t.comm->deterministic.load(std::memory_order_relaxed) ? " (deterministic)"
                                                                                          : " (fixed order)");
}

// Runs a lone call on the one-shot path (tryLoneOneShot) with the path's answer and the op as it applies.
ncclResult_t runLone(const Task& t, bool doubling, bool det, size_t total, const ResolvedRedOp& op, bool* ran) {
  ncclComm* comm = t.comm;
  const size_t typeSize = dataTypeSize(t.datatype), bytes = t.count * typeSize;
  const bool byteWise = t.func == ncclFuncAllGather || t.func == ncclFuncBroadcast || t.func == ncclFuncAlltoAll;
  *ran = true;
  CommOpsGuard busy(comm);
  OneShot s;
  s.func = t.func;
  s.root = t.root;
  s.input = static_cast<const char*>(t.sendbuff);
  s.output = static_cast<char*>(t.recvbuff);
  s.count = byteWise ? bytes : t.count;
  s.esize = byteWise ? 1 : typeSize;
  s.op = op;
  s.det = det;  // folds in the fixed order (corePaths kept a user's PreMulSum off this path)
  s.doubling = doubling;
  const uint64_t opCount = comm->collOpCount++;
  logColl(t, opCount, total, s.doubling ? kAlgoDoubling : kAlgoOneShot, NCCL_PROTO_SIMPLE, 1, kCoreDecider);
  logSetThreadRank(comm->rank);
  host::OpLabel label{comm->rank, funcName(t.func), opCount, 0, &comm->failure, commAskFailure, comm};
  label.whoArrived = callCheckWhoArrived;
  const ncclResult_t res = host::runOneShot(comm, s, commWaitContext(comm), label);
  if (res != ncclSuccess) {
    ncclResult_t expected = ncclSuccess;
    comm->asyncError.compare_exchange_strong(expected, res);
    commCancelOps(comm);
  }
  return res;
}

// A lone collective on the one-shot path (outside a group, blocking communicator, no stream, no profiler or call
// check): run on the calling thread without a launch, the plan, work item and connection pass that a launch builds
// (most of a tiny call's own cost). The same messages as the launch's one-shot plan (planCollective), so ranks may
// mix the two. False in *ran where the launch is needed, the first time the connections are made included.
ncclResult_t tryLoneOneShot(const Task& t, bool* ran) {
  *ran = false;
  ncclComm* comm = t.comm;
  if (!oneShotFunc(t.func) || t.stream || t.plan || t.internal || comm->backend != Backend::Host ||
      !comm->directConnsReady || comm->calls.checkCalls || comm->profiler || comm->oneShotMaxBytes == 0 ||
      comm->rma)  // windows: the buffers may be symmetric ones, which planCollective runs in place
    return ncclSuccess;
  const bool byteWise = t.func == ncclFuncAllGather || t.func == ncclFuncBroadcast || t.func == ncclFuncAlltoAll;
  ncclComm::LoneCall& last = comm->loneCall;
  const bool det = detReduces(t);
  if (!last.valid || last.func != t.func || last.count != t.count || last.datatype != t.datatype ||
      last.op != t.op || last.det != det) {
    const CorePaths paths = corePaths(comm, t, /*preMul: the one-shot path does not ask=*/false);
    ResolvedRedOp resolved;
    if (paths.oneShot) {
      if (byteWise) resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &resolved);  // plain copy
      else TUTTI_CHECK(comm->redOps->resolve(t.op, t.datatype, &resolved, funcName(t.func)));
    }
    // A user's op may be destroyed and its handle reused: only the built-in ones are kept.
    last.valid = static_cast<int>(t.op) < static_cast<int>(ncclNumOps);
    last.func = t.func;
    last.count = t.count;
    last.datatype = t.datatype;
    last.op = t.op;
    last.det = det;
    last.oneShot = paths.oneShot;
    last.doubling = paths.doubling;
    last.totalBytes = paths.totalBytes;
    last.resolved = resolved;
    if (!paths.oneShot) return ncclSuccess;
    return runLone(t, paths.doubling, det, paths.totalBytes, resolved, ran);
  }
  if (!last.oneShot) return ncclSuccess;
  return runLone(t, last.doubling, last.det, last.totalBytes, last.resolved, ran);
}

ncclResult_t launchGroupPlain(const Task* tasks, size_t nTasks) {
  // One launch per communicator, in order of first appearance.
  std::vector<host::CommLaunch>& launches = tScratch.launches;
  size_t used = 0;
  // Profiling: the launches' own references to their events end with this call (work items hold theirs).
  struct ReleaseEvents {
    std::vector<host::CommLaunch>& launches;
    size_t& used;
    ~ReleaseEvents() {
      for (size_t li = 0; li < used; ++li) {
        host::CommLaunch& l = launches[li];
        if (!l.profGroup) [[likely]] continue;
        l.profLaunch = {};
        l.colls.clear();
        l.p2p.clear();
        l.profGroup = {};
      }
    }
  } releaseEvents{launches, used};
  for (size_t i = 0; i < nTasks; ++i) {
    const Task& t = tasks[i];
    // Groups hold few communicators: a linear search beats a map here.
    size_t li = 0;
    while (li < used && launches[li].comm != t.comm) ++li;
    if (li == used) {
      if (used == launches.size()) launches.emplace_back();
      resetLaunch(launches[used++], t);
      if (t.comm->profiler) [[unlikely]] {
        launches[li].profGroup = ProfRef(profGroupStart(t.comm));
        launches[li].profLaunch = ProfRef(profKernelLaunchStart(t.comm, t.api ? t.api.get()->parent : nullptr));
      }
    }
    host::CommLaunch& l = launches[li];
    if (!l.stream) l.stream = t.stream;
    // Device backends fan in every stream of the group (cuda: the null stream is the legacy default stream).
    if (t.comm->backend != Backend::Host && (t.stream || t.comm->backend == Backend::Cuda) &&
        std::find(l.streams.begin(), l.streams.end(), t.stream) == l.streams.end())
      l.streams.push_back(t.stream);
    if (t.func == ncclFuncSend || t.func == ncclFuncRecv) {
      l.p2p.push_back(t);
      // A deterministic call's steps carry the call's Coll event already (det_coll.h).
      if (l.profGroup && !t.prof) [[unlikely]] profP2pStart(&l.p2p.back(), l.profGroup.get());
    } else {
      CollPlan plan;
      if (t.plan) [[unlikely]] {
        plan = *t.plan;
        plan.task.prof = t.prof;
      }
      else TUTTI_CHECK(planCollective(t.comm, t, &plan));
      plan.opCount = t.comm->collOpCount++;
      logColl(t, plan.opCount, plan.nBytes, plan.algorithm, plan.protocol, plan.work.size(), plan.decider);
      l.colls.push_back(std::move(plan));
      if (l.profGroup && !t.prof) [[unlikely]] profCollStart(&l.colls.back(), l.profGroup.get());
    }
  }
  for (size_t li = 0; li < used; ++li) {
    const host::CommLaunch& l = launches[li];
    if (l.comm->backend == Backend::Cuda) continue;  // any CUDA stream
    // The host backend runs on its one stream, the sim fans in all of them (no copy: a call allocates nothing here).
    const bool host = l.comm->backend == Backend::Host;
    const cudaStream_t* streams = host ? &l.stream : l.streams.data();
    const size_t nStreams = host ? 1 : l.streams.size();
    for (size_t i = 0; i < nStreams; ++i) {
      const cudaStream_t s = streams[i];
      if (!s) continue;
      host::HostStream* hs = host::HostStream::fromHandle(s);
      if (!hs)
        TUTTI_FAIL(ncclInvalidArgument, "rank {}: stream {} is not a host stream created with tuttiStreamCreate (the "
                   "{} backend runs without CUDA streams)", l.comm->rank, static_cast<void*>(s),
                   backendName(l.comm->backend));
      if (l.comm->backend == Backend::Host && hs->capturing())
        TUTTI_FAIL(ncclInvalidUsage, "rank {}: stream {} is capturing: the host backend's operations cannot be "
                   "captured into a graph (the sim and cuda backends' can)", l.comm->rank, static_cast<void*>(s));
    }
  }

  // TUTTI_CHECK_CALLS: every rank's calls compared before anything connects or moves (off: one test each).
  for (size_t li = 0; li < used; ++li) {
    if (launches[li].comm->calls.checkCalls) [[unlikely]] {
      TUTTI_CHECK(callCheckLaunches(launches.data(), used));
      break;
    }
  }

  // Connections are set up through the bootstrap, collectively per communicator: with several
  // communicators (one thread driving several ranks) they must progress concurrently.
  if (used == 1) {
    TUTTI_CHECK(host::launchConnect(launches[0]));
  } else {
    std::vector<host::WorkItem> jobs;
    for (size_t li = 0; li < used; ++li) {
      host::CommLaunch* l = &launches[li];
      jobs.push_back([l] { return host::launchConnect(*l); });
    }
    TUTTI_CHECK(host::runConcurrently(jobs));
  }

  // Work that runs now, for every communicator without a stream. Cleared when done so the items (and the
  // plans they hold) do not outlive the call.
  std::vector<host::WorkItem>& now = tScratch.items;
  now.clear();
  struct ClearOnExit {
    std::vector<host::WorkItem>& v;
    ~ClearOnExit() { v.clear(); }
  } clearNow{now};
  bool device = false;
  for (size_t li = 0; li < used; ++li) {
    host::CommLaunch& l = launches[li];
    if (l.comm->backend != Backend::Host) {
      // Device backends: queued on the communicator's internal stream behind its user streams (device/enqueue.h).
      TUTTI_CHECK(device::enqueue(l));
      device = true;
    } else if (!l.stream) {
      TUTTI_CHECK(host::launchItems(l, &now));
    } else {
      auto items = std::make_shared<std::vector<host::WorkItem>>();
      auto selfCopies = std::make_shared<std::vector<host::SelfCopy>>();
      TUTTI_CHECK(host::launchItems(l, items.get(), selfCopies.get()));
      // The queued work keeps its communicator alive (commFree waits for it) until it has run.
      auto alive = std::make_shared<CommOpsGuard>(l.comm);
      host::HostStream::fromHandle(l.stream)->enqueue([items, selfCopies, alive]() mutable {
        // Sends to and receives from this rank first, in stream order (before any other item of the group
        // reads or writes those buffers).
        for (const host::SelfCopy& c : *selfCopies) std::memmove(c.dst, c.src, c.bytes);
        ncclResult_t res = host::runConcurrently(*items);
        items.reset();
        alive.reset();
        return res;
      });
    }
    l.profLaunch = {};  // KernelLaunch: the work is handed to the executor (or the stream)
  }
  ncclResult_t res = host::runConcurrently(now);
  for (size_t li = 0; device && li < used; ++li) {
    if (launches[li].comm->backend == Backend::Host) continue;
    const ncclResult_t r = device::finish(launches[li]);
    if (res == ncclSuccess) res = r;
  }
  return res;
}

// A group: deterministic reductions (comm/det_coll.h) run after the other tasks, as phases of launches of their
// own steps (point-to-point, AllGather, local reduction).
ncclResult_t launchGroup(const Task* tasks, size_t nTasks) {
  for (size_t i = 0; i < nTasks; ++i) {
    if (detTask(tasks[i])) [[unlikely]] return detLaunchGroup(tasks, nTasks, launchGroupPlain);
  }
  return launchGroupPlain(tasks, nTasks);
}

// The distinct communicators of `tasks`, in order of first appearance.
std::vector<ncclComm*> commsOf(const Task* tasks, size_t nTasks) {
  std::vector<ncclComm*> comms;
  for (size_t i = 0; i < nTasks; ++i)
    if (std::find(comms.begin(), comms.end(), tasks[i].comm) == comms.end()) comms.push_back(tasks[i].comm);
  return comms;
}

// launchGroup with every communicator counted busy (CommOpsGuard) until it returns, so an abort from
// another thread waits for this call to leave before freeing the communicator.
ncclResult_t launchGroupCounted(const Task* tasks, size_t nTasks) {
  if (nTasks == 1) {
    CommOpsGuard busy(tasks[0].comm);
    return launchGroup(tasks, nTasks);
  }
  std::vector<std::unique_ptr<CommOpsGuard>> busy;
  for (ncclComm* c : commsOf(tasks, nTasks)) busy.push_back(std::make_unique<CommOpsGuard>(c));
  return launchGroup(tasks, nTasks);
}

// A group whose communicators are all nonblocking runs on a background thread: each communicator's
// asyncError is ncclInProgress until it is done, then ncclSuccess or the group's error.
ncclResult_t launchGroupAsync(std::vector<Task> tasks) {
  std::vector<ncclComm*> comms = commsOf(tasks.data(), tasks.size());
  auto guards = std::make_shared<std::vector<std::unique_ptr<CommOpsGuard>>>();
  for (ncclComm* c : comms) {
    std::shared_ptr<AsyncJob> previous;
    {
      std::lock_guard<std::mutex> lock(c->lifeMutex);
      previous = std::move(c->asyncJob);
    }
    if (previous) previous->join();  // finished: its asyncError was no longer ncclInProgress at enqueue
    c->asyncError.store(ncclInProgress);
    guards->push_back(std::make_unique<CommOpsGuard>(c));
  }
  auto job = std::make_shared<AsyncJob>([tasks = std::move(tasks), comms, guards]() mutable {
    const ncclResult_t res = launchGroup(tasks.data(), tasks.size());
    tasks.clear();  // profiler references end before the communicators may go
    for (ncclComm* c : comms) c->asyncError.store(res);
    guards->clear();
  });
  for (ncclComm* c : comms) {
    std::lock_guard<std::mutex> lock(c->lifeMutex);
    c->asyncJob = job;
  }
  return ncclInProgress;
}

bool allNonblocking(const Task* tasks, size_t nTasks) {
  for (size_t i = 0; i < nTasks; ++i)
    if (!commNonblocking(tasks[i].comm)) return false;
  return nTasks > 0;
}

ncclResult_t launchTasks(std::vector<Task> tasks) {
  if (allNonblocking(tasks.data(), tasks.size())) return launchGroupAsync(std::move(tasks));
  return launchGroupCounted(tasks.data(), tasks.size());
}

}  // namespace

bool groupActive() { return tGroupDepth > 0; }

size_t groupScratchOffset(ncclComm* comm, size_t bytes) {
  if (tGroupDepth == 0) return 0;
  for (auto& [c, taken] : tGroup.scratchTaken) {
    if (c != comm) continue;
    const size_t at = taken;
    taken += (bytes + 255) / 256 * 256;
    return at;
  }
  tGroup.scratchTaken.emplace_back(comm, (bytes + 255) / 256 * 256);
  return 0;
}

ncclResult_t groupStart() {
  ++tGroupDepth;
  return ncclSuccess;
}

ncclResult_t groupEnd() {
  if (tGroupDepth == 0) TUTTI_FAIL(ncclInvalidUsage, "ncclGroupEnd called without a matching ncclGroupStart");
  if (--tGroupDepth > 0) return ncclSuccess;
  tGroup.scratchTaken.clear();
  std::vector<Task> tasks = std::move(tGroup.tasks);
  std::vector<host::WorkItem> inits = std::move(tGroup.initJobs);
  std::vector<std::function<void()>> asyncInits = std::move(tGroup.asyncInits);
  tGroup.tasks.clear();
  tGroup.initJobs.clear();
  tGroup.asyncInits.clear();
  for (auto& start : asyncInits) start();
  std::vector<std::function<ncclResult_t()>> rmaPuts = std::move(tGroup.rmaPuts);
  std::vector<std::function<ncclResult_t()>> rmaWaits = std::move(tGroup.rmaWaits);
  tGroup.rmaPuts.clear();
  tGroup.rmaWaits.clear();
  if (!inits.empty()) TUTTI_CHECK(host::runConcurrently(inits));
  ncclResult_t res = tasks.empty() ? ncclSuccess : launchTasks(std::move(tasks));
  if (res != ncclSuccess && res != ncclInProgress) return res;
  for (auto* ops : {&rmaPuts, &rmaWaits})
    for (auto& issue : *ops) TUTTI_CHECK(issue());
  return res == ncclSuccess && !asyncInits.empty() ? ncclInProgress : res;
}

ncclResult_t groupSimulateEnd(ncclSimInfo_t* simInfo) {
  // Like ncclGroupEnd this closes one level even when simInfo is bad; at the outermost level the queued
  // tasks are then discarded (NCCL does the same), so a failed call never leaves a half-open group.
  if (tGroupDepth == 0)
    TUTTI_FAIL(ncclInvalidUsage, "ncclGroupSimulateEnd called without a matching ncclGroupStart");
  const ncclResult_t valid = simInfoCheck(simInfo);
  if (--tGroupDepth > 0) return valid;
  tGroup.scratchTaken.clear();
  std::vector<Task> tasks = std::move(tGroup.tasks);
  std::vector<host::WorkItem> inits = std::move(tGroup.initJobs);
  std::vector<std::function<void()>> asyncInits = std::move(tGroup.asyncInits);
  tGroup.tasks.clear();
  tGroup.initJobs.clear();
  tGroup.asyncInits.clear();
  tGroup.rmaPuts.clear();  // one-sided operations are not simulated: discarded with the tasks
  tGroup.rmaWaits.clear();
  if (valid != ncclSuccess) return valid;
  // Deferred communicator inits are real (as in NCCL); only the collectives are simulated.
  for (auto& start : asyncInits) start();
  if (!inits.empty()) TUTTI_CHECK(host::runConcurrently(inits));
  float us = 0;
  TUTTI_CHECK(simulateTasks(tasks.data(), tasks.size(), &us));
  simInfo->estimatedTime = us;
  return ncclSuccess;
}

namespace {

// A task of a profiled communicator: its API event (CollApi / P2pApi) under the communicator's GroupApi
// event of this thread's group, started by the group's first task of that communicator (an implicit
// group of one outside ncclGroupStart/End, groupDepth 1). The API events hold the GroupApi event, the tasks
// hold the API events: all end when the tasks of the group have been launched and their work is done.
ncclResult_t groupEnqueueProfiled(const Task& task) {
  Task t = task;
  ProfEvent* groupApi = nullptr;
  for (auto it = tGroup.tasks.rbegin(); it != tGroup.tasks.rend() && !groupApi; ++it)
    if (it->comm == t.comm && it->api) groupApi = it->api.get()->parent;
  ProfRef fresh;
  if (!groupApi) {
    fresh = ProfRef(profGroupApiStart(t.comm, tGroupDepth + 1));
    groupApi = fresh.get();
  }
  t.api = ProfRef(profApiCallStart(t.comm, groupApi, t));
  if (tGroupDepth > 0) {
    tGroup.tasks.push_back(std::move(t));
    return ncclSuccess;
  }
  if (commNonblocking(t.comm)) return launchGroupAsync({std::move(t)});
  return launchGroupCounted(&t, 1);
}

}  // namespace

ncclResult_t groupEnqueue(const Task& task) {
  if (task.comm->profiler) [[unlikely]] return groupEnqueueProfiled(task);
  if (tGroupDepth > 0) {
    tGroup.tasks.push_back(task);
    return ncclSuccess;
  }
  if (commNonblocking(task.comm)) [[unlikely]] return launchGroupAsync({task});
  bool ran = false;
  const ncclResult_t res = tryLoneOneShot(task, &ran);
  if (ran) return res;
  return launchGroupCounted(&task, 1);
}

ncclResult_t groupAddInitJob(std::function<ncclResult_t()> job) {
  if (tGroupDepth > 0) {
    tGroup.initJobs.push_back(std::move(job));
    return ncclSuccess;
  }
  return job();
}

ncclResult_t groupAddRmaOp(bool isWait, std::function<ncclResult_t()> issue) {
  if (tGroupDepth > 0) {
    (isWait ? tGroup.rmaWaits : tGroup.rmaPuts).push_back(std::move(issue));
    return ncclSuccess;
  }
  return issue();
}

ncclResult_t groupAddAsyncInit(std::function<void()> start) {
  if (tGroupDepth > 0) {
    tGroup.asyncInits.push_back(std::move(start));
    return ncclSuccess;
  }
  start();
  return ncclInProgress;
}

}  // namespace tutti
