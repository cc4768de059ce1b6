#include "device/host/oneshot.h"

#include "comm/comm.h"
#include "comm/task.h"
#include "device/host/det_reduce_copy.h"
#include "device/host/reduce_copy.h"
#include "proxy/net_transport.h"
#include "proxy/proxy.h"
#include "util/check.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace tutti {

bool oneShotWanted(const ncclComm* comm, ncclFunc_t func, size_t bytes) {
  if (comm->backend != Backend::Host || !comm->corePaths || comm->nRanks < 2 || comm->nRanks > kOneShotMaxRanks ||
      bytes == 0 || comm->oneShotMaxBytes == 0)
    return false;
  const size_t slot = comm->buffSizes[TUTTI_PROTO_SIMPLE] / TUTTI_STEPS;
  // AlltoAll: each peer's block once, as the grouped sends would send it, all at once from one thread.
  if (func == ncclFuncAlltoAll)
    return bytes <= std::max(comm->oneShotMaxBytes, comm->oneShotAlltoAllMaxBytes) && bytes / comm->nRanks <= slot;
  // AllGather, ReduceScatter: each peer's block, the ring's bytes, up to comm->oneShotGatherMaxBytes if that is larger.
  const size_t max = func == ncclFuncAllGather || func == ncclFuncReduceScatter
                         ? std::max(comm->oneShotMaxBytes, comm->oneShotGatherMaxBytes)
                         : comm->oneShotMaxBytes;
  return bytes <= max && bytes <= slot;
}

LogAllReduce logAllReduce(const ncclComm* comm, size_t bytes, bool det) {
  const int n = comm->nRanks;
  if (comm->backend != Backend::Host || !comm->corePaths || n < 2 || n > kOneShotMaxRanks || bytes == 0)
    return LogAllReduce::kNone;
  const size_t slot = comm->buffSizes[TUTTI_PROTO_SIMPLE] / TUTTI_STEPS;
  // On 2 ranks the tree is the one-shot's exchange, so it starts at 3; doubling starts at doublingMinRanks (>= 2).
  const bool pow2 = (n & (n - 1)) == 0, doublingRanks = n >= comm->doublingMinRanks, treeRanks = n >= 3;
  const bool doublingBytes = bytes >= comm->doublingMinBytes;
  if (det) {
    // Recursive doubling over a power of two of ranks, whose tree is the fixed order's (partial results travel in
    // the accumulator: up to 4 times the bytes, fp8), or up to rank 0 in one hop and down the binomial tree (raw rows,
    // folded by rank 0 in the fixed order for any n).
    if (pow2 && doublingRanks && doublingBytes && bytes <= comm->detDoublingMaxBytes && 4 * bytes <= slot)
      return LogAllReduce::kDoubling;
    if (treeRanks && bytes >= comm->detScatterGatherMinBytes && bytes <= comm->detScatterGatherMaxBytes &&
        bytes % (8 * static_cast<size_t>(n)) == 0 &&
        (bytes / n <= slot || bytes <= comm->detScatterGatherRoundsMaxBytes))
      return LogAllReduce::kScatterGather;
    const bool treeBytes = bytes >= comm->detTreeAllReduceMinBytes && bytes <= comm->detTreeAllReduceMaxBytes;
    return treeRanks && treeBytes && bytes <= slot ? LogAllReduce::kTree : LogAllReduce::kNone;
  }
  const bool treeBytes = (bytes >= comm->treeAllReduceMinBytes && bytes <= comm->treeAllReduceMaxBytes) ||
                         bytes <= comm->oneHopTreeAllReduceMaxBytes;
  if (treeRanks && treeBytes && bytes <= slot) return LogAllReduce::kTree;
  if (!doublingRanks || !doublingBytes) return LogAllReduce::kNone;
  if (bytes <= comm->doublingMaxBytes && bytes <= slot) return LogAllReduce::kDoubling;
  // Past doublingMaxBytes: recursive halving then doubling (4 or 8 ranks), blocks of whole elements (bytes a multiple
  // of 8n: the count of any datatype divides by n).
  if (n >= 4 && pow2 && bytes % (8 * static_cast<size_t>(n)) == 0 && bytes <= comm->halvingDoublingMaxBytes &&
      bytes / 2 <= slot)
    return LogAllReduce::kHalvingDoubling;
  return LogAllReduce::kNone;
}

bool treeReduceScatterWanted(const ncclComm* comm, size_t bytes, bool det) {
  const int n = comm->nRanks;
  if (comm->backend != Backend::Host || !comm->corePaths || n < 3 || n > kOneShotMaxRanks || bytes == 0) return false;
  const size_t slot = comm->buffSizes[TUTTI_PROTO_SIMPLE] / TUTTI_STEPS;
  // The whole input goes up the tree; a deterministic call's raw to rank 0 in one hop (up to a quarter of a slot),
  // after the deterministic halving where that applies.
  if (!det) return bytes <= comm->treeReduceScatterMaxBytes && bytes <= slot;
  const bool halving = n >= 4 && (n & (n - 1)) == 0 && bytes >= comm->doublingMinBytes && bytes <= comm->detHalvingMaxBytes;
  return !halving && bytes >= comm->detTreeReduceScatterMinBytes && bytes <= comm->detTreeReduceScatterMaxBytes &&
         4 * bytes <= slot;
}

bool doublingWanted(const ncclComm* comm, ncclFunc_t func, size_t bytes, bool det) {
  // Small enough for the one-shot to come first (comm->oneShotFirstBytes), deterministic calls too: their one-shot
  // gathers the inputs whole and folds them in the fixed order, the same messages.
  if (bytes <= (func == ncclFuncAllReduce ? comm->oneShotFirstAllReduceBytes
                        : func == ncclFuncAllGather || func == ncclFuncReduceScatter ? comm->oneShotFirstBytes
                                                                                      : 0))
    return false;
  if (func == ncclFuncAllReduce) return logAllReduce(comm, bytes, det) != LogAllReduce::kNone;
  const int n = comm->nRanks;
  if (comm->backend != Backend::Host || !comm->corePaths || n < comm->doublingMinRanks || n > kOneShotMaxRanks ||
      bytes == 0)
    return false;
  const size_t slot = comm->buffSizes[TUTTI_PROTO_SIMPLE] / TUTTI_STEPS;
  // Broadcast (the buffer's bytes): one message in and at most log2 n out per rank, whatever the size.
  if (func == ncclFuncBroadcast) return bytes <= comm->binomialBcastMaxBytes && bytes <= slot;
  if (func == ncclFuncReduceScatter && treeReduceScatterWanted(comm, bytes, det)) return true;
  if (bytes < comm->doublingMinBytes) return false;
  // A deterministic ReduceScatter by recursive halving, its partial results in the accumulator.
  if (det) return func == ncclFuncReduceScatter && n >= 4 && (n & (n - 1)) == 0 &&
                  bytes <= comm->detHalvingMaxBytes && 2 * bytes <= slot;
  // AlltoAll (the input's bytes): at most half of the blocks in a message, any rank count.
  if (func == ncclFuncAlltoAll) return bytes <= comm->bruckMaxBytes && bytes / 2 <= slot;
  // AllGather (the output's bytes), ReduceScatter (the input's): half of them in the largest message.
  if (n < 4 || (n & (n - 1)) != 0 || bytes / 2 > slot) return false;
  if (func == ncclFuncAllGather) return bytes <= comm->gatherDoublingMaxBytes;
  return func == ncclFuncReduceScatter && bytes <= comm->halvingMaxBytes;
}

