#include "comm/callcheck.h"

#include "comm/comm.h"
#include "device/common/dtypes.h"
#include "device/host/launch.h"
#include "plan/tuning.h"
#include "plugin/params.h"
#include "util/check.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <vector>

namespace tutti {
namespace {

// Bootstrap tags (user tag space; connections use 0x1xxxxx, failure notes 0x300000).
constexpr int kCollSigTag = 0x400001;      // child -> parent: header, then the signatures
constexpr int kCollSigBodyTag = 0x400002;
constexpr int kCollVerdictTag = 0x400003;  // parent -> child
constexpr int kP2pSigTag = 0x400004;       // peer <-> peer: header, then the entries
constexpr int kP2pSigBodyTag = 0x400005;
constexpr int kStuckTag = 0x400006;        // "I am stuck in opCount N", to every peer

constexpr uint32_t kMagic = 0x7443616cu;  // "tCal"
constexpr int32_t kNoOp = -1;             // the function takes no reduction op
constexpr int32_t kUserOp = -2;           // a user-defined op (ncclRedOpCreatePreMulSum)

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What every rank must agree on about one collective of a launch. Plain data: it travels as bytes.
struct CallSig {
  uint64_t opCount = 0;
  uint64_t count = 0;
  int32_t func = 0, datatype = 0;
  int32_t op = kNoOp;   // built-in ncclRedOp_t, kUserOp, or kNoOp
  int32_t root = -1;    // Broadcast / Reduce only
  int32_t algorithm = 0, protocol = 0, nChannels = 0, pad = 0;
  bool sameCall(const CallSig& o) const {
    return opCount == o.opCount && count == o.count && func == o.func && datatype == o.datatype && op == o.op &&
           root == o.root;
  }
  bool samePlan(const CallSig& o) const {
    return algorithm == o.algorithm && protocol == o.protocol && nChannels == o.nChannels;
  }
};

constexpr int32_t kMaxSigs = 1 << 20;  // more collectives in one group than this is a corrupt header

// The first difference found between two ranks' collective lists (a: the lower rank), or a rank that could
// not take part in the check (kBroken: rankA failed; its own error says why).
enum : int32_t { kAgree = 0, kMismatch = 1, kBroken = 2 };
struct Verdict {
  int32_t found = kAgree;
  int32_t index = 0;        // position in the launch's collectives
  int32_t rankA = -1, rankB = -1;
  int32_t nA = 0, nB = 0;   // collectives each rank launched
  CallSig a, b;             // valid when index < nA / nB
};

struct CollHeader {
  uint32_t magic = kMagic;
  int32_t rank = -1;
  int32_t nSigs = 0;
  int32_t pad = 0;
  Verdict verdict;  // merged over the sender's subtree
};

bool isReduction(int func) {
  return func == ncclFuncAllReduce || func == ncclFuncReduce || func == ncclFuncReduceScatter;
}
bool isRooted(int func) { return func == ncclFuncBroadcast || func == ncclFuncReduce; }

const char* opText(int32_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    case kUserOp: return "user op";
    default: return "?";
  }
}

// "float32" for ncclFloat32: the names users write in messages.
std::string typeText(int32_t datatype) {
  std::string name = dataTypeName(static_cast<ncclDataType_t>(datatype));
  if (name.rfind("nccl", 0) == 0) name.erase(0, 4);
  if (!name.empty()) name[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(name[0])));
  return name;
}

CallSig sigOf(const CollPlan& p) {
  CallSig s;
  s.opCount = p.opCount;
  s.count = p.task.count;
  s.func = p.task.func;
  s.datatype = p.task.datatype;
  if (isReduction(p.task.func)) s.op = p.task.op < ncclNumOps ? static_cast<int32_t>(p.task.op) : kUserOp;
  if (isRooted(p.task.func)) s.root = p.task.root;
  s.algorithm = p.algorithm;
  s.protocol = p.protocol;
  s.nChannels = static_cast<int32_t>(p.work.size());
  return s;
}

std::string describe(const CallSig& s, bool withPlan) {
  std::string d = fmt::format("{} count {} {}", funcName(static_cast<ncclFunc_t>(s.func)), s.count,
                              typeText(s.datatype));
  if (s.op != kNoOp) d += fmt::format(" {}", opText(s.op));
  if (s.root >= 0) d += fmt::format(" root {}", s.root);
  if (withPlan)
    d += fmt::format(" (algorithm {} protocol {} channels {})", tunedAlgoName(s.algorithm),
                     tunedProtoName(s.protocol), s.nChannels);
  return d;
}

