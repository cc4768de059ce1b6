// Deterministic reductions (tutti.h, tuttiCommSetDeterministic): AllReduce, ReduceScatter and Reduce of
// floating types on a deterministic communicator do not run the ring or tree reductions; they move raw inputs
// and reduce them locally in the fixed order of device/common/det_reduce.h, so the arithmetic is the same
// whatever the size or position. On the host backend with the default tuner, an AllReduce or ReduceScatter that
// fits the one-shot path, or whose ranks read one another's memory (the direct path), takes that path with the
// fixed-order fold (detOnCorePath). The others run here:
//   one-shot (input x ranks <= TUTTI_DET_ONESHOT_BYTES): an AllGather of every rank's whole input into n rows,
//     then each rank reduces what it outputs;
//   exchange (larger): 1. every rank sends each peer its slice of this rank's input (AllReduce, Reduce: the
//     count cut into n slices of count / n, the last count % n elements reduced by every rank; ReduceScatter:
//     block j), point-to-point over the usual transports; 2. the local reduction of the n rows; 3. AllReduce:
//     an in-place AllGather of the reduced slices; Reduce: the slices sent to the root. On device backends an
//     exchange whose rows would pass TUTTI_DET_SEGMENT_BYTES runs as segments (consecutive element ranges; of
//     each block, for a ReduceScatter), one after another, all through the scratch made at init.
// On the host backend (two channels or more; TUTTI_DET_FUSED) phases 1 and 2 are one step, the fused exchange
// (device/host/det_exchange.h): the received slices are reduced straight from the connections' slots, and an
// AllReduce's AllGather runs in the same launch; an AllReduce of more than TUTTI_DET_PIPELINE_BYTES runs as segments
// of that size, one launch each, so that each segment's reduced slices are gathered while still in cache. Elsewhere
// the local reduction is hostDetReduceCopy over scratch rows (host backend) or, on the sim and cuda backends, a
// local step of the symmetric kernel (sym.h, SymPeers::local). The phases of one call run in order on its stream, or
// before the call returns (stream NULL on the host backend). The AllGathers and point-to-point operations are
// steps of the call (Task::internal): NCCL_ALGO / NCCL_PROTO do not restrict them.
#pragma once

#include "comm/task.h"

#include <functional>

namespace tutti {

// Whether `t` reduces in the fixed order: an AllReduce, ReduceScatter or Reduce of a floating type, of at least one
// element, on a deterministic communicator; or an AllReduce or ReduceScatter of a floating type on a communicator
// whose fastest paths these are (ncclComm::fixedOrderPaths: over the network, from 6 ranks; within a node, 4 to 8
// processes, from 128 KiB of input).
bool detReduces(const Task& t);

// Whether such a task takes a path of the core that folds in the fixed order itself (host backend, default tuner):
// an AllReduce or ReduceScatter on the one-shot path (device/host/oneshot.h; not with a user's PreMulSum, whose
// per-rank scalars do not travel) or the direct path (device/host/direct_copy.h). Decided from what every rank passes
// alike, as planCollective decides.
bool detOnCorePath(const Task& t);

// Whether such a task runs as any other collective, its reductions folding two ranks' raw inputs in the fixed order
// (ResolvedRedOp::detPair): two ranks on the host backend, Sum, Prod or Avg. With two ranks every algorithm (ring,
// tree, PAT) reduces each element once, from both ranks' inputs, and the fold of two is the same whichever comes
// first; so the tuner chooses algorithm, protocol and channels as for any call, at the same speed.
bool detPairPath(const Task& t);

// Whether `t` runs as a deterministic exchange (detReduces, not on a core path, not detPairPath).
bool detTask(const Task& t);

// Device backends: the scratch a deterministic call may need (a one-shot gather, one segment of an exchange and
// the ranks' scalars), made when the communicator is created. An exchange whose rows would not fit runs as
// segments of at most TUTTI_DET_SEGMENT_BYTES of rows, one after another; each element is still reduced in the
// fixed order, by whichever rank holds its slice of that segment.
size_t detDeviceScratchBytes(const ncclComm* comm);

// Launches a group whose tasks include deterministic ones: the others first, through `launch` (the group
// launcher, which takes any list of tasks), then each communicator's deterministic tasks in issue order, the
// k-th of every communicator together.
using DetLaunchFn = std::function<ncclResult_t(const Task* tasks, size_t nTasks)>;
ncclResult_t detLaunchGroup(const Task* tasks, size_t nTasks, const DetLaunchFn& launch);

}  // namespace tutti