namespace host {
namespace {

constexpr int kMaxDoublingSteps = 3;  // log2 kOneShotMaxRanks

// The protocol of a one-shot message of `bytes` on connection c: LL lines for a small one between ranks of a node,
// which the receiver polls itself (one line to fetch, no tail or size to read first), else a Simple slot. Both ends
// decide alike: the size is the call's, the connection's kind and buffers are the same at both ends.
constexpr size_t kLLRowMaxBytes = 4096;  // the largest LL message a receiver keeps (OneShotRows)
int oneShotProto(const ncclComm* comm, const HostConn* c, size_t bytes) {
  const bool local = !c->netEnd && !(c->conn.flags & TUTTI_CONN_PROXIED);
  return local && bytes <= comm->oneShotLLMaxBytes && bytes <= kLLRowMaxBytes &&
                 bytes <= HostPrims::slotDataBytes(c->conn, TUTTI_PROTO_LL)
             ? TUTTI_PROTO_LL
             : TUTTI_PROTO_SIMPLE;
}

// Where a one-shot call keeps its LL messages: the rows read from the peers' lanes (released at once, so the next
// call's messages may land there) and the one it sends with its scalar applied. 36 KiB per thread, made on first use
// and kept (off the stack: a caller's thread may have a small one).
struct OneShotRows {
  alignas(64) std::array<char, kLLRowMaxBytes> scaled;
  alignas(64) std::array<char, kOneShotMaxRanks * kLLRowMaxBytes> rows;
};
[[gnu::tls_model("initial-exec")]] thread_local OneShotRows* tRows = nullptr;
thread_local std::unique_ptr<OneShotRows> tRowsOwner;
OneShotRows& oneShotRows() {
  if (!tRows) [[unlikely]] {
    tRowsOwner = std::make_unique<OneShotRows>();
    tRows = tRowsOwner.get();
  }
  return *tRows;
}

ResolvedRedOp byteCopy() {
  ResolvedRedOp copy{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copy);
  return copy;
}

// Channel 0's collective connections with peer p, both ways.
ncclResult_t partner(ncclComm* comm, int p, const char* what, HostConn** from, HostConn** to) {
  Connection* rc = commCollConnection(comm, p, false);
  Connection* sc = commCollConnection(comm, p, true);
  if (!rc || !sc) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection with rank {}", comm->rank, what, p);
  *from = &rc->host;
  *to = &sc->host;
  return ncclSuccess;
}

// Up to N HostPrims, built in place when needed: slots[i] is null until emplace(i, ...). A std::array of
// std::optional would do, but compilers zero all of its storage on entry (2.6 KB for 8 slots, a tenth of a
// 2-rank call's time); this leaves it as it is, and walks only the slots built (in the order they were).
template <size_t N>
class PrimsSlots {
 public:
  PrimsSlots() {}
  ~PrimsSlots() {
    for (size_t k = 0; k < nBuilt_; ++k)
      if (live_[built_[k]]) at(built_[k])->~HostPrims();
  }
  PrimsSlots(const PrimsSlots&) = delete;
  PrimsSlots& operator=(const PrimsSlots&) = delete;
  template <typename... Args>
  HostPrims& emplace(size_t i, Args&&... args) {
    const bool rebuilt = live_[i];
    if (rebuilt) at(i)->~HostPrims();
    live_[i] = false;
    HostPrims* p = new (&raw_[i]) HostPrims(std::forward<Args>(args)...);
    live_[i] = true;
    if (!rebuilt) built_[nBuilt_++] = static_cast<uint8_t>(i);
    return *p;
  }
  HostPrims* operator[](size_t i) { return live_[i] ? at(i) : nullptr; }
  static constexpr size_t size() { return N; }
  // The k-th slot built (k < built()), null if it was torn down.
  size_t built() const { return nBuilt_; }
  HostPrims* builtAt(size_t k) { return (*this)[built_[k]]; }

