// `tutti-plugin-check tuner`: init for several communicator shapes (all contexts alive at once), then
// getCollInfo for every collective over a size sweep with the cost table fenced by canary bytes,
// unavailable (-1) entries that must stay so, and a sane channel count; getChunkSize (v6); finalize.
#include "common.h"

#include <tutti/tuner.h>

#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace tutti::check {
namespace {

constexpr int kMaxChannels = 64;  // MAXCHANNELS of the core; a tuner may ask for at most this many
constexpr size_t kCanaryBytes = 256;
constexpr unsigned char kCanary = 0xA5;
constexpr int kAlgos = NCCL_NUM_ALGORITHMS;
constexpr int kProtos = NCCL_NUM_PROTOCOLS;

// What the tool needs from any tuner version.
struct Tuner {
  int version = 0;
  const void* table = nullptr;
  std::string name;
  std::vector<std::string> missing;

  ncclResult_t init(void** ctx, size_t nRanks, size_t nNodes, ncclTunerConstants_v5_t* consts) const {
    *ctx = nullptr;
    switch (version) {
      case 6: {
        ncclNvlDomainInfo_v6_t nvl{static_cast<int>(nNodes), 1, static_cast<int>(nRanks / nNodes)};
        return t<ncclTuner_v6_t>()->init(ctx, 0x74756e65ull + nRanks, nRanks, nNodes, pluginLogger, &nvl, consts);
      }
      case 5: {
        ncclNvlDomainInfo_v5_t nvl{static_cast<int>(nNodes), 1, static_cast<int>(nRanks / nNodes)};
        return t<ncclTuner_v5_t>()->init(ctx, 0x74756e65ull + nRanks, nRanks, nNodes, pluginLogger, &nvl, consts);
      }
      case 4: return t<ncclTuner_v4_t>()->init(nRanks, nNodes, pluginLogger, ctx);
      case 3: return t<ncclTuner_v3_t>()->init(nRanks, nNodes, pluginLogger, ctx);
      default: return t<ncclTuner_v2_t>()->init(nRanks, nNodes, pluginLogger, ctx);
    }
  }
  ncclResult_t getCollInfo(void* ctx, ncclFunc_t f, size_t nBytes, float* table, int* nChannels) const {
    float** tbl = reinterpret_cast<float**>(table);  // the ABI passes the contiguous block as float**
    switch (version) {
      case 6: return t<ncclTuner_v6_t>()->getCollInfo(ctx, f, nBytes, 1, tbl, kAlgos, kProtos, 0, nChannels);
      case 5: return t<ncclTuner_v5_t>()->getCollInfo(ctx, f, nBytes, 1, tbl, kAlgos, kProtos, 0, nChannels);
      case 4: return t<ncclTuner_v4_t>()->getCollInfo(ctx, f, nBytes, 1, tbl, kAlgos, kProtos, 0, nChannels);
      default: return t<ncclTuner_v3_t>()->getCollInfo(ctx, f, nBytes, 1, tbl, kAlgos, kProtos, nChannels);
    }
  }
  ncclResult_t getCollInfoV2(void* ctx, ncclFunc_t f, size_t nBytes, int* algo, int* proto, int* nChannels) const {
    return t<ncclTuner_v2_t>()->getCollInfo(ctx, f, nBytes, 0, 0, 1, algo, proto, nChannels);
  }
  ncclResult_t finalize(void* ctx) const {
    switch (version) {
      case 6: return t<ncclTuner_v6_t>()->finalize(ctx);
      case 5: return t<ncclTuner_v5_t>()->finalize(ctx);
      case 4: return t<ncclTuner_v4_t>()->destroy(ctx);
      case 3: return t<ncclTuner_v3_t>()->destroy(ctx);
      default: return t<ncclTuner_v2_t>()->destroy(ctx);
    }
  }
  template <class T>
  const T* t() const {
    return static_cast<const T*>(table);
  }
};

template <class T>
void fillCommon(Tuner* tu) {
  auto* t = static_cast<const T*>(tu->table);
  tu->name = t->name ? t->name : "";
  if (!t->name) tu->missing.push_back("name");
  if (!t->init) tu->missing.push_back("init");
  if (!t->getCollInfo) tu->missing.push_back("getCollInfo");
}

bool loadTuner(const std::string& path, int abi, Tuner* tu, std::string* err, std::string* found) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *err = std::string("dlopen failed: ") + dlerror();
    return false;
  }
  for (int v = 6; v >= 2; v--) {
    void* s = dlsym(lib, ("ncclTunerPlugin_v" + std::to_string(v)).c_str());
    if (!s) continue;
    *found += (found->empty() ? "v" : " v") + std::to_string(v);
    if (!tu->table && (abi == 0 || abi == v)) tu->version = v, tu->table = s;
  }
  if (!tu->table) {
    *err = abi ? "no symbol ncclTunerPlugin_v" + std::to_string(abi) : "no symbol ncclTunerPlugin_v6 .. ncclTunerPlugin_v2";
    dlclose(lib);
    return false;
  }
  switch (tu->version) {
    case 6:
      fillCommon<ncclTuner_v6_t>(tu);
      if (!tu->t<ncclTuner_v6_t>()->finalize) tu->missing.push_back("finalize");
      break;
    case 5:
      fillCommon<ncclTuner_v5_t>(tu);
      if (!tu->t<ncclTuner_v5_t>()->finalize) tu->missing.push_back("finalize");
      break;
    case 4: fillCommon<ncclTuner_v4_t>(tu); if (!tu->t<ncclTuner_v4_t>()->destroy) tu->missing.push_back("destroy"); break;
    case 3: fillCommon<ncclTuner_v3_t>(tu); if (!tu->t<ncclTuner_v3_t>()->destroy) tu->missing.push_back("destroy"); break;
    default: fillCommon<ncclTuner_v2_t>(tu); if (!tu->t<ncclTuner_v2_t>()->destroy) tu->missing.push_back("destroy"); break;
  }
  return true;
}

