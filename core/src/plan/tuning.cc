#include "plan/tuning.h"

#include "comm/comm.h"
#include "plugin/params.h"
#include "plugin/tuner_plugin.h"
#include "util/check.h"

#include <strings.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

namespace tutti {

namespace {

constexpr int kA = NCCL_NUM_ALGORITHMS;
constexpr int kP = NCCL_NUM_PROTOCOLS;

// ---- The YAML overrides, run as the last tuner of the chain. ----

struct OverrideContext {
  std::vector<TuningRule> rules;
  int nRanks = 1, nNodes = 1;
};

// Matching rules apply in file order; a later rule that forces a pair replaces an earlier one's choice.
ncclResult_t overrideGetCollInfo(void* context, ncclFunc_t f, size_t nBytes, int, float** collCostTable,
                                 int numAlgo, int numProto, int, int* nChannels) {
  const auto* ctx = static_cast<const OverrideContext*>(context);
  auto* table = reinterpret_cast<float*>(collCostTable);
  std::vector<float> entry(table, table + numAlgo * numProto);
  const int64_t bytes = nBytes > static_cast<size_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(nBytes);
  for (const TuningRule& r : ctx->rules) {
    if (!r.matches(f, bytes, ctx->nRanks, ctx->nNodes)) continue;
    if (r.channels > 0) *nChannels = r.channels;
    if (r.algorithm < 0 && r.protocol < 0) continue;
    bool any = false;
    for (int a = 0; a < numAlgo; ++a) {
      for (int p = 0; p < numProto; ++p) {
        bool forced = (r.algorithm < 0 || r.algorithm == a) && (r.protocol < 0 || r.protocol == p) &&
                      entry[a * numProto + p] >= 0;
        any |= forced;
      }
    }
    if (!any) {
      TUTTI_INFO(NCCL_TUNING, "tuning rule at {}: {}/{} is not available for {}, rule ignored", r.where.str(),
                 r.algorithm < 0 ? "any" : tunedAlgoName(r.algorithm),
                 r.protocol < 0 ? "any" : tunedProtoName(r.protocol), tunedFuncName(f));
      continue;
    }
    for (int a = 0; a < numAlgo; ++a) {
      for (int p = 0; p < numProto; ++p) {
        const float e = entry[a * numProto + p];
        bool forced = (r.algorithm < 0 || r.algorithm == a) && (r.protocol < 0 || r.protocol == p) && e >= 0;
        table[a * numProto + p] = forced ? 0.0f : e;
      }
    }
  }
  return ncclSuccess;
}

ncclResult_t overrideInit(void**, uint64_t, size_t, size_t, ncclDebugLogger_t, ncclNvlDomainInfo_v6_t*,
                          ncclTunerConstants_v6_t*) {
  return ncclSuccess;  // the context is made by TunerChain::addOverrides
}
ncclResult_t overrideFinalize(void*) { return ncclSuccess; }

constexpr ncclTuner_v6_t kOverrideTuner = {"yaml-overrides", overrideInit, overrideGetCollInfo, overrideFinalize,
                                           nullptr};

// ---- Loaded tuner libraries: one per label for the life of the process, shared by communicators. ----

std::mutex gPluginMutex;
std::map<std::string, std::shared_ptr<TunerPlugin>>& loadedPlugins() {
  static auto* m = new std::map<std::string, std::shared_ptr<TunerPlugin>>();  // never unloaded
  return *m;
}

ncclResult_t loadShared(const PluginSpec& spec, std::shared_ptr<TunerPlugin>* out) {
  std::lock_guard<std::mutex> lock(gPluginMutex);
  auto& m = loadedPlugins();
  if (auto it = m.find(spec.label()); it != m.end()) {
    *out = it->second;
    return ncclSuccess;
  }
  std::unique_ptr<TunerPlugin> p;
  TUTTI_CHECK(tunerPluginLoad(spec.label(), &p));
  std::shared_ptr<TunerPlugin> shared(std::move(p));
  if (shared) m[spec.label()] = shared;
  *out = std::move(shared);
  return ncclSuccess;
}

}  // namespace

void TunerChainDeleter::operator()(TunerChain* chain) const { delete chain; }

void engineSupport(ncclFunc_t func, bool ll128, bool (&supported)[kA][kP]) {
  // The engine runs ring for all five collectives, the double binary tree for AllReduce and PAT for
  // AllGather and ReduceScatter, each over Simple, LL and (where every connection guarantees its ordering)
  // LL128 FIFOs.
  for (int a = 0; a < kA; ++a) {
    const bool algo = a == NCCL_ALGO_RING || (a == NCCL_ALGO_TREE && func == ncclFuncAllReduce) ||
                      (a == NCCL_ALGO_PAT && (func == ncclFuncAllGather || func == ncclFuncReduceScatter));
    for (int p = 0; p < kP; ++p)
      supported[a][p] = algo && (p == NCCL_PROTO_SIMPLE || p == NCCL_PROTO_LL || (p == NCCL_PROTO_LL128 && ll128));
  }
}

float coreBaseCost(ncclFunc_t f, size_t nBytes, int nRanks, int algo, int proto) {
  // A neutral estimate (10 us per step, 1 GB/s) so a chain without tuners still orders entries sensibly;
  // the default tuner replaces it with a calibrated model.
  const double k = std::max(nRanks, 1);
  double steps = k - 1, factor = (k - 1) / k;
  if (f == ncclFuncAllReduce) {
    steps = 2 * (k - 1);
    factor = 2 * (k - 1) / k;
  } else if (f == ncclFuncBroadcast || f == ncclFuncReduce) {
    factor = 1;
  }
  if (algo == NCCL_ALGO_TREE) {  // up then down a binary tree: fewer steps, but every byte crosses two links
    steps = 2 * std::ceil(std::log2(k));
    factor = 2;
  }
  // PAT: the neutral estimate never prefers it to the ring (one step more); a tuner that knows the
  // topology does (the default tuner at one rank per node), and NCCL_ALGO=PAT forces it.
  if (algo == NCCL_ALGO_PAT) steps += 1;
  const double latencyUs = proto == NCCL_PROTO_SIMPLE ? 10.0 : 5.0;
  // LL moves 4 data bytes per 8-byte line, LL128 120 per 128: their wire bandwidth is that much lower.
  const double wire = proto == NCCL_PROTO_LL ? 2.0 : proto == NCCL_PROTO_LL128 ? 128.0 / 120.0 : 1.0;
  return static_cast<float>(steps * latencyUs + wire * factor * static_cast<double>(nBytes) / 1e3);
}

TunerChain::~TunerChain() {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->internalState) continue;
    if (ncclResult_t r = it->api->finalize(it->context); r != ncclSuccess)
      TUTTI_WARN("tuner '{}': finalize failed ({})", it->name, static_cast<int>(r));
  }
}