// Compares the collective lists of two ranks; records the first difference in `out` when it precedes
// what `out` already holds (every rank then agrees on which difference to report).
void compareLists(int rankX, const std::vector<CallSig>& x, int rankY, const std::vector<CallSig>& y, Verdict* out) {
  const bool xFirst = rankX < rankY;
  const std::vector<CallSig>& a = xFirst ? x : y;
  const std::vector<CallSig>& b = xFirst ? y : x;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (i < a.size() && i < b.size() && a[i].sameCall(b[i]) && a[i].samePlan(b[i])) continue;
    Verdict v;
    v.found = kMismatch;
    v.index = static_cast<int32_t>(i);
    v.rankA = xFirst ? rankX : rankY;
    v.rankB = xFirst ? rankY : rankX;
    v.nA = static_cast<int32_t>(a.size());
    v.nB = static_cast<int32_t>(b.size());
    if (i < a.size()) v.a = a[i];
    if (i < b.size()) v.b = b[i];
    if (!out->found || v.index < out->index || (v.index == out->index && v.rankA < out->rankA)) *out = v;
    return;
  }
}

// A mismatch says more than a broken rank, so it wins; among mismatches the earliest (see compareLists).
void mergeVerdict(const Verdict& v, Verdict* out) {
  if (v.found == kAgree || (out->found == kMismatch && v.found == kBroken)) return;
  if (out->found != v.found || v.index < out->index || (v.index == out->index && v.rankA < out->rankA)) *out = v;
}

std::string verdictText(const ncclComm* comm, const std::vector<CallSig>& mine, const Verdict& v) {
  const bool hasA = v.index < v.nA, hasB = v.index < v.nB;
  // The plan is shown only when the calls agree and the chosen algorithm, protocol or channels differ.
  const bool planOnly = hasA && hasB && v.a.sameCall(v.b);
  auto side = [&](int rank, bool has, const CallSig& s, int n) {
    return has ? fmt::format("rank {} called {}", rank, describe(s, planOnly))
               : fmt::format("rank {} called no collective there (its group holds {})", rank, n);
  };
  const size_t i = static_cast<size_t>(v.index);
  const std::string own = i < mine.size() ? funcName(static_cast<ncclFunc_t>(mine[i].func)) : "group";
  const uint64_t opCount = hasA ? v.a.opCount : v.b.opCount;
  return fmt::format("rank {}: {} opCount {}: mismatched collective calls: {}, {}{}", comm->rank, own, opCount,
                     side(v.rankA, hasA, v.a, v.nA), side(v.rankB, hasB, v.b, v.nB),
                     planOnly ? " (different NCCL_ALGO / NCCL_PROTO / channel settings on the two ranks?)"
                              : " (every rank must make the same collective calls in the same order)");
}

// A bootstrap receive that honours TUTTI_TIMEOUT, the abort flag and TUTTI_WAIT_WARN.
ncclResult_t recvWatched(ncclComm* comm, int peer, int tag, void* data, size_t bytes, uint64_t opCount) {
  const int64_t start = nowNs();
  bool warned = false;
  while (true) {
    const ncclResult_t r = comm->bootstrap->recvWithin(peer, tag, data, bytes, 100);
    if (r == ncclSuccess) return r;
    if (r == ncclInvalidUsage)
      TUTTI_FAIL(ncclInvalidUsage, "rank {}: call check (TUTTI_CHECK_CALLS): rank {} sent a message of another "
                 "size (different Tutti versions on the two ranks?)", comm->rank, peer);
    if (r != ncclTimeout || comm->abortFlag.load(std::memory_order_acquire))
      TUTTI_FAIL(ncclRemoteError, "rank {}: call check (TUTTI_CHECK_CALLS) of opCount {}: rank {} failed or the "
                 "communicator was aborted", comm->rank, opCount, peer);
    const int64_t waited = nowNs() - start;
    if (comm->timeoutNs > 0 && waited > comm->timeoutNs) {
      const std::string arrived = callCheckWhoArrived(comm, opCount);
      TUTTI_FAIL(ncclTimeout, "rank {}: call check (TUTTI_CHECK_CALLS) of opCount {} timed out after {} s waiting "
                 "for rank {}{}", comm->rank, opCount, comm->timeoutNs / 1000000000, peer,
                 arrived.empty() ? fmt::format(": did rank {} make the same calls?", peer) : arrived);
    }
    if (!warned && comm->calls.waitWarnNs > 0 && waited > comm->calls.waitWarnNs) {
      warned = true;
      TUTTI_WARN("rank {}: call check (TUTTI_CHECK_CALLS) of opCount {} has waited {} s for rank {}", comm->rank,
                 opCount, waited / 1000000000, peer);
    }
  }
}

