// The collective matrix, one thread per rank (ncclGetUniqueId + ncclCommInitRank): for each collective,
// rank count and placement, one ctest test walks every datatype x op x count on one set of
// communicators, with send/recv buffers offset by 0..7 bytes and roots alternating between 0 and k-1.
#include "coll_case.h"
#include "dtypes.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace tutti::itest {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 1023};

struct MatrixParam {
  Coll coll;
  int nranks;
  bool inPlace;
};

std::string matrixName(const MatrixParam& p) {
  return std::string(collName(p.coll)) + "_k" + std::to_string(p.nranks) + (p.inPlace ? "_InPlace" : "_OutOfPlace");
}
std::string paramName(const testing::TestParamInfo<MatrixParam>& info) { return matrixName(info.param); }
// Readable parameter values in test listings (and so in ctest names) instead of raw bytes.
void PrintTo(const MatrixParam& p, std::ostream* os) { *os << matrixName(p); }

// The datatypes of the matrix. TUTTI_TEST_TYPES=representative (the forced algorithm/protocol repeats, see
// CMakeLists.txt): an integer type and each floating format, elements of 1, 2, 4 and 8 bytes, since the
// protocols move elements by size and reduce them by format; every type runs in the matrix's default run.
// Unset or "all": all twelve.
bool matrixTypes(std::vector<ncclDataType_t>* types) {
  const char* v = std::getenv("TUTTI_TEST_TYPES");
  if (v && std::string(v) == "representative") {
    *types = {ncclInt8, ncclFloat8e4m3, ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64};
    return true;
  }
  types->assign(std::begin(kAllTypes), std::end(kAllTypes));
  return !v || std::string(v) == "all";
}

// Every case of one (collective, k, placement); variety in offsets and roots comes from the case index
// so all 8 offsets and both roots occur without multiplying the number of calls.
CaseList matrixCases(Coll coll, int nranks, bool inPlace, const std::vector<ncclDataType_t>& types) {
  CaseList cases;
  uint32_t index = 0;
  for (ncclDataType_t type : types) {
    for (OpKind op : kAllOps) {
      if (!isReduction(coll) && op != OpKind::kSum) continue;  // op is meaningless there
      for (size_t count : kCounts) {
        CollSpec s;
        s.coll = coll;
        s.type = type;
        s.op = op;
        s.count = count;
        s.inPlace = inPlace;
        s.root = (index % 2 == 0) ? 0 : nranks - 1;
        s.sendOffset = index % 8;
        s.recvOffset = (index * 3 + 5) % 8;
        s.seed = 1000 + index;
        cases.push_back(std::make_unique<CollCase>(s, nranks));
        ++index;
      }
    }
  }
  return cases;
}

class CollectiveMatrix : public testing::TestWithParam<MatrixParam> {};

TEST_P(CollectiveMatrix, AllTypesOpsCounts) {
  const MatrixParam p = GetParam();
  std::vector<ncclDataType_t> types;
  ASSERT_TRUE(matrixTypes(&types)) << "TUTTI_TEST_TYPES must be all or representative, not "
                                   << std::getenv("TUTTI_TEST_TYPES");
  CommSet comms(p.nranks, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  CaseList cases = matrixCases(p.coll, p.nranks, p.inPlace, types);
  Report report;
  runCases(comms, Drive::kThreads, cases, report);
  reportFailures(report);
}

std::vector<MatrixParam> matrixParams() {
  std::vector<MatrixParam> params;
  for (Coll c : kAllColls) {
    for (int k : {1, 2, 3, 4, 5, 8}) {
      params.push_back({c, k, false});
      if (supportsInPlace(c) && c != Coll::kBcast) params.push_back({c, k, true});
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Threads, CollectiveMatrix, testing::ValuesIn(matrixParams()), paramName);

// 1<<20 + 3 elements: several slots, loops and channels' worth of data with a ragged tail.
struct LargeParam {
  Coll coll;
  int nranks;
};

void PrintTo(const LargeParam& p, std::ostream* os) { *os << collName(p.coll) << "_k" << p.nranks; }

class LargeCounts : public testing::TestWithParam<LargeParam> {};

TEST_P(LargeCounts, RepresentativeTypes) {
  const LargeParam p = GetParam();
  CommSet comms(p.nranks, InitMode::kInitRank);
  ASSERT_TRUE(comms.ok()) << comms.error();
  constexpr size_t kLarge = (size_t{1} << 20) + 3;
  CaseList cases;
  struct Pick {
    ncclDataType_t type;
    OpKind op;
    bool inPlace;
  };
  // A 4-byte float sum out of place, a 2-byte bf16 max in place, a 1-byte int8 premulsum with an offset.
  const Pick picks[] = {{ncclFloat32, OpKind::kSum, false},
                        {ncclBfloat16, OpKind::kMax, true},
                        {ncclInt8, OpKind::kPreMulHost, false}};
  uint32_t index = 0;
  for (const Pick& pick : picks) {
    CollSpec s;
    s.coll = p.coll;
    s.type = pick.type;
    s.op = pick.op;
    s.count = kLarge;
    s.inPlace = pick.inPlace;
    s.root = index % 2 ? 0 : p.nranks - 1;
    s.sendOffset = index * 3 % 8;
    s.recvOffset = index * 5 % 8;
    s.seed = 77 + index++;
    cases.push_back(std::make_unique<CollCase>(s, p.nranks));
  }
  Report report;
  runCases(comms, Drive::kThreads, cases, report, 240);
  reportFailures(report);
}

std::vector<LargeParam> largeParams() {
  std::vector<LargeParam> params;
  for (Coll c : kAllColls) {
    for (int k : {2, 3, 8}) params.push_back({c, k});
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Threads, LargeCounts, testing::ValuesIn(largeParams()),
                         [](const testing::TestParamInfo<LargeParam>& info) {
                           return std::string(collName(info.param.coll)) + "_k" +
                                  std::to_string(info.param.nranks);
                         });

}  // namespace
}  // namespace tutti::itest
