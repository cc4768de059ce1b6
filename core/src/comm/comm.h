// The communicator: identity of its ranks, channels and their rings, connections, user reduction ops,
// and the state shared by the API, the planner and the backends.
#pragma once

#include <nccl.h>

#include "bootstrap/bootstrap.h"
#include "comm/callcheck.h"
#include "comm/profiler.h"
#include "device/common/reduce_ops.h"
#include "device/host/prims.h"
#include "rma/window.h"
#include "topo/topo.h"
#include "topo/trees.h"

#include <tutti/transport.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

struct ncclComm;

namespace tutti {
namespace device {
struct CommDevice;
}

class TransportPlugin;
class HostStream;
class TunerChain;
// Defined in plan/tuning.cc, so holders of ncclComm need not see TunerChain.
struct TunerChainDeleter {
  void operator()(TunerChain* chain) const;
};

inline constexpr uint64_t kCommMagic = 0x7475747469436f6dull;  // "tuttiCom"
inline constexpr uint64_t kCommDeadMagic = 0xdeadc0117deadc01ull;

// Connection indices: collectives and point-to-point use separate connections, so a group may run both
// at once without their steps interleaving on one FIFO.
inline constexpr int kConnColl = 0;
inline constexpr int kConnP2p = 1;
inline constexpr int kConnRma = 2;  // one-sided operations to ranks of other hosts (rma/net_rma.h)

// Page-aligned and a whole number of pages: device backends register the page of `host.step` with the runtime
// (device/enqueue.h registerConnection), and a registered page must hold nothing of the application's. CUDA
// refuses a cudaMemcpy (cudaErrorInvalidValue) whose pageable buffer starts in a registered page and runs past it.
struct alignas(4096) Connection {
  host::HostConn host;             // what the primitives use
  TransportPlugin* transport = nullptr;
  void* res = nullptr;             // transport's handle for this end
  bool isSend = false;
  // Device backends: the registered host blocks (device/enqueue.h registerConnection) this end uses.
  std::vector<uintptr_t> devBlocks;
};

struct ChannelRing {
  std::vector<int> ranks;  // ring position -> rank
  int index = 0;           // this rank's position
  int prev = 0, next = 0;  // ranks
  // The channel's collective connections once established (looked up on every launch, so cached here).
  Connection* sendConn = nullptr;  // to `next`
  Connection* recvConn = nullptr;  // from `prev`
};

// What runs a communicator's operations (config `device:` / TUTTI_DEVICE): the host backend's CPU
// primitives, or the device kernels on the CPU SIMT emulator (sim) or a GPU (cuda).
enum class Backend { Host, Sim, Cuda };
const char* backendName(Backend b);
// The backend a communicator created now would get: TUTTI_DEVICE (environment or params:), else the config's
// `device:`. *from names which decided. False with *error set for an unknown or unavailable backend.
bool backendOfNewComms(Backend* out, std::string* from, std::string* error);
// Whether a communicator created now reduces deterministically: TUTTI_DETERMINISTIC (environment or params:),
// else the config's `deterministic:`. *from names which decided. False with *error set when the config is bad.
bool deterministicOfNewComms(bool* out, std::string* from, std::string* error);

// Initializing: a nonblocking init (or split/shrink) still runs in the background; asyncError says how it
// ends. Revoked: ncclCommRevoke stopped its operations; only destroy, abort, split and shrink remain.
enum class CommState { Initializing, Ready, Finalized, Revoked, Aborted };

// Background work of a nonblocking communicator: its init, or one group of its operations. The thread is
// joined by join() (idempotent, any thread) or the destructor.
class AsyncJob {
 public:
  explicit AsyncJob(std::function<void()> body);
  ~AsyncJob();
  void join();
  bool done() const { return done_.load(std::memory_order_acquire); }
  AsyncJob(const AsyncJob&) = delete;
  AsyncJob& operator=(const AsyncJob&) = delete;