// The cost table as the core would build it: plausible costs (us) growing with size, and -1 where an
// algorithm/protocol pair is unavailable (CollNet, NVLS, NVLS tree, PAT but for AllGather and ReduceScatter,
// and Tree/LL128 on odd sizes).
void initialTable(float* t, ncclFunc_t f, size_t nBytes) {
  for (int a = 0; a < kAlgos; a++)
    for (int p = 0; p < kProtos; p++) {
      bool avail = a == NCCL_ALGO_RING || (a == NCCL_ALGO_TREE && f == ncclFuncAllReduce) ||
                   (a == NCCL_ALGO_PAT && (f == ncclFuncAllGather || f == ncclFuncReduceScatter));
      if (a == NCCL_ALGO_TREE && p == NCCL_PROTO_LL128 && (nBytes & 1)) avail = false;
      t[a * kProtos + p] = avail ? 5.0f + 3.0f * p + static_cast<float>(nBytes) / (1.0e4f * (p + 1)) : NCCL_ALGO_PROTO_IGNORE;
    }
}

std::vector<size_t> sizeSweep() {
  std::vector<size_t> s = {0, 1, 3, 7, 4097};
  for (size_t b = 8; b <= (size_t(1) << 30); b <<= 1) s.push_back(b);
  s.push_back((size_t(1) << 30) - 1);
  return s;
}

const char* funcName(int f) {
  static const char* n[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
  return f >= 0 && f < 5 ? n[f] : "?";
}

}  // namespace

