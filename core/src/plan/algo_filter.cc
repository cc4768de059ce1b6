// NCCL_ALGO / NCCL_PROTO parsing (declared in tuning.h). Kept apart from the tuner chain so that it is a
// pure function of its text, linked alone by tests/fuzz.
#include "plan/plan.h"
#include "plan/tuning.h"

#include "util/check.h"

#include <strings.h>

#include <string>
#include <vector>

namespace tutti {

namespace {

constexpr int kA = NCCL_NUM_ALGORITHMS;
constexpr int kP = NCCL_NUM_PROTOCOLS;

// NCCL's spellings (parsing is case-insensitive).
const char* const kAlgoNames[kA] = {"Tree", "Ring", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT"};
const char* const kProtoNames[kP] = {"LL", "LL128", "Simple"};
const char* const kFuncNames[kNumTunedFuncs] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t") + 1);
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  for (;;) {
    size_t e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) return out;
    b = e + 1;
  }
}

std::string joinNames(const char* const* names, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::string(names[i]);
  return s;
}

}  // namespace

const char* tunedAlgoName(int a) {
  if (a == kAlgoSymmetric) return "SYM";
  if (a == kAlgoDetExchange) return "DET";
  if (a == kAlgoDirect) return "DIRECT";
  if (a == kAlgoOneShot) return "ONESHOT";
  if (a == kAlgoDoubling) return "DOUBLING";
  if (a == kAlgoScatterGather) return "SCATTERGATHER";
  return a >= 0 && a < kA ? kAlgoNames[a] : "?";
}
const char* tunedProtoName(int p) { return p >= 0 && p < kP ? kProtoNames[p] : "?"; }
const char* tunedFuncName(ncclFunc_t f) { return f >= 0 && f < kNumTunedFuncs ? kFuncNames[f] : "?"; }

AlgoProtoFilter::AlgoProtoFilter() {
  for (int f = 0; f < kNumTunedFuncs; ++f) {
    for (int a = 0; a < kA; ++a) algo[f][a] = true;
    for (int p = 0; p < kP; ++p) proto[f][p] = true;
  }
}

ncclResult_t parseAlgoProtoList(const char* var, const std::string& text, const char* const* names, int n,
                                bool* allowed) {
  std::vector<bool> out(allowed, allowed + kNumTunedFuncs * n);
  const std::vector<std::string> sections = split(text, ';');
  for (size_t s = 0; s < sections.size(); ++s) {
    std::string section = trim(sections[s]);
    if (section.empty()) continue;
    std::string prefix, list = section;
    if (size_t colon = section.find(':'); colon != std::string::npos) {
      prefix = trim(section.substr(0, colon));
      list = trim(section.substr(colon + 1));
    } else if (s != 0) {
      // A prefix-less list after a section would silently overwrite the sections before it.
      TUTTI_FAIL(ncclInvalidUsage, "{}=\"{}\": only the first entry may omit the collective prefix (\"{}\")", var,
                 text, section);
    }
    int fBegin = 0, fEnd = kNumTunedFuncs;
    if (!prefix.empty() || section.find(':') != std::string::npos) {
      int f = 0;
      while (f < kNumTunedFuncs && strcasecmp(prefix.c_str(), kFuncNames[f]) != 0) ++f;
      if (f == kNumTunedFuncs)
        TUTTI_FAIL(ncclInvalidUsage, "{}=\"{}\": unknown collective \"{}\" (expected one of {})", var, text, prefix,
                   joinNames(kFuncNames, kNumTunedFuncs));
      fBegin = f;
      fEnd = f + 1;
    }
    const bool exclude = !list.empty() && list[0] == '^';
    if (exclude) list = trim(list.substr(1));
    std::vector<bool> named(n, false);
    for (const std::string& raw : split(list, ',')) {
      std::string word = trim(raw);
      if (word.empty()) continue;
      int e = 0;
      while (e < n && strcasecmp(word.c_str(), names[e]) != 0) ++e;
      if (e == n)
        TUTTI_FAIL(ncclInvalidUsage, "{}=\"{}\": unknown name \"{}\" (expected one of {})", var, text, word,
                   joinNames(names, n));
      named[e] = true;
    }
    for (int f = fBegin; f < fEnd; ++f)
      for (int e = 0; e < n; ++e) out[f * n + e] = exclude ? !named[e] : named[e];
  }
  for (int i = 0; i < kNumTunedFuncs * n; ++i) allowed[i] = out[i];
  return ncclSuccess;
}

ncclResult_t parseAlgoProtoFilter(const std::string& algoText, const std::string& protoText, AlgoProtoFilter* out) {
  AlgoProtoFilter f;
  TUTTI_CHECK(parseAlgoProtoList("NCCL_ALGO", algoText, kAlgoNames, kA, &f.algo[0][0]));
  TUTTI_CHECK(parseAlgoProtoList("NCCL_PROTO", protoText, kProtoNames, kP, &f.proto[0][0]));
  *out = f;
  return ncclSuccess;
}

}  // namespace tutti
