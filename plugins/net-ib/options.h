// The environment variables net-ib reads (names, meanings and defaults as in NCCL's IB transport). Read by
// the first init (again after the last finalize); a malformed value fails init with a message naming it.
#pragma once

#include <string>

#include <tutti/common.h>

#include "selection.h"

namespace tutti::netib {

struct Options {
  bool disable = false;        // NCCL_IB_DISABLE: 1 reports no device
  std::string hcaSpec;         // NCCL_IB_HCA as given
  HcaFilter hca;               // parsed NCCL_IB_HCA
  int gidIndex = -1;           // NCCL_IB_GID_INDEX: RoCE GID table index; -1 chooses (see chooseGidIndex)
  int trafficClass = 0;        // NCCL_IB_TC: RoCE traffic class (GRH), 0..255
  int serviceLevel = 0;        // NCCL_IB_SL: InfiniBand service level, 0..15
  int timeout = 20;            // NCCL_IB_TIMEOUT: local ACK timeout exponent (4.096 us * 2^n), 1..31
  int retryCount = 7;          // NCCL_IB_RETRY_CNT: transport retries, 0..7
  int qpsPerConnection = 1;    // NCCL_IB_QPS_PER_CONNECTION: data QPs per comm, payload split across them
  int adaptiveRouting = -2;    // NCCL_IB_ADAPTIVE_ROUTING: 1 on, 0 off, -2 auto (on for IB, off for RoCE)
  std::string socketIfname;    // NCCL_SOCKET_IFNAME: interface of the TCP side channel
  int timeoutMs = 30000;       // TUTTI_NET_IB_TIMEOUT_MS: connection setup limit
};

// Parses the environment into *out. Bad values are logged and give ncclInvalidUsage.
ncclResult_t readOptions(Options* out);

// The options of the current init (valid between init and the last finalize).
const Options& options();
void setOptions(const Options& o);

}  // namespace tutti::netib
