#include "model.h"

#include <algorithm>
#include <cmath>

namespace tutti::tunerdefault {

namespace {

// Steps on the critical path and bytes each rank moves per byte of the collective, per algorithm.
struct Shape {
  double steps = -1;
  double traffic = 0;
};

Shape shapeOf(ncclFunc_t f, int algo, int nRanks, int nNodes) {
  const double k = nRanks;
  Shape s;
  switch (algo) {
    case NCCL_ALGO_RING:
      if (f == ncclFuncAllReduce) {
        s = {2 * (k - 1), 2 * (k - 1) / k};  // reduce-scatter then all-gather around the ring
      } else if (f == ncclFuncAllGather || f == ncclFuncReduceScatter) {
        s = {k - 1, (k - 1) / k};
      } else if (f == ncclFuncBroadcast || f == ncclFuncReduce) {
        s = {k - 1, 1};  // a pipelined chain: every byte crosses each link once
      }
      break;
    case NCCL_ALGO_TREE:
      // Reduce up then broadcast down: a binary tree across nodes and a chain inside each node, so the
      // depth is log2(nodes) plus the chain's length (on one node the "tree" is a chain of k ranks). A rank
      // with both a parent and a child receives and sends every byte twice (once per phase); with depth 1
      // (2 ranks) each rank sends and receives it once, but the root reduces all of it and the two phases
      // do not overlap, so the traffic of a depth-1 tree is an option (Model::time).
      if (f == ncclFuncAllReduce) {
        const double nodes = std::clamp(nNodes, 1, std::max(nRanks, 1));
        const double chain = std::ceil(k / nodes) - 1;
        const double depth = std::ceil(std::log2(nodes)) + chain;
        s = {2 * depth, depth >= 2 ? 2.0 : 1.0};
      }
      break;
    case NCCL_ALGO_PAT:
      // One rank per node (as NCCL offers it): log2(k) exchanges, the ring's traffic. Where ranks share a
      // node their exchanges share its memory bus and this model is not fitted: PAT is costed above the
      // ring there, so it runs only when asked for (NCCL_ALGO=PAT).
      if (f == ncclFuncAllGather || f == ncclFuncReduceScatter)
        s = nNodes >= nRanks ? Shape{std::ceil(std::log2(std::max(k, 1.0))), (k - 1) / k}
                             : Shape{2 * (k - 1), 2 * (k - 1) / k};
      break;
    default:
      break;  // CollNet / NVLS need hardware this model does not describe
  }
  return s;
}

}  // namespace

double Model::time(ncclFunc_t f, int algo, int proto, size_t nBytes, int coreChannels) const {
  if (proto < 0 || proto >= NCCL_NUM_PROTOCOLS) return -1;
  if (nRanks <= 1) return options.overheadUs[kLinkProcess][proto] + options.latencyUs[kLinkProcess][proto];
  const Shape s = shapeOf(f, algo, nRanks, nNodes);
  if (s.steps < 0) return -1;
  const Link l = link();
  // GB/s = 1e3 bytes per microsecond. The overhead is paid once per call whatever the rank count (launch,
  // plan, completion), which a per-step latency fitted at one rank count would wrongly scale.
  // Tree steps cost more than ring steps where a rank serves several peers (parent and two children, in two
  // trees at once) on few cores: the factors scale the link's ring-fitted constants.
  const bool tree = algo == NCCL_ALGO_TREE;
  // More ranks on a node than cores: a waiting rank gives its core away and is woken later (a longer step),
  // and the ranks share the cores' copy and reduce throughput.
  const double latency = options.latencyUs[l][proto] * (tree ? options.treeLatencyFactor[l] : 1.0) * latencyOver_;
  const double bandwidth =
      options.bandwidthGBs[l][proto] * (tree ? options.treeBandwidthFactor[l] : 1.0) / bandwidthOver_;
  const double bytes = static_cast<double>(nBytes);
  const double depth = tree ? s.steps / 2 : 0;
  const double traffic = tree && depth < 2 ? options.treeShallowTraffic[l] : s.traffic;
  double t = options.overheadUs[l][proto] + latency * s.steps + traffic * bytes / (bandwidth * 1e3);
  if (tree && f == ncclFuncAllReduce) {
    // Pipeline fill: a chunk goes up `depth` links and back down before the last one leaves, so the tree
    // pays about 2 x depth - 1 chunk times beyond its steady state. A chunk is one FIFO slot of data per
    // channel, with Simple cut finer for small shares as the core does (treeStepBytes). With few chunks per
    // channel nothing overlaps and a tree costs several times a ring, even between 2 ranks; at many chunks
    // per channel the term fades.
    const int channelsUsed = std::max(1, std::min(channels(nBytes), coreChannels > 0 ? coreChannels : 1));
    const double step = static_cast<double>(
        proto == NCCL_PROTO_SIMPLE
            ? treeStepBytes(options.slotDataBytes[proto], nBytes / channelsUsed, static_cast<int>(depth))
            : options.slotDataBytes[proto]);
    const double chunk = std::min(bytes, step * channelsUsed);
    t += options.treeFillFactor[l] * std::max(0.0, 2 * depth - 1) * chunk / (bandwidth * 1e3);
  }
  return t;
}

long long treeStepBytes(long long slotBytes, size_t shareBytes, int depth) {
  // The core's rule (core/src/plan/plan.h, treeChunkBytes): halve the slot, not below 32 KiB, until the
  // channel's share makes 4 chunks per link of depth.
  constexpr long long kMinChunk = 32 * 1024, kChunksPerDepth = 4;
  const unsigned long long want = kChunksPerDepth * static_cast<unsigned long long>(std::max(depth, 1));
  long long chunk = slotBytes;
  while (chunk / 2 >= kMinChunk && shareBytes < want * static_cast<unsigned long long>(chunk)) chunk /= 2;
  return chunk;
}

void Model::configure(const Options& opts, int ranks, int nodes) {
  options = opts;
  nRanks = ranks;
  nNodes = nodes;
  const double over = oversubscription();
  latencyOver_ = over > 1 ? options.oversubLatencyFactor : 1.0;
  bandwidthOver_ = std::pow(over, options.oversubBandwidthExponent);
}

double Model::oversubscription() const {
  if (options.cores <= 0) return 1;
  const double local = std::ceil(static_cast<double>(nRanks) / std::max(nNodes, 1));
  return std::max(1.0, local / options.cores);
}

int Model::channels(size_t nBytes) const {
  const unsigned long long per = static_cast<unsigned long long>(options.channelBytes);
  const unsigned long long n = (static_cast<unsigned long long>(nBytes) + per - 1) / per;
  return static_cast<int>(std::clamp<unsigned long long>(n, 1, options.maxChannels));
}

void modelFill(const Model& m, ncclFunc_t f, size_t nBytes, int coreChannels, float* table, int numAlgo,
               int numProto) {
  for (int a = 0; a < numAlgo && a < NCCL_NUM_ALGORITHMS; ++a) {
    for (int p = 0; p < numProto && p < NCCL_NUM_PROTOCOLS; ++p) {
      float& e = table[a * numProto + p];
      if (!(e >= 0)) continue;  // unavailable stays unavailable
      const double t = m.time(f, a, p, nBytes, coreChannels);
      if (t >= 0) e = static_cast<float>(t);
    }
  }
}

}  // namespace tutti::tunerdefault
