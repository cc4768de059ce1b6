/* NCCL's device API, core part: teams, device communicators and their requirements, communicator
 * properties, and the layout device code reads through a window handle. Names, fields and values follow
 * NCCL 2.30's nccl_device/core.h, so code written against it compiles; the layouts of ncclDevComm and of
 * the window are Tutti's own (device code sees them only through these headers).
 *
 * In Tutti a device communicator gives kernels the ranks they reach by load/store (the LSA team: the
 * ranks of this host, contiguous in rank order), barriers among them, and GIN operations carried out as
 * stores into those ranks' memory. */
#ifndef NCCL_DEVICE_CORE_H_
#define NCCL_DEVICE_CORE_H_

#include <nccl.h>
#include <stdbool.h>

#include "port.h"

typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclTeam ncclTeam_t;
typedef struct ncclWindow_vidmem ncclWindow_vidmem_t;
typedef struct ncclMultimemHandle ncclMultimemHandle_t;

/* A resource of a device communicator: the byte offset of its buffer in each rank's resource block. */
typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

typedef struct {
  uint64_t opaque[2];
} ncclGinRequest_t;

/* A set of world ranks: rank r of the team is world rank (world rank of team rank 0) + r * stride. */
struct ncclTeam {
  int nRanks, rank, stride;
};

#ifdef __cplusplus
struct ncclTeamTagWorld {};
struct ncclTeamTagLsa {};
struct ncclTeamTagRail {};
#endif

typedef struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
} ncclLsaBarrierHandle_t;

typedef struct ncclGinBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
} ncclGinBarrierHandle_t;

typedef struct ncclLLA2AHandle {
  ncclDevResourceHandle_t bufHandle;
  int nSlots;
} ncclLLA2AHandle_t;

struct ncclMultimemHandle {
  void* mcBasePtr;
};

typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclCommProperties ncclCommProperties_t;

typedef enum {
  NCCL_GIN_CONNECTION_NONE,
  NCCL_GIN_CONNECTION_FULL,
  NCCL_GIN_CONNECTION_RAIL,
} ncclGinConnectionType_t;

/* What a device communicator must hold. Start from NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER. */
struct ncclDevCommRequirements {
  size_t size;           /* set by the initializer */
  unsigned int magic;    /* set by the initializer */
  unsigned int version;  /* set by the initializer */
  ncclDevResourceRequirements_t* resourceRequirementsList;  /* more buffers (requirement builders) */
  ncclTeamRequirements_t* teamRequirementsList;
  bool lsaMultimem;
  int barrierCount;       /* world barriers (ncclBarrierSession with ncclTeamTagWorld): devComm.worldBarrier */
  int lsaBarrierCount;    /* LSA barriers (ncclLsaBarrierSession): devComm.lsaBarrier */
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount;    /* a hint */
  int ginSignalCount;     /* signals 0 .. ginSignalCount-1 */
  int ginCounterCount;    /* counters 0 .. ginCounterCount-1 */
  ncclGinConnectionType_t ginConnectionType;
  bool ginExclusiveContexts;
  int ginQueueDepth;
  int ginTrafficClass;
  int worldGinBarrierCount;
  bool ginStrongSignalsRequired;
  bool ginVaSignalsRequired;
};