// Marks the communicator failed (`culprit`: the rank to blame) and stops its operations, as a failed
// operation does: peers connected to it fail promptly too.
void poison(ncclComm* comm, int culprit, ncclResult_t res) {
  int none = -1;
  comm->failure.compare_exchange_strong(none, host::failureRecord(culprit, false));
  ncclResult_t ok = ncclSuccess;
  comm->asyncError.compare_exchange_strong(ok, res);
  LastErrorKeeper keep;
  commSignalAbort(comm);
}

ncclResult_t failMismatch(ncclComm* comm, int culprit, const std::string& text) {
  poison(comm, culprit, ncclInvalidUsage);
  TUTTI_FAIL(ncclInvalidUsage, "{}", text);
}

// The collectives of one launch, checked along the edges of the binary tree r -> (r - 1) / 2.
ncclResult_t checkTree(ncclComm* comm, const std::vector<CallSig>& mine, bool* headerSent) {
  const uint64_t opCount = mine.front().opCount;
  const int me = comm->rank, n = comm->nRanks;
  Verdict verdict;
  std::vector<CallSig> theirs;
  for (int child = 2 * me + 1; child <= 2 * me + 2 && child < n; ++child) {
    CollHeader h;
    TUTTI_CHECK(recvWatched(comm, child, kCollSigTag, &h, sizeof h, opCount));
    if (h.magic != kMagic || h.rank != child || h.nSigs < 0 || h.nSigs > kMaxSigs)
      TUTTI_FAIL(ncclInternalError, "rank {}: call check: malformed signature header from rank {}", me, child);
    theirs.assign(static_cast<size_t>(h.nSigs), CallSig{});
    if (h.nSigs > 0)
      TUTTI_CHECK(recvWatched(comm, child, kCollSigBodyTag, theirs.data(), theirs.size() * sizeof(CallSig), opCount));
    mergeVerdict(h.verdict, &verdict);
    if (h.verdict.found != kBroken || h.verdict.rankA != child) compareLists(me, mine, child, theirs, &verdict);
  }
  if (me > 0) {
    const int parent = (me - 1) / 2;
    CollHeader h;
    h.rank = me;
    h.nSigs = static_cast<int32_t>(mine.size());
    h.verdict = verdict;
    TUTTI_CHECK(comm->bootstrap->send(parent, kCollSigTag, &h, sizeof h));
    TUTTI_CHECK(comm->bootstrap->send(parent, kCollSigBodyTag, mine.data(), mine.size() * sizeof(CallSig)));
    *headerSent = true;
    TUTTI_CHECK(recvWatched(comm, parent, kCollVerdictTag, &verdict, sizeof verdict, opCount));
  }
  for (int child = 2 * me + 1; child <= 2 * me + 2 && child < n; ++child)
    TUTTI_CHECK(comm->bootstrap->send(child, kCollVerdictTag, &verdict, sizeof verdict));
  if (verdict.found == kAgree) return ncclSuccess;
  if (verdict.found == kBroken) {
    poison(comm, verdict.rankA, ncclRemoteError);
    TUTTI_FAIL(ncclRemoteError, "rank {}: call check (TUTTI_CHECK_CALLS) of opCount {}: rank {} failed during the "
               "check (its own error says why)", me, opCount, verdict.rankA);
  }
  return failMismatch(comm, verdict.rankA == me ? verdict.rankB : verdict.rankA, verdictText(comm, mine, verdict));
}

// A rank that fails on the way still tells its tree neighbours (kBroken), so no rank waits for a verdict
// that never comes.
ncclResult_t checkCollectives(ncclComm* comm, const std::vector<CollPlan>& colls) {
  std::vector<CallSig> mine;
  mine.reserve(colls.size());
  for (const CollPlan& p : colls)
    if (!p.local) mine.push_back(sigOf(p));
  bool headerSent = false;
  const ncclResult_t res = checkTree(comm, mine, &headerSent);
  // Success, or a verdict every rank received (it poisoned the communicator already).
  if (res == ncclSuccess || comm->abortFlag.load()) return res;
  LastErrorKeeper keep;
  Verdict broken;
  broken.found = kBroken;
  broken.rankA = comm->rank;
  const int me = comm->rank;
  if (me > 0 && !headerSent) {
    CollHeader h;
    h.rank = me;
    h.verdict = broken;
    comm->bootstrap->send((me - 1) / 2, kCollSigTag, &h, sizeof h);
  }
  for (int child = 2 * me + 1; child <= 2 * me + 2 && child < comm->nRanks; ++child)
    comm->bootstrap->send(child, kCollVerdictTag, &broken, sizeof broken);
  poison(comm, me, res);
  return res;
}

