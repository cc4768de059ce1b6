#include "mp_cases.h"

#include "dtypes.h"
#include "p2p_case.h"

#include <utility>

namespace tutti::itest {

namespace {

constexpr size_t kSmallCounts[] = {0, 1, 7, 1023};
constexpr size_t kLarge = (size_t{1} << 20) + 3;  // several slots and loops, with a ragged tail
// Data movement does not interpret elements; one type per element size covers it.
constexpr ncclDataType_t kMovementTypes[] = {ncclInt8, ncclFloat16, ncclFloat32, ncclFloat64};

// (type, op) pairs of a reduction: every type with sum, every op with float and int32.
std::vector<std::pair<ncclDataType_t, OpKind>> reductionPicks() {
  std::vector<std::pair<ncclDataType_t, OpKind>> picks;
  for (ncclDataType_t t : kAllTypes) picks.push_back({t, OpKind::kSum});
  for (ncclDataType_t t : {ncclFloat32, ncclInt32}) {
    for (OpKind op : kAllOps) {
      if (op != OpKind::kSum) picks.push_back({t, op});
    }
  }
  return picks;
}

}  // namespace

std::vector<Coll> matrixColls() {
  std::vector<Coll> colls;
  for (Coll c : kAllColls) {
    if (c != Coll::kBcast) colls.push_back(c);
  }
  return colls;
}

CaseList collCases(Coll coll, int nranks) {
  CaseList cases;
  uint32_t index = 0;
  auto add = [&](ncclDataType_t type, OpKind op, size_t count, bool inPlace, int root) {
    CollSpec s;
    s.coll = coll;
    s.type = type;
    s.op = op;
    s.count = count;
    s.inPlace = inPlace;
    s.root = root;
    s.sendOffset = index % 8;
    s.recvOffset = (index * 3 + 5) % 8;
    s.seed = 500 + index++;
    cases.push_back(std::make_unique<CollCase>(s, nranks));
  };
  std::vector<std::pair<ncclDataType_t, OpKind>> picks;
  if (isReduction(coll)) {
    picks = reductionPicks();
  } else {
    for (ncclDataType_t t : kMovementTypes) picks.push_back({t, OpKind::kSum});
  }
  // Small counts: the root walks over every rank, one step per (out of place, in place) pair.
  int pair = 0;
  for (const auto& [type, op] : picks) {
    for (size_t count : kSmallCounts) {
      const int root = pair++ % nranks;
      add(type, op, count, false, root);
      if (supportsInPlace(coll)) add(type, op, count, true, root);
    }
  }
  // Large: alternately out of place and in place, the first four ranks as root.
  for (int i = 0; i < 4; ++i) {
    const bool inPlace = supportsInPlace(coll) && i % 2 == 1;
    add(i < 2 ? ncclFloat32 : ncclInt32, i < 2 ? OpKind::kSum : OpKind::kMax, kLarge, inPlace, i % nranks);
  }
  return cases;
}

CaseList sendRecvCases(int nranks) {
  CaseList cases;
  uint32_t seed = 900;
  auto add = [&](P2pPattern pattern, int shift, ncclDataType_t type, size_t count) {
    P2pSpec s;
    s.pattern = pattern;
    s.shift = shift;
    s.type = type;
    s.count = count;
    s.seed = seed++;
    cases.push_back(std::make_unique<P2pCase>(s, nranks));
  };
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, kLarge}) {
    add(P2pPattern::kRingShift, 1, ncclFloat32, count);
    add(P2pPattern::kRingShift, nranks - 1, ncclInt8, count);
    add(P2pPattern::kAllPairs, 0, ncclFloat32, count);
    add(P2pPattern::kAllToAll, 0, ncclInt8, count);
    add(P2pPattern::kSelf, 0, ncclFloat64, count);
  }
  return cases;
}

bool appendSuiteCases(const std::string& name, int nranks, CaseList& out) {
  CaseList cases;
  if (name == kSendRecvSuite) {
    cases = sendRecvCases(nranks);
  } else {
    bool found = false;
    for (Coll c : matrixColls()) {
      if (name != collName(c)) continue;
      cases = collCases(c, nranks);
      found = true;
      break;
    }
    if (!found) return false;
  }
  for (auto& c : cases) out.push_back(std::move(c));
  return true;
}

std::vector<std::string> suiteNames() {
  std::vector<std::string> names;
  for (Coll c : matrixColls()) names.push_back(collName(c));
  names.push_back(kSendRecvSuite);
  return names;
}

}  // namespace tutti::itest