int runTunerChecks(const Options& opt, Out& out) {
  out.begin("tuner.load");
  Tuner tu;
  std::string err, found;
  if (!loadTuner(opt.path, opt.abi, &tu, &err, &found)) {
    out.fail("tuner.load", err);
    return 1;
  }
  out.meta("name", tu.name);
  out.meta("abi", std::to_string(tu.version));
  out.info("tuner '" + tu.name + "', ABI v" + std::to_string(tu.version) + " (symbols found: " + found + ")");
  out.pass("tuner.load");
  std::string m;
  for (auto& x : tu.missing) m += (m.empty() ? "" : ", ") + x;
  out.verdict("tuner.table", m.empty() ? "" : "required members are NULL: " + m);
  if (!m.empty()) return 1;

  struct Shape {
    size_t nRanks, nNodes;
    void* ctx = nullptr;
    bool ok = false;
  };
  std::vector<Shape> shapes = {{1, 1}, {2, 1}, {8, 1}, {3, 3}, {16, 2}, {64, 8}, {1024, 128}};
  // Every context is created before any is used: a tuner must keep several communicators apart.
  for (auto& s : shapes) {
    std::string name = "tuner.init.ranks" + std::to_string(s.nRanks) + "-nodes" + std::to_string(s.nNodes);
    out.begin(name);
    ncclTunerConstants_v5_t consts{};
    ncclResult_t r = tu.init(&s.ctx, s.nRanks, s.nNodes, tu.version >= 5 ? &consts : nullptr);
    s.ok = r == ncclSuccess;
    std::string e = s.ok ? "" : std::string("init returned ") + resultName(r);
    if (s.ok && tu.version >= 5) {
      const double* c = reinterpret_cast<const double*>(&consts);
      for (size_t i = 0; i < sizeof consts / sizeof(double); i++)
        if (!std::isfinite(c[i]) || c[i] < 0) {
          e = "init left a negative or non-finite value in the tuning constants";
          break;
        }
    }
    out.verdict(name, e);
  }

  const auto sizes = sizeSweep();
  for (auto& s : shapes) {
    std::string shape = "ranks" + std::to_string(s.nRanks) + "-nodes" + std::to_string(s.nNodes);
    for (int f = 0; f < NCCL_NUM_FUNCTIONS; f++) {
      std::string name = std::string("tuner.getCollInfo.") + funcName(f) + "." + shape;
      if (!s.ok) {
        out.skip(name, "init failed for this shape");
        continue;
      }
      out.begin(name);
      std::string e;
      for (size_t nBytes : sizes) {
        std::string at = std::to_string(nBytes) + " B: ";
        if (tu.version == 2) {
          int algo = NCCL_ALGO_UNDEF, proto = NCCL_PROTO_UNDEF, nch = 0;
          ncclResult_t r = tu.getCollInfoV2(s.ctx, static_cast<ncclFunc_t>(f), nBytes, &algo, &proto, &nch);
          if (r != ncclSuccess) e = at + "getCollInfo returned " + resultName(r);
          else if (algo < NCCL_ALGO_UNDEF || algo >= kAlgos) e = at + "algorithm " + std::to_string(algo) + " out of range";
          else if (proto < NCCL_PROTO_UNDEF || proto >= kProtos) e = at + "protocol " + std::to_string(proto) + " out of range";
          else if (nch < 0 || nch > kMaxChannels) e = at + "nChannels " + std::to_string(nch) + " out of range";
          if (!e.empty()) break;
          continue;
        }
        // Table with canaries on both sides, so a write outside [0, numAlgo*numProto) is seen.
        std::vector<unsigned char> block(2 * kCanaryBytes + sizeof(float) * kAlgos * kProtos, kCanary);
        float* table = reinterpret_cast<float*>(block.data() + kCanaryBytes);
        float before[kAlgos * kProtos];
        initialTable(before, static_cast<ncclFunc_t>(f), nBytes);
        memcpy(table, before, sizeof before);
        int nch = 0;  // the core passes 0: "no opinion"
        ncclResult_t r = tu.getCollInfo(s.ctx, static_cast<ncclFunc_t>(f), nBytes, table, &nch);
        const unsigned char* tail = block.data() + block.size() - kCanaryBytes;
        for (size_t i = 0; i < kCanaryBytes && e.empty(); i++)
          if (block[i] != kCanary) e = at + "wrote " + std::to_string(kCanaryBytes - i) + " bytes before the cost table";
        for (size_t i = 0; i < kCanaryBytes && e.empty(); i++)
          if (tail[i] != kCanary) e = at + "wrote past the end of the cost table (byte " + std::to_string(i) + " after it)";
        if (!e.empty()) break;
        if (r != ncclSuccess) {
          e = at + "getCollInfo returned " + resultName(r);
          break;
        }
        float* after = table;
        bool any = false;
        for (int i = 0; i < kAlgos * kProtos && e.empty(); i++) {
          std::string cell = "[" + std::to_string(i / kProtos) + "][" + std::to_string(i % kProtos) + "]";
          if (before[i] == NCCL_ALGO_PROTO_IGNORE && after[i] != NCCL_ALGO_PROTO_IGNORE)
            e = at + "entry " + cell + " was unavailable (-1) and became " + std::to_string(after[i]);
          else if (!std::isfinite(after[i]) || (after[i] < 0 && after[i] != NCCL_ALGO_PROTO_IGNORE))
            e = at + "entry " + cell + " is " + std::to_string(after[i]) + " (costs are >= 0 or -1)";
          if (after[i] != NCCL_ALGO_PROTO_IGNORE) any = true;
        }
        if (e.empty() && !any) e = at + "every entry is -1: the core has no algorithm left";
        if (e.empty() && (nch < 0 || nch > kMaxChannels))
          e = at + "nChannels " + std::to_string(nch) + " (0 = unchanged, else 1.." + std::to_string(kMaxChannels) + ")";
        if (!e.empty()) break;
      }
      out.verdict(name, e);
    }
  }

  if (tu.version == 6) {
    auto* t6 = tu.t<ncclTuner_v6_t>();
    if (!t6->getChunkSize) {
      out.skip("tuner.getChunkSize", "not provided (optional)");
    } else {
      out.begin("tuner.getChunkSize");
      std::string e;
      for (auto& s : shapes) {
        if (!s.ok || !e.empty()) continue;
        for (size_t nBytes : {size_t(0), size_t(4096), size_t(1) << 30}) {
          size_t chunk = 131072;
          ncclResult_t r = t6->getChunkSize(s.ctx, ncclFuncAllReduce, nBytes, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 4, &chunk);
          if (r != ncclSuccess) e = "getChunkSize returned " + std::string(resultName(r));
          else if (chunk == 0) e = "getChunkSize set the chunk size to 0";
          if (!e.empty()) break;
        }
      }
      out.verdict("tuner.getChunkSize", e);
    }
  }

  for (auto& s : shapes) {
    if (!s.ok) continue;
    std::string name = "tuner.finalize.ranks" + std::to_string(s.nRanks) + "-nodes" + std::to_string(s.nNodes);
    out.begin(name);
    ncclResult_t r = tu.finalize(s.ctx);
    out.verdict(name, r == ncclSuccess ? "" : std::string("finalize returned ") + resultName(r));
  }
  return 0;
}

}  // namespace tutti::check
