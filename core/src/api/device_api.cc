// Host entry points of NCCL's device API (nccl_device.h, up to NCCL 2.30) and ncclResetDebugInit, so that
// every function NCCL's libnccl.so.2 exports is exported here too and a binary linked against NCCL loads
// Tutti.
//
// Teams, communicator properties and window pointers are answered for real (the LSA team is the ranks of
// this host, rma/window.h lsaRange). Device communicators are made in rma/devcomm.cc; the GIN barrier and LL
// all-to-all builders size their buffers here (nccl_device/gin_barrier.h, ll_a2a.h). Multimem and the GIN
// outbox / inbox builders refuse with ncclInvalidUsage and say why; README.md ("Installing, and drop-in
// use") lists them.
#include "api/api.h"
#include "api/argcheck.h"
#include "comm/comm.h"
#include "rma/barrier_requirement.h"
#include "rma/window.h"
#include "util/log.h"

#include <nccl_device.h>

#include <cstring>

// Types of NCCL 2.30's GIN outbox / inbox builders, passed by pointer only.
struct ncclGinOutboxHandle;
struct ncclGinInboxA2AHandle;

namespace {

constexpr const char* kNoMultimem = "{}: multimem (NVLink SHARP) is not available: Tutti drives no NVSwitch";
constexpr const char* kNoGinQueues =
    "{}: GIN outboxes and inboxes are scratch of NCCL's own symmetric kernels (their state types are in no "
    "public NCCL header) and are not implemented by Tutti; use ncclGin put/signal, GIN or LSA barriers, or LL "
    "all-to-all sessions";

// A window handle as ncclCommWindowRegister made it (it carries its communicator).
ncclResult_t checkWindow(ncclWindow_t window, const char* call) {
  if (!window || window->magic != tutti::rma::kWindowMagic)
    TUTTI_FAIL(ncclInvalidArgument, "{}: {} is not a window made by ncclCommWindowRegister", call,
               static_cast<void*>(window));
  TUTTI_CHECK(tutti::argCheckComm(window->comm, call));
  return ncclSuccess;
}

// Where `peer`'s part of the window is, `offset` bytes in, as this process reaches it.
ncclResult_t peerPointer(ncclWindow_t window, size_t offset, int peer, void** outPtr, const char* call) {
  TUTTI_CHECK(tutti::argCheckPtr(outPtr, "outPtr", call));
  const size_t size = window->peerSize[peer];
  char* base = window->peerBase[peer];
  if (offset >= size && !(offset == 0 && size == 0))
    TUTTI_FAIL(ncclInvalidArgument, "{}: offset {} is outside rank {}'s {}-byte window", call, offset, peer, size);
  if (!base && size > 0)
    TUTTI_FAIL(ncclInvalidUsage, "{}: rank {}'s window is not reachable by load/store from rank {} (another host, or "
               "memory of another process not allocated with ncclMemAlloc)", call, peer, window->rank);
  *outPtr = base ? base + offset : nullptr;
  return ncclSuccess;
}

// A team the comm cannot describe (null or uninitialized comm): zero ranks, so no rank is a member.
ncclTeam worldOf(ncclComm_t comm) {
  if (tutti::argCheckComm(comm, "ncclTeamWorld") != ncclSuccess) return ncclTeam{0, 0, 1};
  return ncclTeam{comm->nRanks, comm->rank, 1};
}

}  // namespace