 private:
  std::thread thread_;
  std::once_flag joinOnce_;
  std::atomic<bool> done_{false};
};

}  // namespace tutti

struct ncclComm {
  uint64_t magic = tutti::kCommMagic;
  int rank = 0;
  int nRanks = 0;
  int cudaDev = -1;
  int nNodes = 1;
  tutti::Backend backend = tutti::Backend::Host;
  tutti::device::CommDevice* device = nullptr;  // sim / cuda: internal stream, events, watcher (device/enqueue.h)
  int devArch = 0;  // compute capability (major x 10 + minor) of the backend's GPU; 0: none (host)
  uint64_t commHash = 0;  // same on every rank of the communicator
  ncclConfig_t config{};
  std::string commName;

  std::unique_ptr<tutti::Bootstrap> bootstrap;
  std::vector<tuttiPeerInfo_t> peers;
  int nChannels = 1;
  // Channels one collective may use (the tuners' choice is clamped to it): nChannels, or on the host backend with
  // every rank on one host, unless NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS say otherwise, one per core the host has
  // for each of its ranks.
  int collChannelCap = 1;
  std::vector<tutti::ChannelRing> rings;  // per channel
  tutti::DoubleTree trees;                // channel c follows tree c % kTreeCount
  size_t buffSizes[TUTTI_NUM_PROTOCOLS] = {};
  // Host backend: the Simple buffer of a point-to-point connection over the network (0: buffSizes'; launch.h,
  // p2pStepBytes).
  size_t p2pNetBuffSize = 0;
  bool ll128 = false;  // every pair's transport guarantees LL128 ordering (same answer on every rank)
  // Single-copy collectives (device/host/direct_copy.h): every rank can read every other rank's memory, and the
  // smallest collective of each that takes the path (TUTTI_DIRECT_MIN_BYTES; 0: never); a deterministic reduction has
  // its own. An AllReduce of at least directOverOneShot bytes takes the path even where it fits the one-shot path (0:
  // never; ranks as threads, TUTTI_DIRECT_MIN_BYTES, TUTTI_ONESHOT_MAX_BYTES and TUTTI_DOUBLING_MAX_BYTES unset).
  // directCopiesFirst: an AllGather, Broadcast or 2-rank AlltoAll that may take the path takes it even where it fits
  // the one-shot plan (ranks as processes, the same settings and TUTTI_BINOMIAL_BCAST_MAX_BYTES,
  // TUTTI_ONESHOT_ALLTOALL_MAX_BYTES unset).
  bool directOk = false, directCopiesFirst = false;
  size_t directMinGather = 0, directMinBcast = 0, directMinAlltoAll = 0, directMinReduce = 0,
         directMinReduceScatter = 0, directMinDetReduce = 0, directMinDetReduceScatter = 0, directMinDetPairReduce = 0,
         directOverOneShot = 0;
  // Ranks as processes with the default thresholds: directProbe measures what a read from another process costs
  // against a copy (TUTTI_DIRECT_READ_COST) and, where reads cost 2.5 copies or more, turns directMinGather and
  // directMinReduce off.
  // directDetReadCostGate: the same for a deterministic AllReduce (TUTTI_DET_DIRECT_MIN_BYTES unset), which then
  // takes the exchange at every size. directReadCost: the ranks' median, in percent (0: not measured).
  bool directReadCostGate = false, directDetReadCostGate = false;
  int directReadCost = 0;
  // An AllGather / AlltoAll of at least this many bytes of output takes the ring / sends and receives instead
  // (TUTTI_DIRECT_MAX_GATHER_BYTES, TUTTI_DIRECT_MAX_ALLTOALL_BYTES; 0: no bound).
  size_t directMaxGather = 0, directMaxAlltoAll = 0;
  // A single-copy Broadcast of at least this many bytes has the root write the last 1/n of every reader's buffer
  // while the readers read the rest (TUTTI_DIRECT_ROOT_SHARE_MIN_BYTES; 0: never).
  size_t directRootShareMin = 0;
  // What an in-place AlltoAll offers its peers (a copy of its input), or the peers' rows a direct reduction stages.
  std::vector<char> directStaging;
  // Channel 0's collective connections to every peer, both ways, are made (the single-copy and one-shot paths'):
  // a lone one-shot AllReduce may then skip the launch (comm/group.cc).
  bool directConnsReady = false;
  // Host backend: a ring AllReduce's Simple steps carry at most this many bytes (TUTTI_NET_RING_STEP_BYTES; 0: the
  // whole slot), and a ring ReduceScatter's, AllGather's and Broadcast's too where ringStepEveryRing (no peer over
  // the network).
  size_t ringStepMaxBytes = 0;
  bool ringStepEveryRing = false;
  // Host backend, no peer over the network: a point-to-point message of at least p2pStepMinMessage bytes and longer
  // than NCCL_STEPS steps of p2pStepMaxBytes moves in steps of that many (TUTTI_P2P_STEP_BYTES; 0: launch.h's
  // p2pStepBytes alone).
  size_t p2pStepMaxBytes = 0;
  size_t p2pStepMinMessage = 0;
  // One-shot AllReduce (device/host/oneshot.h) up to this many bytes (TUTTI_ONESHOT_MAX_BYTES; 0: never).
  size_t oneShotMaxBytes = 0;
  // The same for AlltoAll where larger (TUTTI_ONESHOT_ALLTOALL_MAX_BYTES): off with oneShotMaxBytes.
  size_t oneShotAlltoAllMaxBytes = 0;
  // The same for AllGather and ReduceScatter where larger (TUTTI_ONESHOT_GATHER_MAX_BYTES): off with oneShotMaxBytes.
  size_t oneShotGatherMaxBytes = 0;
  // One-shot messages of up to this many bytes between ranks of a node travel as LL lines, which the receiver
  // polls, rather than in a Simple slot behind tail (TUTTI_ONESHOT_LL_MAX_BYTES; 0: never).
  size_t oneShotLLMaxBytes = 0;
  // Recursive doubling AllReduce (device/host/oneshot.h, doublingWanted) from doublingMinRanks ranks, from
  // doublingMinBytes to doublingMaxBytes (TUTTI_DOUBLING_*; a maximum of 0: never).
  int doublingMinRanks = 4;
  size_t doublingMinBytes = 0, doublingMaxBytes = 0;
  // From 4 ranks, a power of two: AllGather by recursive doubling, ReduceScatter by recursive halving, from
  // doublingMinBytes up to these many bytes (TUTTI_DOUBLING_GATHER_MAX_BYTES, TUTTI_HALVING_MAX_BYTES; 0: never).
  size_t gatherDoublingMaxBytes = 0, halvingMaxBytes = 0;
  // AllReduce / AllGather and ReduceScatter of at most these many bytes take the one-shot ahead of doubling, halving
  // and the trees, deterministic reductions included (TUTTI_ONESHOT_FIRST_MAX_BYTES; 0: never).
  size_t oneShotFirstAllReduceBytes = 0, oneShotFirstBytes = 0;
  // AlltoAll by Bruck's algorithm, from doublingMinRanks ranks and doublingMinBytes, up to this many bytes of input
  // (TUTTI_BRUCK_MAX_BYTES; 0: never).
  size_t bruckMaxBytes = 0;
  // Broadcast down a binomial tree, from doublingMinRanks ranks and doublingMinBytes, up to this many bytes
  // (TUTTI_BINOMIAL_BCAST_MAX_BYTES; 0: never).
  size_t binomialBcastMaxBytes = 0;
  // AllReduce up and down a binomial tree, 3 to 8 ranks, up to this many bytes (TUTTI_TREE_ALLREDUCE_MAX_BYTES,
  // TUTTI_DET_TREE_ALLREDUCE_MAX_BYTES for a deterministic one; 0: never), from treeAllReduceMinBytes
  // (TUTTI_TREE_ALLREDUCE_MIN_BYTES; a deterministic one from detTreeAllReduceMinBytes,
  // TUTTI_DET_TREE_ALLREDUCE_MIN_BYTES).
  size_t treeAllReduceMaxBytes = 0, detTreeAllReduceMaxBytes = 0, treeAllReduceMinBytes = 0;
  size_t detTreeAllReduceMinBytes = 0;
  // A deterministic AllReduce from detScatterGatherMinBytes to detScatterGatherMaxBytes, 3 to 8 ranks, takes a
  // one-shot ReduceScatter then a one-shot AllGather, ahead of the tree (TUTTI_DET_SCATTER_GATHER_MIN_BYTES /
  // TUTTI_DET_SCATTER_GATHER_MAX_BYTES; max 0: never).
  size_t detScatterGatherMinBytes = 0, detScatterGatherMaxBytes = 0;
  // Past a Simple slot per rank, up to this many bytes, the same in rounds of a slot per rank each
  // (TUTTI_DET_SCATTER_GATHER_ROUNDS_MAX_BYTES; 0: never).
  size_t detScatterGatherRoundsMaxBytes = 0;
  // A non-deterministic AllReduce of up to this many bytes takes the tree with its way up in one hop, every rank's
  // row to rank 0 (TUTTI_TREE_ALLREDUCE_ONE_HOP_MAX_BYTES; 0: never; a deterministic one always goes so).
  size_t oneHopTreeAllReduceMaxBytes = 0;
  // ReduceScatter up and down the same tree, up to this many bytes of input (TUTTI_TREE_REDUCESCATTER_MAX_BYTES,
  // TUTTI_DET_TREE_REDUCESCATTER_MAX_BYTES for a deterministic one, from detTreeReduceScatterMinBytes; 0: never).
  size_t treeReduceScatterMaxBytes = 0, detTreeReduceScatterMaxBytes = 0, detTreeReduceScatterMinBytes = 0;
  // AllReduce by recursive halving then doubling, past doublingMaxBytes (TUTTI_HALVING_DOUBLING_MAX_BYTES).
  size_t halvingDoublingMaxBytes = 0;
  // A deterministic AllReduce by recursive doubling (a power of two of ranks) up to this many bytes
  // (TUTTI_DET_DOUBLING_MAX_BYTES; 0: never).
  size_t detDoublingMaxBytes = 0;
  // A deterministic ReduceScatter by recursive halving (4 or 8 ranks) up to this many bytes of input
  // (TUTTI_DET_HALVING_MAX_BYTES; 0: never).
  size_t detHalvingMaxBytes = 0;
  // The default tuner alone decides, so the core may take the paths above (comm.cc).
  bool corePaths = false;
  // AllReduce and ReduceScatter of floating types take the deterministic paths (comm/det_coll.h) even when the
  // communicator is not deterministic: host backend, a peer over the network, corePaths, no forced algorithm or
  // protocol, from TUTTI_FIXED_ORDER_NET_MIN_RANKS ranks; or within a node, 4 to 8 ranks each in its own process, from
  // fixedOrderMinBytes of input (TUTTI_FIXED_ORDER_SHM_MIN_BYTES; comm.cc).
  bool fixedOrderPaths = false;
  size_t fixedOrderMinBytes = 0;
  // Over the network, where fixedOrderPaths: a float AllReduce past detTreeAllReduceMaxBytes that logAllReduce would
  // run by halving then doubling keeps that path (TUTTI_FIXED_ORDER_NET_HALVING_DOUBLING; comm.cc).
  bool fixedOrderKeepsHalvingDoubling = false;
  // An AllGather of at least this many bytes of output runs as grouped sends and receives, every block to every peer
  // at once (api/coll_api.cc; TUTTI_ALLGATHER_SENDS_MIN_BYTES; by default over the network from 4 ranks; 0: never).
  size_t allGatherSendsMinBytes = 0;
  int64_t p2pLLThreshold = -1;  // send/recv of at most this many bytes use LL (NCCL_P2P_LL_THRESHOLD); -1: none

