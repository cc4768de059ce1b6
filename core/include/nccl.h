/* Tutti's implementation of the NCCL C API (level 2.30).
 *
 * Names, enum values, struct layouts and function signatures are NCCL's, so code written for NCCL
 * compiles against this header and links against libnccl.so.2 (Tutti's core library; libtutti.so is another
 * name for it) unchanged.
 * Every function has a `pnccl` twin that is the same function under a second name, so profiling or
 * interposition layers can define `ncclX` themselves and forward to `pncclX`.
 *
 * The header needs no CUDA installation: without <cuda_runtime.h> (or with TUTTI_NO_CUDA_HEADERS
 * defined) cudaStream_t is declared here with the same definition the CUDA runtime uses. */
#ifndef NCCL_H_
#define NCCL_H_

#if !defined(TUTTI_NO_CUDA_HEADERS) && defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#define TUTTI_NCCL_HAVE_CUDA_RUNTIME 1
#endif
#endif
#ifndef TUTTI_NCCL_HAVE_CUDA_RUNTIME
/* Same declaration as the CUDA runtime's, so the two may meet in one translation unit. On the host
 * backend a stream is a Tutti host stream (see tutti.h) or NULL. */
typedef struct CUstream_st* cudaStream_t;
#endif

/* The NCCL API level implemented. The build reads these lines (CMakeLists.txt), as do find modules that
 * parse nccl.h for the version; keep each a plain number on one line. */
#define NCCL_MAJOR 2
#define NCCL_MINOR 30
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 23007

/* Version code of a release. Releases up to 2.8 used two digits for the minor number. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque handles. */
typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

/* Rendezvous token produced by ncclGetUniqueId on one rank and handed to every rank out of band. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

#ifndef TUTTI_NCCL_RESULT_DEFINED
#define TUTTI_NCCL_RESULT_DEFINED
/* Result of every call. Also defined, under the same guard, by <tutti/common.h>. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;
#endif

/* "Not set by the user" markers for ncclConfig_t fields; the library then picks its default. */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* Stamped into ncclConfig_t by NCCL_CONFIG_INITIALIZER; a config without it is rejected. */
#define NCCL_API_MAGIC 0xcafebeef

/* winFlags of ncclCommWindowRegister. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values (bit flags). */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* shrinkFlags of ncclCommShrink. */
#define NCCL_SHRINK_DEFAULT 0x00 /* wait for the parent's pending work, then shrink */
#define NCCL_SHRINK_ABORT 0x01   /* abort the parent's pending work first (use after a failure) */

/* revokeFlags of ncclCommRevoke: no flags are defined yet, the argument must be 0. */
#define NCCL_REVOKE_DEFAULT 0x00

/* Per-communicator options. Always start from NCCL_CONFIG_INITIALIZER and change only the fields you
 * mean to set: size, magic and version tell the library which layout the caller was compiled with. */
