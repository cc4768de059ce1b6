// Deterministic reductions (tutti.h, tuttiCommSetDeterministic): AllReduce, ReduceScatter and Reduce of
// floating types on a deterministic communicator run as a direct exchange instead of a ring or tree, so
// the arithmetic follows the fixed order of device/common/det_reduce.h whatever the size or position:
//   1. exchange: every rank sends each peer the part of its input that peer reduces (AllReduce, Reduce:
//      the count cut into n slices, slice j reduced by rank j; ReduceScatter: block j) and receives the
//      peers' inputs for its own part, as grouped point-to-point operations over the usual transports;
//   2. local reduction: the n rows, in rank order, through hostDetReduceCopy;
//   3. AllReduce: every rank sends its reduced slice to every peer (a direct AllGather); Reduce: to the root.
// Each rank sends and receives (n-1)/n of the data per phase, as a ring does. The phases of one call run in
// order on its stream (host streams) or before the call returns (stream NULL).
#pragma once

#include "comm/task.h"

#include <functional>

namespace tutti {

// Whether `t` runs as a deterministic exchange.
bool detTask(const Task& t);

// Launches a group whose tasks include deterministic ones: the others first, through `launch` (the group
// launcher, which takes any list of tasks), then each communicator's deterministic tasks in issue order, the
// k-th of every communicator together.
using DetLaunchFn = std::function<ncclResult_t(const Task* tasks, size_t nTasks)>;
ncclResult_t detLaunchGroup(const Task* tasks, size_t nTasks, const DetLaunchFn& launch);

}  // namespace tutti