  // (channel, connIndex, peer, isSend) -> connection, created lazily on first use.
  std::map<std::tuple<int, int, int, bool>, std::unique_ptr<tutti::Connection>> connections;
  std::mutex connMutex;
  // Channel 0's collective connections with every peer, at 2 * peer + isSend (null: none, or this rank), published
  // once the launch that made them all set directConnsReady: the one-shot and single-copy paths then find theirs
  // without connMutex and the map (commCollConnection).
  std::unique_ptr<tutti::Connection*[]> directConnTable;
  std::atomic<tutti::Connection* const*> directConns{nullptr};

  std::unique_ptr<tutti::RedOpTable> redOps;  // created at init (needs nRanks)
  std::unique_ptr<tutti::TunerChain, tutti::TunerChainDeleter> tuners;  // created at init, finalized at free
  // Active profilers (comm/profiler.h); null when none: every emission site tests this pointer only.
  std::unique_ptr<tutti::CommProfiler> profiler;
  uint64_t collOpCount = 0;  // collectives launched, same sequence on every rank
  // The path of the last lone call on the one-shot path (comm/group.cc, tryLoneOneShot). A call that repeats its
  // function, count, datatype, built-in op and the deterministic setting takes it again without asking corePaths:
  // the answer depends on nothing else that may change once the connections are made. The calling thread's, as the
  // communicator is.
  struct LoneCall {
    bool valid = false;
    ncclFunc_t func = ncclFuncAllReduce;
    ncclDataType_t datatype = ncclInt8;
    ncclRedOp_t op = ncclSum;
    size_t count = 0;
    bool det = false;
    bool oneShot = false, doubling = false;  // CorePaths' answer
    size_t totalBytes = 0;
    tutti::ResolvedRedOp resolved{};  // the op as the one-shot applies it (a byte copy for the gathers)
  } loneCall;
  uint64_t p2pOpCount = 0;

