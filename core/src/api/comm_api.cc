// C entry points for communicators: validate, then call comm/ and group code.
#include "api/api.h"
#include "api/argcheck.h"
#include "bootstrap/bootstrap.h"
#include "comm/comm.h"
#include "comm/group.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace tutti;

namespace {

// Registered once so argcheck can tell live communicators from garbage.
const bool kValidatorInstalled = [] {
  argSetCommValidator([](const void* c) { return commIsValid(static_cast<const ncclComm*>(c)); });
  return true;
}();

ncclResult_t initRank(ncclComm_t* newcomm, int nranks, const ncclUniqueId& id, int rank, ncclConfig_t* config,
                      const char* call) {
  TUTTI_CHECK(argCheckPtr(newcomm, "newcomm", call));
  if (nranks < 1) TUTTI_FAIL(ncclInvalidArgument, "{}: nranks {} must be at least 1", call, nranks);
  if (rank < 0 || rank >= nranks)
    TUTTI_FAIL(ncclInvalidArgument, "{}: rank {} is out of range for nranks {}", call, rank, nranks);
  ncclConfig_t effective = NCCL_CONFIG_INITIALIZER;
  TUTTI_CHECK(argCheckConfig(config, &effective, call));
  *newcomm = nullptr;
  return groupAddInitJob([newcomm, nranks, id, rank, effective]() -> ncclResult_t {
    ncclComm* comm = nullptr;
    TUTTI_CHECK(commInitRank(&comm, nranks, id, rank, &effective));
    *newcomm = comm;
    return ncclSuccess;
  });
}

ncclResult_t checkComm(ncclComm_t comm, const char* call) { return argCheckComm(comm, call); }

ncclResult_t notSupported(const char* call, const char* why) {
  TUTTI_FAIL(ncclInvalidUsage, "{} is not supported by this version of Tutti: {}", call, why);
}

}  // namespace

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  return apiGuard("ncclGetUniqueId", [&]() -> ncclResult_t {
    TUTTI_CHECK(argCheckPtr(uniqueId, "uniqueId", "ncclGetUniqueId"));
    return bootstrapGetUniqueId(uniqueId);
  });
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
         ncclConfig_t* config) {
  return apiGuard("ncclCommInitRankConfig",
                  [&] { return initRank(comm, nranks, commId, rank, config, "ncclCommInitRankConfig"); });
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return apiGuard("ncclCommInitRank", [&] { return initRank(comm, nranks, commId, rank, nullptr, "ncclCommInitRank"); });
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
         ncclUniqueId* commIds, ncclConfig_t* config) {
  return apiGuard("ncclCommInitRankScalable", [&]() -> ncclResult_t {
    TUTTI_CHECK(argCheckPtr(commIds, "commIds", "ncclCommInitRankScalable"));
    if (nId < 1) TUTTI_FAIL(ncclInvalidArgument, "ncclCommInitRankScalable: nId {} must be at least 1", nId);
    // One rendezvous root serves every rank here; the extra ids only spread load in NCCL.
    return initRank(newcomm, nranks, commIds[0], myrank, config, "ncclCommInitRankScalable");
  });
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  return apiGuard("ncclCommInitAll", [&]() -> ncclResult_t {
    TUTTI_CHECK(argCheckPtr(comms, "comms", "ncclCommInitAll"));
    if (ndev < 1) TUTTI_FAIL(ncclInvalidArgument, "ncclCommInitAll: ndev {} must be at least 1", ndev);
    if (devlist) {
      for (int i = 0; i < ndev; ++i)
        if (devlist[i] < 0) TUTTI_FAIL(ncclInvalidArgument, "ncclCommInitAll: devlist[{}] = {} is negative", i, devlist[i]);
    }
    ncclUniqueId id;
    TUTTI_CHECK(bootstrapGetUniqueId(&id));
    TUTTI_CHECK(groupStart());
    ncclResult_t res = ncclSuccess;
    for (int r = 0; r < ndev && res == ncclSuccess; ++r) res = initRank(&comms[r], ndev, id, r, nullptr, "ncclCommInitAll");
    ncclResult_t end = groupEnd();
    return res != ncclSuccess ? res : end;
  });
}

NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  return apiGuard("ncclCommFinalize", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclCommFinalize"));
    // Host-backend operations without a stream are complete when their call returns; nothing is in flight.
    comm->state = CommState::Finalized;
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  return apiGuard("ncclCommDestroy", [&]() -> ncclResult_t {
    if (comm == nullptr) return ncclSuccess;
    TUTTI_CHECK(checkComm(comm, "ncclCommDestroy"));
    return commFree(comm);
  });
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  return apiGuard("ncclCommAbort", [&]() -> ncclResult_t {
    if (comm == nullptr) return ncclSuccess;
    TUTTI_CHECK(checkComm(comm, "ncclCommAbort"));
    commSignalAbort(comm);
    comm->state = CommState::Aborted;
    return commFree(comm);
  });
}

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  (void)comm;
  (void)revokeFlags;
  return notSupported("ncclCommRevoke", "fault-tolerant shrinking is not implemented yet");
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  (void)comm, (void)excludeRanksList, (void)excludeRanksCount, (void)newcomm, (void)config, (void)shrinkFlags;
  return notSupported("ncclCommShrink", "fault-tolerant shrinking is not implemented yet");
}

NCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId) {
  (void)comm, (void)uniqueId;
  return notSupported("ncclCommGetUniqueId", "growing communicators is not implemented yet");
}

NCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
         ncclComm_t* newcomm, ncclConfig_t* config) {
  (void)comm, (void)nRanks, (void)uniqueId, (void)rank, (void)newcomm, (void)config;
  return notSupported("ncclCommGrow", "growing communicators is not implemented yet");
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return apiGuard("ncclCommSplit", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclCommSplit"));
    TUTTI_CHECK(argCheckPtr(newcomm, "newcomm", "ncclCommSplit"));
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
      TUTTI_FAIL(ncclInvalidArgument, "ncclCommSplit: color {} must be >= 0 or NCCL_SPLIT_NOCOLOR", color);
    ncclConfig_t effective = comm->config;
    if (config) TUTTI_CHECK(argCheckConfig(config, &effective, "ncclCommSplit"));
    *newcomm = nullptr;
    // Everyone learns every (color, key); the first member (in new-rank order) of each color makes the
    // new unique id and hands it to the other members.
    struct Entry {
      int color, key;
    };
    std::vector<Entry> all(comm->nRanks);
    all[comm->rank] = {color, key};
    TUTTI_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Entry)));
    if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
    std::vector<int> members;
    for (int r = 0; r < comm->nRanks; ++r)
      if (all[r].color == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return all[a].key != all[b].key ? all[a].key < all[b].key : a < b; });
    const int newRank = static_cast<int>(std::find(members.begin(), members.end(), comm->rank) - members.begin());
    constexpr int kSplitTag = 0x200000;
    ncclUniqueId id;
    if (newRank == 0) {
      TUTTI_CHECK(bootstrapGetUniqueId(&id));
      for (size_t i = 1; i < members.size(); ++i) TUTTI_CHECK(comm->bootstrap->send(members[i], kSplitTag, &id, sizeof id));
    } else {
      TUTTI_CHECK(comm->bootstrap->recv(members[0], kSplitTag, &id, sizeof id));
    }
    ncclComm* child = nullptr;
    TUTTI_CHECK(commInitRank(&child, static_cast<int>(members.size()), id, newRank, &effective));
    *newcomm = child;
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  return apiGuard("ncclCommGetAsyncError", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclCommGetAsyncError"));
    TUTTI_CHECK(argCheckPtr(asyncError, "asyncError", "ncclCommGetAsyncError"));
    *asyncError = comm->asyncError.load();
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  return apiGuard("ncclCommCount", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclCommCount"));
    TUTTI_CHECK(argCheckPtr(count, "count", "ncclCommCount"));
    *count = comm->nRanks;
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  return apiGuard("ncclCommCuDevice", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclCommCuDevice"));
    TUTTI_CHECK(argCheckPtr(device, "device", "ncclCommCuDevice"));
    *device = comm->cudaDev;
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  return apiGuard("ncclCommUserRank", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclCommUserRank"));
    TUTTI_CHECK(argCheckPtr(rank, "rank", "ncclCommUserRank"));
    *rank = comm->rank;
    return ncclSuccess;
  });
}

// Host-backend memory needs no registration: the handle is the buffer itself.
NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return apiGuard("ncclCommRegister", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclCommRegister"));
    TUTTI_CHECK(argCheckPtr(handle, "handle", "ncclCommRegister"));
    if (size > 0) TUTTI_CHECK(argCheckPtr(buff, "buff", "ncclCommRegister"));
    *handle = buff;
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  return apiGuard("ncclCommDeregister", [&]() -> ncclResult_t {
    (void)handle;
    return checkComm(comm, "ncclCommDeregister");
  });
}

// The host backend holds no device memory to release; suspend/resume only check the communicator.
NCCL_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags) {
  return apiGuard("ncclCommSuspend", [&]() -> ncclResult_t {
    (void)flags;
    return checkComm(comm, "ncclCommSuspend");
  });
}

NCCL_API(ncclResult_t, ncclCommResume, ncclComm_t comm) {
  return apiGuard("ncclCommResume", [&] { return checkComm(comm, "ncclCommResume"); });
}

NCCL_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  return apiGuard("ncclCommMemStats", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclCommMemStats"));
    TUTTI_CHECK(argCheckPtr(value, "value", "ncclCommMemStats"));
    if (static_cast<int>(stat) < 0 || static_cast<int>(stat) > 3)
      TUTTI_FAIL(ncclInvalidArgument, "ncclCommMemStats: unknown stat {}", static_cast<int>(stat));
    *value = 0;  // no GPU memory on the host backend
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
         int winFlags) {
  (void)comm, (void)buff, (void)size, (void)win, (void)winFlags;
  return notSupported("ncclCommWindowRegister", "one-sided windows are not implemented yet");
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  (void)comm, (void)win;
  return notSupported("ncclCommWindowDeregister", "one-sided windows are not implemented yet");
}

NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  (void)comm, (void)win, (void)outUserPtr;
  return notSupported("ncclWinGetUserPtr", "one-sided windows are not implemented yet");
}

// On the host backend "device" memory is host memory.
NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  return apiGuard("ncclMemAlloc", [&]() -> ncclResult_t {
    TUTTI_CHECK(argCheckPtr(ptr, "ptr", "ncclMemAlloc"));
    if (size == 0) TUTTI_FAIL(ncclInvalidArgument, "ncclMemAlloc: size is 0");
    void* p = std::aligned_alloc(4096, (size + 4095) & ~size_t{4095});
    if (!p) TUTTI_FAIL(ncclSystemError, "ncclMemAlloc: cannot allocate {} bytes", size);
    *ptr = p;
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  std::free(ptr);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
         ncclScalarResidence_t residence, ncclComm_t comm) {
  return apiGuard("ncclRedOpCreatePreMulSum", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclRedOpCreatePreMulSum"));
    return comm->redOps->createPreMulSum(op, scalar, datatype, residence);
  });
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  return apiGuard("ncclRedOpDestroy", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclRedOpDestroy"));
    return comm->redOps->destroy(op);
  });
}
