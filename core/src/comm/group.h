// ncclGroupStart / ncclGroupEnd: a thread-local group collects tasks (and deferred communicator inits);
// the outermost ncclGroupEnd plans, connects and launches them. A call outside a group is a group of one.
#pragma once

#include "comm/task.h"

#include <functional>

namespace tutti {

ncclResult_t groupStart();
ncclResult_t groupEnd();
// ncclGroupSimulateEnd: ends the group like groupEnd, but only plans its collectives and writes their
// predicted time to simInfo->estimatedTime (see plan/simulate.h); the tasks are then discarded.
ncclResult_t groupSimulateEnd(ncclSimInfo_t* simInfo);
bool groupActive();
// Where a call's part of `comm`'s scratch starts (bytes): 0 outside a group; inside one, past what the group's
// earlier calls on `comm` took, so calls whose scratch is filled before any of the group's work reads it (the
// staged copies of in-place AlltoAll) do not share bytes. The whole is asked of commScratch by the caller.
size_t groupScratchOffset(ncclComm* comm, size_t bytes);

// Adds a task to the current group, or runs it as a group of one.
ncclResult_t groupEnqueue(const Task& task);

// Inside a group, ncclCommInitRank is deferred to the group end, where all such inits run concurrently
// (one thread can create several ranks, as ncclCommInitAll needs). Outside a group, runs `job` now.
ncclResult_t groupAddInitJob(std::function<ncclResult_t()> job);
// For a nonblocking communicator: `start` launches its init in the background and returns at once. Run
// now (returns ncclInProgress) or at the group end (which then returns ncclInProgress).
ncclResult_t groupAddAsyncInit(std::function<void()> start);

// One-sided operations (rma/): inside a group they are issued at its end, after the group's other
// operations, every put and signal before any wait, so a group that signals and waits never waits on
// itself. Outside a group, `issue` runs now.
ncclResult_t groupAddRmaOp(bool isWait, std::function<ncclResult_t()> issue);

}  // namespace tutti
