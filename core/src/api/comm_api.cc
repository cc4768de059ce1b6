// C entry points for communicators: validate, then call comm/ and group code.
#include <tutti.h>

#include "api/api.h"
#include "api/argcheck.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "comm/comm.h"
#include "comm/group.h"
#include "device/enqueue.h"
#include "device/runtime.h"
#include "plugin/params.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
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
  if (effective.blocking == 0) {
    // Nonblocking (as NCCL): the handle exists at once; ncclCommGetAsyncError says when it is ready.
    ncclComm* shell = commCreateShell(&effective);
    *newcomm = shell;
    return groupAddAsyncInit([shell, nranks, id, rank] {
      commStartAsyncInit(shell, nullptr, [shell, nranks, id, rank] { return commInitInto(shell, nranks, id, rank); });
    });
  }
  return groupAddInitJob([newcomm, nranks, id, rank, effective]() -> ncclResult_t {
    ncclComm* comm = nullptr;
    TUTTI_CHECK(commInitRank(&comm, nranks, id, rank, &effective));
    *newcomm = comm;
    return ncclSuccess;
  });
}

ncclResult_t checkComm(ncclComm_t comm, const char* call) { return argCheckComm(comm, call); }

// checkComm, and the communicator has finished initializing (its ranks, ops and bootstrap exist).
ncclResult_t checkInitialized(ncclComm_t comm, const char* call) {
  TUTTI_CHECK(argCheckComm(comm, call));
  if (comm->state.load() != CommState::Initializing) return ncclSuccess;
  const ncclResult_t err = comm->asyncError.load();
  if (err == ncclInProgress)
    TUTTI_FAIL(ncclInvalidArgument, "{}: the communicator is still initializing (wait until ncclCommGetAsyncError "
               "returns ncclSuccess)", call);
  TUTTI_FAIL(ncclInvalidArgument, "{}: the communicator failed to initialize ({}); only ncclCommDestroy and "
             "ncclCommAbort apply to it", call, ncclGetErrorString(err));
}

// The child of a split or shrink: agreement on its unique id over the parent's bootstrap (collective among
// the members), then its init. Blocking: *newcomm is set on success. Nonblocking: *newcomm is set at once
// and the whole of it runs in the background (ncclInProgress).
using ChildAgreement = std::function<ncclResult_t(ncclUniqueId* id, int* nRanks, int* rank)>;
ncclResult_t createChild(ncclComm* parent, const ncclConfig_t& config, ChildAgreement agree, ncclComm_t* newcomm) {
  if (config.blocking != 0) {
    ncclUniqueId id;
    int nRanks = 0, rank = 0;
    TUTTI_CHECK(agree(&id, &nRanks, &rank));
    ncclComm* child = nullptr;
    TUTTI_CHECK(commInitRank(&child, nRanks, id, rank, &config));
    *newcomm = child;
    return ncclSuccess;
  }
  ncclComm* shell = commCreateShell(&config);
  *newcomm = shell;
  commStartAsyncInit(shell, parent, [shell, agree = std::move(agree)]() -> ncclResult_t {
    ncclUniqueId id;
    int nRanks = 0, rank = 0;
    TUTTI_CHECK(agree(&id, &nRanks, &rank));
    return commInitInto(shell, nRanks, id, rank);
  });
  return ncclInProgress;
}

// Bootstrap tags of split and shrink agreements (user tags of the parent's bootstrap, never reused for data).
constexpr int kSplitTag = 0x200000;
constexpr int kShrinkTag = 0x200001;

// The last bytes of a grow id (ncclCommGetUniqueId), after the bootstrap's own: which communicator it grows
// and its size, so a joining rank can check the rank it asks for without the parent.
struct GrowTag {
  uint32_t marker;
  int32_t parentRanks;
  uint64_t parentHash;
};
constexpr uint32_t kGrowMarker = 0x776f7247;  // "Grow"
constexpr size_t kGrowTagOffset = NCCL_UNIQUE_ID_BYTES - sizeof(GrowTag);
static_assert(kGrowTagOffset >= sizeof(wire::UniqueId), "the grow tag must not overlap the bootstrap id");

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
    if (comm == nullptr) return ncclSuccess;  // as NCCL
    TUTTI_CHECK(checkInitialized(comm, "ncclCommFinalize"));
    if (comm->state.load() == CommState::Revoked)
      TUTTI_FAIL(ncclInvalidUsage, "ncclCommFinalize: rank {}: the communicator was revoked; destroy it instead",
                 comm->rank);
    // Host-backend operations without a stream are complete when their call returns (nonblocking ones when
    // ncclCommGetAsyncError says so); work queued on host streams finishes before ncclCommDestroy frees.
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

