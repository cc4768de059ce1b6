// The core's generic network transport: drives whichever net plugin (NCCL net ABI) the config selects,
// through the proxy thread. To the primitives a network connection looks like any other: a local FIFO and
// control block. On the sending rank the proxy waits for posted steps and isends them; on the receiving
// rank it keeps irecvs posted into free slots and publishes each completed one.
#pragma once

#include <tutti/transport.h>

#include <cstddef>
#include <cstdint>

namespace tutti {

// The transport table of the network path ("net"), used after the intra-node transports of the config.
// canConnect accepts any pair once a net plugin with at least one device is loaded.
const tuttiTransport_v1_t& netTransportTable();

struct ProfEvent;

// Whether a connection's transport is this one (its ends can report profiler ProxySteps).
bool netTransportIs(const tuttiTransport_v1_t& api);

// Profiling (comm/profiler.h) of the network end `res`: steps [firstStep, firstStep + nSteps) belong to the
// ProxyOp `op`; the end adopts the caller's reference. The proxy thread starts a ProxyStep per step, records
// its phases, and stops the op after its last step. Ops of one end are posted in step order.
void netProfilePost(void* res, ProfEvent* op, uint64_t firstStep, uint64_t nSteps);

class ProxyTask;

// The proxy task that moves the network end `res` (a rank may drive it itself: proxy.h, proxyProgressInline).
ProxyTask* netProxyTaskOf(void* res);

// Zero copy on a host rank's network end (host backend only; HostConn::userBufferMinBytes).
// Whether the net plugin takes host pointers it did not allocate (NCCL_PTR_HOST): user buffers can then be
// registered (regMr) and moved as they are.
bool netTakesUserBuffers(void* res);
// The smallest step worth moving from or into user buffers when TUTTI_NET_ZERO_COPY_MIN_BYTES is left to the core:
// from the step whose copy costs what registering the buffer costs (measured once per process, on this end's
// plugin comm), and at least 16 KiB; 0 where registering failed.
size_t netZeroCopyAutoMinBytes(void* res);
// Send end: step `step` (about to be posted) goes out from `data`, a user buffer that stays untouched until the
// end's head passes the step, instead of from its FIFO slot. Called before tail publishes the step.
void netSendFrom(void* res, uint64_t step, const void* data);
// Receive end: steps [steps[i].step] land at steps[i].ptr (exactly steps[i].bytes) instead of in the landing
// FIFO. Called, in step order, before those steps are announced (announceRecvSteps).
struct NetUserStep {
  uint64_t step;
  void* ptr;
  size_t bytes;
};
void netRecvInto(void* res, const NetUserStep* steps, size_t n);
// Whether the end was closed after its communicator cancelled its operations: from then on the plugin reads
// and writes no user buffer of it.
bool netEndClosed(void* res);

// Name of the net plugin in use ("" when none could be loaded), loading the config's nets on first call.
const char* netTransportPluginName();

}  // namespace tutti
