// The default cost model: time = latency x steps + bytes / bandwidth per (algorithm, protocol), with the
// steps and traffic of each algorithm as in NCCL's model, and latency / bandwidth per protocol and link.
#pragma once

#include "options.h"

#include <cstddef>

namespace tutti::tunerdefault {

struct Model {
  Options options;  // read-only outside configure()
  int nRanks = 1;
  int nNodes = 1;

  // The link that bounds a collective spanning the communicator: the network when it crosses nodes.
  Link link() const { return nNodes > 1 ? kLinkNet : options.intraLink; }
  // Estimated microseconds, or a negative value when the model has no estimate for (f, algo) (the
  // caller then leaves the core's entry as it is). coreChannels: the channels the core offers (the most it
  // will run), which bounds the chunks a tree pipelines at once.
  double time(ncclFunc_t f, int algo, int proto, size_t nBytes, int coreChannels) const;
  // Ranks per node over cores per node (>= 1; 1 when the ranks fit or the core count is unknown).
  double oversubscription() const;
  // Channels worth using for nBytes: 1 for small collectives, one per channelBytes up to maxChannels.
  int channels(size_t nBytes) const;
  // Sets the options and the communicator's shape, and computes what time() needs that does not depend on
  // the call (the oversubscription terms; time() runs for every entry of every collective's table). The
  // only way to set them, so the precomputed terms cannot go stale.
  void configure(const Options& opts, int ranks, int nodes);

 private:
  double latencyOver_ = 1;    // latency factor for oversubscribed ranks
  double bandwidthOver_ = 1;  // bandwidth divisor: over^oversubBandwidthExponent
};

// Bytes per step of a tree AllReduce with Simple for a channel share of shareBytes on a tree `depth` links
// deep: the core's rule, mirrored (the plugin links nothing of the core).
long long treeStepBytes(long long slotBytes, size_t shareBytes, int depth);

// Fills the entries of table[numAlgo][numProto] that are >= 0 (leaves NCCL_ALGO_PROTO_IGNORE and
// out-of-model entries untouched).
void modelFill(const Model& m, ncclFunc_t f, size_t nBytes, int coreChannels, float* table, int numAlgo,
               int numProto);

}  // namespace tutti::tunerdefault
