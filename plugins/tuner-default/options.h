// The variables the default tuner reads (TUTTI_TUNER_*), declared once in options.cc with their defaults.
// A YAML config sets them through the plugin's `options:` map (applied to the environment before the
// plugin loads); a real environment variable wins. Read at every init, so each communicator sees the
// values current when it was created.
#pragma once

#include <tutti/tuner.h>

#include <string>

namespace tutti::tunerdefault {

// Where ranks of one node exchange data: threads of one process (p2p) or processes over shared memory.
enum Link { kLinkProcess = 0, kLinkShm = 1, kLinkNet = 2, kNumLinks = 3 };

struct Options {
  Link intraLink = kLinkShm;                       // TUTTI_TUNER_INTRA_LINK (auto resolved at read time)
  double overheadUs[kNumLinks][NCCL_NUM_PROTOCOLS];  // TUTTI_TUNER_OVERHEAD_{...}: per call, >= 0
  double latencyUs[kNumLinks][NCCL_NUM_PROTOCOLS];  // TUTTI_TUNER_LATENCY_{PROCESS,SHM,NET}: per step
  double bandwidthGBs[kNumLinks][NCCL_NUM_PROTOCOLS];  // TUTTI_TUNER_BANDWIDTH_{...}: data GB/s per link
  double treeLatencyFactor[kNumLinks] = {1, 1, 1};    // TUTTI_TUNER_TREE_LATENCY_FACTOR: tree vs ring step
  double treeBandwidthFactor[kNumLinks] = {1, 1, 1};  // TUTTI_TUNER_TREE_BANDWIDTH_FACTOR: tree vs ring GB/s
  double treeFillFactor[kNumLinks] = {1, 1, 1};       // TUTTI_TUNER_TREE_FILL_FACTOR: pipeline-fill weight
  double treeShallowTraffic[kNumLinks] = {1, 1, 1};   // TUTTI_TUNER_TREE_SHALLOW_TRAFFIC: depth-1 tree traffic
  int cores = 0;                     // TUTTI_TUNER_CORES: cores a node's ranks share (0: ignore oversubscription)
  double oversubLatencyFactor = 1;   // TUTTI_TUNER_OVERSUBSCRIBED: step latency factor when ranks > cores,
  double oversubBandwidthExponent = 1;  // and bandwidth divided by (ranks / cores)^exponent
  // Data bytes in one FIFO slot per protocol (LL, LL128, Simple), from NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE
  // and NCCL_BUFFSIZE as the core cuts them (8 slots; LL carries 4 data bytes per 8, LL128 120 per 128).
  long long slotDataBytes[NCCL_NUM_PROTOCOLS] = {16384, 576000, 524288};
  long long channelBytes = 262144;                 // TUTTI_TUNER_CHANNEL_BYTES: bytes per extra channel
  int maxChannels = 64;                            // TUTTI_TUNER_MAX_CHANNELS (the core clamps further)
};

// One declared variable: name, default text, meaning (for the README and error messages).
struct OptionInfo {
  const char* name;
  const char* defaultText;
  const char* description;
};
const OptionInfo* optionTable(int* count);

// Parses the environment over the defaults. A malformed value: *error says which variable and why, and
// the result is ncclInvalidUsage.
ncclResult_t readOptions(Options* out, std::string* error);

}  // namespace tutti::tunerdefault