  std::atomic<bool> abortFlag{false};
  std::atomic<int> failure{-1};  // first failureRecord (device/host/wait.h) that aborted this communicator
  // Failure notes received from network peers (commAskFailure), by peer: a peer sends one note, and every
  // channel that saw its connection close asks for it.
  std::mutex failureNotesMutex;
  std::map<int, int> failureNotes;
  std::atomic<ncclResult_t> asyncError{ncclSuccess};
  std::atomic<tutti::CommState> state{tutti::CommState::Ready};
  // Calls and queued stream work using the communicator right now (CommOpsGuard): its memory is freed
  // only once this is 0, so ncclCommAbort from another thread never pulls it from under a waiting call.
  std::atomic<int> activeOps{0};
  std::mutex lifeMutex;  // guards `bootstrap` while an init may publish it, and `asyncJob`
  std::shared_ptr<tutti::AsyncJob> asyncJob;  // latest background job of a nonblocking communicator
  std::unique_ptr<ncclUniqueId> growId;  // guarded by lifeMutex: made by ncclCommGetUniqueId, not yet used
  // One-sided state (rma/window.h): signal blocks and windows, made by the first ncclCommWindowRegister.
  std::mutex rmaMutex;
  std::unique_ptr<tutti::rma::CommRma, tutti::rma::CommRmaDeleter> rma;
  // rma's abort word (pinned memory device-side waits poll), raised with abortFlag; null until rma exists.
  std::atomic<uint32_t*> rmaAbortWord{nullptr};
  // Scratch memory of the backend's kind (commScratch), newest last. Outgrown buffers stay until commFree:
  // queued or captured work may still read them.
  std::mutex scratchMutex;
  std::vector<std::pair<void*, size_t>> scratch;
  // Device backends: bytes of the scratch made when the communicator was created. Calls keep their scratch within
  // it (in segments or rounds where they would need more), so none allocates device memory: a cudaMalloc may wait
  // for the device while peers' kernels spin, and graph capture refuses it. 0 on the host backend (no bound).
  size_t scratchAtInit = 0;
  // Staging of in-place AlltoAlls inside a user's group (commScratch's `staging`): apart from `scratch`, which
  // other work of the same launch (PAT, deterministic calls) may write while the AlltoAll's sends read this.
  std::vector<std::pair<void*, size_t>> staging;
  // Host backend: scratch rows of deterministic reductions (comm/det_coll.h) that no call holds, kept for the
  // next ones (a fresh large allocation costs a page fault per page on every call).
  std::mutex detScratchMutex;
  std::vector<std::pair<void*, size_t>> detScratchFree;
  int64_t timeoutNs = 0;
  int spinCount = 2000;
  int netSpinCount = 2000;  // the same for waits that drive network connections (TUTTI_NET_SPIN_COUNT)
  int netLongSpinCount = 2000;   // the same for a step of kLongNetStepBytes or more (TUTTI_NET_LONG_SPIN_COUNT)
  int bcastRecvSpinCount = 2000;  // a Broadcast receiver's wait on the network (TUTTI_NET_BCAST_SPIN_COUNT)
  // The bytes of lanes this rank's LL connections cycle through (HostConn::laneRegion): the two ends agree at
  // connect (connect.cc). 0: no bound but kMaxLanes.
  size_t llLaneRegion = 0;
  // Reductions of floating types in the fixed order of device/common/det_reduce.h (comm/det_coll.h):
  // config `deterministic:`, TUTTI_DETERMINISTIC, tuttiCommSetDeterministic. Read when a group launches.
  std::atomic<bool> deterministic{false};
  // Their tuning (TUTTI_DET_*), read once at init: calls of a few bytes cannot afford the lookups.
  struct DetTuning {
    size_t oneShotBytes = 0;    // TUTTI_DET_ONESHOT_BYTES
    bool fused = true;          // TUTTI_DET_FUSED
    size_t stepBytes = 1;       // TUTTI_DET_STEP_BYTES (at least 1)
    bool stepGrows = false;     // over the network, unset: a call's steps grow with its slices (det_coll.cc)
    size_t oneThreadBytes = 0;  // TUTTI_DET_ONE_THREAD_BYTES
    size_t segmentBytes = 1;    // TUTTI_DET_SEGMENT_BYTES (at least 1)
    size_t pipelineBytes = 0;   // TUTTI_DET_PIPELINE_BYTES (0: off)
  } det;
  tutti::CommCallCheck calls;  // TUTTI_CHECK_CALLS, TUTTI_WAIT_WARN, who reached a stuck operation
};

