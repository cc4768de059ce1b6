#include "device/host/oneshot.h"

#include "comm/comm.h"
#include "device/host/reduce_copy.h"
#include "util/check.h"

#include <memory>
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
  const size_t bytes = s.count * s.esize;
  auto conn = [&](int p, bool isSend) -> HostConn* {
    Connection* c = commFindConnection(comm, 0, kConnColl, p, isSend);
    return c ? &c->host : nullptr;
  };
  // 1. The input to every peer, this rank's scalar applied on the way (one slot each: no send waits on this call).
  for (int k = 1; k < n; ++k) {
    const int p = (r + k) % n;
    HostConn* c = conn(p, true);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: AllReduce: no connection to rank {}", r, p);
    HostPrims prims(nullptr, c, s.input, nullptr, s.esize, s.op, wait, label, TUTTI_PROTO_SIMPLE);
    TUTTI_CHECK(prims.send(0, s.count));
  }
  // 2. Every peer's row, left in its slot until the fold has read it.
  ResolvedRedOp copy{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copy);
  std::vector<std::unique_ptr<HostPrims>> prims(n);
  std::vector<const void*> rows(n);
  for (int k = 1; k < n; ++k) {
    const int p = (r + n - k) % n;
    HostConn* c = conn(p, false);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: AllReduce: no connection from rank {}", r, p);
    announceRecvSteps(c, 1);
    prims[p] = std::make_unique<HostPrims>(c, nullptr, nullptr, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    const char* data = nullptr;
    TUTTI_CHECK(prims[p]->recvPeek(bytes, &data));
    rows[p] = data;
  }
  // 3. This rank's own row enters with its scalar too; then rows 0..n-1 are folded in that order on every rank.
  // A copy when the row is not the fold's first: to scale it, or because in place the output is the input (only the
  // first source may alias the destination).
  std::vector<char> own;
  rows[r] = s.input;
  const bool scaled = s.op.kind == RedOpKind::PreMulSum;
  if (r != 0 && (scaled || s.output == s.input)) {
    own.resize(bytes);
    void* dst = own.data();
    const void* src = s.input;
    hostReduceCopy(s.op, 1, &src, 1, &dst, s.count, /*preOpFirstSrc=*/scaled, /*postOp=*/false);
    rows[r] = own.data();
  }
  void* out = s.output;
  hostReduceCopy(s.op, n, rows.data(), 1, &out, s.count, /*preOpFirstSrc=*/scaled && r == 0, /*postOp=*/true);
  for (int p = 0; p < n; ++p)
    if (prims[p]) prims[p]->recvRelease();
  return ncclSuccess;
}

}  // namespace host
}  // namespace tutti