ncclResult_t TunerChain::add(const std::string& name, std::shared_ptr<TunerPlugin> plugin, const ncclTuner_v6_t* api,
                             bool required, uint64_t commId) {
  TunerEntry e;
  e.name = name;
  e.stateless = plugin && plugin->stateless;
  e.plugin = std::move(plugin);
  e.api = api;
  // Zeroed rather than NULL: tuners written for NCCL may read or edit these unconditionally.
  ncclNvlDomainInfo_v6_t nvl{};
  nvl.nNvlDomains = nNodes_;
  nvl.minRanksPerNvlDomain = nvl.maxRanksPerNvlDomain = nRanks_ / std::max(nNodes_, 1);
  ncclTunerConstants_v6_t constants{};
  ncclResult_t r = api->init(&e.context, commId, static_cast<size_t>(nRanks_), static_cast<size_t>(nNodes_),
                             tuttiPluginLogger, &nvl, &constants);
  if (r != ncclSuccess) {
    if (required) TUTTI_FAIL(r, "tuner '{}' is required but its init failed ({})", name, static_cast<int>(r));
    TUTTI_WARN("tuner '{}': init failed ({}), skipped for this communicator", name, static_cast<int>(r));
    return ncclSuccess;
  }
  entries_.push_back(std::move(e));
  return ncclSuccess;
}

void TunerChain::addOverrides(const std::vector<TuningRule>& rules) {
  if (rules.empty()) return;
  auto ctx = std::make_shared<OverrideContext>();
  ctx->rules = rules;
  ctx->nRanks = nRanks_;
  ctx->nNodes = nNodes_;
  TunerEntry e;
  e.name = kOverrideTuner.name;
  e.stateless = true;  // fixed rules
  e.api = &kOverrideTuner;
  e.context = ctx.get();
  e.internalState = std::move(ctx);
  entries_.push_back(std::move(e));
}

bool TunerChain::cacheable() const {
  return std::all_of(entries_.begin(), entries_.end(), [](const TunerEntry& e) { return e.stateless; });
}