namespace tutti {

// True when `comm` is a live communicator (comm/registry.h); *comm is read only once it is known to be live.
bool commIsValid(const ncclComm* comm);

// Collective: every rank of `nRanks` calls it with the same id. *out set only on success.
ncclResult_t commInitRank(ncclComm** out, int nRanks, const ncclUniqueId& id, int rank, const ncclConfig_t* config);
// The two halves of commInitRank, for nonblocking communicators: a shell that exists (and can be aborted)
// at once, in state Initializing with asyncError ncclInProgress, and the collective init that fills it.
ncclComm* commCreateShell(const ncclConfig_t* config);
ncclResult_t commInitInto(ncclComm* comm, int nRanks, const ncclUniqueId& id, int rank);
// Runs `init` (which ends with commInitInto, or fails before) on a background thread and returns; the shell
// becomes Ready and asyncError ncclSuccess when it succeeds, or asyncError holds its error. `parent`, if
// set, is kept alive (activeOps) while the job runs (split and shrink read its bootstrap).
void commStartAsyncInit(ncclComm* shell, ncclComm* parent, std::function<ncclResult_t()> init);
// Releases everything (connections, bootstrap), after the communicator's background job and every call
// still inside it (other threads) have returned. Not collective.
ncclResult_t commFree(ncclComm* comm);
// Stops the communicator's operations: every wait returns (Aborted), its connections' ends close so peers
// stop too, network peers are told why. The bootstrap keeps working (split and shrink need it).
void commCancelOps(ncclComm* comm);
// commCancelOps, and the bootstrap's waits end too (ncclCommAbort). Safe from any thread, during init too.
void commSignalAbort(ncclComm* comm);
// Whether operations may be issued on `comm` now; the error names `call` and why not: still initializing
// or busy with a nonblocking group (ncclInvalidArgument, as NCCL), finalized, revoked or aborted
// (ncclInvalidUsage), or an earlier operation's error (that error).
ncclResult_t commCheckUsable(ncclComm* comm, const char* call);
// Waits until no call or queued work uses the communicator and its background job has ended.
void commQuiesce(ncclComm* comm);
// At least `bytes` of scratch in memory the communicator's kernels or host work reach (device memory on a
// device backend), for work queued on the communicator; grown as needed, freed by commFree. `staging`: the
// separate buffers of comm->staging instead of comm->scratch.
ncclResult_t commScratch(ncclComm* comm, size_t bytes, void** out, bool staging = false);

// config.blocking = 0: init, split, shrink and groups of operations run in the background and return
// ncclInProgress; ncclCommGetAsyncError says when they are done. Unset (NCCL_CONFIG_UNDEF_INT) is blocking.
inline bool commNonblocking(const ncclComm* comm) { return comm->config.blocking == 0; }

// Counts one call (or one queued piece of work) in comm->activeOps for its lifetime.
class CommOpsGuard {
 public:
  explicit CommOpsGuard(ncclComm* comm) : comm_(comm) { comm_->activeOps.fetch_add(1, std::memory_order_acq_rel); }
  ~CommOpsGuard() { comm_->activeOps.fetch_sub(1, std::memory_order_acq_rel); }
  CommOpsGuard(const CommOpsGuard&) = delete;
  CommOpsGuard& operator=(const CommOpsGuard&) = delete;

