// Host backend launch: what one communicator runs for one group (its collectives, then its point-to-point
// operations), turned into work items for the executor.
#pragma once

#include "comm/task.h"
#include "device/host/executor.h"
#include "plan/plan.h"

#include <vector>

namespace tutti::host {

struct HostConn;

struct CommLaunch {
  ncclComm* comm = nullptr;
  cudaStream_t stream = nullptr;            // host backend: the group's host stream (first one given)
  std::vector<cudaStream_t> streams;        // device backends: every user stream of the group, once each
  std::vector<CollPlan> colls;   // in issue order
  std::vector<Task> p2p;         // sends and receives in issue order
  ProfRef profGroup;             // profiling only: the Group event of this launch
  ProfRef profLaunch;            // profiling only: the KernelLaunch event
};

// Opens the connections the launch needs. Collective over the communicator's ranks taking part.
ncclResult_t launchConnect(CommLaunch& launch);

// Opens every connection a launch may need (NCCL_RUNTIME_CONNECT=0), at init: the ring, tree and PAT links of
// every channel, and point-to-point both ways with every peer. Collective over all the communicator's ranks.
ncclResult_t connectAll(ncclComm* comm);

// Wraps a work item so that its failure poisons the communicator (asyncError set, operations cancelled,
// connections closed so the peers stop too).
WorkItem guarded(ncclComm* comm, WorkItem item);

// Announces to the receive ends of channel `c` (network proxies) the steps the launch's collectives will take
// from them.
ncclResult_t announceChannelSteps(ncclComm* comm, const std::vector<CollPlan>& colls, int c);

// Protocol of one send or receive of `bytes`: LL up to the threshold (latency), Simple above (bandwidth).
// Both ends decide from the byte count alone, so matching calls agree; mismatched ones are reported.
int p2pProtocol(const ncclComm* comm, size_t bytes);

// Bytes of one step of a send or receive of `bytes` on `conn` (both ends compute the same): a whole slot, but on a
// connection whose slots are larger than the communicator's (TUTTI_NET_P2P_BUFFSIZE) the communicator's slot, unless
// the message takes more than NCCL_STEPS of those and at most NCCL_STEPS of the connection's: then NCCL_STEPS equal
// steps (multiples of 64 bytes). Such a message then leaves without waiting for its receiver (sendsFitFifos: one
// thread sends to every peer, then receives) where the communicator's slots would have paced it by its receiver;
// every other message keeps the communicator's steps (2 slots of a 1 MiB message lost to 1: 4 ranks over sockets,
// AlltoAll of 4 MiB, 2283 -> 2445 us). Within a node (comm->p2pStepMaxBytes, TUTTI_P2P_STEP_BYTES) a Simple message
// of at least comm->p2pStepMinMessage bytes, longer than NCCL_STEPS steps of that many, takes steps of that many
// where shorter than the slot: the FIFOs a call cycles through then stay in the caches.
size_t p2pStepBytes(const ncclComm* comm, const HostConn* conn, int proto, size_t bytes);
// Steps of a message of `bytes` in steps of `stepBytes` (a message of 0 bytes is one step).
uint64_t p2pSteps(size_t bytes, size_t stepBytes);

// Profiler ProxyOps (comm->profiler set): of every collective of channel `c` on its network connections, in the
// order the channel runs them; of one send or receive task. Must precede the steps (and their announcement).
ncclResult_t profileChannelProxyOps(ncclComm* comm, const std::vector<CollPlan>& colls, int c);
void profileP2pProxyOp(ncclComm* comm, const Task& t, bool sending);

// Point-to-point of one launch in the order both backends run it: sends to rank+1, rank+2, ... and receives
// from rank-1, rank-2, ... (every rank visits its peers in the same round order, so sends and receives pair
// up without deadlock). Self send/receive pairs are left out: given `selfCopies`, they are appended there for
// the caller to copy in stream order (device memory); without it they are copied now (host memory).
struct SelfCopy {
  void* dst;
  const void* src;
  size_t bytes;
};
ncclResult_t orderP2p(ncclComm* comm, const std::vector<Task>& p2p, std::vector<Task>* sends,
                      std::vector<Task>* recvs, std::vector<SelfCopy>* selfCopies = nullptr);

// Appends the launch's work items: one per channel for the collectives (run in order on that channel),
// one for all sends and one for all receives (peers visited in the same round order on every rank, so
// sends and receives pair up without deadlock). Self send/receive pairs are copied here directly.
// Given `selfCopies`, sends to and receives from this rank are appended there for the caller to copy before
// the items run (work queued on a stream); without it they are copied now.
ncclResult_t launchItems(CommLaunch& launch, std::vector<WorkItem>* items,
                         std::vector<SelfCopy>* selfCopies = nullptr);

}  // namespace tutti::host
