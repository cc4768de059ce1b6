// Single-copy AllGather and Broadcast inside one host (plan kAlgoDirect, host backend): each rank reads the blocks it
// needs straight from the owners' user buffers, with process_vm_readv (cross memory attach) when the owner is another
// process of this host, or memcpy when it is a thread of this process. A ring copies every byte twice per hop (into
// the FIFO, out of it); this copies it once, and a rank's reads do not wait on any other rank's copies.
//
// Per call, over the point-to-point connections (Simple, one slot each way, so a single thread never blocks on them):
//   1. every owner (AllGather: every rank; Broadcast: the root) sends each reader a descriptor: its buffer's address
//      and size, and its pid;
//   2. every reader receives the descriptors, reads the blocks into its output, and sends each owner a "done";
//   3. every owner waits for the "done" of each reader before returning: its buffer is not touched after that.
// The address never outlives the call. A peer that dies mid-call closes its connections, which fails the waits.
// Whether the ranks can read one another is probed once, when the communicator is created (directProbe).
#pragma once

#include "device/host/prims.h"
#include "device/host/wait.h"

#include <nccl.h>

#include <cstddef>

struct ncclComm;

namespace tutti {

struct DirectCopy {
  ncclFunc_t func = ncclFuncAllGather;  // ncclFuncAllGather or ncclFuncBroadcast
  int root = 0;                         // Broadcast
  const char* input = nullptr;          // AllGather: this rank's block; Broadcast: the root's buffer
  char* output = nullptr;               // AllGather: nRanks blocks; Broadcast: the buffer
  size_t bytes = 0;                     // AllGather: bytes per block; Broadcast: bytes in all
};

// At communicator creation (host backend, ranks on one host): whether every rank can read every other rank's memory
// (same process, or cross memory attach into a process of the same pid namespace). Collective: two bootstrap
// all-gathers when some peer is another process of this host, none otherwise. Sets comm->directOk.
ncclResult_t directProbe(ncclComm* comm);

// Whether a collective of `bytes` in all (AllGather: the output) takes the direct path: directOk, the default tuner
// alone in the chain (comm->corePaths), and at least the communicator's minimum for that collective
// (comm->directMinGather / directMinBcast, from TUTTI_DIRECT_MIN_BYTES).
bool directWanted(const ncclComm* comm, ncclFunc_t func, size_t bytes);

namespace host {

ncclResult_t runDirectCopy(ncclComm* comm, const DirectCopy& d, const WaitContext& wait, const OpLabel& label);

}  // namespace host
}  // namespace tutti
