// libtutti-tuner-default.so: Tutti's default cost model as an NCCL tuner plugin (exports
// ncclTunerPlugin_v6, name "default"). One context per communicator; no global mutable state.
#include "model.h"

#include <new>

namespace tutti::tunerdefault {
namespace {

struct Context {
  Model model;
  ncclDebugLogger_t log = nullptr;
};

#define TUNER_LOG(logger, level, ...) \
  do { if (logger) (logger)(level, NCCL_TUNING, __FILE__, __LINE__, __VA_ARGS__); } while (0)

ncclResult_t init(void** context, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                  ncclNvlDomainInfo_v6_t* nvlDomainInfo, ncclTunerConstants_v6_t* constants) {
  (void)commId;
  (void)nvlDomainInfo;
  (void)constants;  // the core's own constants are not this model's inputs
  if (context == nullptr || nRanks == 0 || nNodes == 0 || nNodes > nRanks) {
    TUNER_LOG(logFunction, NCCL_LOG_WARN, "tuner default: bad init arguments (nRanks %zu, nNodes %zu)", nRanks,
              nNodes);
    return ncclInvalidArgument;
  }
  Options options;
  std::string error;
  try {
    if (ncclResult_t r = readOptions(&options, &error); r != ncclSuccess) {
      TUNER_LOG(logFunction, NCCL_LOG_WARN, "tuner default: %s", error.c_str());
      return r;
    }
    auto* ctx = new Context();
    ctx->log = logFunction;
    ctx->model.configure(options, static_cast<int>(nRanks), static_cast<int>(nNodes));
    static const char* const kLinkNames[] = {"process", "shm", "net"};
    TUNER_LOG(logFunction, NCCL_LOG_INFO, "tuner default: %zu ranks on %zu nodes, link %s", nRanks, nNodes,
              kLinkNames[ctx->model.link()]);
    *context = ctx;
  } catch (const std::bad_alloc&) {
    return ncclSystemError;
  } catch (...) {
    return ncclInternalError;
  }
  return ncclSuccess;
}

ncclResult_t getCollInfo(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                         int numAlgo, int numProto, int regBuff, int* nChannels) {
  (void)numPipeOps;
  (void)regBuff;
  auto* ctx = static_cast<Context*>(context);
  if (ctx == nullptr || collCostTable == nullptr || numAlgo < 0 || numProto < 0) return ncclInvalidArgument;
  // One contiguous float[numAlgo][numProto] block handed over as float**.
  const int coreChannels = nChannels && *nChannels > 0 ? *nChannels : 1;
  modelFill(ctx->model, collType, nBytes, coreChannels, reinterpret_cast<float*>(collCostTable), numAlgo,
            numProto);
  if (nChannels) *nChannels = ctx->model.channels(nBytes);
  return ncclSuccess;
}

ncclResult_t finalize(void* context) {
  delete static_cast<Context*>(context);
  return ncclSuccess;
}

constexpr ncclTuner_v6_t makeTable() {
  ncclTuner_v6_t t{};
  t.name = "default";
  t.init = init;
  t.getCollInfo = getCollInfo;
  t.finalize = finalize;
  t.getChunkSize = nullptr;  // the core's chunk geometry is right for its FIFOs
  return t;
}

}  // namespace
}  // namespace tutti::tunerdefault

// The model is fixed at init (options, ranks, nodes): the same arguments always get the same answer.
extern "C" __attribute__((visibility("default"))) const int tuttiTunerStateless = 1;

extern "C" __attribute__((visibility("default"))) const ncclTuner_v6_t ncclTunerPlugin_v6 =
    tutti::tunerdefault::makeTable();
