// The core's generic network transport: drives whichever net plugin (NCCL net ABI) the config selects,
// through the proxy thread. To the primitives a network connection looks like any other: a local FIFO and
// control block. On the sending rank the proxy waits for posted steps and isends them; on the receiving
// rank it keeps irecvs posted into free slots and publishes each completed one.
#pragma once

#include <tutti/transport.h>

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

// Name of the net plugin in use ("" when none could be loaded), loading the config's nets on first call.
const char* netTransportPluginName();

}  // namespace tutti