 private:
  ncclComm* comm_;
};
// OpLabel::askFailure for this communicator: waits briefly for `peer`'s failure note (see commSignalAbort).
int commAskFailure(void* comm, int peer);

// Establishes the connections in `wanted` that do not exist yet ({channel, connIndex, peer, isSend}).
// Collective between the two ends of each connection: both must ask for it in the same group.
struct ConnRequest {
  int channel, connIndex, peer;
  bool isSend;
};
ncclResult_t commConnect(ncclComm* comm, const std::vector<ConnRequest>& wanted);
// Whether every rank's transports to all its peers declare TUTTI_TRANSPORT_CAP_LL128. Collective (one
// bootstrap allGather), so every rank gets the same answer.
ncclResult_t commLL128Vote(ncclComm* comm, bool* out);
// Whether the transport this rank would connect to `peer` with (the first in config order that accepts the pair) is
// a network transport: the user left the ranks only the network (shm and p2p disabled or absent).
ncclResult_t commPeerOverNetwork(ncclComm* comm, int peer, bool* out);
Connection* commFindConnection(ncclComm* comm, int channel, int connIndex, int peer, bool isSend);
// Channel 0's collective connection with `peer`: commFindConnection(comm, 0, kConnColl, peer, isSend), from the
// published table once there is one.
inline Connection* commCollConnection(ncclComm* comm, int peer, bool isSend) {
  if (Connection* const* table = comm->directConns.load(std::memory_order_acquire)) return table[2 * peer + isSend];
  return commFindConnection(comm, 0, kConnColl, peer, isSend);
}
// Publishes comm->directConns (once; every later call returns at once).
void commPublishDirectConns(ncclComm* comm);

// Wait policy for this communicator's operations (spin count, TUTTI_TIMEOUT, abort flag).
host::WaitContext commWaitContext(ncclComm* comm);

}  // namespace tutti