ncclResult_t TunerChain::select(ncclFunc_t f, size_t nBytes, const bool (&supported)[kA][kP], int coreChannels,
                                int maxChannels, TuningDecision* out, bool filtered) const {
  if (f < 0 || f >= kNumTunedFuncs) TUTTI_FAIL(ncclInternalError, "tuning asked for non-collective {}", int(f));
  // `supported` follows from f and the communicator (fixed), so the key leaves it out.
  Cached* slot = nullptr;
  if (cacheable()) {
    if (!cache_) cache_ = std::make_unique<Cached[]>(kCacheSlots);
    const size_t h = (nBytes * 0x9e3779b97f4a7c15ull) ^ (static_cast<size_t>(f) << 3) ^
                     (static_cast<size_t>(coreChannels) << 11) ^ (static_cast<size_t>(maxChannels) << 19) ^ filtered;
    slot = &cache_[(h >> 7) % kCacheSlots];
    if (slot->valid && slot->f == f && slot->nBytes == nBytes && slot->coreChannels == coreChannels &&
        slot->maxChannels == maxChannels && slot->filtered == filtered) {
      *out = slot->decision;
      return ncclSuccess;
    }
  }
  TUTTI_CHECK(selectUncached(f, nBytes, supported, coreChannels, maxChannels, out, filtered));
  if (slot) *slot = Cached{true, f, nBytes, coreChannels, maxChannels, filtered, *out};
  return ncclSuccess;
}

ncclResult_t TunerChain::selectUncached(ncclFunc_t f, size_t nBytes, const bool (&supported)[kA][kP],
                                        int coreChannels, int maxChannels, TuningDecision* out, bool filtered) const {
  float table[kA][kP];
  const std::string* writer[kA][kP];
  static const std::string kCore = "core";
  for (int a = 0; a < kA; ++a) {
    for (int p = 0; p < kP; ++p) {
      table[a][p] = supported[a][p] ? coreBaseCost(f, nBytes, nRanks_, a, p) : NCCL_ALGO_PROTO_IGNORE;
      writer[a][p] = &kCore;
    }
  }
  int channels = coreChannels;
  const std::string* channelsBy = &kCore;

  for (const TunerEntry& e : entries_) {
    float before[kA][kP];
    std::memcpy(before, table, sizeof table);
    int ch = channels;
    ncclResult_t r = e.api->getCollInfo(e.context, f, nBytes, 1, reinterpret_cast<float**>(&table[0][0]), kA, kP, 0,
                                        &ch);
    if (r != ncclSuccess) {
      // Skipped for this call only: the table is what it was before the tuner ran.
      if (!e.warned) {
        TUTTI_WARN("tuner '{}': getCollInfo failed ({}) for {} of {} bytes; its answer is ignored (further "
                   "failures are logged at TRACE)", e.name, static_cast<int>(r), tunedFuncName(f), nBytes);
        e.warned = true;
      } else {
        TUTTI_TRACE(NCCL_TUNING, "tuner '{}': getCollInfo failed ({})", e.name, static_cast<int>(r));
      }
      std::memcpy(table, before, sizeof table);
      continue;
    }
    for (int a = 0; a < kA; ++a) {
      for (int p = 0; p < kP; ++p) {
        if (before[a][p] == NCCL_ALGO_PROTO_IGNORE && table[a][p] != NCCL_ALGO_PROTO_IGNORE) {
          // An unsupported pair must stay unsupported: the engine cannot run it.
          TUTTI_TRACE(NCCL_TUNING, "tuner '{}' enabled unsupported {}/{}; kept disabled", e.name,
                      tunedAlgoName(a), tunedProtoName(p));
          table[a][p] = NCCL_ALGO_PROTO_IGNORE;
        } else if (std::memcmp(&before[a][p], &table[a][p], sizeof(float)) != 0) {
          writer[a][p] = &e.name;
        }
      }
    }
    if (ch != channels) {
      if (ch >= 1) {
        channels = ch;
        channelsBy = &e.name;
      } else {
        TUTTI_TRACE(NCCL_TUNING, "tuner '{}' suggested {} channels; ignored", e.name, ch);
      }
    }
  }

  bool anyAllowed = false;
  int bestA = NCCL_ALGO_UNDEF, bestP = NCCL_PROTO_UNDEF;
  for (int a = 0; a < kA; ++a) {
    for (int p = 0; p < kP; ++p) {
      if (!supported[a][p] || (filtered && !filter_.allows(f, a, p))) continue;
      anyAllowed = true;
      const float c = table[a][p];
      if (!(c >= 0)) continue;  // -1 (or NaN): unavailable
      if (bestA < 0 || c < table[bestA][bestP]) {
        bestA = a;
        bestP = p;
      }
    }
  }
  if (!anyAllowed) {
    std::string what;
    for (int a = 0; a < kA; ++a)
      for (int p = 0; p < kP; ++p)
        if (supported[a][p]) what += (what.empty() ? "" : ", ") + fmt::format("{}/{}", tunedAlgoName(a), tunedProtoName(p));
    TUTTI_FAIL(ncclInvalidUsage, "NCCL_ALGO=\"{}\" / NCCL_PROTO=\"{}\" leave no usable algorithm/protocol for {} "
               "(this engine supports {})", paramString("NCCL_ALGO"), paramString("NCCL_PROTO"), tunedFuncName(f),
               what);
  }
  if (bestA < 0) {
    std::string chain;
    for (const TunerEntry& e : entries_) chain += (chain.empty() ? "" : ", ") + e.name;
    TUTTI_FAIL(ncclInvalidUsage, "no algorithm/protocol left for {} of {} bytes: the tuners ({}) marked every "
               "allowed entry unavailable", tunedFuncName(f), nBytes, chain);
  }
  TuningDecision d;
  d.algorithm = bestA;
  d.protocol = bestP;
  d.nChannels = std::clamp(channels, 1, std::max(maxChannels, 1));
  d.channelsFromTuner = channelsBy != &kCore;
  d.cost = table[bestA][bestP];
  d.decider = *writer[bestA][bestP];
  d.channelsBy = *channelsBy;
  *out = std::move(d);
  return ncclSuccess;
}

