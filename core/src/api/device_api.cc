// Host entry points of NCCL's device API (nccl_device.h, up to NCCL 2.30) and ncclResetDebugInit, so that
// every function NCCL's libnccl.so.2 exports is exported here too and a binary linked against NCCL loads
// Tutti.
//
// Teams and communicator properties are answered for real. Tutti does not yet give kernels a device
// communicator (load/store windows, GIN), so the LSA team of a rank is the rank alone (no peer is
// reachable by load/store through this API), the rail team is the world, and the properties say the
// device API, multimem, GIN and host RMA are absent; ncclDevCommCreate, the requirement builders and
// the multimem pointer queries fail with ncclInvalidUsage and say so. The window pointer queries answer
// from the window (rma/window.h): where each peer's buffer is mapped in this process. README.md ("Installing, and drop-in
// use") lists these.
#include "api/api.h"
#include "api/argcheck.h"
#include "comm/comm.h"
#include "util/log.h"

#include <cstring>

// Layouts of nccl_device/core.h that cross the ABI by value or are written through a pointer here.
struct ncclTeam {
  int nRanks, rank, stride;
};
struct ncclDevComm;
struct ncclDevCommRequirements;
struct ncclLsaBarrierHandle;
struct ncclGinBarrierHandle;
struct ncclDevResourceRequirements {
  ncclDevResourceRequirements* next;
  size_t bufferSize, bufferAlign;
  uint32_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  uint32_t* outGinSignalStart;
  uint32_t* outGinCounterStart;
};
struct ncclLLA2AHandle {
  uint32_t bufHandle;
  int nSlots;
};
struct ncclGinOutboxHandle;
struct ncclGinInboxA2AHandle;
struct ncclMultimemHandle {
  void* mcBasePtr;  // by value in ncclGetMultimemDevicePointer; only its size matters here
};
// NCCL 2.29+ (nccl_device/core.h). size/magic/version come from NCCL_COMM_PROPERTIES_INITIALIZER; the
// fields after nvmlDev's group exist in headers newer than 2.29.3 only, and `size` says how far the
// caller's struct goes.
struct ncclCommProperties {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  int ginType;  // ncclGinType_t: NCCL_GIN_TYPE_NONE = 0
  int nLsaTeams;
  bool hostRmaSupport;
  int railedGinType;
};

namespace {

constexpr const char* kNoWindows = "{}: multimem (NVLink SHARP) is not available: Tutti drives no NVSwitch";
constexpr const char* kNoDevComm =
    "{}: device communicators (nccl_device.h) are not supported by Tutti yet; use the collective and "
    "point-to-point API";

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
  const tutti::rma::PeerWindow& pw = window->peers[peer];
  if (offset >= pw.size && !(offset == 0 && pw.size == 0))
    TUTTI_FAIL(ncclInvalidArgument, "{}: offset {} is outside rank {}'s {}-byte window", call, offset, peer, pw.size);
  if (!pw.base && pw.size > 0)
    TUTTI_FAIL(ncclInvalidUsage, "{}: rank {}'s window is not reachable by load/store from rank {} (another host, or "
               "memory of another process not allocated with ncclMemAlloc)", call, peer, window->comm->rank);
  *outPtr = pw.base ? pw.base + offset : nullptr;
  return ncclSuccess;
}

// A team the comm cannot describe (null or uninitialized comm): zero ranks, so no rank is a member.
ncclTeam worldOf(ncclComm_t comm) {
  if (tutti::argCheckComm(comm, "ncclTeamWorld") != ncclSuccess) return ncclTeam{0, 0, 1};
  return ncclTeam{comm->nRanks, comm->rank, 1};
}

}  // namespace

NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const ncclDevCommRequirements* reqs, ncclDevComm* out) {
  return tutti::apiGuard("ncclDevCommCreate", [&]() -> ncclResult_t {
    (void)reqs, (void)out;
    TUTTI_CHECK(tutti::argCheckComm(comm, "ncclDevCommCreate"));
    TUTTI_FAIL(ncclInvalidUsage, kNoDevComm, "ncclDevCommCreate");
  });
}

NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const ncclDevComm* devComm) {
  return tutti::apiGuard("ncclDevCommDestroy", [&]() -> ncclResult_t {
    (void)devComm;
    TUTTI_CHECK(tutti::argCheckComm(comm, "ncclDevCommDestroy"));
    TUTTI_FAIL(ncclInvalidUsage, kNoDevComm, "ncclDevCommDestroy");
  });
}

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
    set(&ncclCommProperties::deviceApiSupport, false);
    set(&ncclCommProperties::multimemSupport, false);
    if (props->version > static_cast<unsigned>(NCCL_VERSION(2, 29, 3))) {
      set(&ncclCommProperties::ginType, 0);
      set(&ncclCommProperties::nLsaTeams, comm->nRanks);  // LSA teams of one rank each
      set(&ncclCommProperties::hostRmaSupport, comm->backend != tutti::Backend::Cuda);  // rma/window.h
      set(&ncclCommProperties::railedGinType, 0);
    }
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclGetLsaMultimemDevicePointer, ncclWindow_t window, size_t offset, void** outPtr) {
  return tutti::apiGuard("ncclGetLsaMultimemDevicePointer", [&]() -> ncclResult_t {
    (void)window, (void)offset, (void)outPtr;
    TUTTI_FAIL(ncclInvalidUsage, kNoWindows, "ncclGetLsaMultimemDevicePointer");
  });
}