typedef struct ncclConfig_v23000 {
  size_t size;          /* sizeof(ncclConfig_t) at the caller's compile time; do not change */
  unsigned int magic;   /* NCCL_API_MAGIC; do not change */
  unsigned int version; /* NCCL_VERSION_CODE at the caller's compile time; do not change */
  int blocking;         /* 1: init/finalize calls block; 0: they may return ncclInProgress */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName; /* force one net plugin/device family by name */
  int splitShare;      /* ncclCommSplit children share the parent's resources */
  int trafficClass;
  const char* commName; /* shown in logs and profiler traces */
  int collnetEnable;
  int CTAPolicy; /* NCCL_CTA_POLICY_* */
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                  \
  {                                                                                              \
    sizeof(ncclConfig_t), /* size */                                                             \
    NCCL_API_MAGIC,       /* magic */                                                            \
    NCCL_VERSION_CODE,    /* version */                                                          \
    NCCL_CONFIG_UNDEF_INT,   /* blocking */                                                      \
    NCCL_CONFIG_UNDEF_INT,   /* cgaClusterSize */                                                \
    NCCL_CONFIG_UNDEF_INT,   /* minCTAs */                                                       \
    NCCL_CONFIG_UNDEF_INT,   /* maxCTAs */                                                       \
    NCCL_CONFIG_UNDEF_PTR,   /* netName */                                                       \
    NCCL_CONFIG_UNDEF_INT,   /* splitShare */                                                    \
    NCCL_CONFIG_UNDEF_INT,   /* trafficClass */                                                  \
    NCCL_CONFIG_UNDEF_PTR,   /* commName */                                                      \
    NCCL_CONFIG_UNDEF_INT,   /* collnetEnable */                                                 \
    NCCL_CONFIG_UNDEF_INT,   /* CTAPolicy */                                                     \
    NCCL_CONFIG_UNDEF_INT,   /* shrinkShare */                                                   \
    NCCL_CONFIG_UNDEF_INT,   /* nvlsCTAs */                                                      \
    NCCL_CONFIG_UNDEF_INT,   /* nChannelsPerNetPeer */                                           \
    NCCL_CONFIG_UNDEF_INT,   /* nvlinkCentricSched */                                            \
    NCCL_CONFIG_UNDEF_INT,   /* graphUsageMode */                                                \
    NCCL_CONFIG_UNDEF_INT,   /* numRmaCtx */                                                     \
    NCCL_CONFIG_UNDEF_INT,   /* maxP2pPeers */                                                   \
    NCCL_CONFIG_UNDEF_INT    /* graphStreamOrdering */                                           \
  }

/* Filled by ncclGroupSimulateEnd. Initialise with NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime; /* microseconds the group is predicted to take */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER                              \
  {                                                            \
    sizeof(ncclSimInfo_t), /* size */                          \
    0x74685283,            /* magic */                         \
    NCCL_VERSION_CODE,     /* version */                       \
    NCCL_UNDEF_FLOAT       /* estimatedTime */                 \
  }

/* Memory suitable for every optimisation (registration, windows). May round the size up. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* Stores the library's NCCL_VERSION_CODE in *version. */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/* Creates the token every rank passes to ncclCommInitRank*. Call on one rank, then distribute it. */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/* Communicator creation. All ranks call it with the same nranks and id; rank is 0..nranks-1 and unique.
 * It synchronises with the other ranks, so call it from one thread per rank or inside a group. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
/* ndev communicators of one process, one per device of devlist (NULL: devices 0..ndev-1). */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
/* Like ncclCommInitRankConfig, with nId ids (same list on every rank) to spread the rendezvous load. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config);

/* Completes all issued work and releases shared resources; ncclCommDestroy then frees the rest
 * locally without blocking. Non-blocking communicators report ncclInProgress until done. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);
/* Frees the communicator's local resources. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);
/* Stops outstanding work and frees the communicator. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);
/* Stops in-flight work; afterwards only destroy, split and shrink are allowed. revokeFlags must be 0. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* New communicators from the ranks of comm with equal color, ordered by key. NCCL_SPLIT_NOCOLOR gives
 * *newcomm == NULL. config NULL: inherit comm's configuration. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
/* New communicator without the listed ranks; the others are renumbered densely. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
/* One-use token for ncclCommGrow; a new one may be made only after the previous one was consumed. */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
/* Adds ranks. Existing ranks pass comm and rank -1 (the root also the id); new ranks pass comm NULL,
 * the id and their new rank. */
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                           ncclComm_t* newcomm, ncclConfig_t* config);

/* Short description of a result code (never NULL). */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);
/* Message of the most recent failure, with what went wrong and where (never NULL; "" if none). */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/* Re-reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE. Deprecated in NCCL; kept for binaries. */
__attribute__((deprecated("ncclResetDebugInit is deprecated"))) void ncclResetDebugInit(void);
__attribute__((deprecated("pncclResetDebugInit is deprecated"))) void pncclResetDebugInit(void);

#if defined(__linux__)
/* Re-reads the logging variables (NCCL_DEBUG, ...). Kept for compatibility; not part of the API. */
__attribute__((deprecated("ncclResetDebugInit is not part of the NCCL API"))) void ncclResetDebugInit(void);
__attribute__((deprecated("pncclResetDebugInit is not part of the NCCL API"))) void pncclResetDebugInit(void);
#else
#define ncclResetDebugInit()
#define pncclResetDebugInit()
#endif

/* Stores the first asynchronous error of comm (or ncclInProgress while a non-blocking call runs). */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);
/* Device of comm (-1 on the host backend). */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* Buffer registration for zero-copy transfers. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* flags of ncclCommSuspend. */
#define NCCL_SUSPEND_MEM 0x01 /* release the memory that can be re-created on resume */

/* Releases resources while the communicator is idle; it cannot be used until ncclCommResume. */
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);