// Any thread, any time, also while other threads wait inside an operation of `comm` or its nonblocking
// init runs: every wait ends (ncclInternalError or the cause), then everything is freed.
NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  return apiGuard("ncclCommAbort", [&]() -> ncclResult_t {
    if (comm == nullptr) return ncclSuccess;
    TUTTI_CHECK(checkComm(comm, "ncclCommAbort"));
    comm->state = CommState::Aborted;
    commSignalAbort(comm);
    return commFree(comm);
  });
}

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  return apiGuard("ncclCommRevoke", [&]() -> ncclResult_t {
    if (comm == nullptr) return ncclSuccess;
    TUTTI_CHECK(checkInitialized(comm, "ncclCommRevoke"));
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
      TUTTI_FAIL(ncclInvalidArgument, "ncclCommRevoke: revokeFlags {} must be NCCL_REVOKE_DEFAULT (0)", revokeFlags);
    CommState expected = CommState::Ready;
    if (!comm->state.compare_exchange_strong(expected, CommState::Revoked))
      TUTTI_FAIL(ncclInvalidArgument, "ncclCommRevoke: rank {}: the communicator was already {}", comm->rank,
                 expected == CommState::Revoked ? "revoked" : expected == CommState::Finalized ? "finalized" : "aborted");
    // In-flight operations end (here and, through the closed connections, on the peers); the bootstrap
    // stays, for split and shrink. Quiet once the calls inside the communicator have left.
    commCancelOps(comm);
    commQuiesce(comm);
    TUTTI_INFO(NCCL_INIT, "rank {}: communicator revoked", comm->rank);
    comm->asyncError.store(ncclSuccess);
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return apiGuard("ncclCommShrink", [&]() -> ncclResult_t {
    constexpr const char* kCall = "ncclCommShrink";
    TUTTI_CHECK(checkInitialized(comm, kCall));
    TUTTI_CHECK(argCheckPtr(newcomm, "newcomm", kCall));
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
      TUTTI_FAIL(ncclInvalidArgument, "{}: shrinkFlags {} must be NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT", kCall,
                 shrinkFlags);
    if (excludeRanksCount < 0 || excludeRanksCount >= comm->nRanks)
      TUTTI_FAIL(ncclInvalidArgument, "{}: excludeRanksCount {} must be in 0..{} (nRanks {})", kCall,
                 excludeRanksCount, comm->nRanks - 1, comm->nRanks);
    if (excludeRanksCount > 0) TUTTI_CHECK(argCheckPtr(excludeRanksList, "excludeRanksList", kCall));
    std::vector<char> excluded(comm->nRanks, 0);
    for (int i = 0; i < excludeRanksCount; ++i) {
      const int r = excludeRanksList[i];
      if (r < 0 || r >= comm->nRanks)
        TUTTI_FAIL(ncclInvalidArgument, "{}: excludeRanksList[{}] = {} is out of range for nRanks {}", kCall, i, r,
                   comm->nRanks);
      if (excluded[r]) TUTTI_FAIL(ncclInvalidArgument, "{}: rank {} is listed twice in excludeRanksList", kCall, r);
      if (r == comm->rank)
        TUTTI_FAIL(ncclInvalidArgument, "{}: rank {} excludes itself (excluded ranks do not call ncclCommShrink)",
                   kCall, r);
      excluded[r] = 1;
    }
    ncclConfig_t effective = comm->config;
    if (config) TUTTI_CHECK(argCheckConfig(config, &effective, kCall));
    *newcomm = nullptr;
    if (shrinkFlags == NCCL_SHRINK_ABORT) {
      // Operations still waiting on the excluded (perhaps dead) ranks end first; the bootstrap stays.
      commCancelOps(comm);
      commQuiesce(comm);
    }
    std::vector<int> members;
    for (int r = 0; r < comm->nRanks; ++r)
      if (!excluded[r]) members.push_back(r);
    // Survivors must agree on who is excluded: the new rank 0 sends the id with a digest of the list.
    uint64_t digest = 0xcbf29ce484222325ull;
    for (int r : members) digest = (digest ^ static_cast<uint64_t>(r)) * 0x100000001b3ull;
    ChildAgreement agree = [comm, members, digest](ncclUniqueId* id, int* nRanks, int* rank) -> ncclResult_t {
      struct Offer {
        ncclUniqueId id;
        uint64_t digest;
      } offer;
      *nRanks = static_cast<int>(members.size());
      *rank = static_cast<int>(std::find(members.begin(), members.end(), comm->rank) - members.begin());
      if (*rank == 0) {
        TUTTI_CHECK(bootstrapGetUniqueId(&offer.id));
        offer.digest = digest;
        for (size_t i = 1; i < members.size(); ++i)
          TUTTI_CHECK(comm->bootstrap->send(members[i], kShrinkTag, &offer, sizeof offer));
      } else {
        const int64_t limitMs = std::max<int64_t>(1, paramInt("TUTTI_BOOTSTRAP_TIMEOUT")) * 1000;
        const ncclResult_t r = comm->bootstrap->recvWithin(members[0], kShrinkTag, &offer, sizeof offer, limitMs);
        if (r != ncclSuccess)
          TUTTI_FAIL(r == ncclTimeout ? ncclTimeout : ncclRemoteError, "ncclCommShrink: rank {}: no communicator id "
                     "from rank {} (the lowest surviving rank) within {} s ({})", comm->rank, members[0],
                     limitMs / 1000, ncclGetErrorString(r));
        if (offer.digest != digest)
          TUTTI_FAIL(ncclInvalidUsage, "ncclCommShrink: rank {}: the ranks disagree on excludeRanksList (rank {} "
                     "excluded a different set)", comm->rank, members[0]);
      }
      *id = offer.id;
      return ncclSuccess;
    };
    return createChild(comm, effective, std::move(agree), newcomm);
  });
}

NCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId) {
  return apiGuard("ncclCommGetUniqueId", [&]() -> ncclResult_t {
    constexpr const char* kCall = "ncclCommGetUniqueId";
    TUTTI_CHECK(checkInitialized(comm, kCall));
    TUTTI_CHECK(argCheckPtr(uniqueId, "uniqueId", kCall));
    std::lock_guard<std::mutex> lock(comm->lifeMutex);
    if (comm->growId)
      TUTTI_FAIL(ncclInvalidUsage, "{}: rank {}: the previous grow id of this communicator has not been used by "
                 "ncclCommGrow yet; a new one can be made only after it", kCall, comm->rank);
    ncclUniqueId id;
    TUTTI_CHECK(bootstrapGetUniqueId(&id));  // its rendezvous root runs in this process
    const GrowTag tag{kGrowMarker, comm->nRanks, comm->commHash};
    std::memcpy(id.internal + kGrowTagOffset, &tag, sizeof tag);
    comm->growId = std::make_unique<ncclUniqueId>(id);
    *uniqueId = id;
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
         ncclComm_t* newcomm, ncclConfig_t* config) {
  return apiGuard("ncclCommGrow", [&]() -> ncclResult_t {
    constexpr const char* kCall = "ncclCommGrow";
    TUTTI_CHECK(argCheckPtr(newcomm, "newcomm", kCall));
    if (nRanks <= 0) TUTTI_FAIL(ncclInvalidArgument, "{}: nRanks {} must be positive", kCall, nRanks);
    if (!comm) {
      // A joining rank: the id says how many ranks the parent has, so the rank is checked here.
      TUTTI_CHECK(argCheckPtr(uniqueId, "uniqueId", kCall));
      GrowTag tag;
      std::memcpy(&tag, uniqueId->internal + kGrowTagOffset, sizeof tag);
      if (tag.marker != kGrowMarker)
        TUTTI_FAIL(ncclInvalidArgument, "{}: the id was not made by ncclCommGetUniqueId (a joining rank needs the "
                   "grow id of the communicator it joins)", kCall);
      if (rank < tag.parentRanks || rank >= nRanks)
        TUTTI_FAIL(ncclInvalidArgument, "{}: a joining rank's rank must be in [{}, {}) (the parent has {} ranks, the "
                   "grown communicator {}), not {}", kCall, tag.parentRanks, nRanks, tag.parentRanks, nRanks, rank);
      return initRank(newcomm, nRanks, *uniqueId, rank, config, kCall);
    }
    TUTTI_CHECK(checkInitialized(comm, kCall));
    if (rank != -1)
      TUTTI_FAIL(ncclInvalidArgument, "{}: rank {} of the parent passes rank {}: existing ranks pass -1 (they keep "
                 "their rank)", kCall, comm->rank, rank);
    if (nRanks <= comm->nRanks)
      TUTTI_FAIL(ncclInvalidArgument, "{}: nRanks {} must be larger than the parent's {} ranks", kCall, nRanks,
                 comm->nRanks);
    if (uniqueId) {
      std::lock_guard<std::mutex> lock(comm->lifeMutex);
      if (!comm->growId || std::memcmp(comm->growId->internal, uniqueId->internal, NCCL_UNIQUE_ID_BYTES) != 0)
        TUTTI_FAIL(ncclInvalidArgument, "{}: rank {} passes an id that is not this communicator's current grow id "
                   "(made by ncclCommGetUniqueId on this rank)", kCall, comm->rank);
    }
    ncclConfig_t effective = comm->config;
    if (config) TUTTI_CHECK(argCheckConfig(config, &effective, kCall));
    *newcomm = nullptr;
    // The coordinator (the rank that passes the id) hands it to the other existing ranks; all must agree on
    // the new size.
    const bool coordinator = uniqueId != nullptr;
    const ncclUniqueId offered = coordinator ? *uniqueId : ncclUniqueId{};
    ChildAgreement agree = [comm, nRanks, coordinator, offered](ncclUniqueId* id, int* outRanks, int* outRank) {
      struct Entry {
        ncclUniqueId id;
        int32_t hasId, nRanks;
      };
      std::vector<Entry> all(comm->nRanks);
      all[comm->rank] = {offered, coordinator ? 1 : 0, nRanks};
      TUTTI_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Entry)));
      std::vector<int> coordinators;
      for (int r = 0; r < comm->nRanks; ++r) {
        if (all[r].hasId) coordinators.push_back(r);
        if (all[r].nRanks != nRanks)
          TUTTI_FAIL(ncclInvalidUsage, "ncclCommGrow: rank {} grows to {} ranks but rank {} to {}: every rank must pass "
                     "the same nRanks", comm->rank, nRanks, r, all[r].nRanks);
      }
      if (coordinators.size() != 1)
        TUTTI_FAIL(ncclInvalidUsage, "ncclCommGrow: rank {}: exactly one existing rank must pass the grow id, {} did{}",
                   comm->rank, coordinators.size(),
                   coordinators.empty() ? " (the rank that called ncclCommGetUniqueId passes it)"
                                        : fmt::format(" (ranks {})", fmt::join(coordinators, ", ")));
      *id = all[coordinators[0]].id;
      *outRanks = nRanks;
      *outRank = comm->rank;
      if (coordinator) {
        std::lock_guard<std::mutex> lock(comm->lifeMutex);
        comm->growId.reset();  // consumed: the next grow needs a new id
      }
      return ncclSuccess;
    };
    return createChild(comm, effective, std::move(agree), newcomm);
  });
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return apiGuard("ncclCommSplit", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkInitialized(comm, "ncclCommSplit"));
    TUTTI_CHECK(argCheckPtr(newcomm, "newcomm", "ncclCommSplit"));
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
      TUTTI_FAIL(ncclInvalidArgument, "ncclCommSplit: color {} must be >= 0 or NCCL_SPLIT_NOCOLOR", color);
    ncclConfig_t effective = comm->config;
    if (config) TUTTI_CHECK(argCheckConfig(config, &effective, "ncclCommSplit"));
    *newcomm = nullptr;
    // Everyone learns every (color, key); the first member (in new-rank order) of each color makes the
    // new unique id and hands it to the other members.
    ChildAgreement agree = [comm, color, key](ncclUniqueId* id, int* nRanks, int* newRank) -> ncclResult_t {
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
      *nRanks = static_cast<int>(members.size());
      *newRank = static_cast<int>(std::find(members.begin(), members.end(), comm->rank) - members.begin());
      if (*newRank == 0) {
        TUTTI_CHECK(bootstrapGetUniqueId(id));
        for (size_t i = 1; i < members.size(); ++i)
          TUTTI_CHECK(comm->bootstrap->send(members[i], kSplitTag, id, sizeof *id));
      } else {
        TUTTI_CHECK(comm->bootstrap->recv(members[0], kSplitTag, id, sizeof *id));
      }
      return ncclSuccess;
    };
    if (color != NCCL_SPLIT_NOCOLOR) return createChild(comm, effective, std::move(agree), newcomm);
    // No child, but the rank still takes part in the exchange: in the background for a nonblocking parent,
    // which then reports ncclInProgress until it is done.
    if (!commNonblocking(comm)) {
      ncclUniqueId unused;
      int n = 0, r = 0;
      return agree(&unused, &n, &r);
    }
    comm->asyncError.store(ncclInProgress);
    auto busy = std::make_shared<CommOpsGuard>(comm);
    auto job = std::make_shared<AsyncJob>([comm, busy, agree = std::move(agree)]() mutable {
      ncclUniqueId unused;
      int n = 0, r = 0;
      const ncclResult_t res = agree(&unused, &n, &r);
      comm->asyncError.store(res);
      busy.reset();
    });
    std::lock_guard<std::mutex> lock(comm->lifeMutex);
    comm->asyncJob = std::move(job);
    return ncclInProgress;
  });
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  return apiGuard("ncclCommGetAsyncError", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclCommGetAsyncError"));
    TUTTI_CHECK(argCheckPtr(asyncError, "asyncError", "ncclCommGetAsyncError"));
    // A launch whose kernels failed reports it now, not when the watcher looks (not while the communicator or a
    // nonblocking group is still in progress: its device state may be in the making).
    if (comm->asyncError.load() != ncclInProgress) device::commDeviceRetire(comm);
    *asyncError = comm->asyncError.load();
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  return apiGuard("ncclCommCount", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkInitialized(comm, "ncclCommCount"));
    TUTTI_CHECK(argCheckPtr(count, "count", "ncclCommCount"));
    *count = comm->nRanks;
    return ncclSuccess;
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiCommSetDeterministic(ncclComm_t comm, int enable) {
  return apiGuard("tuttiCommSetDeterministic", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkInitialized(comm, "tuttiCommSetDeterministic"));
    if (enable != 0 && enable != 1)
      TUTTI_FAIL(ncclInvalidArgument, "tuttiCommSetDeterministic: enable is {} (expected 0 or 1)", enable);
    comm->deterministic.store(enable == 1);
    TUTTI_INFO(NCCL_INIT, "rank {}: deterministic reductions {}", comm->rank, enable ? "on" : "off");
    return ncclSuccess;
  });
}

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiCommGetDeterministic(ncclComm_t comm, int* enabled) {
  return apiGuard("tuttiCommGetDeterministic", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkInitialized(comm, "tuttiCommGetDeterministic"));
    TUTTI_CHECK(argCheckPtr(enabled, "enabled", "tuttiCommGetDeterministic"));
    *enabled = comm->deterministic.load() ? 1 : 0;
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  return apiGuard("ncclCommCuDevice", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkInitialized(comm, "ncclCommCuDevice"));
    TUTTI_CHECK(argCheckPtr(device, "device", "ncclCommCuDevice"));
    *device = comm->cudaDev;
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  return apiGuard("ncclCommUserRank", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkInitialized(comm, "ncclCommUserRank"));
    TUTTI_CHECK(argCheckPtr(rank, "rank", "ncclCommUserRank"));
    *rank = comm->rank;
    return ncclSuccess;
  });
}