#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER                                                              \
  {                                                                                                         \
    sizeof(ncclDevCommRequirements_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NULL, NULL, false, 0, 0, 0, 0, 0, \
        false, 4, 0, 0, NCCL_GIN_CONNECTION_NONE, false, 0, NCCL_CONFIG_UNDEF_INT, 0, true, true            \
  }

/* One more buffer (and signals, counters) of every rank's resource block; the handle is written by
 * ncclDevCommCreate. Chained through `next` into ncclDevCommRequirements.resourceRequirementsList. */
struct ncclDevResourceRequirements {
  ncclDevResourceRequirements_t* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
};

struct ncclTeamRequirements {
  ncclTeamRequirements_t* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
};

/* Every field named (zero past the header), so -Wextra's missing-field-initializers stays quiet. */
#define NCCL_COMM_PROPERTIES_INITIALIZER                                                                  \
  {                                                                                                       \
    sizeof(ncclCommProperties_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, 0, 0, 0, 0, false, false,            \
        NCCL_GIN_TYPE_NONE, 0, false, NCCL_GIN_TYPE_NONE                                                  \
  }

typedef enum {
  NCCL_GIN_TYPE_NONE = 0,
  NCCL_GIN_TYPE_PROXY = 2,
  NCCL_GIN_TYPE_GDAKI = 3,
  NCCL_GIN_TYPE_GPI = 4,
} ncclGinType_t;

struct ncclCommProperties {
  size_t size;           /* set by the initializer */
  unsigned int magic;    /* set by the initializer */
  unsigned int version;  /* set by the initializer */
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  ncclGinType_t ginType;
  int nLsaTeams;
  bool hostRmaSupport;
  ncclGinType_t railedGinType;
};

/* What a window handle points to (ncclCommWindowRegister): where every rank's buffer is, as this
 * process's device code reaches it. */
struct ncclWindow_vidmem {
  uint64_t magic;
  ncclComm_t comm;
  void* userPtr;
  size_t size;
  int flags;
  int rank, nRanks;
  int lsaFirst, lsaSize;   /* the LSA team (world ranks lsaFirst .. lsaFirst + lsaSize - 1) */
  char* const* peerBase;   /* [nRanks]: rank r's buffer, or NULL when r is not reachable by load/store */
  const size_t* peerSize;  /* [nRanks]: bytes rank r registered */
  void* internal;          /* the library's */
};

/* A device communicator, passed to kernels by value. */
struct ncclDevComm {
  int rank, nRanks;
  int lsaRank, lsaSize;  /* the LSA team: world ranks rank - lsaRank .. rank - lsaRank + lsaSize - 1 */
  int ginContextCount, ginSignalCount, ginCounterCount;
  ncclLsaBarrierHandle_t lsaBarrier;    /* lsaBarrierCount barriers of the LSA team */
  ncclGinBarrierHandle_t worldBarrier;  /* barrierCount barriers of the world (ncclBarrierSession) */
  ncclGinBarrierHandle_t railGinBarrier;   /* railGinBarrierCount GIN barriers of the rail team */
  ncclGinBarrierHandle_t worldGinBarrier;  /* worldGinBarrierCount GIN barriers of the world */
  ncclDevResourceHandle_t ginSignals;   /* uint64_t[ginSignalCount] */
  ncclDevResourceHandle_t ginCounters;  /* uint64_t[ginCounterCount], this rank's only */
  char* const* resources;  /* [nRanks]: rank r's resource block as reached here (NULL: not in the LSA team) */
  uint8_t* abortFlag;      /* non-zero once the communicator is aborted: device-side waits give up */
  void* internal;          /* the library's */
};

NCCL_EXTERN_C ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
/* Collective (completes at the group end inside ncclGroupStart/End). */
NCCL_EXTERN_C ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                             ncclDevComm_t* outDevComm);
NCCL_EXTERN_C ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);

NCCL_EXTERN_C ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
NCCL_EXTERN_C ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                        ncclMultimemHandle_t multimem, void** outPtr);
NCCL_EXTERN_C ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr);
NCCL_EXTERN_C ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);

/* Teams of a host communicator. */
NCCL_EXTERN_C ncclTeam_t ncclTeamWorld(ncclComm_t comm);
NCCL_EXTERN_C ncclTeam_t ncclTeamLsa(ncclComm_t comm);
NCCL_EXTERN_C ncclTeam_t ncclTeamRail(ncclComm_t comm);
NCCL_EXTERN_C int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
NCCL_EXTERN_C int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* Team arithmetic, on the host and in device code. */
#ifdef __cplusplus
/* Team `b`'s rank bPeer as a rank of team `a`, or -1 when it is not a member of `a`. */
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToTeam(ncclTeam_t a, ncclTeam_t b, int bPeer) {
  const long long worldDelta = (long long)(bPeer - b.rank) * b.stride;  /* from the common rank */
  if (worldDelta % a.stride != 0) return -1;
  const long long r = a.rank + worldDelta / a.stride;
  return r >= 0 && r < a.nRanks ? (int)r : -1;
}
NCCL_HOST_DEVICE_INLINE bool ncclTeamRankIsMember(ncclTeam_t a, ncclTeam_t b, int bPeer) {
  return ncclTeamRankToTeam(a, b, bPeer) >= 0;
}
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamInnerFactor(ncclTeam_t parent, int innerSize) {
  return ncclTeam_t{innerSize, parent.rank % innerSize, parent.stride};
}
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamOuterFactor(ncclTeam_t parent, int innerSize) {
  return ncclTeam_t{parent.nRanks / innerSize, parent.rank / innerSize, parent.stride * innerSize};
}

NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamWorld(ncclDevComm const& c) { return ncclTeam_t{c.nRanks, c.rank, 1}; }
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamLsa(ncclDevComm const& c) { return ncclTeam_t{c.lsaSize, c.lsaRank, 1}; }
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamRail(ncclDevComm const& c) {
  return ncclTeamOuterFactor(ncclTeamWorld(c), c.lsaSize);
}
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamOf(ncclDevComm const& c, ncclTeamTagWorld) { return ncclTeamWorld(c); }
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamOf(ncclDevComm const& c, ncclTeamTagLsa) { return ncclTeamLsa(c); }
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamOf(ncclDevComm const& c, ncclTeamTagRail) { return ncclTeamRail(c); }
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToWorld(ncclDevComm const& c, ncclTeam_t team, int r) {
  return c.rank + (r - team.rank) * team.stride;
}
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToLsa(ncclDevComm const& c, ncclTeam_t team, int r) {
  return c.lsaRank + (r - team.rank) * team.stride;
}
#endif

#endif /* NCCL_DEVICE_CORE_H_ */
