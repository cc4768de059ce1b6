// Host entry points of NCCL's device API (nccl_device.h) and ncclResetDebugInit, so that every function
// NCCL's libnccl.so.2 exports is exported here too and a binary linked against NCCL loads Tutti.
//
// Teams are answered for real. Tutti does not yet give kernels a device communicator (load/store windows,
// GIN), so the LSA team of a rank is the rank alone (no peer is reachable by load/store through this
// API) and the rail team is the world; ncclDevCommCreate and the barrier requirements fail with
// ncclInvalidUsage and say so. README.md ("Drop-in use") lists these.
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

namespace {

constexpr const char* kNoDevComm =
    "{}: device communicators (nccl_device.h) are not supported by Tutti yet; use the collective and "
    "point-to-point API";

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