// Registration. Host-backend memory needs none: the handle is the buffer itself. On a device backend,
// device and managed memory need none either; host memory is registered with the device (cudaHostRegister
// on cuda), so its kernels reach the buffer, until ncclCommDeregister. The handle is then a record of it.
namespace {
struct HostRegistration {
  uint64_t magic = 0x72656769737472ull;  // "registr"
  rt::Runtime* rt;
  void* buff;
};
std::mutex gRegMutex;
std::unordered_set<HostRegistration*> gRegs;
}  // namespace

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return apiGuard("ncclCommRegister", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclCommRegister"));
    TUTTI_CHECK(argCheckPtr(handle, "handle", "ncclCommRegister"));
    if (size > 0) TUTTI_CHECK(argCheckPtr(buff, "buff", "ncclCommRegister"));
    *handle = buff;
    rt::Runtime* rt = device::runtimeOf(comm);
    if (!rt || size == 0) return ncclSuccess;
    rt::MemKind kind = rt::MemKind::Unknown;
    TUTTI_CHECK(rt->pointerKind(buff, &kind));
    if (kind != rt::MemKind::Host) return ncclSuccess;  // the device reaches it already
    TUTTI_CHECK(rt->hostRegister(buff, size));
    auto* reg = new HostRegistration{.rt = rt, .buff = buff};
    std::lock_guard<std::mutex> lock(gRegMutex);
    gRegs.insert(reg);
    *handle = reg;
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  return apiGuard("ncclCommDeregister", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkComm(comm, "ncclCommDeregister"));
    HostRegistration* reg = nullptr;
    {
      std::lock_guard<std::mutex> lock(gRegMutex);
      auto it = gRegs.find(static_cast<HostRegistration*>(handle));
      if (it == gRegs.end()) return ncclSuccess;  // a buffer that needed no registration
      reg = *it;
      gRegs.erase(it);
    }
    const ncclResult_t res = reg->rt->hostUnregister(reg->buff);
    delete reg;
    return res;
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


// Memory of the backend new communicators get, shareable with other processes of the host: memfd pages (the
// sim runtime's allocations, which are host memory, so the host backend uses them too) or, on cuda, cuMem with
// a POSIX-fd handle. Windows (rma/window.h) of such memory are reachable from other processes. Blocks are
// remembered with their runtime, so ncclMemFree refuses a pointer it did not hand out.
static std::mutex gMemMutex;
static std::unordered_map<void*, rt::Runtime*> gMemBlocks;

NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  return apiGuard("ncclMemAlloc", [&]() -> ncclResult_t {
    TUTTI_CHECK(argCheckPtr(ptr, "ptr", "ncclMemAlloc"));
    if (size == 0) TUTTI_FAIL(ncclInvalidArgument, "ncclMemAlloc: size is 0");
    if (size > SIZE_MAX - 4095) TUTTI_FAIL(ncclInvalidArgument, "ncclMemAlloc: size {} is too large", size);
    Backend backend = Backend::Host;
    std::string from, error;
    if (!backendOfNewComms(&backend, &from, &error)) TUTTI_FAIL(ncclInvalidUsage, "ncclMemAlloc: {}", error);
    // The host backend's memory is the sim runtime's too: memfd pages another process can map (rma/window.h).
    rt::Runtime* rt = backend == Backend::Cuda ? rt::cudaRuntime() : rt::simRuntime();
    void* p = nullptr;
    TUTTI_CHECK(rt->alloc(&p, size, /*shareable=*/true));
    std::lock_guard<std::mutex> lock(gMemMutex);
    gMemBlocks[p] = rt;
    *ptr = p;
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  return apiGuard("ncclMemFree", [&]() -> ncclResult_t {
    if (ptr == nullptr) return ncclSuccess;
    rt::Runtime* rt = nullptr;
    {
      std::lock_guard<std::mutex> lock(gMemMutex);
      auto it = gMemBlocks.find(ptr);
      if (it == gMemBlocks.end())
        TUTTI_FAIL(ncclInvalidArgument, "ncclMemFree: ptr {} was not returned by ncclMemAlloc (or was freed already)",
                   ptr);
      rt = it->second;
      gMemBlocks.erase(it);
    }
    return rt->free(ptr);
  });
}

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
         ncclScalarResidence_t residence, ncclComm_t comm) {
  return apiGuard("ncclRedOpCreatePreMulSum", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkInitialized(comm, "ncclRedOpCreatePreMulSum"));
    return comm->redOps->createPreMulSum(op, scalar, datatype, residence);
  });
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  return apiGuard("ncclRedOpDestroy", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkInitialized(comm, "ncclRedOpDestroy"));
    return comm->redOps->destroy(op);
  });
}