NCCL_API(ncclResult_t, ncclGetMultimemDevicePointer, ncclWindow_t window, size_t offset, ncclMultimemHandle multimem,
         void** outPtr) {
  return tutti::apiGuard("ncclGetMultimemDevicePointer", [&]() -> ncclResult_t {
    (void)window, (void)offset, (void)multimem, (void)outPtr;
    TUTTI_FAIL(ncclInvalidUsage, kNoWindows, "ncclGetMultimemDevicePointer");
  });
}

NCCL_API(ncclResult_t, ncclGetLsaDevicePointer, ncclWindow_t window, size_t offset, int lsaRank, void** outPtr) {
  return tutti::apiGuard("ncclGetLsaDevicePointer", [&]() -> ncclResult_t {
    // The LSA team of a rank is the rank alone (ncclTeamLsa): LSA rank 0 is this rank.
    if (lsaRank != 0)
      TUTTI_FAIL(ncclInvalidArgument, "ncclGetLsaDevicePointer: lsaRank {} is outside the LSA team (of 1 rank)", lsaRank);
    TUTTI_CHECK(checkWindow(window, "ncclGetLsaDevicePointer"));
    return peerPointer(window, offset, window->comm->rank, outPtr, "ncclGetLsaDevicePointer");
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
    TUTTI_FAIL(ncclInvalidUsage, kNoDevComm, "ncclGinOutboxCreateRequirement");
  });
}

NCCL_API(ncclResult_t, ncclGinInboxA2ACreateRequirement, ncclTeam peers, int nBlocks, int sizeLog2,
         ncclGinInboxA2AHandle* outHandle, ncclDevResourceRequirements* outReq) {
  return tutti::apiGuard("ncclGinInboxA2ACreateRequirement", [&]() -> ncclResult_t {
    (void)peers, (void)nBlocks, (void)sizeLog2, (void)outHandle, (void)outReq;
    TUTTI_FAIL(ncclInvalidUsage, kNoDevComm, "ncclGinInboxA2ACreateRequirement");
  });
}

NCCL_API(ncclTeam, ncclTeamWorld, ncclComm_t comm) { return worldOf(comm); }

NCCL_API(ncclTeam, ncclTeamLsa, ncclComm_t comm) {
  ncclTeam w = worldOf(comm);
  return ncclTeam{w.nRanks > 0 ? 1 : 0, 0, 1};
}

NCCL_API(ncclTeam, ncclTeamRail, ncclComm_t comm) {
  // The outer factor of the LSA team (size 1): every rank, stride 1.
  return worldOf(comm);
}

NCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam team, int rank) {
  return worldOf(comm).rank + (rank - team.rank) * team.stride;
}

NCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam team, int rank) {
  (void)comm;  // the rank's LSA rank is 0
  return (rank - team.rank) * team.stride;
}

NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam team, int nBarriers, ncclLsaBarrierHandle* outHandle,
         ncclDevResourceRequirements* outReq) {
  return tutti::apiGuard("ncclLsaBarrierCreateRequirement", [&]() -> ncclResult_t {
    (void)team, (void)nBarriers, (void)outHandle, (void)outReq;
    TUTTI_FAIL(ncclInvalidUsage, kNoDevComm, "ncclLsaBarrierCreateRequirement");
  });
}

NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeam team, int nBarriers,
         ncclGinBarrierHandle* outHandle, ncclDevResourceRequirements* outReq) {
  return tutti::apiGuard("ncclGinBarrierCreateRequirement", [&]() -> ncclResult_t {
    (void)team, (void)nBarriers, (void)outHandle, (void)outReq;
    TUTTI_CHECK(tutti::argCheckComm(comm, "ncclGinBarrierCreateRequirement"));
    TUTTI_FAIL(ncclInvalidUsage, kNoDevComm, "ncclGinBarrierCreateRequirement");
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
    (void)nBlocks, (void)nSlots, (void)outHandle, (void)outReq;
    TUTTI_FAIL(ncclInvalidUsage, kNoDevComm, "ncclLLA2ACreateRequirement");
  });
}

// Re-reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE (deprecated in NCCL, kept for binaries).
NCCL_API(void, ncclResetDebugInit) { tutti::logReconfigure(); }

// The same, under the second name NCCL's library exports it by (no pnccl twin there either).
extern "C" TUTTI_API_EXPORT void ncclResetDebugInitInternal(void) { tutti::logReconfigure(); }