/* Quantities ncclCommMemStats reports. */
typedef enum {
  ncclStatGpuMemSuspend = 0,   /* bytes that suspend can release */
  ncclStatGpuMemSuspended = 1, /* 1 while suspended, else 0 */
  ncclStatGpuMemPersist = 2,   /* bytes that stay allocated while suspended */
  ncclStatGpuMemTotal = 3      /* all bytes the communicator tracks */
} ncclCommMemStat_t;

ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);

/* Memory windows (collective registration; NCCL_WIN_* flags). */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);

/* Reduction operators. Values >= ncclNumOps are handles of operators made by ncclRedOpCreate*; the
 * largest value is bounded so the enum keeps the size it has always had. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5, /* count of built-in operators and the first user-created handle */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* Element types. */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10, /* 4 exponent bits, 3 mantissa bits, no infinities, largest finite 448 */
  ncclFloat8e5m2 = 11, /* 5 exponent bits, 2 mantissa bits, IEEE-like with infinities */
  ncclNumTypes = 12
} ncclDataType_t;

/* Where a scalar argument lives and when it is read. */
typedef enum {
  /* Device-visible memory, read while the collective runs (the pointer must stay valid until then).
   * On the host backend device memory is host memory. */
  ncclScalarDevice = 0,
  /* Host memory, read before ncclRedOpCreate* returns. */
  ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

/* Creates an operator for comm and datatype only: every input is multiplied by *scalar on its own rank,
 * then the products are summed. The handle is stored in *op. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
/* Destroys an operator made with the same comm. Allowed as soon as the last call using it returned. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* Collectives. Every rank of comm makes the matching call; a call returns once the work is enqueued on
 * stream (host backend with stream NULL: once it is done). Ranks driven by one thread must use a group.
 * Counts are in elements of datatype. */

/* Reduction to root; recvbuff is used on root only. In place when sendbuff == recvbuff. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
/* Deprecated in-place broadcast. */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);
/* root's sendbuff to every rank's recvbuff. In place when sendbuff == recvbuff. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            int root, ncclComm_t comm, cudaStream_t stream);
/* Reduction whose result lands on every rank. In place when sendbuff == recvbuff. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
/* sendbuff holds nranks*recvcount elements; rank i receives block i of the reduction.
 * In place when recvbuff == sendbuff + rank * recvcount elements. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
/* recvbuff holds nranks*sendcount elements; rank i's data lands at offset i*sendcount.
 * In place when sendbuff == recvbuff + rank * sendcount elements. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);
/* Block j of sendbuff (count elements each) goes to rank j; block i of recvbuff comes from rank i. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
/* Every rank's count elements to block i of root's recvbuff. In place when
 * sendbuff == recvbuff + root * count elements (on root). */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
/* Block i of root's sendbuff to rank i's recvbuff. In place when recvbuff == sendbuff + root * count. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream);

/* Point to point. peer makes the matching ncclRecv/ncclSend with the same count and datatype. Sends and
 * receives that must progress together belong in one group. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* One-sided: writes count elements of localbuff into peer's window peerWin at byte offset
 * peerWinOffset, then raises signal sigIdx of context ctx on peer. flags is reserved (0). */
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                            ncclComm_t comm, cudaStream_t stream);
/* Raises a signal on peer without data. */
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                         cudaStream_t stream);

/* One entry of ncclWaitSignal: wait for opCnt signals from peer on (sigIdx, ctx). */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                             cudaStream_t stream);

/* Groups: calls between ncclGroupStart and ncclGroupEnd are collected and issued together at
 * ncclGroupEnd (which only guarantees they are enqueued). Needed when one thread drives several ranks,
 * and to let sends and receives progress concurrently. Groups nest; the outermost end issues. */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);
/* Plans the group as ncclGroupEnd would, runs nothing, and reports the predicted time. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

/* Runtime parameters (NCCL_* variables) by key. Handles and returned strings are owned by the library;
 * a string stays valid until the next call of the same function on the same thread. */
typedef struct ncclParamHandle* ncclParamHandle_t;

ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t pncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t pncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t pncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t pncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t pncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t pncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
ncclResult_t pncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out);
/* Raw bytes of the value into out (maxLen bytes available); *len receives the value's length. */
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen);
/* Keys of the documented parameters (all of them with NCCL_PARAM_DUMP_ALL set). */
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen);
/* Logs every parameter and its value. */
void ncclParamDumpAll(void);
void pncclParamDumpAll(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