// ---- point-to-point ---------------------------------------------------------------------------------

struct P2pSig {
  uint64_t count = 0;
  int32_t datatype = 0;
  int32_t isSend = 0;
};

struct P2pHeader {
  uint32_t magic = kMagic;
  int32_t rank = -1;
  int32_t nSends = 0, nRecvs = 0;  // to / from the receiver of this message, in issue order
  uint64_t p2pOpCount = 0;
};

struct PeerCalls {
  int peer = -1;
  std::vector<P2pSig> sends, recvs;
};

std::string p2pText(const P2pSig& s) {
  return fmt::format("count {} {}", s.count, typeText(s.datatype));
}

// Sends of `from` to `to` against the receives `to` posted from `from`; "" when they match.
std::string compareDirection(int from, const std::vector<P2pSig>& sends, int to, const std::vector<P2pSig>& recvs) {
  if (sends.size() != recvs.size())
    return fmt::format("rank {} posts {} send(s) to rank {}, rank {} posts {} receive(s) from rank {}", from,
                       sends.size(), to, to, recvs.size(), from);
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i].count == recvs[i].count && sends[i].datatype == recvs[i].datatype) continue;
    return fmt::format("rank {}'s send #{} to rank {} is {}, rank {}'s matching receive from rank {} is {}", from,
                       i + 1, to, p2pText(sends[i]), to, from, p2pText(recvs[i]));
  }
  return "";
}

ncclResult_t checkP2p(ncclComm* comm, const std::vector<Task>& p2p) {
  std::vector<PeerCalls> peers;
  for (const Task& t : p2p) {
    if (t.root == comm->rank) continue;  // self pairs are checked where they are copied (launchItems)
    auto it = std::find_if(peers.begin(), peers.end(), [&](const PeerCalls& p) { return p.peer == t.root; });
    if (it == peers.end()) it = peers.insert(peers.end(), PeerCalls{t.root, {}, {}});
    const bool send = t.func == ncclFuncSend;
    (send ? it->sends : it->recvs).push_back(P2pSig{t.count, static_cast<int32_t>(t.datatype), send ? 1 : 0});
  }
  const uint64_t opCount = comm->p2pOpCount;
  // Every message first (a send only waits while socket buffers are full), then every reply.
  for (const PeerCalls& p : peers) {
    P2pHeader h;
    h.rank = comm->rank;
    h.nSends = static_cast<int32_t>(p.sends.size());
    h.nRecvs = static_cast<int32_t>(p.recvs.size());
    h.p2pOpCount = opCount;
    std::vector<P2pSig> body = p.sends;
    body.insert(body.end(), p.recvs.begin(), p.recvs.end());
    TUTTI_CHECK(comm->bootstrap->send(p.peer, kP2pSigTag, &h, sizeof h));
    TUTTI_CHECK(comm->bootstrap->send(p.peer, kP2pSigBodyTag, body.data(), body.size() * sizeof(P2pSig)));
  }
  for (const PeerCalls& p : peers) {
    P2pHeader h;
    TUTTI_CHECK(recvWatched(comm, p.peer, kP2pSigTag, &h, sizeof h, opCount));
    if (h.magic != kMagic || h.rank != p.peer || h.nSends < 0 || h.nRecvs < 0 || h.nSends + h.nRecvs == 0)
      TUTTI_FAIL(ncclInternalError, "rank {}: call check: malformed send/receive header from rank {}", comm->rank,
                 p.peer);
    std::vector<P2pSig> body(static_cast<size_t>(h.nSends + h.nRecvs));
    TUTTI_CHECK(recvWatched(comm, p.peer, kP2pSigBodyTag, body.data(), body.size() * sizeof(P2pSig), opCount));
    const std::vector<P2pSig> peerSends(body.begin(), body.begin() + h.nSends);
    const std::vector<P2pSig> peerRecvs(body.begin() + h.nSends, body.end());
    // Both ends compute the same text: the lower rank's direction first.
    const bool low = comm->rank < p.peer;
    std::string why = low ? compareDirection(comm->rank, p.sends, p.peer, peerRecvs)
                          : compareDirection(p.peer, peerSends, comm->rank, p.recvs);
    if (why.empty())
      why = low ? compareDirection(p.peer, peerSends, comm->rank, p.recvs)
                : compareDirection(comm->rank, p.sends, p.peer, peerRecvs);
    if (!why.empty())
      return failMismatch(comm, p.peer, fmt::format("rank {}: Send/Recv with rank {} (p2p opCount {}): mismatched "
                                                    "calls: {}", comm->rank, p.peer, opCount, why));
  }
  return ncclSuccess;
}

