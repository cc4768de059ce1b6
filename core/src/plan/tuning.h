// Algorithm / protocol / channel selection for one collective: the core's cost table, the tuner chain
// (config order, then the YAML overrides as a last internal tuner), the NCCL_ALGO / NCCL_PROTO filters and
// the cheapest remaining entry. Every rank makes the same decision from the same inputs, so a collective
// is sliced identically everywhere.
#pragma once

#include <tutti/tuner.h>

#include "plugin/config.h"

#include <memory>
#include <string>
#include <vector>

struct ncclComm;

namespace tutti {

class TunerPlugin;

// The five tunable collectives (ncclFuncBroadcast .. ncclFuncAllReduce), as NCCL_NUM_FUNCTIONS counts them.
inline constexpr int kNumTunedFuncs = 5;

// NCCL_ALGO / NCCL_PROTO: which entries of the table a collective may use. Default: everything allowed.
struct AlgoProtoFilter {
  bool algo[kNumTunedFuncs][NCCL_NUM_ALGORITHMS];
  bool proto[kNumTunedFuncs][NCCL_NUM_PROTOCOLS];
  AlgoProtoFilter();
  bool allows(ncclFunc_t f, int a, int p) const { return algo[f][a] && proto[f][p]; }
};

// Parses one variable with NCCL's grammar into `allowed` (rows: collectives, `n` columns of `names`):
//   "ring,tree"                  only these, for every collective
//   "^ll128"                     everything but these
//   "simple;allreduce:^ll"       a first section without prefix, then `collective:` sections
// Names and prefixes are case-insensitive. Each section first resets its collectives' row (to allowed
// when the list starts with ^, else to disallowed). `var` names the variable in error messages; an
// unknown word or a prefix-less section after the first is ncclInvalidUsage naming it.
ncclResult_t parseAlgoProtoList(const char* var, const std::string& text, const char* const* names, int n,
                                bool* allowed /* [kNumTunedFuncs][n] */);
// Both variables (empty text = no filter); `out` is written only on success.
ncclResult_t parseAlgoProtoFilter(const std::string& algoText, const std::string& protoText, AlgoProtoFilter* out);

// Names as NCCL prints and parses them ("Ring", "Simple", "AllReduce").
const char* tunedAlgoName(int algo);
const char* tunedProtoName(int proto);
const char* tunedFuncName(ncclFunc_t f);

// One link of the chain: a loaded plugin (shared between communicators) or an internal tuner.
struct TunerEntry {
  std::string name;                      // for logs: the tuner's own name, or "yaml-overrides"
  std::shared_ptr<TunerPlugin> plugin;   // keeps the library loaded; null for internal tuners
  const ncclTuner_v6_t* api = nullptr;   // the function table
  void* context = nullptr;               // from init
  mutable bool warned = false;           // a getCollInfo error was logged at WARN already
  bool stateless = false;                // same arguments, same answer (tutti/tuner.h, tuttiTunerStateless)
  std::shared_ptr<void> internalState;   // owns an internal tuner's context
};

struct TuningDecision {
  int algorithm = NCCL_ALGO_UNDEF;
  int protocol = NCCL_PROTO_UNDEF;
  int nChannels = 0;             // the count to use (already clamped by the caller's limits)
  bool channelsFromTuner = false;
  float cost = 0;                // the chosen entry of the cost table after the whole chain (microseconds)
  std::string decider = "core";  // the last tuner that changed the winning entry's cost
  std::string channelsBy = "core";  // the last tuner that changed the count (one that repeats the value
                                    // it was given cannot be told apart from one that left it alone)
};

// The tuners of one communicator. Thread-compatible: one group launch at a time uses it.
class TunerChain {
 public:
  TunerChain(int nRanks, int nNodes) : nRanks_(nRanks), nNodes_(nNodes) {}
  ~TunerChain();  // finalizes every context, last first
  TunerChain(const TunerChain&) = delete;
  TunerChain& operator=(const TunerChain&) = delete;

  // Initializes `api` for this communicator (commId: same on every rank) and appends it. A failed init is
  // logged and skipped, or returned when `required`.
  ncclResult_t add(const std::string& name, std::shared_ptr<TunerPlugin> plugin, const ncclTuner_v6_t* api,
                   bool required, uint64_t commId = 0);
  // Appends the YAML rules as the last tuner (no-op when `rules` is empty).
  void addOverrides(const std::vector<TuningRule>& rules);
  void setFilter(const AlgoProtoFilter& f) {
    filter_ = f;
    cache_.reset();
  }
  const AlgoProtoFilter& filter() const { return filter_; }
  const std::vector<TunerEntry>& entries() const { return entries_; }

  // Chooses for a collective of `nBytes`. `supported` marks what the engine can run for `f`;
  // `coreChannels` is the core's own channel count, `maxChannels` the most it can use. Fails (naming the
  // collective) when no supported, allowed entry remains. `filtered` false: NCCL_ALGO / NCCL_PROTO do not
  // apply (a step another call takes internally, which moves data only).
  ncclResult_t select(ncclFunc_t f, size_t nBytes, const bool (&supported)[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS],
                      int coreChannels, int maxChannels, TuningDecision* out, bool filtered = true) const;

 private:
  int nRanks_, nNodes_;
  std::vector<TunerEntry> entries_;
  AlgoProtoFilter filter_;
  // Decisions of a chain whose every tuner is stateless, per (collective, size, channel limits, filtered):
  // direct-mapped, a call of a size seen before skips the cost table. One group launch at a time (see above).
  struct Cached {
    bool valid = false;
    ncclFunc_t f{};
    size_t nBytes = 0;
    int coreChannels = 0, maxChannels = 0;
    bool filtered = false;
    TuningDecision decision;
  };
  static constexpr size_t kCacheSlots = 64;
  mutable std::unique_ptr<Cached[]> cache_;
  bool cacheable() const;
  ncclResult_t selectUncached(ncclFunc_t f, size_t nBytes,
                              const bool (&supported)[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], int coreChannels,
                              int maxChannels, TuningDecision* out, bool filtered) const;
};

// The core's nominal cost (microseconds) of an entry before any tuner refines it.
float coreBaseCost(ncclFunc_t f, size_t nBytes, int nRanks, int algo, int proto);

// Which (algorithm, protocol) pairs the engine runs for `f` today.
void engineSupport(ncclFunc_t f, bool ll128, bool (&supported)[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS]);

// Builds comm->tuners from the process config (plugins in order, then the YAML overrides) and parses
// NCCL_ALGO / NCCL_PROTO. Fails on a bad filter or on a `required` tuner that cannot load or init.
ncclResult_t tunerChainCreate(ncclComm* comm);

// The decision for one collective task of comm, logged at INFO TUNING (`filtered`: as in TunerChain::select).
ncclResult_t tuningSelect(ncclComm* comm, ncclFunc_t f, size_t nBytes, int coreChannels, TuningDecision* out,
                          bool filtered = true);

}  // namespace tutti
