// Host backend launch: what one communicator runs for one group (its collectives, then its point-to-point
// operations), turned into work items for the executor.
#pragma once

#include "comm/task.h"
#include "device/host/executor.h"
#include "plan/plan.h"

#include <vector>

namespace tutti::host {

struct CommLaunch {
  ncclComm* comm = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<CollPlan> colls;   // in issue order
  std::vector<Task> p2p;         // sends and receives in issue order
  ProfRef profGroup;             // profiling only: the Group event of this launch
  ProfRef profLaunch;            // profiling only: the KernelLaunch event
};

// Opens the connections the launch needs. Collective over the communicator's ranks taking part.
ncclResult_t launchConnect(CommLaunch& launch);

// Wraps a work item so that its failure poisons the communicator (asyncError set, operations cancelled,
// connections closed so the peers stop too).
WorkItem guarded(ncclComm* comm, WorkItem item);

// Announces to the receive ends of channel `c` (network proxies) the steps the launch's collectives will take
// from them.
ncclResult_t announceChannelSteps(ncclComm* comm, const std::vector<CollPlan>& colls, int c);

// Appends the launch's work items: one per channel for the collectives (run in order on that channel),
// one for all sends and one for all receives (peers visited in the same round order on every rank, so
// sends and receives pair up without deadlock). Self send/receive pairs are copied here directly.
ncclResult_t launchItems(CommLaunch& launch, std::vector<WorkItem>* items);

}  // namespace tutti::host