ncclResult_t checkLaunch(host::CommLaunch& l) {
  ncclComm* comm = l.comm;
  logSetThreadRank(comm->rank);
  if (comm->nRanks > 1 && !l.colls.empty()) TUTTI_CHECK(checkCollectives(comm, l.colls));
  if (l.p2p.empty()) return ncclSuccess;
  const ncclResult_t res = checkP2p(comm, l.p2p);
  if (res != ncclSuccess && !comm->abortFlag.load()) poison(comm, comm->rank, res);  // a mismatch did already
  return res;
}

struct StuckNote {
  uint32_t magic = kMagic;
  int32_t rank = -1;
  uint64_t opCount = 0;
};

std::string rankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

void callCheckInit(ncclComm* comm) {
  comm->calls.checkCalls = paramInt("TUTTI_CHECK_CALLS") != 0;
  comm->calls.waitWarnNs = std::max<int64_t>(0, paramInt("TUTTI_WAIT_WARN")) * 1000000000ll;
}

ncclResult_t callCheckLaunches(host::CommLaunch* launches, size_t n) {
  std::vector<host::WorkItem> jobs;
  for (size_t i = 0; i < n; ++i) {
    if (!launches[i].comm->calls.checkCalls) continue;
    host::CommLaunch* l = &launches[i];
    jobs.push_back([l] { return checkLaunch(*l); });
  }
  if (jobs.size() == 1) return jobs[0]();
  return jobs.empty() ? ncclSuccess : host::runConcurrently(jobs);
}

std::string callCheckWhoArrived(void* c, uint64_t opCount) {
  auto* comm = static_cast<ncclComm*>(c);
  CommCallCheck& cc = comm->calls;
  std::lock_guard<std::mutex> lock(cc.stuckMutex);
  if (cc.stuckDone) return cc.stuckText;
  cc.stuckDone = true;
  if (!comm->bootstrap || comm->bootstrap->aborted()) return "";
  LastErrorKeeper keep;  // notes to dead peers fail: that is not the error being reported
  StuckNote note;
  note.rank = comm->rank;
  note.opCount = opCount;
  for (int r = 0; r < comm->nRanks; ++r)
    if (r != comm->rank) comm->bootstrap->send(r, kStuckTag, &note, sizeof note);
  // Ranks stuck in the same operation time out within about the same time (or fail at once when a
  // neighbour gives up and closes its connections): their notes arrive within the grace period.
  const int64_t graceNs = std::clamp<int64_t>(comm->timeoutNs / 2, 1000000000ll, 5000000000ll);
  const int64_t deadline = nowNs() + graceNs;
  std::vector<int> arrived{comm->rank}, missing;
  std::vector<std::string> behind;
  for (int r = 0; r < comm->nRanks; ++r) {
    if (r == comm->rank) continue;
    const int64_t leftMs = std::max<int64_t>(1, (deadline - nowNs()) / 1000000);
    StuckNote got;
    const bool heard = comm->bootstrap->recvWithin(r, kStuckTag, &got, sizeof got, leftMs) == ncclSuccess &&
                       got.magic == kMagic && got.rank == r;
    if (heard && got.opCount >= opCount) {
      arrived.push_back(r);
    } else {
      missing.push_back(r);
      if (heard) behind.push_back(fmt::format("rank {} is still in opCount {}", r, got.opCount));
    }
  }
  if (comm->bootstrap->aborted()) return "";  // ncclCommAbort cut the exchange short: it proves nothing
  std::sort(arrived.begin(), arrived.end());
  if (missing.empty()) {
    cc.stuckText = fmt::format("; every rank reached opCount {}", opCount);
  } else {
    std::string extra;
    for (const std::string& b : behind) extra += "; " + b;
    cc.stuckText = fmt::format("; {} did not arrive at opCount {} ({} did{})", rankList(missing), opCount,
                               rankList(arrived), extra);
  }
  return cc.stuckText;
}

}  // namespace tutti