NCCL_API(ncclResult_t, ncclCommQueryProperties, ncclComm_t comm, ncclCommProperties* props) {
  return tutti::apiGuard("ncclCommQueryProperties", [&]() -> ncclResult_t {
    TUTTI_CHECK(tutti::argCheckComm(comm, "ncclCommQueryProperties"));
    TUTTI_CHECK(tutti::argCheckPtr(props, "props", "ncclCommQueryProperties"));
    if (props->magic != NCCL_API_MAGIC)
      TUTTI_FAIL(ncclInvalidUsage, "ncclCommQueryProperties: props must start from NCCL_COMM_PROPERTIES_INITIALIZER");
    // Only the fields the caller's struct has: `size` (from its header) bounds what is written.
    const size_t size = props->size;
    auto set = [&](auto ncclCommProperties::*field, auto value) {
      const size_t end = reinterpret_cast<const char*>(&(props->*field)) - reinterpret_cast<const char*>(props) +
                         sizeof(props->*field);
      if (end <= size) props->*field = value;
    };
    set(&ncclCommProperties::rank, comm->rank);
    set(&ncclCommProperties::nRanks, comm->nRanks);
    set(&ncclCommProperties::cudaDev, comm->cudaDev);
    set(&ncclCommProperties::nvmlDev, comm->cudaDev);
    // Device communicators (rma/devcomm.cc) need kernels: the sim backend's emulator or a GPU.
    set(&ncclCommProperties::deviceApiSupport, comm->backend != tutti::Backend::Host);
    set(&ncclCommProperties::multimemSupport, false);
    if (props->version > static_cast<unsigned>(NCCL_VERSION(2, 29, 3))) {
      set(&ncclCommProperties::ginType, NCCL_GIN_TYPE_NONE);  // GIN is load/store within the LSA team only
      set(&ncclCommProperties::nLsaTeams, comm->nRanks / ncclTeamLsa(comm).nRanks);
      set(&ncclCommProperties::hostRmaSupport, true);  // rma/window.h, every backend
      set(&ncclCommProperties::railedGinType, NCCL_GIN_TYPE_NONE);
    }
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclGetLsaMultimemDevicePointer, ncclWindow_t window, size_t offset, void** outPtr) {
  return tutti::apiGuard("ncclGetLsaMultimemDevicePointer", [&]() -> ncclResult_t {
    (void)window, (void)offset, (void)outPtr;
    TUTTI_FAIL(ncclInvalidUsage, kNoMultimem, "ncclGetLsaMultimemDevicePointer");
  });
}

NCCL_API(ncclResult_t, ncclGetMultimemDevicePointer, ncclWindow_t window, size_t offset, ncclMultimemHandle multimem,
         void** outPtr) {
  return tutti::apiGuard("ncclGetMultimemDevicePointer", [&]() -> ncclResult_t {
    (void)window, (void)offset, (void)multimem, (void)outPtr;
    TUTTI_FAIL(ncclInvalidUsage, kNoMultimem, "ncclGetMultimemDevicePointer");
  });
}

NCCL_API(ncclResult_t, ncclGetLsaDevicePointer, ncclWindow_t window, size_t offset, int lsaRank, void** outPtr) {
  return tutti::apiGuard("ncclGetLsaDevicePointer", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkWindow(window, "ncclGetLsaDevicePointer"));
    if (lsaRank < 0 || lsaRank >= window->lsaSize)
      TUTTI_FAIL(ncclInvalidArgument, "ncclGetLsaDevicePointer: lsaRank {} is outside the LSA team of {} rank(s)",
                 lsaRank, window->lsaSize);
    return peerPointer(window, offset, window->lsaFirst + lsaRank, outPtr, "ncclGetLsaDevicePointer");
  });
}

NCCL_API(ncclResult_t, ncclGetPeerDevicePointer, ncclWindow_t window, size_t offset, int peer, void** outPtr) {
  return tutti::apiGuard("ncclGetPeerDevicePointer", [&]() -> ncclResult_t {
    TUTTI_CHECK(checkWindow(window, "ncclGetPeerDevicePointer"));
    TUTTI_CHECK(tutti::argCheckPeer(peer, window->comm->nRanks, "ncclGetPeerDevicePointer"));
    return peerPointer(window, offset, peer, outPtr, "ncclGetPeerDevicePointer");
  });
}

NCCL_API(ncclResult_t, ncclGinOutboxCreateRequirement, int nBlocks, int sizeLog2, ncclGinOutboxHandle* outHandle,
         ncclDevResourceRequirements* outReq) {
  return tutti::apiGuard("ncclGinOutboxCreateRequirement", [&]() -> ncclResult_t {
    (void)nBlocks, (void)sizeLog2, (void)outHandle, (void)outReq;
    TUTTI_FAIL(ncclInvalidUsage, kNoGinQueues, "ncclGinOutboxCreateRequirement");
  });
}

NCCL_API(ncclResult_t, ncclGinInboxA2ACreateRequirement, ncclTeam peers, int nBlocks, int sizeLog2,
         ncclGinInboxA2AHandle* outHandle, ncclDevResourceRequirements* outReq) {
  return tutti::apiGuard("ncclGinInboxA2ACreateRequirement", [&]() -> ncclResult_t {
    (void)peers, (void)nBlocks, (void)sizeLog2, (void)outHandle, (void)outReq;
    TUTTI_FAIL(ncclInvalidUsage, kNoGinQueues, "ncclGinInboxA2ACreateRequirement");
  });
}

NCCL_API(ncclTeam, ncclTeamWorld, ncclComm_t comm) { return worldOf(comm); }

