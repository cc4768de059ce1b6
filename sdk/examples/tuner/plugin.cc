// Example tuner: rules from a CSV file force an (algorithm, protocol) pair and a channel count for
// matching collectives. Exports ncclTunerPlugin_v6. Written in C++ to show the one rule that matters for
// a C++ plugin: no exception may leave a callback (each entry point catches and returns an error code).
#include <tutti/tuner.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr const char* kCsvVariable = "TUTTI_EXAMPLE_TUNER_CSV";

struct Rule {
  ncclFunc_t coll;
  size_t minBytes;  // inclusive
  size_t maxBytes;  // exclusive
  int algo;
  int proto;
  int channels;     // -1: keep the core's choice
  int line;         // for logs
};

struct Context {
  ncclDebugLogger_t log = nullptr;
  std::vector<Rule> rules;
  size_t nRanks = 0;
  size_t nNodes = 0;
};

#define TUNER_LOG(ctx, level, ...) \
  do { if ((ctx)->log) (ctx)->log(level, NCCL_TUNING, __FILE__, __LINE__, __VA_ARGS__); } while (0)

// Position of `word` in `names`, or -1.
int lookup(const std::string& word, const std::vector<const char*>& names) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (word == names[i]) return static_cast<int>(i);
  }
  return -1;
}

// Indices follow NCCL's values: ncclFunc_t, NCCL_ALGO_*, NCCL_PROTO_*.
const std::vector<const char*> kColls = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
const std::vector<const char*> kAlgos = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree",
                                         "pat"};
const std::vector<const char*> kProtos = {"ll", "ll128", "simple"};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

bool parseSize(const std::string& text, size_t* out) {
  if (text == "inf") {
    *out = SIZE_MAX;
    return true;
  }
  if (text.empty() || text[0] == '-') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = static_cast<size_t>(v);
  return true;
}

// Parses one non-comment line into *rule; on failure returns a message saying what is wrong.
std::string parseLine(const std::string& line, Rule* rule) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  std::string field;
  while (std::getline(ss, field, ',')) f.push_back(trim(field));
  if (f.size() != 6) return "expected 6 fields (collective,minBytes,maxBytes,algorithm,protocol,channels), got " +
                            std::to_string(f.size());
  int coll = lookup(f[0], kColls);
  if (coll < 0) return "unknown collective '" + f[0] + "' (broadcast, reduce, allgather, reducescatter, allreduce)";
  if (!parseSize(f[1], &rule->minBytes)) return "minBytes '" + f[1] + "' is not a byte count";
  if (!parseSize(f[2], &rule->maxBytes)) return "maxBytes '" + f[2] + "' is not a byte count or 'inf'";
  if (rule->minBytes >= rule->maxBytes) return "empty size range [" + f[1] + ", " + f[2] + ")";
  rule->algo = lookup(f[3], kAlgos);
  if (rule->algo < 0) return "unknown algorithm '" + f[3] + "'";
  rule->proto = lookup(f[4], kProtos);
  if (rule->proto < 0) return "unknown protocol '" + f[4] + "' (ll, ll128, simple)";
  char* end = nullptr;
  long ch = std::strtol(f[5].c_str(), &end, 10);
  if (f[5].empty() || *end != '\0' || ch == 0 || ch < -1 || ch > 64) {
    return "channels '" + f[5] + "' must be 1..64, or -1 to keep the core's choice";
  }
  rule->coll = static_cast<ncclFunc_t>(coll);
  rule->channels = static_cast<int>(ch);
  return "";
}

// Reads the file named by TUTTI_EXAMPLE_TUNER_CSV. No variable: no rules (the tuner then changes nothing).
ncclResult_t loadRules(Context* ctx) {
  const char* path = std::getenv(kCsvVariable);
  if (!path || !*path) {
    TUNER_LOG(ctx, NCCL_LOG_INFO, "example tuner: %s is not set, no rules", kCsvVariable);
    return ncclSuccess;
  }
  std::ifstream in(path);
  if (!in) {
    TUNER_LOG(ctx, NCCL_LOG_WARN, "example tuner: cannot open %s=%s: %s", kCsvVariable, path, std::strerror(errno));
    return ncclSystemError;
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    Rule r{};
    r.line = n;
    std::string err = parseLine(t, &r);
    if (!err.empty()) {
      TUNER_LOG(ctx, NCCL_LOG_WARN, "example tuner: %s:%d: %s", path, n, err.c_str());
      return ncclInvalidUsage;
    }
    ctx->rules.push_back(r);
  }
  TUNER_LOG(ctx, NCCL_LOG_INFO, "example tuner: %zu rules from %s", ctx->rules.size(), path);
  return ncclSuccess;
}

ncclResult_t init(void** context, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                  ncclNvlDomainInfo_v6_t* nvlDomainInfo, ncclTunerConstants_v6_t* constants) {
  (void)commId;
  (void)nvlDomainInfo;
  (void)constants;  // a tuner may edit the core's model constants here; this one does not
  Context* ctx = nullptr;
  try {
    ctx = new Context();
    ctx->log = logFunction;
    ctx->nRanks = nRanks;
    ctx->nNodes = nNodes;
    ncclResult_t res = loadRules(ctx);
    if (res != ncclSuccess) {
      delete ctx;
      return res;
    }
  } catch (const std::bad_alloc&) {
    delete ctx;
    return ncclSystemError;
  } catch (...) {
    delete ctx;
    return ncclInternalError;
  }
  *context = ctx;
  return ncclSuccess;
}

ncclResult_t getCollInfo(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                         int numAlgo, int numProto, int regBuff, int* nChannels) {
  (void)numPipeOps;
  (void)regBuff;
  auto* ctx = static_cast<Context*>(context);
  // One contiguous float[numAlgo][numProto] block handed over as float**.
  auto* table = reinterpret_cast<float*>(collCostTable);
  for (const Rule& r : ctx->rules) {
    if (r.coll != collType || nBytes < r.minBytes || nBytes >= r.maxBytes) continue;
    // First matching rule wins. An unsupported pair (-1) must stay unsupported: skip the rule then.
    if (r.algo >= numAlgo || r.proto >= numProto || table[r.algo * numProto + r.proto] == NCCL_ALGO_PROTO_IGNORE) {
      TUNER_LOG(ctx, NCCL_LOG_TRACE, "example tuner: rule of line %d names an unavailable pair, ignored", r.line);
      continue;
    }
    table[r.algo * numProto + r.proto] = 0.0f;
    if (r.channels > 0) *nChannels = r.channels;
    TUNER_LOG(ctx, NCCL_LOG_TRACE, "example tuner: %s %zu bytes -> %s/%s channels %d (line %d)",
              kColls[collType], nBytes, kAlgos[r.algo], kProtos[r.proto], r.channels, r.line);
    return ncclSuccess;
  }
  return ncclSuccess;
}

ncclResult_t finalize(void* context) {
  delete static_cast<Context*>(context);
  return ncclSuccess;
}

// constexpr: the table is built at compile time, so it is valid the moment the library is mapped.
constexpr ncclTuner_v6_t makeTable() {
  ncclTuner_v6_t t{};
  t.name = "example-csv";
  t.init = init;
  t.getCollInfo = getCollInfo;
  t.finalize = finalize;
  t.getChunkSize = nullptr;  // optional: keep the core's chunk size
  return t;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const ncclTuner_v6_t ncclTunerPlugin_v6 = makeTable();
