#include "device/host/oneshot.h"

#include "comm/comm.h"
#include "comm/task.h"
#include "device/host/det_reduce_copy.h"
#include "device/host/reduce_copy.h"
#include "proxy/net_transport.h"
#include "proxy/proxy.h"
#include "util/check.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace tutti {

bool oneShotWanted(const ncclComm* comm, size_t bytes) {
  if (comm->backend != Backend::Host || !comm->corePaths || comm->nRanks < 2 || comm->nRanks > kOneShotMaxRanks)
    return false;
  return bytes > 0 && bytes <= comm->oneShotMaxBytes && bytes <= comm->buffSizes[TUTTI_PROTO_SIMPLE] / TUTTI_STEPS;
}

namespace host {

ncclResult_t runOneShot(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label) {
  const int n = comm->nRanks, r = comm->rank;
  const size_t bytes = s.count * s.esize;  // one message
  const bool reduce = s.func == ncclFuncAllReduce || s.func == ncclFuncReduceScatter;
  const bool bcast = s.func == ncclFuncBroadcast;
  const bool scatter = s.func == ncclFuncReduceScatter || s.func == ncclFuncAlltoAll;  // block p goes to rank p
  const char* what = funcName(s.func);
  auto conn = [&](int p, bool isSend) -> HostConn* {
    Connection* c = commFindConnection(comm, 0, kConnColl, p, isSend);
    return c ? &c->host : nullptr;
  };
  // Where the message for rank p starts in the input, in elements (ReduceScatter, AlltoAll: p's block; the others:
  // all of it).
  auto inputFor = [&](int p) -> size_t { return scatter ? static_cast<size_t>(p) * s.count : 0; };
  ResolvedRedOp copy{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copy);
  // 1. The messages to the peers, this rank's scalar applied on the way (one slot each: no send waits on this call);
  // raw bytes for the fixed order, which scales every row as it folds it. On a network end that takes user buffers
  // (HostConn::userBufferMinBytes) a message that needs no scalar leaves from the input itself, and the call ends
  // once it has left (waitSent below).
  std::array<std::optional<HostPrims>, kOneShotMaxRanks> sends;
  ProxyDriveScope scope;  // what the sends still have to move moves while this thread waits for the peers' messages
  if (!bcast || r == s.root) {
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      HostConn* c = conn(p, true);
      if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection to rank {}", r, what, p);
      if (s.det) {
        sends[p].emplace(nullptr, c, s.input + inputFor(p) * s.esize, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
        sends[p]->useUserBuffers(false, true);
        TUTTI_CHECK(sends[p]->send(0, bytes));
      } else {
        sends[p].emplace(nullptr, c, s.input, nullptr, s.esize, s.op, wait, label, TUTTI_PROTO_SIMPLE);
        sends[p]->useUserBuffers(false, true);
        TUTTI_CHECK(sends[p]->send(inputFor(p), s.count));
      }
      if (c->proxyTask) scope.add(c->proxyTask);
    }
  }
  auto waitSent = [&]() -> ncclResult_t {
    for (std::optional<HostPrims>& sp : sends)
      if (sp) TUTTI_CHECK(sp->waitSent());
    return ncclSuccess;
  };
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
  std::array<std::optional<HostPrims>, kOneShotMaxRanks> prims;  // no allocation: a tiny call's cost is its steps
  std::array<const void*, kOneShotMaxRanks> rows{};
  for (int k = 1; k < n; ++k) {
    const int p = (r + n - k) % n;
    if (bcast && p != s.root) continue;
    HostConn* c = conn(p, false);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection from rank {}", r, what, p);
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
    prims[p].emplace(c, nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    const char* data = nullptr;
    TUTTI_CHECK(prims[p]->recvPeek(bytes, &data, landing));
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
  // AllGather, AlltoAll: row p is block p of the output; Broadcast: the root's row is the output. In place, the
  // blocks this rank sent are in their slots or have left, so overwriting them is safe.
  if (!reduce) {
    for (int p = 0; p < n; ++p) {
      char* dst = s.output + (bcast ? 0 : static_cast<size_t>(p) * bytes);
      const void* src = p == r ? s.input + inputFor(r) * s.esize : rows[p];
      if (src && src != dst && (p != r || !bcast || r == s.root)) std::memcpy(dst, src, bytes);
    }
    return release();
  }
  const char* mine = s.input + inputFor(r) * s.esize;
  if (s.det) {  // rank order, whatever the count or the path; the output may be this rank's own row
    rows[r] = mine;
    void* out = s.output;
    hostDetReduceCopy(s.op, n, rows.data(), 1, &out, s.count);
    return release();
  }
  // 3. This rank's own row enters with its scalar too; then rows 0..n-1 are folded in that order on every rank.
  // A copy when the row is not the fold's first: to scale it, or because in place the output is the row (only the
  // first source may alias the destination).
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
  return release();
}

}  // namespace host
}  // namespace tutti
