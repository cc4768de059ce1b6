#include "soak_draw.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>

#include "coll_case.h"
#include "dtypes.h"
#include "p2p_case.h"
#include "reference.h"

namespace tutti::soak {

namespace {

using itest::Coll;
using itest::OpKind;

// splitmix64: a small, well-mixed generator whose whole state is one word, so an iteration's stream
// depends on (seed, iteration) only and can be replayed on its own.
class Rng {
 public:
  explicit Rng(uint64_t state) : s_(state) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return unit() < p; }

 private:
  uint64_t s_;
};

// The operations drawn, equally likely: the eight collectives and grouped send/recv.
constexpr Coll kSoakColls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
                               Coll::kReduce,    Coll::kAlltoAll,  Coll::kGather,        Coll::kScatter};
constexpr size_t kKinds = std::size(kSoakColls) + 1;  // + send/recv

// Reduction ops, weighted: the built-ins often, a pre-multiplied sum (host or device scalar) sometimes.
constexpr OpKind kOpTable[] = {OpKind::kSum,         OpKind::kSum, OpKind::kSum, OpKind::kProd,
                               OpKind::kProd,        OpKind::kMin, OpKind::kMin, OpKind::kMax,
                               OpKind::kMax,         OpKind::kAvg, OpKind::kAvg, OpKind::kPreMulHost,
                               OpKind::kPreMulDevice};

// 0 and 1 often (the edge cases), otherwise log-uniform in [1, maxCount], odd half of the time.
size_t drawCount(Rng& rng, size_t maxCount) {
  const uint64_t r = rng.below(100);
  if (r < 4 || maxCount == 0) return 0;
  if (r < 8) return 1;
  const double logMax = std::log(static_cast<double>(maxCount) + 1.0);
  size_t count = static_cast<size_t>(std::exp(rng.unit() * logMax));
  count = std::clamp<size_t>(count, 1, maxCount);
  if (rng.chance(0.5)) count |= 1;
  if (count > maxCount) count -= 2;  // only when maxCount is even and count was maxCount
  return count;
}

std::unique_ptr<itest::RankCase> drawCase(Rng& rng, const DrawLimits& limits, uint32_t dataSeedXor) {
  const int n = limits.nranks;
  const size_t drawn = rng.below(kKinds);
  const size_t pick = limits.only >= 0 ? static_cast<size_t>(limits.only) : drawn;
  if (pick == std::size(kSoakColls)) {
    itest::P2pSpec s;
    constexpr itest::P2pPattern kPatterns[] = {itest::P2pPattern::kRingShift, itest::P2pPattern::kAllToAll,
                                               itest::P2pPattern::kAllPairs, itest::P2pPattern::kSelf};
    s.pattern = kPatterns[rng.below(std::size(kPatterns))];
    s.shift = n > 1 ? 1 + static_cast<int>(rng.below(static_cast<uint64_t>(n - 1))) : 0;
    s.type = itest::kAllTypes[rng.below(std::size(itest::kAllTypes))];
    // One buffer per peer in the all-to-all patterns: keep their total within the limit too.
    const bool perPeer =
        s.pattern == itest::P2pPattern::kAllToAll || s.pattern == itest::P2pPattern::kAllPairs;
    s.count = drawCount(rng, limits.maxBytes / (itest::typeSize(s.type) * (perPeer ? n : 1)));
    s.seed = static_cast<uint32_t>(rng.next()) ^ dataSeedXor;
    return std::make_unique<itest::P2pCase>(s, n);
  }
  itest::CollSpec s;
  s.coll = kSoakColls[pick];
  // ncclBcast is Broadcast in place through its own entry point: draw it a quarter of the time.
  if (s.coll == Coll::kBroadcast && rng.chance(0.25)) s.coll = Coll::kBcast;
  s.type = itest::kAllTypes[rng.below(std::size(itest::kAllTypes))];
  s.op = itest::isReduction(s.coll) ? kOpTable[rng.below(std::size(kOpTable))] : OpKind::kSum;
  size_t perRankBuffers = 1;  // how many count-sized blocks the largest buffer holds
  switch (s.coll) {
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAlltoAll:
    case Coll::kGather:
    case Coll::kScatter:
      perRankBuffers = static_cast<size_t>(n);
      break;
    default:
      break;
  }
  s.count = drawCount(rng, limits.maxBytes / (itest::typeSize(s.type) * perRankBuffers));
  s.root = static_cast<int>(rng.below(static_cast<uint64_t>(n)));
  s.inPlace = rng.chance(0.5);
  s.sendOffset = rng.below(8);
  s.recvOffset = rng.below(8);
  s.nullUnusedOnNonRoot = itest::hasRoot(s.coll) && rng.chance(0.2);
  s.seed = static_cast<uint32_t>(rng.next()) ^ dataSeedXor;
  return std::make_unique<itest::CollCase>(s, n);
}

}  // namespace

const std::vector<std::string>& operationNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (Coll c : kSoakColls) v.push_back(itest::collName(c));
    v.push_back("SendRecv");
    return v;
  }();
  return names;
}

IterationDraw drawIteration(uint64_t seed, long iteration, const DrawLimits& limits, uint32_t dataSeedXor) {
  Rng mixer(seed);
  Rng rng(mixer.next() ^ (static_cast<uint64_t>(iteration) * 0xd1b54a32d192ed03ull));
  IterationDraw d;
  const int ops = rng.chance(0.125) ? 2 : 1;
  for (int i = 0; i < ops; ++i) {
    d.cases.push_back(drawCase(rng, limits, dataSeedXor));
    d.label += (i ? " + " : "") + d.cases.back()->label();
  }
  return d;
}

}  // namespace tutti::soak
