// C entry points for collectives, point-to-point and groups: validate, then record a task.
#include "api/api.h"
#include "api/argcheck.h"
#include "comm/comm.h"
#include "comm/group.h"
#include "device/common/dtypes.h"
#include "device/enqueue.h"
#include "device/host/direct_copy.h"
#include "device/host/oneshot.h"
#include "device/host/stream.h"

using namespace tutti;

namespace {

// The host and sim backends take host streams (tutti.h); a cuda communicator takes CUDA streams and memory
// the GPU can reach (device, managed, or host memory registered or allocated pinned).
ncclResult_t checkStreamAndBuffers(const char* call, ncclComm_t comm, cudaStream_t stream, const void* sendbuff,
                                   const void* recvbuff) {
  if (comm->backend != Backend::Cuda) {
    if (stream && !host::HostStream::fromHandle(stream))
      TUTTI_FAIL(ncclInvalidArgument, "{}: rank {}: stream {} is not a host stream created with tuttiStreamCreate (the "
                 "{} backend runs without CUDA streams)", call, comm->rank, static_cast<void*>(stream),
                 backendName(comm->backend));
    return ncclSuccess;
  }
  rt::Runtime* rt = device::runtimeOf(comm);
  for (const void* p : {sendbuff, recvbuff}) {
    if (!p) continue;
    rt::MemKind kind = rt::MemKind::Unknown;
    TUTTI_CHECK(rt->pointerKind(p, &kind));
    if (kind == rt::MemKind::Host || kind == rt::MemKind::Unknown)
      TUTTI_FAIL(ncclInvalidArgument, "{}: rank {}: {} {} is {}: a cuda communicator needs memory the GPU can reach "
                 "(cudaMalloc, cudaMallocManaged, ncclMemAlloc, or host memory from cudaHostAlloc / cudaHostRegister)",
                 call, comm->rank, p == sendbuff ? "sendbuff" : "recvbuff", p, rt::memKindName(kind));
  }
  return ncclSuccess;
}

// An empty collective (count 0) is discarded once its arguments pass. This is the cheap form of the full path's
// checks for that case: a live and usable communicator, a valid datatype, root and built-in op, no stream to look
// up. Anything else, user ops and host streams included, goes through the full path, which also names the problem.
// The call then costs a few loads rather than the general checks (a third of the time: 37 -> 12 ns).
inline bool emptyCallPasses(ncclFunc_t func, ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                            cudaStream_t stream) {
  if (stream || !commIsValid(comm) || !dataTypeValid(datatype)) return false;
  if (comm->state.load(std::memory_order_acquire) != CommState::Ready ||
      comm->asyncError.load(std::memory_order_acquire) != ncclSuccess)
    return false;
  if ((func == ncclFuncBroadcast || func == ncclFuncReduce || func == ncclFuncGather || func == ncclFuncScatter) &&
      (root < 0 || root >= comm->nRanks)) return false;
  if (func == ncclFuncAllReduce || func == ncclFuncReduce || func == ncclFuncReduceScatter)
    return static_cast<int>(op) >= 0 && static_cast<int>(op) < static_cast<int>(ncclNumOps) &&
           (comm->devArch == 0 || comm->devArch >= minArchForReduction(datatype));
  return true;
}

// Records the call's task in the group (or runs it, outside one): its arguments have passed.
inline ncclResult_t enqueueTask(ncclFunc_t func, const void* sendbuff, void* recvbuff, size_t count,
                                ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                                cudaStream_t stream) {
  Task t;
  t.func = func;
  t.comm = comm;
  t.sendbuff = sendbuff;
  t.recvbuff = recvbuff;
  t.count = count;
  t.datatype = datatype;
  t.op = op;
  t.root = root;
  t.stream = stream;
  return groupEnqueue(t);
}

[[gnu::noinline]] ncclResult_t enqueueChecked(const char* call, ncclFunc_t func, const void* sendbuff, void* recvbuff,
                                              size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,
                                              ncclComm_t comm, cudaStream_t stream) {
  TUTTI_CHECK(argCheckComm(comm, call));
  TUTTI_CHECK(commCheckUsable(comm, call));
  CollArgs a;
  a.call = call;
  a.func = func;
  a.sendbuff = sendbuff;
  a.recvbuff = recvbuff;
  a.count = count;
  a.datatype = datatype;
  a.op = op;
  a.root = root;
  a.rank = comm->rank;
  a.nRanks = comm->nRanks;
  TUTTI_CHECK(argCheckCollective(a));
  TUTTI_CHECK(checkStreamAndBuffers(call, comm, stream, count ? sendbuff : nullptr, count ? recvbuff : nullptr));
  if (func == ncclFuncAllReduce || func == ncclFuncReduce || func == ncclFuncReduceScatter) {
    // A user's op must exist and match the datatype; a built-in one passed argCheckCollective already.
    if (static_cast<int>(op) >= static_cast<int>(ncclNumOps)) {
      ResolvedRedOp resolved;
      TUTTI_CHECK(comm->redOps->resolve(op, datatype, &resolved, call));
    }
    const int need = minArchForReduction(datatype);
    if (comm->devArch && comm->devArch < need)
      TUTTI_FAIL(ncclInvalidArgument, "{}: rank {}: {} reductions need compute capability {}.{} (sm_{}) or newer; "
                 "this communicator's GPU ({} backend) is sm_{}", call, comm->rank, dataTypeName(datatype), need / 10,
                 need % 10, need, backendName(comm->backend), comm->devArch);
  }
  // An empty collective moves nothing: discarded once its arguments pass, as NCCL discards it (every rank passes the
  // same count, so every rank discards it). Point-to-point calls of 0 bytes still pair up.
  if (count == 0 && func != ncclFuncSend && func != ncclFuncRecv) return ncclSuccess;
  return enqueueTask(func, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

// A collective of AllReduce, Broadcast, AllGather, ReduceScatter or AlltoAll whose arguments are plainly valid: the
// cheap form of the full path's checks for the usual call, as emptyCallPasses is for the empty one. The checks of
// argCheckCollective and checkStreamAndBuffers for it: a live and usable host or sim communicator, no stream, a valid
// datatype and built-in op, a root in range, a count whose bytes cannot overflow, both buffers set, and the buffers
// disjoint or exactly in place. Anything else goes through the full path, which also names the problem. A call of a
// few bytes then costs its steps more than its checks (2 thread ranks, Broadcast of 8 B, callgrind: 352 -> 151
// instructions per call from the entry point to the group).
inline bool plainCallPasses(ncclFunc_t func, const void* sendbuff, const void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  constexpr size_t kPlainMaxCount = size_t{1} << 40;  // times 8-byte elements and 2^16 ranks: far from overflow
  if (stream || count == 0 || count >= kPlainMaxCount || !sendbuff || !recvbuff || !commIsValid(comm) ||
      !dataTypeValid(datatype))
    return false;
  // The state first: a nonblocking init still running writes the backend and the device's architecture, and
  // Ready (acquire) is what makes them readable here.
  if (comm->state.load(std::memory_order_acquire) != CommState::Ready ||
      comm->asyncError.load(std::memory_order_acquire) != ncclSuccess || comm->backend == Backend::Cuda ||
      comm->devArch != 0)
    return false;
  const size_t block = count * dataTypeSize(datatype), n = static_cast<size_t>(comm->nRanks);
  size_t sendBytes = block, recvBytes = block;
  const auto s = reinterpret_cast<uintptr_t>(sendbuff), r = reinterpret_cast<uintptr_t>(recvbuff);
  bool inPlace = s == r;
  switch (func) {
    case ncclFuncAllReduce:
    case ncclFuncReduceScatter:
      if (static_cast<int>(op) < 0 || static_cast<int>(op) >= static_cast<int>(ncclNumOps)) return false;
      if (func == ncclFuncReduceScatter) {
        sendBytes = block * n;
        inPlace = r == s + static_cast<size_t>(comm->rank) * block;
      }
      break;
    case ncclFuncBroadcast:
      if (root < 0 || root >= comm->nRanks) return false;
      if (comm->rank != root) return true;  // the root's buffer alone is read
      break;
    case ncclFuncAllGather:
      recvBytes = block * n;
      inPlace = s == r + static_cast<size_t>(comm->rank) * block;
      break;
    case ncclFuncAlltoAll:
      sendBytes = recvBytes = block * n;
      break;
    default:
      return false;
  }
  return inPlace || !(s < r + recvBytes && r < s + sendBytes);
}

// The empty call's test comes first, inline in the entry point: it returns before the general path's frame is set up.
// Then the plain call's, whose task goes to the group at once.
inline ncclResult_t enqueue(const char* call, ncclFunc_t func, const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  if (count == 0 && func != ncclFuncSend && func != ncclFuncRecv &&
      emptyCallPasses(func, datatype, op, root, comm, stream))
    return ncclSuccess;
  if (plainCallPasses(func, sendbuff, recvbuff, count, datatype, op, root, comm, stream))
    return enqueueTask(func, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  return enqueueChecked(call, func, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

// AlltoAll, Gather and Scatter are grouped send/receive. The arguments are checked as a whole first, so a
// bad call records nothing.
ncclResult_t checkWhole(const char* call, ncclFunc_t func, const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm) {
  TUTTI_CHECK(argCheckComm(comm, call));
  CollArgs a;
  a.call = call;
  a.func = func;
  a.sendbuff = sendbuff;
  a.recvbuff = recvbuff;
  a.count = count;
  a.datatype = datatype;
  a.root = root;
  a.rank = comm->rank;
  a.nRanks = comm->nRanks;
  return argCheckCollective(a);
}

// One-sided calls are not implemented yet, but their arguments are checked first, so a program that would
// fail in NCCL fails here with the same code and a message naming the argument.
template <typename Body>
ncclResult_t asGroup(Body&& body) {
  TUTTI_CHECK(groupStart());
  ncclResult_t res = body();
  ncclResult_t end = groupEnd();
  return res != ncclSuccess ? res : end;
}

}  // namespace

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return apiGuard("ncclAllReduce", [&] {
    return enqueue("ncclAllReduce", ncclFuncAllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
  });
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return apiGuard("ncclReduce", [&] {
    return enqueue("ncclReduce", ncclFuncReduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  });
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream) {
  return apiGuard("ncclBroadcast", [&] {
    return enqueue("ncclBroadcast", ncclFuncBroadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                   stream);
  });
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
         cudaStream_t stream) {
  return apiGuard("ncclBcast", [&]() -> ncclResult_t {
    // Checked here so the message names the one buffer ncclBcast has (enqueue would call it sendbuff).
    TUTTI_CHECK(argCheckComm(comm, "ncclBcast"));
    if (buff == nullptr && count > 0)
      TUTTI_FAIL(ncclInvalidArgument, "ncclBcast: buff argument is NULL with count {}", count);
    return enqueue("ncclBcast", ncclFuncBroadcast, buff, buff, count, datatype, ncclSum, root, comm, stream);
  });
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return apiGuard("ncclAllGather", [&]() -> ncclResult_t {
    // Over the network from comm->allGatherSendsMinBytes of output (comm.cc): every block to every peer at once, as
    // grouped sends and receives, where the ring's n - 1 steps wake the ranks one after another. Checked as a whole
    // first, as AlltoAll's; every rank decides alike (the same count everywhere).
    if (sendcount > 0 && sendcount < (size_t{1} << 40) && dataTypeValid(datatype) && commIsValid(comm) &&
        comm->state.load(std::memory_order_acquire) == CommState::Ready && comm->allGatherSendsMinBytes &&
        sendcount * dataTypeSize(datatype) * static_cast<size_t>(comm->nRanks) >= comm->allGatherSendsMinBytes) {
      if (!plainCallPasses(ncclFuncAllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream))
        TUTTI_CHECK(checkWhole("ncclAllGather", ncclFuncAllGather, sendbuff, recvbuff, sendcount, datatype, 0, comm));
      const size_t block = sendcount * dataTypeSize(datatype);
      const char* mine = static_cast<const char*>(recvbuff) + static_cast<size_t>(comm->rank) * block;
      return asGroup([&]() -> ncclResult_t {
        for (int r = 0; r < comm->nRanks; ++r) {
          if (r == comm->rank && sendbuff == mine) continue;  // in place: this rank's block is already there
          TUTTI_CHECK(enqueue("ncclAllGather", ncclFuncSend, sendbuff, nullptr, sendcount, datatype, ncclSum, r, comm,
                              stream));
          TUTTI_CHECK(enqueue("ncclAllGather", ncclFuncRecv, nullptr, static_cast<char*>(recvbuff) + r * block,
                              sendcount, datatype, ncclSum, r, comm, stream));
        }
        return ncclSuccess;
      });
    }
    return enqueue("ncclAllGather", ncclFuncAllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm,
                   stream);
  });
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return apiGuard("ncclReduceScatter", [&] {
    return enqueue("ncclReduceScatter", ncclFuncReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm,
                   stream);
  });
}

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  return apiGuard("ncclSend", [&] {
    return enqueue("ncclSend", ncclFuncSend, sendbuff, nullptr, count, datatype, ncclSum, peer, comm, stream);
  });
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream) {
  return apiGuard("ncclRecv", [&] {
    return enqueue("ncclRecv", ncclFuncRecv, nullptr, recvbuff, count, datatype, ncclSum, peer, comm, stream);
  });
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream) {
  return apiGuard("ncclAlltoAll", [&]() -> ncclResult_t {
    if (count == 0 && emptyCallPasses(ncclFuncAlltoAll, datatype, ncclSum, 0, comm, stream)) return ncclSuccess;
    if (!plainCallPasses(ncclFuncAlltoAll, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream))
      TUTTI_CHECK(checkWhole("ncclAlltoAll", ncclFuncAlltoAll, sendbuff, recvbuff, count, datatype, 0, comm));
    if (count == 0) {  // empty: discarded, as an empty collective is
      TUTTI_CHECK(commCheckUsable(comm, "ncclAlltoAll"));
      return ncclSuccess;
    }
    const size_t block = count * dataTypeSize(datatype);
    // Small buffers go to every peer at once (device/host/oneshot.h), and inside one host large blocks are read
    // once from the peers' buffers (device/host/direct_copy.h): one collective instead of the sends and receives
    // below. Every rank decides alike (the same count everywhere).
    if (oneShotWanted(comm, ncclFuncAlltoAll, block * comm->nRanks) ||
        doublingWanted(comm, ncclFuncAlltoAll, block * comm->nRanks, /*det=*/false) ||
        directWanted(comm, ncclFuncAlltoAll, block * comm->nRanks))
      return enqueue("ncclAlltoAll", ncclFuncAlltoAll, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream);
    // In place (sendbuff == recvbuff): a receive would overwrite a block before it was sent, so the blocks
    // are sent from a copy in the communicator's scratch, made first by sends to and receives from this rank
    // (copies in stream order, before the group's other sends start); this rank's own block stays where it is.
    // Device backends keep to the scratch made at init (comm->scratchAtInit): the call runs in rounds, one group
    // each, round i moving the same columns [a, a + m) of every block. A round overwrites only its own columns,
    // which it copied first, so later rounds still find theirs.
    const bool inPlace = sendbuff == recvbuff && comm->nRanks > 1 && block > 0;
    if (!inPlace) {
      return asGroup([&]() -> ncclResult_t {
        for (int r = 0; r < comm->nRanks; ++r) {
          TUTTI_CHECK(enqueue("ncclAlltoAll", ncclFuncSend, static_cast<const char*>(sendbuff) + r * block, nullptr,
                              count, datatype, ncclSum, r, comm, stream));
          TUTTI_CHECK(enqueue("ncclAlltoAll", ncclFuncRecv, nullptr, static_cast<char*>(recvbuff) + r * block, count,
                              datatype, ncclSum, r, comm, stream));
        }
        return ncclSuccess;
      });
    }
    // Inside a user's group the rounds would be one launch (every staged copy before any send), beside other work
    // that may use the scratch: the call takes one round, in staging memory of its own (comm->staging, past the
    // group's other in-place AlltoAlls: groupScratchOffset), even where that allocates during the call.
    const size_t esize = dataTypeSize(datatype), n = static_cast<size_t>(comm->nRanks);
    const bool grouped = groupActive();
    size_t columns = count;  // elements of each block per round
    if (comm->scratchAtInit && !grouped) columns = std::clamp<size_t>(comm->scratchAtInit / (n * esize), 1, count);
    const size_t at = groupScratchOffset(comm, columns * n * esize);
    void* scratchPtr = nullptr;
    TUTTI_CHECK(commScratch(comm, at + columns * n * esize, &scratchPtr, grouped));
    char* scratch = static_cast<char*>(scratchPtr) + at;
    char* buf = static_cast<char*>(recvbuff);
    for (size_t a = 0; a < count; a += columns) {
      const size_t m = std::min(columns, count - a);
      TUTTI_CHECK(asGroup([&]() -> ncclResult_t {
        for (int r = 0; r < comm->nRanks; ++r) {  // this round's columns of every peer's block, into scratch
          if (r == comm->rank) continue;
          char* from = buf + r * block + a * esize;
          TUTTI_CHECK(enqueue("ncclAlltoAll", ncclFuncSend, from, nullptr, m, datatype, ncclSum, comm->rank, comm,
                              stream));
          TUTTI_CHECK(enqueue("ncclAlltoAll", ncclFuncRecv, nullptr, scratch + r * m * esize, m, datatype, ncclSum,
                              comm->rank, comm, stream));
        }
        for (int r = 0; r < comm->nRanks; ++r) {
          if (r == comm->rank) continue;
          TUTTI_CHECK(enqueue("ncclAlltoAll", ncclFuncSend, scratch + r * m * esize, nullptr, m, datatype, ncclSum, r,
                              comm, stream));
          TUTTI_CHECK(enqueue("ncclAlltoAll", ncclFuncRecv, nullptr, buf + r * block + a * esize, m, datatype,
                              ncclSum, r, comm, stream));
        }
        return ncclSuccess;
      }));
    }
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream) {
  return apiGuard("ncclGather", [&]() -> ncclResult_t {
    if (count == 0 && emptyCallPasses(ncclFuncGather, datatype, ncclSum, root, comm, stream)) return ncclSuccess;
    TUTTI_CHECK(checkWhole("ncclGather", ncclFuncGather, sendbuff, recvbuff, count, datatype, root, comm));
    if (count == 0) {  // empty: discarded, as an empty collective is
      TUTTI_CHECK(commCheckUsable(comm, "ncclGather"));
      return ncclSuccess;
    }
    const size_t block = count * dataTypeSize(datatype);
    return asGroup([&]() -> ncclResult_t {
      TUTTI_CHECK(enqueue("ncclGather", ncclFuncSend, sendbuff, nullptr, count, datatype, ncclSum, root, comm, stream));
      if (comm->rank == root) {
        for (int r = 0; r < comm->nRanks; ++r)
          TUTTI_CHECK(enqueue("ncclGather", ncclFuncRecv, nullptr, static_cast<char*>(recvbuff) + r * block, count,
                              datatype, ncclSum, r, comm, stream));
      }
      return ncclSuccess;
    });
  });
}

NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream) {
  return apiGuard("ncclScatter", [&]() -> ncclResult_t {
    if (count == 0 && emptyCallPasses(ncclFuncScatter, datatype, ncclSum, root, comm, stream)) return ncclSuccess;
    TUTTI_CHECK(checkWhole("ncclScatter", ncclFuncScatter, sendbuff, recvbuff, count, datatype, root, comm));
    if (count == 0) {  // empty: discarded, as an empty collective is
      TUTTI_CHECK(commCheckUsable(comm, "ncclScatter"));
      return ncclSuccess;
    }
    const size_t block = count * dataTypeSize(datatype);
    return asGroup([&]() -> ncclResult_t {
      if (comm->rank == root) {
        for (int r = 0; r < comm->nRanks; ++r)
          TUTTI_CHECK(enqueue("ncclScatter", ncclFuncSend, static_cast<const char*>(sendbuff) + r * block, nullptr,
                              count, datatype, ncclSum, r, comm, stream));
      }
      TUTTI_CHECK(enqueue("ncclScatter", ncclFuncRecv, nullptr, recvbuff, count, datatype, ncclSum, root, comm, stream));
      return ncclSuccess;
    });
  });
}

NCCL_API(ncclResult_t, ncclGroupStart) {
  return apiGuard("ncclGroupStart", [] { return groupStart(); });
}

NCCL_API(ncclResult_t, ncclGroupEnd) {
  return apiGuard("ncclGroupEnd", [] { return groupEnd(); });
}

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  return apiGuard("ncclGroupSimulateEnd", [simInfo] { return groupSimulateEnd(simInfo); });
}