NCCL_API(ncclTeam, ncclTeamLsa, ncclComm_t comm) {
  const ncclTeam w = worldOf(comm);
  if (w.nRanks == 0) return w;
  int first = 0, size = 1;
  tutti::rma::lsaRange(comm, &first, &size);
  return ncclTeam{size, comm->rank - first, 1};
}

NCCL_API(ncclTeam, ncclTeamRail, ncclComm_t comm) {
  // The outer factor of the LSA team: the ranks with this rank's LSA rank in every LSA team.
  const ncclTeam lsa = ncclTeamLsa(comm);
  if (lsa.nRanks == 0) return lsa;
  return ncclTeamOuterFactor(worldOf(comm), lsa.nRanks);
}

NCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam team, int rank) {
  return worldOf(comm).rank + (rank - team.rank) * team.stride;
}

NCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam team, int rank) {
  return ncclTeamLsa(comm).rank + (rank - team.rank) * team.stride;
}

NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeam team, int nBarriers,
         ncclGinBarrierHandle* outHandle, ncclDevResourceRequirements* outReq) {
  return tutti::apiGuard("ncclGinBarrierCreateRequirement", [&]() -> ncclResult_t {
    constexpr const char* kCall = "ncclGinBarrierCreateRequirement";
    TUTTI_CHECK(tutti::argCheckComm(comm, kCall));
    TUTTI_CHECK(tutti::argCheckPtr(outHandle, "outHandle", kCall));
    TUTTI_CHECK(tutti::argCheckPtr(outReq, "outReq", kCall));
    if (nBarriers < 0 || team.nRanks < 1 || team.stride < 1 || team.rank < 0 || team.rank >= team.nRanks)
      TUTTI_FAIL(ncclInvalidArgument, "{}: {} barriers of a team of {} ranks (rank {}, stride {})", kCall, nBarriers,
                 team.nRanks, team.rank, team.stride);
    // Tutti's GIN is load/store (nccl_device/gin_barrier.h): every member must be in this rank's LSA team.
    const ncclTeam lsa = ncclTeamLsa(comm);
    const int first = ncclTeamRankToTeam(lsa, team, 0), last = ncclTeamRankToTeam(lsa, team, team.nRanks - 1);
    if (nBarriers > 0 && (first < 0 || last < 0))
      TUTTI_FAIL(ncclInvalidUsage, "{}: rank {}: the team reaches ranks outside its LSA team (the ranks of this "
                 "host); Tutti's GIN is load/store, without a network GIN (ginType NCCL_GIN_TYPE_NONE)", kCall,
                 comm->rank);
    tutti::rma::fillBarrierRequirement(nBarriers, team.nRanks, outHandle, outReq);
    return ncclSuccess;
  });
}

// Slots an LL all-to-all session needs for messages of up to maxElts elements of maxEltSize bytes:
// each element travels in 8-byte payload words.
NCCL_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) {
  if (maxElts <= 0 || maxEltSize <= 0) return 0;
  return maxElts * ((maxEltSize + 7) / 8);
}

NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots, ncclLLA2AHandle* outHandle,
         ncclDevResourceRequirements* outReq) {
  return tutti::apiGuard("ncclLLA2ACreateRequirement", [&]() -> ncclResult_t {
    constexpr const char* kCall = "ncclLLA2ACreateRequirement";
    TUTTI_CHECK(tutti::argCheckPtr(outHandle, "outHandle", kCall));
    TUTTI_CHECK(tutti::argCheckPtr(outReq, "outReq", kCall));
    if (nBlocks < 0 || nSlots < 0)
      TUTTI_FAIL(ncclInvalidArgument, "{}: nBlocks {} and nSlots {} must not be negative", kCall, nBlocks, nSlots);
    // nccl_device/ll_a2a.h: per block a header line and two banks of nSlots 16-byte lines.
    std::memset(outReq, 0, sizeof *outReq);
    outReq->bufferSize = static_cast<size_t>(nBlocks) * (1 + 2 * static_cast<size_t>(nSlots)) * 16;
    outReq->bufferAlign = 16;
    outReq->outBufferHandle = &outHandle->bufHandle;
    outHandle->bufHandle = 0;
    outHandle->nSlots = nSlots;
    return ncclSuccess;
  });
}

// Re-reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE (deprecated in NCCL, kept for binaries).
NCCL_API(void, ncclResetDebugInit) { tutti::logReconfigure(); }

// The same, under the second name NCCL's library exports it by (no pnccl twin there either).
extern "C" TUTTI_API_EXPORT void ncclResetDebugInitInternal(void) { tutti::logReconfigure(); }