ncclResult_t tunerChainCreate(ncclComm* comm) {
  AlgoProtoFilter filter;
  TUTTI_CHECK(parseAlgoProtoFilter(paramString("NCCL_ALGO"), paramString("NCCL_PROTO"), &filter));
  const Config* cfg = nullptr;
  TUTTI_CHECK(configGet(&cfg));
  std::unique_ptr<TunerChain, TunerChainDeleter> chain(new TunerChain(comm->nRanks, comm->nNodes));
  chain->setFilter(filter);
  for (const PluginSpec& spec : cfg->tuners) {
    std::shared_ptr<TunerPlugin> plugin;
    if (ncclResult_t r = loadShared(spec, &plugin); r != ncclSuccess) {
      if (spec.required) TUTTI_FAIL(r, "tuner '{}' ({}) is required but failed to load", spec.label(), spec.where.str());
      TUTTI_WARN("tuner '{}' ({}) failed to load; continuing without it", spec.label(), spec.where.str());
      continue;
    }
    if (!plugin) continue;  // "none"
    const ncclTuner_v6_t* api = &plugin->tuner;
    TUTTI_CHECK(chain->add(api->name, std::move(plugin), api, spec.required, comm->commHash));
  }
  chain->addOverrides(cfg->tuning);
  std::string names;
  for (const TunerEntry& e : chain->entries()) names += (names.empty() ? "" : " -> ") + e.name;
  TUTTI_INFO(NCCL_INIT | NCCL_TUNING, "comm {} rank {}: tuner chain: {}", static_cast<void*>(comm), comm->rank,
             names.empty() ? "none (core costs only)" : names);
  comm->tuners = std::move(chain);
  return ncclSuccess;
}

ncclResult_t tuningSelect(ncclComm* comm, ncclFunc_t f, size_t nBytes, int coreChannels, TuningDecision* out,
                          bool filtered) {
  bool supported[kA][kP];
  engineSupport(f, comm->ll128, supported);
  TuningDecision d;
  if (comm->tuners) {
    TUTTI_CHECK(comm->tuners->select(f, nBytes, supported, coreChannels, comm->collChannelCap, &d, filtered));
  } else {
    TunerChain bare(comm->nRanks, comm->nNodes);
    TUTTI_CHECK(bare.select(f, nBytes, supported, coreChannels, comm->collChannelCap, &d, filtered));
  }
  TUTTI_INFO(NCCL_TUNING, "{}: {} bytes -> algo {} proto {} channels {} decider {} (channels by {}) time {} us",
             tunedFuncName(f), nBytes, tunedAlgoName(d.algorithm), tunedProtoName(d.protocol), d.nChannels,
             d.decider, d.channelsBy, d.cost);
  *out = std::move(d);
  return ncclSuccess;
}

}  // namespace tutti
