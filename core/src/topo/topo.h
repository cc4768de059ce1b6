// Where each rank lives (host, process, device) and the rings each channel follows.
#pragma once

#include "plugin/config.h"  // kMaxChannels

#include <tutti/transport.h>

#include <string>
#include <vector>

namespace tutti {

// This rank's identity. The host identity is the hostname, or TUTTI_HOSTNAME when set (lets tests run
// "nodes" in network namespaces of one machine).
ncclResult_t topoLocalPeerInfo(int rank, int cudaDev, tuttiPeerInfo_t* out);

// Number of distinct hosts among `peers`.
int topoNodeCount(const std::vector<tuttiPeerInfo_t>& peers);

// Ring order of channel `c`: ranks grouped by host (so a ring crosses each host boundary once), in rank
// order within a host. Returns ringRanks[i] = rank at ring position i.
std::vector<int> topoRing(const std::vector<tuttiPeerInfo_t>& peers, int channel);

// Channel count of a communicator from NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS.
int topoChannelCount(int nRanks);

}  // namespace tutti
