#include "comm/group.h"

#include "comm/comm.h"
#include "device/host/launch.h"
#include "device/common/dtypes.h"
#include "device/host/stream.h"
#include "plugin/config.h"
#include "util/check.h"

#include <algorithm>
#include <memory>

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
  int depth = 0;
  std::vector<Task> tasks;
  std::vector<host::WorkItem> initJobs;
};
thread_local GroupState tGroup;

ncclResult_t launchGroup(std::vector<Task> tasks) {
  // One launch per communicator, in order of first appearance.
  std::vector<host::CommLaunch> launches;
  launches.reserve(4);
  for (const Task& t : tasks) {
    // Groups hold few communicators: a linear search beats a map here.
    auto it = std::find_if(launches.begin(), launches.end(), [&](const host::CommLaunch& l) { return l.comm == t.comm; });
    if (it == launches.end()) {
      launches.emplace_back();
      launches.back().comm = t.comm;
      launches.back().stream = t.stream;
      it = launches.end() - 1;
    }
    host::CommLaunch& l = *it;
    if (!l.stream) l.stream = t.stream;
    if (t.func == ncclFuncSend || t.func == ncclFuncRecv) {
      l.p2p.push_back(t);
    } else {
      CollPlan plan;
      TUTTI_CHECK(planCollective(t.comm, t, &plan));
      plan.opCount = t.comm->collOpCount++;
      TUTTI_INFO(NCCL_COLL, "{}: opCount {} count {} datatype {} op {} root {} comm {} [nranks={}] algo {} proto {} "
                 "channels {}", funcName(t.func), plan.opCount, t.count, dataTypeName(t.datatype),
                 static_cast<int>(t.op), t.root, static_cast<void*>(t.comm), t.comm->nRanks,
                 algorithmName(plan.algorithm), protocolName(plan.protocol), plan.work.size());
      l.colls.push_back(std::move(plan));
    }
  }
  for (host::CommLaunch& l : launches) {
    if (l.stream && !host::HostStream::fromHandle(l.stream))
      TUTTI_FAIL(ncclInvalidArgument, "rank {}: stream {} is not a host stream created with tuttiStreamCreate (the "
                 "host backend runs without CUDA streams)", l.comm->rank, static_cast<void*>(l.stream));
  }

  // Connections are set up through the bootstrap, collectively per communicator: with several
  // communicators (one thread driving several ranks) they must progress concurrently.
  if (launches.size() == 1) {
    TUTTI_CHECK(host::launchConnect(launches[0]));
  } else {
    std::vector<host::WorkItem> jobs;
    for (host::CommLaunch& l : launches) jobs.push_back([&l] { return host::launchConnect(l); });
    TUTTI_CHECK(host::runConcurrently(jobs));
  }

  std::vector<host::WorkItem> now;
  for (host::CommLaunch& l : launches) {
    std::vector<host::WorkItem> items;
    TUTTI_CHECK(host::launchItems(l, &items));
    if (!l.stream) {
      for (auto& i : items) now.push_back(std::move(i));
    } else {
      auto shared = std::make_shared<std::vector<host::WorkItem>>(std::move(items));
      host::HostStream::fromHandle(l.stream)->enqueue([shared] { return host::runConcurrently(*shared); });
    }
  }
  return host::runConcurrently(now);
}

}  // namespace

bool groupActive() { return tGroup.depth > 0; }

ncclResult_t groupStart() {
  ++tGroup.depth;
  return ncclSuccess;
}

ncclResult_t groupEnd() {
  if (tGroup.depth == 0) TUTTI_FAIL(ncclInvalidUsage, "ncclGroupEnd called without a matching ncclGroupStart");
  if (--tGroup.depth > 0) return ncclSuccess;
  std::vector<Task> tasks = std::move(tGroup.tasks);
  std::vector<host::WorkItem> inits = std::move(tGroup.initJobs);
  tGroup.tasks.clear();
  tGroup.initJobs.clear();
  if (!inits.empty()) TUTTI_CHECK(host::runConcurrently(inits));
  if (tasks.empty()) return ncclSuccess;
  return launchGroup(std::move(tasks));
}

ncclResult_t groupEnqueue(const Task& task) {
  if (tGroup.depth > 0) {
    tGroup.tasks.push_back(task);
    return ncclSuccess;
  }
  return launchGroup({task});
}

ncclResult_t groupAddInitJob(std::function<ncclResult_t()> job) {
  if (tGroup.depth > 0) {
    tGroup.initJobs.push_back(std::move(job));
    return ncclSuccess;
  }
  return job();
}

}  // namespace tutti