 private:
  static_assert(N <= 256, "slot indices are kept in bytes");
  HostPrims* at(size_t i) { return std::launder(reinterpret_cast<HostPrims*>(&raw_[i])); }
  struct alignas(HostPrims) Raw {
    unsigned char bytes[sizeof(HostPrims)];
  };
  Raw raw_[N];
  bool live_[N] = {};
  uint8_t built_[N];
  size_t nBuilt_ = 0;
};

// The call ends once every send that left from a user buffer has left.
template <size_t N>
ncclResult_t waitAllSent(PrimsSlots<N>& sends) {
  for (size_t k = 0; k < sends.built(); ++k)
    if (HostPrims* sp = sends.builtAt(k)) TUTTI_CHECK(sp->waitSent());
  return ncclSuccess;
}

// AllReduce by recursive doubling (oneshot.h). The ranks past the largest power of two p, r < 2(n - p) odd
// and even, pair up first: the even one gives its row to the odd one and gets the result back at the end. The p
// that remain (virtual ranks: the odd ones of the pairs, then the rest in order) exchange their partial results with
// the partner whose virtual rank differs in bit k, k = 0, 1, ..., and fold them lower half first. Every rank folds
// the same operands in the same order, so every rank gets the same bits: a balanced tree over rank order.
ncclResult_t runDoubling(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label) {
  const int n = comm->nRanks, r = comm->rank;
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  const int extra = n - pow2;                                        // pairs that fold first
  const int v = r < 2 * extra ? (r % 2 ? r / 2 : -1) : r - extra;    // -1: gives its row away
  auto realRank = [&](int vr) { return vr < extra ? 2 * vr + 1 : vr + extra; };
  // A deterministic call (n a power of two) keeps its partial results in the fixed order's accumulator and
  // narrows the root's once: the bits of hostDetReduceCopy.
  const bool det = s.det;
  const size_t bytes = s.count * (det ? hostDetAccSize(s.op.datatype) : s.esize);
  const char* what = funcName(s.func);
  const ResolvedRedOp copy = byteCopy();
  auto conn = [&](int p, bool isSend) -> HostConn* {
    HostConn* c = nullptr;
    if (Connection* cn = commCollConnection(comm, p, isSend)) c = &cn->host;
    return c;
  };
  // The peers this rank hears from, in order; every receive is announced at once, so a network end posts them all
  // before the first wait.
  std::array<int, 2 + 3> from{};
  int nFrom = 0;
  if (v < 0) from[nFrom++] = r + 1;
  else {
    if (r < 2 * extra) from[nFrom++] = r - 1;
    for (int mask = 1; mask < pow2; mask <<= 1) from[nFrom++] = realRank(v ^ mask);
  }
  for (int i = 0; i < nFrom; ++i) {
    HostConn* c = conn(from[i], false);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection from rank {}", r, what, from[i]);
    announceRecvSteps(c, 1);
  }
  // Partial results alternate between two scratch rows; the last fold writes the output.
  thread_local std::vector<char> scratch;  // grows to the largest call this thread has made, then stays
  if (scratch.size() < 2 * bytes) scratch.resize(2 * bytes);
  char* const spare[2] = {scratch.data(), scratch.data() + bytes};
  const bool scaled = s.op.kind == RedOpKind::PreMulSum;
  // this rank's partial result: its own row first, its scalar applied (a deterministic call's first exchange sends
  // the raw rows, each widened where it is folded: half the bytes of fp32's accumulator, no pass to widen them)
  const char* acc = s.input;
  bool raw = det;
  if (!det && scaled) {
    const void* src = s.input;
    void* dst = spare[0];
    hostReduceCopy(s.op, 1, &src, 1, &dst, s.count, /*preOpFirstSrc=*/true, /*postOp=*/false);
    acc = spare[0];
  }
  PrimsSlots<2 + 3> sends;  // kept until the end: a network send may still be leaving
  int nSends = 0;
  ProxyDriveScope scope;
  const size_t rawBytes = s.count * s.esize;
  auto sendTo = [&](int p, const char* data) -> ncclResult_t {
    HostConn* c = conn(p, true);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection to rank {}", r, what, p);
    HostPrims& sp = sends.emplace(nSends++, nullptr, c, data, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    TUTTI_CHECK(sp.send(0, raw ? rawBytes : bytes));  // into the slot: `data` may change from here on
    if (c->proxyTask) scope.add(c->proxyTask);
    return ncclSuccess;
  };
  // Receives p's row and folds it with acc, the lower virtual rank's operand first, into the output when `last`
  // and into the scratch row acc is not in otherwise. Only a first operand may share the destination.
  auto foldFrom = [&](int p, bool lowerFirst, bool last) -> ncclResult_t {
    HostPrims prims(conn(p, false), nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    const char* row = nullptr;
    TUTTI_CHECK(prims.recvPeek(raw ? rawBytes : bytes, &row));
    const void* srcs[2] = {lowerFirst ? row : acc, lowerFirst ? acc : row};
    char* dst = acc == spare[0] ? spare[1] : spare[0];
    if (det) {
      if (raw) hostDetLeafPair(s.op, srcs[0], srcs[1], dst, s.count);
      else hostDetCombine(s.op, srcs[0], srcs[1], dst, s.count);
      raw = false;
      prims.recvRelease();
      if (last) hostDetFinish(s.op, n, dst, s.output, s.count);
      acc = last ? s.output : dst;
      return ncclSuccess;
    }
    if (last && (s.output == srcs[0] || s.output != acc)) dst = s.output;
    void* dsts[1] = {dst};
    hostReduceCopy(s.op, 2, srcs, 1, dsts, s.count, /*preOpFirstSrc=*/false, /*postOp=*/last);
    prims.recvRelease();
    if (last && dst != s.output) std::memcpy(s.output, dst, bytes);
    acc = last ? s.output : dst;
    return ncclSuccess;
  };
  if (v < 0) {  // an even rank of a pair: its row to r + 1, the result back from it
    TUTTI_CHECK(sendTo(r + 1, acc));
    HostPrims prims(conn(r + 1, false), nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    const char* row = nullptr;
    TUTTI_CHECK(prims.recvPeek(s.count * s.esize, &row));
    std::memcpy(s.output, row, s.count * s.esize);
    prims.recvRelease();
    return ncclSuccess;
  }
  if (r < 2 * extra) TUTTI_CHECK(foldFrom(r - 1, /*lowerFirst=*/true, /*last=*/pow2 == 1));
  for (int mask = 1; mask < pow2; mask <<= 1) {
    const int q = v ^ mask, p = realRank(q);
    TUTTI_CHECK(sendTo(p, acc));
    TUTTI_CHECK(foldFrom(p, /*lowerFirst=*/q < v, /*last=*/mask * 2 == pow2));
  }
  if (r < 2 * extra) {  // the result, in the output's datatype (never a deterministic call: n is a power of two)
    HostConn* c = conn(r - 1, true);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection to rank {}", r, what, r - 1);
    HostPrims& sp = sends.emplace(nSends++, nullptr, c, s.output, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    TUTTI_CHECK(sp.send(0, s.count * s.esize));
    if (c->proxyTask) scope.add(c->proxyTask);
  }
  return ncclSuccess;
}

// The binomial tree of runTreeAllReduce and runTreeReduceScatter: rank r's parent is r less its lowest set bit, its children r +
// m for each power of two m below that bit (any m for rank 0) with r + m < n; the ranks r to r + low - 1 that exist
// are r's subtree.
struct BinomialNode {
  int low = 0;  // r's lowest set bit (n for rank 0): its subtree spans [r, min(r + low, n))
  int nChildren = 0;
  std::array<HostConn*, kMaxDoublingSteps> childFrom{}, childTo{};
  HostConn *parentFrom = nullptr, *parentTo = nullptr;
};

ncclResult_t binomialNode(ncclComm* comm, const char* what, BinomialNode* t) {
  const int n = comm->nRanks, r = comm->rank;
  t->low = r == 0 ? n : r & -r;
  for (int m = 1; m < t->low && r + m < n; m <<= 1, ++t->nChildren) {
    TUTTI_CHECK(partner(comm, r + m, what, &t->childFrom[t->nChildren], &t->childTo[t->nChildren]));
  }
  if (r != 0) TUTTI_CHECK(partner(comm, r - t->low, what, &t->parentFrom, &t->parentTo));
  return ncclSuccess;
}

// The reduction up the tree of `count` elements of s.input (not deterministic: those go up in one hop,
// detReduceToRoot): this rank's row (its PreMulSum scalar applied), then each child's partial result folded after it,
// the smallest subtree first, alternating between the two spare rows. Rank 0's last fold writes `rootOut` with the
// op's last step (Avg's division); *out is the partial result and *outBytes its size.
ncclResult_t foldUpTree(const OneShot& s, const BinomialNode& t, size_t count, char* const spare[2], char* rootOut,
                        const WaitContext& wait, const OpLabel& label, const char** out, size_t* outBytes) {
  const bool root = t.parentFrom == nullptr;
  const size_t bytes = count * s.esize;
  const ResolvedRedOp copy = byteCopy();
  const char* acc = s.input;
  if (s.op.kind == RedOpKind::PreMulSum) {
    const void* src = s.input;
    void* dst = spare[0];
    hostReduceCopy(s.op, 1, &src, 1, &dst, count, /*preOpFirstSrc=*/true, /*postOp=*/false);
    acc = spare[0];
  }
  for (int i = 0; i < t.nChildren; ++i) {
    HostPrims prims(t.childFrom[i], nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    const char* row = nullptr;
    TUTTI_CHECK(prims.recvPeek(bytes, &row));
    const bool last = root && i == t.nChildren - 1;
    // Only the first operand may share the destination: rank 0's last fold may write an output that is its input.
    char* dst = last ? rootOut : acc == spare[0] ? spare[1] : spare[0];
    const void* srcs[2] = {acc, row};
    void* dsts[1] = {dst};
    hostReduceCopy(s.op, 2, srcs, 1, dsts, count, /*preOpFirstSrc=*/false, /*postOp=*/last);
    prims.recvRelease();
    acc = dst;
  }
  *out = acc;
  *outBytes = bytes;
  return ncclSuccess;
}

// The tree's way up in one hop (runTreeAllReduce): every rank but 0 sends rank 0 its raw row (into the slot: the
// output may change from here on); rank 0 folds the n rows into its output, in rank order by the fixed order for a
// deterministic call (else with the op's last step; no PreMulSum scalar: rows arrive unscaled).
ncclResult_t reduceToRoot(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label,
                          ProxyDriveScope* scope, PrimsSlots<1 + kMaxDoublingSteps>* sends) {
  const int n = comm->nRanks, r = comm->rank;
  const size_t bytes = s.count * s.esize;
  const char* what = funcName(s.func);
  const ResolvedRedOp copy = byteCopy();
  if (r != 0) {
    HostConn *from = nullptr, *to = nullptr;
    TUTTI_CHECK(partner(comm, 0, what, &from, &to));
    HostPrims& up = sends->emplace(0, nullptr, to, s.input, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    TUTTI_CHECK(up.send(0, bytes));
    if (to->proxyTask) scope->add(to->proxyTask);
    return ncclSuccess;
  }
  std::array<HostConn*, kOneShotMaxRanks> from{};
  for (int p = 1; p < n; ++p) {
    HostConn* to = nullptr;
    TUTTI_CHECK(partner(comm, p, what, &from[p], &to));
    announceRecvSteps(from[p], 1);  // every receive posted at once
  }
  PrimsSlots<kOneShotMaxRanks> recvs;
  std::array<const void*, kOneShotMaxRanks> rows{};
  rows[0] = s.input;
  for (int p = 1; p < n; ++p) {
    const char* row = nullptr;
    TUTTI_CHECK(recvs.emplace(p, from[p], nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE)
                    .recvPeek(bytes, &row));
    rows[p] = row;
  }
  void* out = s.output;
  if (s.det) hostDetReduceCopy(s.op, n, rows.data(), 1, &out, s.count, nullptr);
  else hostReduceCopy(s.op, n, rows.data(), 1, &out, s.count, /*preOpFirstSrc=*/false, /*postOp=*/true);
  for (int p = 1; p < n; ++p) recvs[p]->recvRelease();
  return ncclSuccess;
}

// AllReduce up the binomial tree (BinomialNode) to rank 0, then down it (logAllReduce: kTree). A rank folds each
// child's partial result after its own, the smallest subtree first, and sends the sum to its parent; rank
// 0 applies the op's last step and sends the result back down, the largest subtree first. n - 1 messages up and
// n - 1 down in all, where recursive doubling sends n log2 n, for 2 log2 n hops in a row instead of log2 n: fewer
// system calls and wake-ups where ranks outnumber cores or talk over sockets.
// A deterministic call goes up in one hop instead: every rank sends rank 0 its raw row, and rank 0 folds the n rows
// in the fixed order (hostDetReduceCopy) straight from its slots. Partial results up the tree would travel in the
// accumulator (twice fp32's bytes) and be folded log2 n times one after another; these messages are the input's
// size and leave at once (8 processes on 2 cores, the median of seven runs, tree -> one hop, us: shm 8 KiB 33.9 ->
// 23.9, 32 KiB 90 -> 56; sockets 16 KiB 158 -> 123, 64 KiB 479 -> 320). So does a call of up to
// comm->oneHopTreeAllReduceMaxBytes, but a PreMulSum, whose rows would reach rank 0 unscaled: rank 0 reduces the n rows
// at once (hostReduceCopy), where the tree's log2 n folds wake one rank after another.
ncclResult_t runTreeAllReduce(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label) {
  const int r = comm->rank;
  const size_t outBytes = s.count * s.esize;
  const bool oneHop = s.det || (outBytes <= comm->oneHopTreeAllReduceMaxBytes && s.op.kind != RedOpKind::PreMulSum);
  const char* what = funcName(s.func);
  const ResolvedRedOp copy = byteCopy();
  BinomialNode t;
  TUTTI_CHECK(binomialNode(comm, what, &t));
  char* landing = nullptr;
  // The result may land in the output: this rank's partial result left (copied into its slot) before the parent could
  // send it.
  if (t.parentFrom && t.parentFrom->netEnd && userBufferStep(t.parentFrom, TUTTI_PROTO_SIMPLE, outBytes)) {
    const NetUserStep step{t.parentFrom->step, s.output, outBytes};
    netRecvInto(t.parentFrom->netEnd, &step, 1);
    landing = s.output;
  }
  if (!oneHop)
    for (int i = 0; i < t.nChildren; ++i) announceRecvSteps(t.childFrom[i], 1);  // every receive posted at once
  if (t.parentFrom) announceRecvSteps(t.parentFrom, 1);
  PrimsSlots<1 + kMaxDoublingSteps> sends;
  ProxyDriveScope scope;
  if (oneHop) {
    TUTTI_CHECK(reduceToRoot(comm, s, wait, label, &scope, &sends));
  } else {
    thread_local std::vector<char> scratch;  // grows to the largest call this thread has made, then stays
    if (scratch.size() < 2 * outBytes) scratch.resize(2 * outBytes);
    char* const spare[2] = {scratch.data(), scratch.data() + outBytes};
    const char* acc = nullptr;
    size_t upBytes = 0;
    TUTTI_CHECK(foldUpTree(s, t, s.count, spare, s.output, wait, label, &acc, &upBytes));
    if (r != 0) {
      HostPrims& up = sends.emplace(0, nullptr, t.parentTo, acc, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
      TUTTI_CHECK(up.send(0, upBytes));  // into the slot: the scratch and the output may change from here on
      if (t.parentTo->proxyTask) scope.add(t.parentTo->proxyTask);
    }
  }
  if (r != 0) {
    HostPrims prims(t.parentFrom, nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    const char* got = nullptr;
    TUTTI_CHECK(prims.recvPeek(outBytes, &got, landing));
    if (got != s.output) std::memcpy(s.output, got, outBytes);
    prims.recvRelease();
  }
  for (int i = t.nChildren - 1; i >= 0; --i) {  // the largest subtree first
    HostPrims& sp = sends.emplace(1 + i, nullptr, t.childTo[i], s.output, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    sp.useUserBuffers(false, true);  // nothing writes the output again in this call
    TUTTI_CHECK(sp.send(0, outBytes));
    if (t.childTo[i]->proxyTask) scope.add(t.childTo[i]->proxyTask);
  }
  return waitAllSent(sends);
}

// ReduceScatter up the binomial tree and back down: the whole input is reduced up the tree as runTreeAllReduce
// reduces it (the fixed order for a deterministic call); rank 0 finishes every block, and each rank sends a child the
// blocks of the child's subtree (contiguous), keeping its own. 2(n - 1) messages in all where recursive halving sends
// n log2 n, for n - 1 times the bytes up the tree: a path for small blocks.
ncclResult_t runTreeReduceScatter(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label) {
  const int n = comm->nRanks, r = comm->rank;
  const bool det = s.det;
  const size_t all = static_cast<size_t>(n) * s.count;  // elements of the input
  const size_t blockBytes = s.count * s.esize;
  const size_t accBytes = all * (det ? hostDetAccSize(s.op.datatype) : s.esize);
  const ResolvedRedOp copy = byteCopy();
  BinomialNode t;
  TUTTI_CHECK(binomialNode(comm, funcName(s.func), &t));
  auto span = [&](int first, int m) { return static_cast<size_t>(std::min(first + m, n) - first) * blockBytes; };
  if (!det)
    for (int i = 0; i < t.nChildren; ++i) announceRecvSteps(t.childFrom[i], 1);  // every receive posted at once
  if (t.parentFrom) announceRecvSteps(t.parentFrom, 1);
  // A deterministic call goes up in one hop, as runTreeAllReduce's: no rows of partial results.
  const size_t spareBytes = det ? 0 : accBytes;
  thread_local std::vector<char> scratch;  // grows to the largest call this thread has made, then stays
  const size_t resultBytes = r == 0 ? all * s.esize : 0;
  if (scratch.size() < 2 * spareBytes + resultBytes) scratch.resize(2 * spareBytes + resultBytes);
  char* const spare[2] = {scratch.data(), scratch.data() + spareBytes};
  char* const result = scratch.data() + 2 * spareBytes;  // rank 0: every block, finished
  PrimsSlots<1 + kMaxDoublingSteps> sends;
  ProxyDriveScope scope;
  if (det) {
    OneShot whole = s;
    whole.count = all;
    whole.output = result;
    TUTTI_CHECK(reduceToRoot(comm, whole, wait, label, &scope, &sends));
  } else {
    const char* acc = nullptr;
    size_t upBytes = 0;
    TUTTI_CHECK(foldUpTree(s, t, all, spare, result, wait, label, &acc, &upBytes));
    if (r != 0) {
      HostPrims& up = sends.emplace(0, nullptr, t.parentTo, acc, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
      TUTTI_CHECK(up.send(0, upBytes));  // into the slot
      if (t.parentTo->proxyTask) scope.add(t.parentTo->proxyTask);
    }
  }
  // The finished blocks of this rank's subtree, from block r on: rank 0's result, the others' parent's message.
  const char* mine = result;
  HostPrims down(t.parentFrom, nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
  if (r != 0) TUTTI_CHECK(down.recvPeek(span(r, t.low), &mine));
  std::memcpy(s.output, mine, blockBytes);  // block r (the output may be the input's block r: read already)
  for (int i = t.nChildren - 1; i >= 0; --i) {  // the largest subtree first
    const int m = 1 << i;
    HostPrims& sp = sends.emplace(1 + i, nullptr, t.childTo[i], mine, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    TUTTI_CHECK(sp.send(static_cast<size_t>(m) * blockBytes, span(r + m, m)));  // into the slot
    if (t.childTo[i]->proxyTask) scope.add(t.childTo[i]->proxyTask);
  }
  if (r != 0) down.recvRelease();
  return waitAllSent(sends);
}

// AllGather by recursive doubling, n a power of two: at step k this rank and rank r ^ 2^k swap the 2^k blocks each
// holds, which lie side by side in the output. Every message leaves from the output and may land there (zero copy on
// network ends that take user buffers): no step writes what an earlier one sends.
ncclResult_t runGatherDoubling(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label) {
  const int n = comm->nRanks, r = comm->rank;
  const size_t block = s.count * s.esize;
  const ResolvedRedOp copy = byteCopy();
  std::array<HostConn*, kMaxDoublingSteps> from{}, to{};
  std::array<char*, kMaxDoublingSteps> landing{};
  int nSteps = 0;
  for (int mask = 1; mask < n; mask <<= 1, ++nSteps) {
    const int p = r ^ mask;
    TUTTI_CHECK(partner(comm, p, funcName(s.func), &from[nSteps], &to[nSteps]));
    HostConn* rc = from[nSteps];
    char* theirs = s.output + static_cast<size_t>(p & ~(mask - 1)) * block;
    const size_t bytes = static_cast<size_t>(mask) * block;
    if (rc->netEnd && userBufferStep(rc, TUTTI_PROTO_SIMPLE, bytes)) {
      const NetUserStep step{rc->step, theirs, bytes};
      netRecvInto(rc->netEnd, &step, 1);
      landing[nSteps] = theirs;
    }
    announceRecvSteps(rc, 1);  // every receive posted before the first wait
  }
  char* own = s.output + static_cast<size_t>(r) * block;
  if (s.input != own) std::memcpy(own, s.input, block);
  PrimsSlots<kMaxDoublingSteps> sends;
  ProxyDriveScope scope;
  for (int i = 0, mask = 1; i < nSteps; ++i, mask <<= 1) {
    const int p = r ^ mask;
    const size_t bytes = static_cast<size_t>(mask) * block;
    const char* mine = s.output + static_cast<size_t>(r & ~(mask - 1)) * block;
    char* theirs = s.output + static_cast<size_t>(p & ~(mask - 1)) * block;
    sends.emplace(i, nullptr, to[i], mine, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    sends[i]->useUserBuffers(false, true);
    TUTTI_CHECK(sends[i]->send(0, bytes));
    if (to[i]->proxyTask) scope.add(to[i]->proxyTask);
    HostPrims prims(from[i], nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    const char* data = nullptr;
    TUTTI_CHECK(prims.recvPeek(bytes, &data, landing[i]));
    if (data != theirs) std::memcpy(theirs, data, bytes);
    prims.recvRelease();
  }
  return waitAllSent(sends);
}

// ReduceScatter by recursive halving, n a power of two: at step k (2^k = n/2, n/4, ..., 1) this rank and rank r ^ 2^k
// split the blocks both still reduce; each sends the partner its partial sums of the partner's half and folds the
// partner's into its own half, the lower rank's operand first. n - 1 blocks sent in all, as on the ring, in log2 n
// messages.
ncclResult_t runHalving(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label) {
  const int n = comm->nRanks, r = comm->rank;
  const size_t block = s.count * s.esize;
  const ResolvedRedOp copy = byteCopy();
  std::array<HostConn*, kMaxDoublingSteps> from{}, to{};
  int nSteps = 0;
  for (int mask = n / 2; mask >= 1; mask >>= 1, ++nSteps) {
    TUTTI_CHECK(partner(comm, r ^ mask, funcName(s.func), &from[nSteps], &to[nSteps]));
    announceRecvSteps(from[nSteps], 1);
  }
  // Partial sums alternate between two scratch copies of the whole input, by block position.
  thread_local std::vector<char> scratch;  // grows to the largest call this thread has made, then stays
  const size_t total = static_cast<size_t>(n) * block;
  if (scratch.size() < 2 * total) scratch.resize(2 * total);
  char* const spare[2] = {scratch.data(), scratch.data() + total};
  const char* cur = s.input;  // this rank's partial sums; its own input enters with its PreMulSum scalar
  if (s.op.kind == RedOpKind::PreMulSum) {
    const void* src = s.input;
    void* dst = spare[0];
    hostReduceCopy(s.op, 1, &src, 1, &dst, static_cast<size_t>(n) * s.count, /*preOpFirstSrc=*/true, false);
    cur = spare[0];
  }
  PrimsSlots<kMaxDoublingSteps> sends;
  ProxyDriveScope scope;
  size_t lo = 0;  // first block of the range this rank still reduces
  for (int i = 0, mask = n / 2; i < nSteps; ++i, mask >>= 1) {
    const int p = r ^ mask;
    const size_t keep = r & mask ? lo + mask : lo, give = r & mask ? lo : lo + mask;
    const size_t bytes = static_cast<size_t>(mask) * block;
    sends.emplace(i, nullptr, to[i], cur, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    sends[i]->useUserBuffers(false, cur == s.input);  // the input is never written, unless in place: not these blocks
    TUTTI_CHECK(sends[i]->send(give * block, bytes));
    if (to[i]->proxyTask) scope.add(to[i]->proxyTask);
    HostPrims prims(from[i], nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    const char* row = nullptr;
    TUTTI_CHECK(prims.recvPeek(bytes, &row));
    const char* mine = cur + keep * block;
    const void* srcs[2] = {r < p ? mine : row, r < p ? row : mine};
    const bool last = mask == 1;
    char* next = cur == spare[0] ? spare[1] : spare[0];
    char* dst = next + keep * block;
    if (last && (s.output == srcs[0] || s.output != mine)) dst = s.output;
    void* dsts[1] = {dst};
    hostReduceCopy(s.op, 2, srcs, 1, dsts, static_cast<size_t>(mask) * s.count, /*preOpFirstSrc=*/false, last);
    prims.recvRelease();
    if (last && dst != s.output) std::memcpy(s.output, dst, block);
    cur = next;
    lo = keep;
  }
  return waitAllSent(sends);
}

// A deterministic ReduceScatter by recursive halving, n a power of two: the partners are r ^ 1, r ^ 2, ..., so the
// partial results combine as the fixed order's perfect tree, lower ranks first, in its accumulator. Blocks still
// reduced are kept in order by the bits of their index from bit k up (compact index b >> k): at step k this rank
// keeps every other one, those whose bit k is its own, packs the others for the partner, and narrows its own block
// once at the end. n - 1 blocks of accumulators sent in all, in log2 n messages.
ncclResult_t runDetHalving(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label) {
  const int n = comm->nRanks, r = comm->rank;
  const size_t blockAcc = s.count * hostDetAccSize(s.op.datatype);
  const ResolvedRedOp copy = byteCopy();
  std::array<HostConn*, kMaxDoublingSteps> from{}, to{};
  int nSteps = 0;
  for (int mask = 1; mask < n; mask <<= 1, ++nSteps) {
    TUTTI_CHECK(partner(comm, r ^ mask, funcName(s.func), &from[nSteps], &to[nSteps]));
    announceRecvSteps(from[nSteps], 1);
  }
  // cur: the blocks this rank still reduces (n at first), next: the ones it keeps, pack: the partner's.
  thread_local std::vector<char> scratch;  // grows to the largest call this thread has made, then stays
  const size_t total = static_cast<size_t>(n) * blockAcc;
  if (scratch.size() < 2 * total) scratch.resize(2 * total);
  char* cur = scratch.data();
  char* next = cur + total;
  char* pack = next + total / 2;
  PrimsSlots<kMaxDoublingSteps> sends;
  ProxyDriveScope scope;
  int held = n;
  // The first step sends raw blocks of the input, each widened where it is folded (half the bytes of fp32's
  // accumulator, no pass to widen the input); the others, partial results.
  const size_t blockRaw = s.count * s.esize;
  for (int i = 0, mask = 1; i < nSteps; ++i, mask <<= 1) {
    const int mine = (r & mask) ? 1 : 0, half = held / 2;
    const bool raw = i == 0;
    const size_t block = raw ? blockRaw : blockAcc;
    const char* rows = raw ? s.input : cur;
    for (int q = 0; q < half; ++q)
      std::memcpy(pack + q * block, rows + static_cast<size_t>(2 * q + 1 - mine) * block, block);
    sends.emplace(i, nullptr, to[i], pack, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    TUTTI_CHECK(sends[i]->send(0, half * block));  // into the slot: pack is free again
    if (to[i]->proxyTask) scope.add(to[i]->proxyTask);
    HostPrims prims(from[i], nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    const char* row = nullptr;
    TUTTI_CHECK(prims.recvPeek(half * block, &row));
    for (int q = 0; q < half; ++q) {
      const char* own = rows + static_cast<size_t>(2 * q + mine) * block;
      const char* theirs = row + q * block;
      if (raw) hostDetLeafPair(s.op, mine ? theirs : own, mine ? own : theirs, next + q * blockAcc, s.count);
      else hostDetCombine(s.op, mine ? theirs : own, mine ? own : theirs, next + q * blockAcc, s.count);
    }
    prims.recvRelease();
    std::swap(cur, next);
    pack = next + total / 2;
    held = half;
  }
  hostDetFinish(s.op, n, cur, s.output, s.count);
  return waitAllSent(sends);
}

// AlltoAll by Bruck's algorithm: ceil(log2 n) messages per rank where the one-shot sends n - 1. Block j of the work
// row starts as this rank's block for rank (r + j) mod n. At step k (m = 2^k) every rank sends rank (r + m) mod n
// the blocks j whose bit k is set, packed in order of j, and puts those of rank (r - m) mod n in their place. Each
// block moves once per set bit of j, so once all steps ran, block j is rank (r - j) mod n's block for this rank.
// About n / 2 blocks per message, (log2 n) / 2 times the direct exchange's bytes: for small blocks, where what a
// call costs is its messages (sockets, or more ranks than cores).
ncclResult_t runBruck(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label) {
  const int n = comm->nRanks, r = comm->rank;
  const size_t block = s.count * s.esize;
  const char* what = funcName(s.func);
  const ResolvedRedOp copy = byteCopy();
  std::array<HostConn*, kMaxDoublingSteps> from{}, to{};
  int nSteps = 0;
  for (int m = 1; m < n; m <<= 1, ++nSteps) {
    Connection* rc = commCollConnection(comm, (r - m + n) % n, false);
    Connection* sc = commCollConnection(comm, (r + m) % n, true);
    if (!rc || !sc)
      TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection from rank {} or to rank {}", r, what, (r - m + n) % n,
                 (r + m) % n);
    from[nSteps] = &rc->host;
    to[nSteps] = &sc->host;
    announceRecvSteps(from[nSteps], 1);  // every receive posted before the first wait
  }
  thread_local std::vector<char> scratch;  // grows to the largest call this thread has made, then stays
  const size_t rowBytes = static_cast<size_t>(n) * block;
  if (scratch.size() < rowBytes + rowBytes / 2 + block) scratch.resize(rowBytes + rowBytes / 2 + block);
  char* const work = scratch.data();
  char* const pack = work + rowBytes;
  // The rotation: block j of the work row is input block (r + j) mod n (the input is read whole before any output
  // is written: in place is safe).
  std::memcpy(work, s.input + static_cast<size_t>(r) * block, static_cast<size_t>(n - r) * block);
  std::memcpy(work + static_cast<size_t>(n - r) * block, s.input, static_cast<size_t>(r) * block);
  PrimsSlots<kMaxDoublingSteps> sends;
  ProxyDriveScope scope;
  for (int i = 0, m = 1; i < nSteps; ++i, m <<= 1) {
    size_t bytes = 0;
    for (int j = m; j < n; ++j)
      if (j & m) {
        std::memcpy(pack + bytes, work + static_cast<size_t>(j) * block, block);
        bytes += block;
      }
    sends.emplace(i, nullptr, to[i], pack, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    TUTTI_CHECK(sends[i]->send(0, bytes));  // into the slot: pack is free again
    if (to[i]->proxyTask) scope.add(to[i]->proxyTask);
    HostPrims prims(from[i], nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    const char* row = nullptr;
    TUTTI_CHECK(prims.recvPeek(bytes, &row));
    for (int j = m; j < n; ++j)
      if (j & m) {
        std::memcpy(work + static_cast<size_t>(j) * block, row, block);
        row += block;
      }
    prims.recvRelease();
  }
  // Block j came from rank (r - j) mod n: the inverse rotation, reversed.
  for (int j = 0; j < n; ++j)
    std::memcpy(s.output + static_cast<size_t>((r - j + n) % n) * block, work + static_cast<size_t>(j) * block, block);
  return waitAllSent(sends);
}

// Broadcast down a binomial tree over ranks relative to the root (v = (r - root) mod n): rank v takes the buffer
// from v minus its highest set bit, then sends it to v + 2^k for every 2^k above that bit, the largest subtree
// first. No rank sends more than ceil(log2 n) messages per call where the one-shot root sends n - 1: calls issued
// back to back go as fast as the busiest sender allows, and a message is system calls on both sides over
// sockets. Every message leaves from the output (the root's input) and the received one may land in the output
// (zero copy on network ends that take user buffers).
ncclResult_t binomialBroadcastSends(ncclComm* comm, const OneShot& s, int v, int top, const char* data,
                                    const WaitContext& wait, const OpLabel& label);
ncclResult_t runBinomialBroadcast(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label) {
  const int n = comm->nRanks, r = comm->rank;
  const int v = (r - s.root + n) % n;
  const size_t bytes = s.count * s.esize;
  const ResolvedRedOp copy = byteCopy();
  const char* what = funcName(s.func);
  int top = 1;  // the lowest power of two above v's highest set bit (1 for the root)
  while (top <= v) top <<= 1;
  const char* data = s.input;  // what this rank sends: the root's input, the others' output once received
  if (v != 0) {
    const int parent = (v - top / 2 + s.root) % n;
    Connection* rcn = commCollConnection(comm, parent, false);
    if (!rcn) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection from rank {}", r, what, parent);
    HostConn* rc = &rcn->host;
    if (oneShotProto(comm, rc, bytes) == TUTTI_PROTO_LL && llSmallConn(rc)) {
      TUTTI_CHECK(llRecvSmall(rc, s.output, bytes, wait, label));
      return binomialBroadcastSends(comm, s, v, top, s.output, wait, label);
    }
    char* landing = nullptr;
    if (rc->netEnd && userBufferStep(rc, TUTTI_PROTO_SIMPLE, bytes)) {
      const NetUserStep step{rc->step, s.output, bytes};
      netRecvInto(rc->netEnd, &step, 1);
      landing = s.output;
    }
    announceRecvSteps(rc, 1);
    // Over the network, where ranks outnumber cores: the senders above this rank are what bounds back-to-back
    // calls, and each poll of ours is a system call on a core they need. A short spin, then a sleep in the net
    // plugin, which its socket ends at once (the proxy thread's futex hand-over would cost another wake-up).
    WaitContext w = wait;
    if (rc->netEnd && proxyHasNetWait())
      w.driveSpinCount = std::min(wait.driveSpinCount >= 0 ? wait.driveSpinCount : wait.spinCount, comm->bcastRecvSpinCount);
    HostPrims prims(rc, nullptr, nullptr, nullptr, 1, copy, w, label, oneShotProto(comm, rc, bytes));
    const char* got = nullptr;
    TUTTI_CHECK(prims.recvPeek(bytes, &got, landing));
    if (got != s.output) std::memcpy(s.output, got, bytes);
    prims.recvRelease();
    data = s.output;
  } else if (s.input != s.output) {
    std::memcpy(s.output, s.input, bytes);
  }
  return binomialBroadcastSends(comm, s, v, top, data, wait, label);
}

// Rank v's sends of the binomial broadcast (runBinomialBroadcast): `data` to v + 2^k for every 2^k from `top` on.
ncclResult_t binomialBroadcastSends(ncclComm* comm, const OneShot& s, int v, int top, const char* data,
                                    const WaitContext& wait, const OpLabel& label) {
  const int n = comm->nRanks, r = comm->rank;
  const size_t bytes = s.count * s.esize;
  const char* what = funcName(s.func);
  const ResolvedRedOp copy = byteCopy();
  int nChildren = 0;
  for (int m = top; v + m < n; m <<= 1) ++nChildren;
  PrimsSlots<kMaxDoublingSteps> sends;
  ProxyDriveScope scope;
  // Child v + (top << i) heads the ranks v + (top << i) + j (top << (i + 1)), j >= 0: the largest subtree first.
  for (int i = 0; i < nChildren; ++i) {
    const int child = (v + (top << i) + s.root) % n;
    Connection* scn = commCollConnection(comm, child, true);
    if (!scn) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection to rank {}", r, what, child);
    HostConn* sc = &scn->host;
    const int proto = oneShotProto(comm, sc, bytes);
    if (proto == TUTTI_PROTO_LL && llSmallConn(sc)) {
      TUTTI_CHECK(llSendSmall(sc, data, bytes, wait, label));
      continue;
    }
    HostPrims& sp = sends.emplace(i, nullptr, sc, data, nullptr, 1, copy, wait, label, proto);
    sp.useUserBuffers(false, true);  // nothing writes the buffer again in this call
    TUTTI_CHECK(sp.send(0, bytes));
    if (sc->proxyTask) scope.add(sc->proxyTask);
  }
  return waitAllSent(sends);
}

// The end of a one-shot call once rows[p] holds rank p's message for every peer p (the others null). AllGather,
// AlltoAll: row p is block p of the output; Broadcast: the root's row is the output. In place, the blocks this rank
// sent are in their slots or have left, so overwriting them is safe. AllReduce, ReduceScatter: the n rows folded.
void finishOneShot(const OneShot& s, int n, int r, std::array<const void*, kOneShotMaxRanks>& rows) {
  const size_t bytes = s.count * s.esize;
  const bool reduce = s.func == ncclFuncAllReduce || s.func == ncclFuncReduceScatter;
  const bool bcast = s.func == ncclFuncBroadcast;
  const bool scatter = s.func == ncclFuncReduceScatter || s.func == ncclFuncAlltoAll;
  const char* mine = s.input + (scatter ? static_cast<size_t>(r) * s.count : 0) * s.esize;
  if (!reduce) {
    for (int p = 0; p < n; ++p) {
      char* dst = s.output + (bcast ? 0 : static_cast<size_t>(p) * bytes);
      const void* src = p == r ? mine : rows[p];
      if (src && src != dst && (p != r || !bcast || r == s.root)) std::memcpy(dst, src, bytes);
    }
    return;
  }
  if (s.det) {  // rank order, whatever the count or the path; the output may be this rank's own row
    rows[r] = mine;
    void* out = s.output;
    hostDetReduceCopy(s.op, n, rows.data(), 1, &out, s.count);
    return;
  }
  // This rank's own row enters with its scalar too; then rows 0..n-1 are folded in that order on every rank. A copy
  // when the row is not the fold's first: to scale it, or because in place the output is the row (only the first
  // source may alias the destination).
  thread_local std::vector<char> own;  // grows to the largest row this thread has needed, then stays
  rows[r] = mine;
  const bool scaled = s.op.kind == RedOpKind::PreMulSum;
  if (r != 0 && (scaled || s.output == mine)) {
    if (own.size() < bytes) own.resize(bytes);
    void* dst = own.data();
    const void* src = mine;
    hostReduceCopy(s.op, 1, &src, 1, &dst, s.count, /*preOpFirstSrc=*/scaled, /*postOp=*/false);
    rows[r] = own.data();
  }
  void* out = s.output;
  hostReduceCopy(s.op, n, rows.data(), 1, &out, s.count, /*preOpFirstSrc=*/scaled && r == 0, /*postOp=*/true);
}

// Whether a one-shot message of `bytes` on c is an LL step the calling thread writes or reads itself (a lane or the
// LL lines of a slot: llSendSmall / llRecvSmall).
bool laneStep(const ncclComm* comm, const HostConn* c, size_t bytes) {
  return c && oneShotProto(comm, c, bytes) == TUTTI_PROTO_LL && llSmallConn(c);
}

// The one-shot call whose every message is such a step, the usual case of a few hundred bytes within a node: the
// packets written and read in turn, then the rows finished, with nothing else (no primitives, no proxy scope, no
// pending send to wait for). These steps cost less than the general path's setup. False in *ran where some message
// takes the general path: the messages are the same, so either end may take either path.
ncclResult_t runLanes(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label, bool* ran) {
  *ran = false;
  const int n = comm->nRanks, r = comm->rank;
  const size_t bytes = s.count * s.esize;
  const bool reduce = s.func == ncclFuncAllReduce || s.func == ncclFuncReduceScatter;
  const bool bcast = s.func == ncclFuncBroadcast;
  const bool scatter = s.func == ncclFuncReduceScatter || s.func == ncclFuncAlltoAll;
  const bool sending = !bcast || r == s.root;
  std::array<HostConn*, kOneShotMaxRanks> to{}, from{};
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    if (sending) {
      Connection* c = commCollConnection(comm, p, true);
      to[p] = c ? &c->host : nullptr;
      if (!laneStep(comm, to[p], bytes)) return ncclSuccess;
    }
    if (!bcast || p == s.root) {
      Connection* c = commCollConnection(comm, p, false);
      from[p] = c ? &c->host : nullptr;
      if (!laneStep(comm, from[p], bytes)) return ncclSuccess;
    }
  }
  *ran = true;
  OneShotRows& staged = oneShotRows();
  if (sending) {
    const bool scale = !s.det && s.op.kind == RedOpKind::PreMulSum;  // the scalar applied on the way
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      const char* in = s.input + (scatter ? static_cast<size_t>(p) * s.count : 0) * s.esize;
      if (scale) {
        const void* src = in;
        void* dst = staged.scaled.data();
        hostReduceCopy(s.op, 1, &src, 1, &dst, s.count, /*preOpFirstSrc=*/true, /*postOp=*/false);
        in = staged.scaled.data();
      }
      TUTTI_CHECK(llSendSmall(to[p], in, bytes, wait, label));
    }
  }
  // Straight into its place in the output where nothing this rank sends is there, else kept in its row.
  const auto sentBegin = reinterpret_cast<uintptr_t>(s.input);
  const uintptr_t sentEnd = sentBegin + (sending ? (scatter ? static_cast<size_t>(n) : 1) * bytes : 0);
  std::array<const void*, kOneShotMaxRanks> rows{};
  for (int k = 1; k < n; ++k) {
    const int p = (r + n - k) % n;
    if (!from[p]) continue;
    char* dst = s.output + (bcast ? 0 : static_cast<size_t>(p) * bytes);
    const auto b = reinterpret_cast<uintptr_t>(dst);
    if (reduce || (b < sentEnd && sentBegin < b + bytes))
      dst = staged.rows.data() + static_cast<size_t>(p) * kLLRowMaxBytes;
    TUTTI_CHECK(llRecvSmall(from[p], dst, bytes, wait, label));
    rows[p] = dst;
  }
  finishOneShot(s, n, r, rows);
  return ncclSuccess;
}

}  // namespace

ncclResult_t runOneShot(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label) {
  if (s.doubling) {
    if (s.func == ncclFuncReduceScatter &&
        treeReduceScatterWanted(comm, s.count * s.esize * static_cast<size_t>(comm->nRanks), s.det))
      return runTreeReduceScatter(comm, s, wait, label);
    if (s.func == ncclFuncAllGather) return runGatherDoubling(comm, s, wait, label);
    if (s.func == ncclFuncAlltoAll) return runBruck(comm, s, wait, label);
    if (s.func == ncclFuncBroadcast) return runBinomialBroadcast(comm, s, wait, label);
    if (s.func == ncclFuncReduceScatter)
      return s.det ? runDetHalving(comm, s, wait, label) : runHalving(comm, s, wait, label);
    const LogAllReduce how = logAllReduce(comm, s.count * s.esize, s.det);
    if (how == LogAllReduce::kTree) return runTreeAllReduce(comm, s, wait, label);
    if (how == LogAllReduce::kScatterGather) {
      // Block p of every row to rank p, folded there in the fixed order into block p of the output (in place, block
      // p of the input is read by this rank alone); then every block to every rank. Both one message per peer.
      // Past a Simple slot per rank (comm->detScatterGatherRoundsMaxBytes), the same on consecutive pieces of the
      // buffer, a slot per rank each: every element is still folded once, in the fixed order, by one rank.
      const int n = comm->nRanks, r = comm->rank;
      const size_t slot = comm->buffSizes[TUTTI_PROTO_SIMPLE] / TUTTI_STEPS;
      // Elements per round: a multiple of n (the whole count is one), at most a slot per rank.
      const size_t roundCount = std::max<size_t>(1, slot / s.esize) * n;
      for (size_t at = 0; at < s.count; at += roundCount) {
        const size_t count = std::min(roundCount, s.count - at);
        const size_t block = count / n * s.esize;
        OneShot scatter = s;
        scatter.func = ncclFuncReduceScatter;
        scatter.input = s.input + at * s.esize;
        scatter.count = count / n;
        scatter.output = s.output + at * s.esize + r * block;
        scatter.doubling = false;
        TUTTI_CHECK(runOneShot(comm, scatter, wait, label));
        OneShot gather{};
        gather.func = ncclFuncAllGather;
        gather.input = scatter.output;  // in place
        gather.output = s.output + at * s.esize;
        gather.count = block;
        gather.esize = 1;
        gather.op = byteCopy();
        TUTTI_CHECK(runOneShot(comm, gather, wait, label));
      }
      return ncclSuccess;
    }
    if (how == LogAllReduce::kHalvingDoubling) {
      const int n = comm->nRanks, r = comm->rank;
      const size_t block = s.count / n * s.esize;
      OneShot half = s;
      half.func = ncclFuncReduceScatter;
      half.count = s.count / n;
      half.output = s.output + r * block;  // this rank's block of the result, its Avg division applied
      TUTTI_CHECK(runHalving(comm, half, wait, label));
      OneShot gather{};
      gather.func = ncclFuncAllGather;
      gather.input = half.output;  // in place
      gather.output = s.output;
      gather.count = block;
      gather.esize = 1;
      return runGatherDoubling(comm, gather, wait, label);
    }
    return runDoubling(comm, s, wait, label);
  }
  bool ran = false;
  TUTTI_CHECK(runLanes(comm, s, wait, label, &ran));
  if (ran) return ncclSuccess;
  const int n = comm->nRanks, r = comm->rank;
  const size_t bytes = s.count * s.esize;  // one message
  const bool reduce = s.func == ncclFuncAllReduce || s.func == ncclFuncReduceScatter;
  const bool bcast = s.func == ncclFuncBroadcast;
  const bool scatter = s.func == ncclFuncReduceScatter || s.func == ncclFuncAlltoAll;  // block p goes to rank p
  const char* what = funcName(s.func);
  auto conn = [&](int p, bool isSend) -> HostConn* {
    Connection* c = commCollConnection(comm, p, isSend);
    return c ? &c->host : nullptr;
  };
  // Where the message for rank p starts in the input, in elements (ReduceScatter, AlltoAll: p's block; the others:
  // all of it).
  auto inputFor = [&](int p) -> size_t { return scatter ? static_cast<size_t>(p) * s.count : 0; };
  const ResolvedRedOp copy = byteCopy();
  // 1. The messages to the peers, this rank's scalar applied on the way (one slot each: no send waits on this call);
  // raw bytes for the fixed order, which scales every row as it folds it. On a network end that takes user buffers
  // (HostConn::userBufferMinBytes) a message that needs no scalar leaves from the input itself, and the call ends
  // once it has left (waitSent below).
  PrimsSlots<kOneShotMaxRanks> sends;
  ProxyDriveScope scope;  // what the sends still have to move moves while this thread waits for the peers' messages
  if (!bcast || r == s.root) {
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      HostConn* c = conn(p, true);
      if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection to rank {}", r, what, p);
      const int proto = oneShotProto(comm, c, bytes);
      if (proto == TUTTI_PROTO_LL && llSmallConn(c)) {  // as lines, in a lane: the receiver reads it alike
        const char* in = s.input + inputFor(p) * s.esize;
        if (!s.det && s.op.kind == RedOpKind::PreMulSum) {  // the scalar applied on the way
          const void* src = in;
          void* dst = oneShotRows().scaled.data();
          hostReduceCopy(s.op, 1, &src, 1, &dst, s.count, /*preOpFirstSrc=*/true, /*postOp=*/false);
          in = oneShotRows().scaled.data();
        }
        TUTTI_CHECK(llSendSmall(c, in, bytes, wait, label));
        continue;
      }
      if (s.det) {
        sends.emplace(p, nullptr, c, s.input + inputFor(p) * s.esize, nullptr, 1, copy, wait, label, proto);
        sends[p]->useUserBuffers(false, true);
        TUTTI_CHECK(sends[p]->send(0, bytes));
      } else {
        sends.emplace(p, nullptr, c, s.input, nullptr, s.esize, s.op, wait, label, proto);
        sends[p]->useUserBuffers(false, true);
        TUTTI_CHECK(sends[p]->send(inputFor(p), s.count));
      }
      if (c->proxyTask) scope.add(c->proxyTask);
    }
  }
  auto waitSent = [&]() -> ncclResult_t { return waitAllSent(sends); };
  // 2. The peers' messages, left in their slots until they have been read. AllGather, AlltoAll, Broadcast: on a
  // network end that takes user buffers a message lands in its place in the output instead, unless that place
  // overlaps what this rank sends (in place AlltoAll: a message could land before the block there has left).
  const bool sending = !bcast || r == s.root;  // what it sends: the input's first message, or all n (AlltoAll)
  const auto sentBegin = reinterpret_cast<uintptr_t>(s.input);
  const uintptr_t sentEnd = sentBegin + (sending ? (scatter ? static_cast<size_t>(n) : 1) * bytes : 0);
  auto overlapsSent = [&](const char* p, size_t len) {
    const auto b = reinterpret_cast<uintptr_t>(p);
    return b < sentEnd && sentBegin < b + len;
  };
  PrimsSlots<kOneShotMaxRanks> prims;  // no allocation: a tiny call's cost is its steps
  std::array<const void*, kOneShotMaxRanks> rows{};
  // An LL message is read into the thread's staging line buffer, which the next one reuses: each is kept here.
  std::array<char, kOneShotMaxRanks * kLLRowMaxBytes>& llRows = oneShotRows().rows;
  for (int k = 1; k < n; ++k) {
    const int p = (r + n - k) % n;
    if (bcast && p != s.root) continue;
    HostConn* c = conn(p, false);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection from rank {}", r, what, p);
    if (oneShotProto(comm, c, bytes) == TUTTI_PROTO_LL && llSmallConn(c)) {
      // Read and handed back at once: straight into its place in the output where nothing this rank sends is
      // there, else kept in its row.
      char* dst = s.output + (bcast ? 0 : static_cast<size_t>(p) * bytes);
      if (reduce || overlapsSent(dst, bytes)) dst = llRows.data() + static_cast<size_t>(p) * kLLRowMaxBytes;
      TUTTI_CHECK(llRecvSmall(c, dst, bytes, wait, label));
      rows[p] = dst;
      continue;
    }
    char* landing = nullptr;
    if (!reduce && c->netEnd && userBufferStep(c, TUTTI_PROTO_SIMPLE, bytes)) {
      char* dst = s.output + (bcast ? 0 : static_cast<size_t>(p) * bytes);
      if (!overlapsSent(dst, bytes)) {
        const NetUserStep step{c->step, dst, bytes};
        netRecvInto(c->netEnd, &step, 1);
        landing = dst;
      }
    }
    announceRecvSteps(c, 1);
    const int proto = landing ? TUTTI_PROTO_SIMPLE : oneShotProto(comm, c, bytes);
    prims.emplace(p, c, nullptr, nullptr, nullptr, 1, copy, wait, label, proto);
    const char* data = nullptr;
    TUTTI_CHECK(prims[p]->recvPeek(bytes, &data, landing));
    if (proto == TUTTI_PROTO_LL) {
      char* row = llRows.data() + static_cast<size_t>(p) * kLLRowMaxBytes;
      std::memcpy(row, data, bytes);
      data = row;
    }
    rows[p] = data;
  }
  auto release = [&]() -> ncclResult_t {
    for (int p = 0; p < n; ++p)
      if (prims[p]) prims[p]->recvRelease();
    return waitSent();
  };
  // A message that left from the input may still be on its way out (zero copy): in place, the output is written
  // only once it has left.
  if (overlapsSent(s.output, (reduce || bcast ? 1 : static_cast<size_t>(n)) * bytes)) TUTTI_CHECK(waitSent());
  finishOneShot(s, n, r, rows);
  return release();
}

}  // namespace host
}  // namespace tutti
