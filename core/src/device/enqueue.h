// Enqueue for the device backends (sim and cuda), above the device runtime (device/runtime.h): what one
// group of one communicator becomes on its streams, as NCCL does it.
//
//   user streams ──record──▶ fan-in events ──wait──▶ internal stream:
//       host fn "begin"  (announce the steps to network proxies, reset the kernels' status, start watching)
//       kernel per run of one datatype, each followed by host fn "check" (its stop status becomes the
//         error the host backend would report; the later kernels are aborted)
//       host fn "end"    (stop watching, profiler KernelCh events)
//   internal stream ──record──▶ done event ──wait──▶ every user stream (fan-out)
//
// ncclGroupEnd returns once this is enqueued; users wait on their streams. When a user stream is being
// captured the same calls are captured (the internal stream joins the capture through the fan-in event and
// leaves it through the fan-out), so the group becomes nodes of the user's graph and replays with it; the
// launch's memory then belongs to the graph. A watcher thread per communicator does what a GPU's host does
// while its kernels run: raise the abort word, ring the network proxy, report slow waits, notice dead peers.
#pragma once

#include "device/host/launch.h"
#include "device/runtime.h"

#include <tutti/transport.h>

namespace tutti {
struct Connection;
}

namespace tutti::device {

// The runtime of a communicator's backend (null for the host backend).
rt::Runtime* runtimeOf(const ncclComm* comm);

// The device memory transports may put a connection's FIFOs in (tuttiConnectRequest_t.devMem); null on the
// host backend.
const tuttiDeviceMem_t* deviceMemOf(const ncclComm* comm);

// Per-communicator state of a device backend: the internal stream, its events and the watcher.
struct CommDevice;
ncclResult_t commDeviceInit(ncclComm* comm);
// After every queued launch has ended (commQuiesce): stops the watcher, frees the stream and events.
void commDeviceFree(ncclComm* comm);
// Ends the launches whose kernels have run and that end by an event (their errors reach asyncError).
void commDeviceRetire(ncclComm* comm);

// Makes a connection's host memory (its FIFOs, landing area, control block and step counter) reachable by
// the device: registered with the runtime (cudaHostRegister on cuda), page runs shared between connections
// registered once. unregisterConnection releases them before the transport frees the memory.
ncclResult_t registerConnection(ncclComm* comm, Connection* c);
void unregisterConnection(ncclComm* comm, Connection* c);

// Pinned memory for what kernels and the host functions after them share (status words), from a pool per
// runtime whose blocks are reused and never given back (a block is often returned in a host function, where
// the runtime cannot be called).
ncclResult_t pinnedGet(rt::Runtime* rt, size_t bytes, void** out);
void pinnedPut(rt::Runtime* rt, void* p, size_t bytes);

// Enqueues one group of one communicator (launch.streams: its user streams, in first-use order; none on the
// sim backend: the call then returns when the work is done, see finish()).
ncclResult_t enqueue(host::CommLaunch& launch);
// Called after every communicator of the group was enqueued: waits for the sim launches given no stream.
ncclResult_t finish(host::CommLaunch& launch);

}  // namespace tutti::device
