// The rows of the bad-input matrix. Collectives and point-to-point calls are generated from one table
// (which kinds apply follows from the call's shape); the other entry points are listed by hand.
#include "matrix.h"

#include <tutti.h>

#include <cstdint>

namespace tutti::itest {
namespace {

using Ctx = MatrixCtx;
using CallFn = std::function<ncclResult_t(Ctx&)>;
using CommFn = std::function<ncclComm_t(Ctx&)>;

// The three bad communicator handles every comm-taking entry point must refuse.
struct BadComm {
  const char* kind;
  CommFn get;
};
const BadComm kBadComms[] = {
    {"NullComm", [](Ctx&) -> ncclComm_t { return nullptr; }},
    {"GarbageComm", [](Ctx& c) { return c.garbage; }},
    {"DestroyedComm", [](Ctx& c) { return c.destroyed; }},
};

// ---- Collectives and point-to-point --------------------------------------------------------------

// Every collective through one signature; `root` is the peer for Send/Recv.
using CollCall = ncclResult_t (*)(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                  int root, ncclComm_t comm, cudaStream_t stream);

struct Coll {
  const char* entry;
  CollCall fn;
  bool reduce = false;   // takes an op
  bool rooted = false;   // takes a root
  bool peer = false;     // Send/Recv
  bool usesSend = true;  // reads a send buffer (on rank 0, the root)
  bool usesRecv = true;
  const char* sendName = "sendbuff";
  const char* recvName = "recvbuff";
  // Partial overlap on rank 0 (root 0) that is not the in-place layout: offsets in elements of a; -1: none.
  int overlapSend = -1, overlapRecv = -1;
};

// Argument order of the generic call: sendbuff, recvbuff, count, datatype, op, root/peer, comm, stream.
const Coll kColls[] = {
    {"ncclAllReduce",
     [](const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t o, int, ncclComm_t c, cudaStream_t st) {
       return ncclAllReduce(s, r, n, t, o, c, st);
     },
     true, false, false, true, true, "sendbuff", "recvbuff", 0, 1},
    {"ncclReduce",
     [](const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t o, int root, ncclComm_t c, cudaStream_t st) {
       return ncclReduce(s, r, n, t, o, root, c, st);
     },
     true, true, false, true, true, "sendbuff", "recvbuff", 0, 1},
    {"ncclBroadcast",
     [](const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int root, ncclComm_t c, cudaStream_t st) {
       return ncclBroadcast(s, r, n, t, root, c, st);
     },
     false, true, false, true, true, "sendbuff", "recvbuff", 0, 1},
    {"ncclBcast",
     [](const void*, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int root, ncclComm_t c, cudaStream_t st) {
       return ncclBcast(r, n, t, root, c, st);
     },
     false, true, false, false, true, "buff", "buff"},
    {"ncclAllGather",
     [](const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int, ncclComm_t c, cudaStream_t st) {
       return ncclAllGather(s, r, n, t, c, st);
     },
     false, false, false, true, true, "sendbuff", "recvbuff", 1, 0},  // in place: sendbuff == recvbuff + 0
    {"ncclReduceScatter",
     [](const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t o, int, ncclComm_t c, cudaStream_t st) {
       return ncclReduceScatter(s, r, n, t, o, c, st);
     },
     true, false, false, true, true, "sendbuff", "recvbuff", 0, 1},
    {"ncclAlltoAll",
     [](const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int, ncclComm_t c, cudaStream_t st) {
       return ncclAlltoAll(s, r, n, t, c, st);
     },
     false, false, false, true, true, "sendbuff", "recvbuff", 0, 1},  // in place only as sendbuff == recvbuff
    {"ncclGather",
     [](const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int root, ncclComm_t c, cudaStream_t st) {
       return ncclGather(s, r, n, t, root, c, st);
     },
     false, true, false, true, true, "sendbuff", "recvbuff", 1, 0},
    {"ncclScatter",
     [](const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int root, ncclComm_t c, cudaStream_t st) {
       return ncclScatter(s, r, n, t, root, c, st);
     },
     false, true, false, true, true, "sendbuff", "recvbuff", 0, 1},
    {"ncclSend",
     [](const void* s, void*, size_t n, ncclDataType_t t, ncclRedOp_t, int peer, ncclComm_t c, cudaStream_t st) {
       return ncclSend(s, n, t, peer, c, st);
     },
     false, false, true, true, false},
    {"ncclRecv",
     [](const void*, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int peer, ncclComm_t c, cudaStream_t st) {
       return ncclRecv(r, n, t, peer, c, st);
     },
     false, false, true, false, true},
};

// A valid call on rank 0 (root/peer 1 for point-to-point so no self-send is involved), then one field spoiled.
struct CollArgsT {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 4;
  ncclDataType_t type = ncclFloat;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

void addCollRows(std::vector<MatrixRow>& rows) {
  for (const Coll& k : kColls) {
    const std::string base = std::string(k.entry).substr(4);  // "AllReduce"
    const Coll* kp = &k;
    auto add = [&](const std::string& kind, ncclResult_t code, std::vector<std::string> needles,
                   std::function<void(Ctx&, CollArgsT&)> spoil, CommFn errComm = nullptr) {
      MatrixRow r;
      r.name = base + "_" + kind;
      r.entry = k.entry;
      r.code = code;
      needles.insert(needles.begin(), k.entry);
      r.needles = std::move(needles);
      r.errComm = std::move(errComm);
      r.call = [kp, spoil](Ctx& c) {
        CollArgsT a;
        a.send = c.a;
        a.recv = c.b;
        a.comm = c.comm;
        if (kp->peer) a.root = 1;
        spoil(c, a);
        return kp->fn(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm, a.stream);
      };
      rows.push_back(std::move(r));
    };
    for (const BadComm& bc : kBadComms) {
      CommFn get = bc.get;
      add(bc.kind, ncclInvalidArgument, {"comm"}, [get](Ctx& c, CollArgsT& a) { a.comm = get(c); }, get);
    }
    if (k.usesSend)
      add(k.sendName == std::string("buff") ? "NullBuff" : "NullSendbuff", ncclInvalidArgument, {k.sendName},
          [](Ctx&, CollArgsT& a) { a.send = nullptr; });
    if (k.usesRecv && k.recvName != std::string("buff"))
      add("NullRecvbuff", ncclInvalidArgument, {k.recvName}, [](Ctx&, CollArgsT& a) { a.recv = nullptr; });
    if (std::string(k.entry) == "ncclBcast")  // its one buffer is passed as recv by the generic call
      add("NullBuff", ncclInvalidArgument, {"buff"}, [](Ctx&, CollArgsT& a) { a.recv = nullptr; });
    // count * sizeof(float) wraps size_t.
    add("CountOverflow", ncclInvalidArgument, {"count"}, [](Ctx&, CollArgsT& a) { a.count = SIZE_MAX / 2 + 1; });
    // 1-byte elements: fits once, but not nRanks times (the whole buffer of the gathered side).
    if (!k.peer && !k.rooted && std::string(k.entry) != "ncclAllReduce")
      add("CountTimesRanksOverflow", ncclInvalidArgument, {"count"}, [](Ctx&, CollArgsT& a) {
        a.count = SIZE_MAX / 2 + 1;
        a.type = ncclInt8;
      });
    add("DatatypeNegative", ncclInvalidArgument, {"datatype"},
        [](Ctx&, CollArgsT& a) { a.type = static_cast<ncclDataType_t>(-1); });
    add("DatatypeTooLarge", ncclInvalidArgument, {"datatype"},
        [](Ctx&, CollArgsT& a) { a.type = static_cast<ncclDataType_t>(ncclNumTypes); });
    if (k.reduce) {
      add("OpNegative", ncclInvalidArgument, {"op"}, [](Ctx&, CollArgsT& a) { a.op = static_cast<ncclRedOp_t>(-1); });
      add("OpNeverCreated", ncclInvalidArgument, {"op"},
          [](Ctx&, CollArgsT& a) { a.op = static_cast<ncclRedOp_t>(int(ncclNumOps) + 7); });
      add("OpDestroyed", ncclInvalidArgument, {"op"}, [](Ctx& c, CollArgsT& a) { a.op = c.deadOp; });
      add("OpOfOtherComm", ncclInvalidArgument, {"op"}, [](Ctx& c, CollArgsT& a) { a.op = c.otherCommOp; });
      add("OpOfDestroyedComm", ncclInvalidArgument, {"op"}, [](Ctx& c, CollArgsT& a) { a.op = c.destroyedCommOp; });
    }
    if (k.rooted) {
      add("RootNegative", ncclInvalidArgument, {"root"}, [](Ctx&, CollArgsT& a) { a.root = -1; });
      add("RootIsNranks", ncclInvalidArgument, {"root"}, [](Ctx& c, CollArgsT& a) { a.root = c.nRanks; });
    }
    if (k.peer) {
      add("PeerNegative", ncclInvalidArgument, {"peer"}, [](Ctx&, CollArgsT& a) { a.root = -1; });
      add("PeerIsNranks", ncclInvalidArgument, {"peer"}, [](Ctx& c, CollArgsT& a) { a.root = c.nRanks; });
    }
    if (k.overlapSend >= 0) {
      const int so = k.overlapSend, ro = k.overlapRecv;
      add("PartialOverlap", ncclInvalidUsage, {"sendbuff", "recvbuff"}, [so, ro](Ctx& c, CollArgsT& a) {
        a.send = c.a + so;
        a.recv = c.a + ro;
      });
    }
    add("GarbageStream", ncclInvalidArgument, {"stream"}, [](Ctx& c, CollArgsT& a) { a.stream = c.garbageStream; });
    add("DestroyedStream", ncclInvalidArgument, {"stream"}, [](Ctx& c, CollArgsT& a) { a.stream = c.deadStream; });
  }
}

}  // namespace

// Defined in matrix_rows_api.cc: every other entry point.
void addApiRows(std::vector<MatrixRow>& rows);

std::vector<MatrixRow> matrixRows() {
  std::vector<MatrixRow> rows;
  addCollRows(rows);
  addApiRows(rows);
  return rows;
}

}  // namespace tutti::itest
