#include "device/host/oneshot.h"

#include "comm/comm.h"
#include "comm/task.h"
#include "device/host/det_reduce_copy.h"
#include "device/host/reduce_copy.h"
#include "util/check.h"

#include <array>
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
  // raw bytes for the fixed order, which scales every row as it folds it.
  if (!bcast || r == s.root) {
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      HostConn* c = conn(p, true);
      if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection to rank {}", r, what, p);
      if (s.det) {
        HostPrims prims(nullptr, c, s.input + inputFor(p) * s.esize, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
        TUTTI_CHECK(prims.send(0, bytes));
      } else {
        HostPrims prims(nullptr, c, s.input, nullptr, s.esize, s.op, wait, label, TUTTI_PROTO_SIMPLE);
        TUTTI_CHECK(prims.send(inputFor(p), s.count));
      }
    }
  }
  // 2. The peers' messages, left in their slots until they have been read.
  std::array<std::optional<HostPrims>, kOneShotMaxRanks> prims;  // no allocation: a tiny call's cost is its steps
  std::array<const void*, kOneShotMaxRanks> rows{};
  for (int k = 1; k < n; ++k) {
    const int p = (r + n - k) % n;
    if (bcast && p != s.root) continue;
    HostConn* c = conn(p, false);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection from rank {}", r, what, p);
    announceRecvSteps(c, 1);
    prims[p].emplace(c, nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    const char* data = nullptr;
    TUTTI_CHECK(prims[p]->recvPeek(bytes, &data));
    rows[p] = data;
  }
  auto release = [&] {
    for (int p = 0; p < n; ++p)
      if (prims[p]) prims[p]->recvRelease();
  };
  // AllGather, AlltoAll: row p is block p of the output; Broadcast: the root's row is the output. In place, the
  // blocks this rank sent are in the slots already, so overwriting them is safe.
  if (!reduce) {
    for (int p = 0; p < n; ++p) {
      char* dst = s.output + (bcast ? 0 : static_cast<size_t>(p) * bytes);
      const void* src = p == r ? s.input + inputFor(r) * s.esize : rows[p];
      if (src && src != dst && (p != r || !bcast || r == s.root)) std::memcpy(dst, src, bytes);
    }
    release();
    return ncclSuccess;
  }
  const char* mine = s.input + inputFor(r) * s.esize;
  if (s.det) {  // rank order, whatever the count or the path; the output may be this rank's own row
    rows[r] = mine;
    void* out = s.output;
    hostDetReduceCopy(s.op, n, rows.data(), 1, &out, s.count);
    release();
    return ncclSuccess;
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
  release();
  return ncclSuccess;
}

}  // namespace host
}  // namespace tutti
