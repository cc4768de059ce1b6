#include "comm/comm.h"

#include "comm/det_coll.h"
#include "comm/registry.h"

#include "nccl_version.h"

#include "plan/tuning.h"

#include "device/enqueue.h"
#include "device/host/launch.h"
#include "device/host/direct_copy.h"
#include "device/sim/kernels.h"
#include "plugin/config.h"
#include "plugin/params.h"
#include "proxy/net_transport.h"
#include "proxy/proxy.h"
#include "plugin/transport_plugin.h"
#include "util/check.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

namespace tutti {
namespace {

uint64_t hashBytes(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// The tuning of deterministic reductions (ncclComm::det), read once.
void readDetTuning(ncclComm* comm) {
  auto bytes = [](const char* name, int64_t least) { return static_cast<size_t>(std::max(least, paramInt(name))); };
  // -1: 256 KiB, lowered once the transports are known (commInitInto)
  comm->det.oneShotBytes = paramInt("TUTTI_DET_ONESHOT_BYTES") < 0 ? size_t{256} << 10 : bytes("TUTTI_DET_ONESHOT_BYTES", 0);
  comm->det.fused = paramInt("TUTTI_DET_FUSED") != 0;
  // -1: 64 KiB, lowered once the transports are known (commInitInto)
  comm->det.stepBytes = paramInt("TUTTI_DET_STEP_BYTES") < 0 ? size_t{64} << 10 : bytes("TUTTI_DET_STEP_BYTES", 1);
  comm->det.oneThreadBytes = bytes("TUTTI_DET_ONE_THREAD_BYTES", 0);
  comm->det.segmentBytes = bytes("TUTTI_DET_SEGMENT_BYTES", 1);
  comm->det.pipelineBytes = bytes("TUTTI_DET_PIPELINE_BYTES", 0);
}

// Which backend runs this communicator (backendOfNewComms), logged once per rank.
ncclResult_t selectBackend(ncclComm* comm) {
  readDetTuning(comm);
  std::string from, error;
  if (!backendOfNewComms(&comm->backend, &from, &error)) TUTTI_FAIL(ncclInvalidUsage, "rank {}: {}", comm->rank, error);
  if (comm->backend == Backend::Sim) {
    const int64_t nthreads = paramInt("TUTTI_SIM_NTHREADS"), arch = paramInt("TUTTI_SIM_ARCH");
    if (nthreads < 32 || nthreads > 1024 || nthreads % 32 != 0)
      TUTTI_FAIL(ncclInvalidArgument, "rank {}: TUTTI_SIM_NTHREADS={}: threads per block must be a multiple of 32 "
                 "from 32 to 1024", comm->rank, nthreads);
    if (arch != 80 && arch != 90)
      TUTTI_FAIL(ncclInvalidArgument, "rank {}: TUTTI_SIM_ARCH={}: the kernels are built for 80 and 90", comm->rank,
                 arch);
    comm->devArch = static_cast<int>(arch);
  } else if (comm->backend == Backend::Cuda) {
    rt::Runtime* rt = rt::cudaRuntime();
    TUTTI_CHECK(rt->currentDevice(&comm->cudaDev));
    TUTTI_CHECK(rt->deviceArch(comm->cudaDev, &comm->devArch));
    if (comm->devArch < 80)
      TUTTI_FAIL(ncclInvalidUsage, "rank {}: device: cuda: GPU {} is sm_{}; the kernels need sm_80 or newer", comm->rank,
                 comm->cudaDev, comm->devArch);
  }
  if (comm->backend != Backend::Host) {
    TUTTI_CHECK(device::commDeviceInit(comm));
    // Scratch for every call that needs some (a deterministic one-shot gather, or one segment of an exchange, and
    // the scalars: detDeviceScratchBytes; a segment of PAT ReduceScatter; a round of in-place AlltoAll), made before the rendezvous, when no peer can have launched yet. During a call, a
    // cudaMalloc may wait for the device while peers' kernels spin for this rank, and under graph capture it is
    // not allowed at all.
    void* scratch = nullptr;
    comm->scratchAtInit = detDeviceScratchBytes(comm);
    TUTTI_CHECK(commScratch(comm, comm->scratchAtInit, &scratch));
  }
  TUTTI_INFO(NCCL_INIT, "rank {}: backend {} ({}){}", comm->rank, backendName(comm->backend), from,
             comm->backend == Backend::Sim ? fmt::format(", TUTTI_SIM_SEED={}", paramInt("TUTTI_SIM_SEED")) : "");
  return ncclSuccess;
}

// Several ranks on one GPU in one process need their kernels to run side by side. CUDA spreads streams over
// CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 unless set); streams that share a queue run in its order, so a
// rank's launch queued behind a peer's kernel (which spins until this rank joins) never starts, and the operation
// times out. Each rank uses two streams (its user stream and the communicator's internal one). On an H200, two ranks
// with CUDA_DEVICE_MAX_CONNECTIONS=1 time out on their first AllGather; with the default, 4 ranks ran.
ncclResult_t warnFewHardwareQueues(const ncclComm* comm) {
  const tuttiPeerInfo_t& me = comm->peers[comm->rank];
  int sharing = 0, first = -1;
  for (int r = 0; r < comm->nRanks; ++r) {
    const tuttiPeerInfo_t& p = comm->peers[r];
    if (p.pidHash != me.pidHash || p.cudaDev != me.cudaDev) continue;
    ++sharing;
    if (first < 0) first = r;
  }
  const char* env = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (!env || first != comm->rank) return ncclSuccess;  // one warning per GPU, from its first rank
  char* end = nullptr;
  const long queues = std::strtol(env, &end, 10);
  if (end == env || queues >= 2L * sharing) return ncclSuccess;
  TUTTI_WARN("rank {}: {} ranks of this communicator share GPU {} in this process, and CUDA_DEVICE_MAX_CONNECTIONS={} "
             "gives their {} streams fewer hardware queues than that: a rank's kernels can then wait behind a peer's "
             "that wait for it, and operations time out. Unset it, or set it to at least {}",
             first, sharing, me.cudaDev, env, 2 * sharing, 2 * sharing);
  return ncclSuccess;
}

}  // namespace

const char* backendName(Backend b) {
  switch (b) {
    case Backend::Sim: return "sim";
    case Backend::Cuda: return "cuda";
    default: return "host";
  }
}

bool backendOfNewComms(Backend* out, std::string* from, std::string* error) {
  DeviceKind kind = DeviceKind::Auto;
  *from = "config device:";
  if (paramIsSet("TUTTI_DEVICE")) {
    const std::string v = paramString("TUTTI_DEVICE");
    *from = "TUTTI_DEVICE";
    if (v == "auto") kind = DeviceKind::Auto;
    else if (v == "host") kind = DeviceKind::Host;
    else if (v == "sim") kind = DeviceKind::Sim;
    else if (v == "cuda") kind = DeviceKind::Cuda;
    else {
      *error = fmt::format("TUTTI_DEVICE={}: unknown backend (expected auto, host, sim or cuda)", v);
      return false;
    }
  } else {
    const Config* cfg = nullptr;
    if (configGet(&cfg) != ncclSuccess) {
      *error = lastErrorText();
      return false;
    }
    kind = cfg->device;
  }
  switch (kind) {
    case DeviceKind::Sim:
      if (!sim::available()) {
        *error = fmt::format("{} sim: this build has no sim backend (configured with TUTTI_WITH_SIM=OFF)", *from);
        return false;
      }
      *out = Backend::Sim;
      return true;
    case DeviceKind::Cuda: {
      std::string why;
      if (!rt::cudaRuntime()->usable(&why)) {
        *error = fmt::format("{} cuda: no usable GPU: {}", *from, why);
        return false;
      }
      *out = Backend::Cuda;
      return true;
    }
    case DeviceKind::Host:
      *out = Backend::Host;
      return true;
    default: {  // auto: cuda where a GPU is usable, else host (`device: host` keeps host buffers on a GPU machine)
      std::string why;
      const bool gpu = rt::cudaRuntime()->usable(&why);
      *from += gpu ? " auto (a usable GPU)" : fmt::format(" auto (no usable GPU: {})", why);
      *out = gpu ? Backend::Cuda : Backend::Host;
      return true;
    }
  }
}

bool deterministicOfNewComms(bool* out, std::string* from, std::string* error) {
  if (paramIsSet("TUTTI_DETERMINISTIC")) {
    const int64_t v = paramInt("TUTTI_DETERMINISTIC");
    if (v != 0 && v != 1) {
      *error = fmt::format("TUTTI_DETERMINISTIC={}: expected 0 or 1", v);
      return false;
    }
    *from = paramOrigin("TUTTI_DETERMINISTIC").kind == ParamOrigin::Environment ? "TUTTI_DETERMINISTIC"
                                                                                : "config params: TUTTI_DETERMINISTIC";
    *out = v == 1;
    return true;
  }
  const Config* cfg = nullptr;
  if (configGet(&cfg) != ncclSuccess) {
    *error = lastErrorText();
    return false;
  }
  *from = cfg->deterministicOrigin.kind == ParamOrigin::File ? "config deterministic:" : "default";
  *out = cfg->deterministic;
  return true;
}

// The registry answers without touching *comm (it may be freed or unmapped); the magic is read only then.
bool commIsValid(const ncclComm* comm) { return commRegistryContains(comm) && comm->magic == kCommMagic; }

host::WaitContext commWaitContext(ncclComm* comm) {
  host::WaitContext w;
  w.spinCount = comm->spinCount;
  w.driveSpinCount = comm->netSpinCount;
  w.longStepDriveSpinCount = comm->netLongSpinCount;
  w.timeoutNs = comm->timeoutNs;
  w.abortFlag = &comm->abortFlag;
  w.shared = false;
  w.warnNs = comm->calls.waitWarnNs;
  w.warnedOp = &comm->calls.warnedOp;
  return w;
}

AsyncJob::AsyncJob(std::function<void()> body) {
  thread_ = std::thread([this, body = std::move(body)] {
    body();
    done_.store(true, std::memory_order_release);
  });
}

AsyncJob::~AsyncJob() { join(); }

void AsyncJob::join() {
  std::call_once(joinOnce_, [this] {
    if (thread_.joinable()) thread_.join();
  });
}

ncclComm* commCreateShell(const ncclConfig_t* config) {
  auto* comm = new ncclComm();
  if (config) comm->config = *config;
  if (config && config->commName) comm->commName = config->commName;
  comm->state = CommState::Initializing;
  comm->asyncError = ncclInProgress;
  commRegistryAdd(comm);  // handed out while still initialising: GetAsyncError/Abort must accept it
  return comm;
}

void commStartAsyncInit(ncclComm* shell, ncclComm* parent, std::function<ncclResult_t()> init) {
  std::shared_ptr<CommOpsGuard> parentGuard = parent ? std::make_shared<CommOpsGuard>(parent) : nullptr;
  auto job = std::make_shared<AsyncJob>([shell, parentGuard, init = std::move(init)]() mutable {
    const ncclResult_t res = init();
    parentGuard.reset();
    if (res == ncclSuccess) {
      CommState expected = CommState::Initializing;
      shell->state.compare_exchange_strong(expected, CommState::Ready);
    }
    shell->asyncError.store(res);
  });
  std::lock_guard<std::mutex> lock(shell->lifeMutex);
  shell->asyncJob = std::move(job);
}

ncclResult_t commInitRank(ncclComm** out, int nRanks, const ncclUniqueId& id, int rank, const ncclConfig_t* config) {
  ncclComm* comm = commCreateShell(config);
  if (ncclResult_t res = commInitInto(comm, nRanks, id, rank); res != ncclSuccess) {
    LastErrorKeeper keep;  // the init's error is the one to report
    commFree(comm);
    return res;
  }
  comm->state = CommState::Ready;
  comm->asyncError = ncclSuccess;
  commRegistryAdd(comm);  // complete: API calls accept it from now on (idempotent)
  *out = comm;
  return ncclSuccess;
}

ncclResult_t commInitInto(ncclComm* comm, int nRanks, const ncclUniqueId& id, int rank) {
  comm->rank = rank;
  comm->nRanks = nRanks;
  comm->commHash = hashBytes(&id, sizeof id);
  comm->redOps = std::make_unique<RedOpTable>(nRanks);
  comm->timeoutNs = std::max<int64_t>(0, paramInt("TUTTI_TIMEOUT")) * 1000000000ll;
  TUTTI_CHECK(selectBackend(comm));
  callCheckInit(&*comm);
  logSetThreadRank(rank);
  static std::once_flag versionOnce;
  std::call_once(versionOnce, [] {
    logFmt(NCCL_LOG_VERSION, NCCL_INIT, __FILE__, __LINE__, "Tutti version {} (NCCL API {}.{}.{})", TUTTI_VERSION_STRING,
           NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  });

  {
    // Published before the rendezvous, so an abort from another thread can end it.
    std::unique_ptr<Bootstrap> b;
    TUTTI_CHECK(Bootstrap::open(&id, rank, nRanks, &b));
    std::lock_guard<std::mutex> lock(comm->lifeMutex);
    comm->bootstrap = std::move(b);
    if (comm->abortFlag.load()) comm->bootstrap->abort();
  }
  TUTTI_CHECK(comm->bootstrap->join(&id));

  comm->peers.resize(nRanks);
  TUTTI_CHECK(topoLocalPeerInfo(rank, comm->cudaDev, &comm->peers[rank]));
  TUTTI_CHECK(comm->bootstrap->allGather(comm->peers.data(), sizeof(tuttiPeerInfo_t)));
  for (int r = 0; r < nRanks; ++r) {
    if (comm->peers[r].rank != r)
      TUTTI_FAIL(ncclInternalError, "rank {}: peer info of rank {} is corrupt (says rank {})", rank, r,
                 comm->peers[r].rank);
  }
  comm->nNodes = topoNodeCount(comm->peers);

  int localRanks = 0;
  for (const auto& p : comm->peers) localRanks += p.hostHash == comm->peers[rank].hostHash;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  // Waits spin before sleeping: a sleeper's wake-up costs tens of microseconds, so spin long while every
  // rank of this host has a core to itself, and briefly when ranks outnumber cores (a spinner would take
  // the core its peer needs).
  if (paramIsSet("TUTTI_SPIN_COUNT")) {
    comm->spinCount = static_cast<int>(std::max<int64_t>(0, paramInt("TUTTI_SPIN_COUNT")));
  } else {
    comm->spinCount = localRanks <= cores ? 20000 : 1000;
  }
  // A wait that drives its network connections polls them with a system call each time: where ranks outnumber
  // cores those calls take the core from the rank being waited for, so such a wait sleeps sooner (the median of
  // three runs, AllReduce over sockets, us, 1000 -> 100 polls: 4 ranks 8 B 114 -> 74, 32 KiB 161 -> 155; 8 ranks 8 B
  // 315 -> 233, 4 KiB 305 -> 225, 32 KiB 560 -> 500; 30 or 300 polls do worse, 0 twice as badly).
  if (paramIsSet("TUTTI_NET_SPIN_COUNT"))
    comm->netSpinCount = static_cast<int>(std::max<int64_t>(0, paramInt("TUTTI_NET_SPIN_COUNT")));
  else
    comm->netSpinCount = localRanks <= cores || paramIsSet("TUTTI_SPIN_COUNT") ? comm->spinCount : 100;
  // A step of 128 KiB or more over the network takes long enough for its waits to sleep sooner still (4 processes
  // over sockets, 2 cores, AllReduce, medians of 8-12 interleaved runs, us, 100 -> 10 polls: 1 MiB (256 KiB steps)
  // 1021 -> 932, 4 MiB 5615 -> 4999 with the spread of the runs 3760-8177 -> 4740-6664; 1000 polls: 7701; 256 KiB
  // (64 KiB steps) 313 -> 328 and 64 KiB 136 -> 152, which keep 100).
  if (paramIsSet("TUTTI_NET_LONG_SPIN_COUNT"))
    comm->netLongSpinCount = static_cast<int>(std::max<int64_t>(0, paramInt("TUTTI_NET_LONG_SPIN_COUNT")));
  else
    comm->netLongSpinCount =
        localRanks <= cores || paramIsSet("TUTTI_NET_SPIN_COUNT") || paramIsSet("TUTTI_SPIN_COUNT") ? comm->netSpinCount
                                                                                                    : 10;
  // A Broadcast receiver over the network, whose senders bound the calls (runBinomialBroadcast), sleeps sooner still
  // where the net plugin can wake it itself (8 processes over sockets, 2 cores, medians of seven interleaved runs,
  // 8 B to 512 B, us: 32-35 -> 22-26 at 10 polls, 25-27 at 2; 34-40 at 10 polls with the proxy thread's hand-over).
  if (paramIsSet("TUTTI_NET_BCAST_SPIN_COUNT"))
    comm->bcastRecvSpinCount = static_cast<int>(std::max<int64_t>(0, paramInt("TUTTI_NET_BCAST_SPIN_COUNT")));
  else
    comm->bcastRecvSpinCount = localRanks <= cores || paramIsSet("TUTTI_NET_SPIN_COUNT") ? comm->netSpinCount : 10;

  // Small LL steps of one size cycle through 16 KiB of lanes (host/prims.h, llDepth) where every rank of this host
  // has a core, so the lines stay in the two cores' caches (2 processes over shm, 2 cores, medians of three
  // interleaved runs, us, 256 lanes -> 16 KiB: AllReduce 256 B 0.82 -> 0.43, 1 KiB 1.77 -> 0.65; AlltoAll 1 KiB
  // 0.92 -> 0.43; AllGather 1 KiB 1.16 -> 0.48; ReduceScatter 1 KiB 1.01 -> 0.44). Where ranks outnumber cores a
  // sender runs far ahead of a receiver waiting for its core: 8 processes, Broadcast 1 KiB 1.32 -> 3.62.
  const int64_t region = paramInt("TUTTI_LL_LANE_REGION_BYTES");
  comm->llLaneRegion = region >= 0 ? static_cast<size_t>(region) : localRanks <= cores ? size_t{16} << 10 : 0;

  // The proxy thread reads its placement when it starts (first network connection of the process): a value
  // it could not use is an init error now rather than a silent default then.
  {
    ProxyAffinity affinity;
    std::string why;
    if (!parseProxyAffinity(paramString("TUTTI_PROXY_AFFINITY"), &affinity, &why))
      TUTTI_FAIL(ncclInvalidArgument, "rank {}: TUTTI_PROXY_AFFINITY: {}", rank, why);
    proxySetAffinity(affinity);
  }

  comm->nChannels = topoChannelCount(nRanks);
  // CUDA backend: a channel is a block, and a block moves what the loads it keeps in flight allow, so a GPU needs
  // many (one H200, 2 ranks, ring AllReduce of 256 MiB, Simple, busbw: 31 GB/s on 2 channels, 116 on 8, 200 on 16).
  // Ranks that share a GPU spin on each other's blocks, which must all be resident at once: together they take at
  // most kCudaSharedGpuBlocks. Counted from the peers' hosts and bus ids, so every rank decides alike.
  if (comm->backend == Backend::Cuda && !paramIsSet("NCCL_MIN_NCHANNELS") && !paramIsSet("NCCL_MAX_NCHANNELS")) {
    constexpr int kCudaChannels = 16, kCudaSharedGpuBlocks = 32;
    int perGpu = 1;
    for (const auto& p : comm->peers) {
      int n = 0;
      for (const auto& q : comm->peers) n += q.hostHash == p.hostHash && q.busId == p.busId;
      perGpu = std::max(perGpu, n);
    }
    comm->nChannels = std::clamp(kCudaSharedGpuBlocks / perGpu, 2, kCudaChannels);
  }
  // Host backend: a channel is a thread, and a second channel a rank cannot give a core of its own costs a thread
  // wake-up per call and splits the copies it would have streamed (2 ranks on 2 cores, AllReduce 1 MiB: 131 us
  // on 2 channels, 56 us on 1).
  // Every rank must slice a collective alike, so only where every rank sees the same cores and local ranks: one host.
  comm->collChannelCap = comm->nChannels;
  if (comm->backend == Backend::Host && comm->nNodes == 1 && !paramIsSet("NCCL_MIN_NCHANNELS") &&
      !paramIsSet("NCCL_MAX_NCHANNELS"))
    comm->collChannelCap = std::clamp(cores / std::max(localRanks, 1), 1, comm->nChannels);
  // Single-copy AllGather / Broadcast. Unset, where measured to beat the ring (2 cores, AllGather and Broadcast
  // from 64 KiB to 16 MiB): AllGather from 4 MiB, where the ring's two copies per byte cost more than the reads'
  // page pinning; Broadcast while ranks outnumber cores (4 ranks on 2: 256 KiB in 52-59 us against 110); with a core
  // each the ring's pipelined copies ran in parallel and beat one rank reading everything, until the root wrote a
  // share of every reader's buffer itself (directRootShareMin; threads with a core each: below). A forced
  // algorithm or protocol is what the caller wants to run (and measure): no single-copy path then. AlltoAll (output
  // bytes, measured 2/4/8 ranks, 16 KiB to 64 MiB): from 1 MiB (4 ranks: 167 us against 268 for the sends and
  // receives), from 256 KiB while ranks outnumber cores (8 ranks: 201 us against 258); below, the descriptor
  // round trip and the page pinning cost more than the second copy.
  // AllReduce / ReduceScatter where every rank is a thread of this process (plain copies; 2/3/4/8 threads on 2 cores,
  // the best of two or three runs, the ring or one-shot -> direct): AllReduce every call past the one-shot path
  // (64 KiB: 4 ranks 79 -> 23 us, 8 ranks 219 -> 57; 256 KiB: 3 ranks 150 -> 43, 4 ranks 253 -> 43, 8 ranks 652 -> 126;
  // 512 KiB on 2 ranks 228 -> 37; 4 MiB on 4 ranks 2048 -> 531), and from 16 KiB even where the call fits the
  // one-shot path (2 ranks 16 KiB 8.4 -> 3.8 us, 64 KiB 9.0 -> 6.4, 256 KiB 50 -> 28; 8 ranks 16 KiB 78 -> 53; even on
  // 4 ranks); ReduceScatter from 128 KiB of input (8 ranks 128 KiB 90 -> 59 us, 256 KiB 174 -> 112; 4 ranks 256 KiB
  // 63 -> 50; at 64 KiB 8 ranks lose, 61 -> 85). Across processes, where a read costs a system call and the page
  // pinning: an AllReduce of 3 or 4 ranks from 256 KiB, where a read costs less than 2.5 copies (directProbe turns
  // it off from there); shm, 2 cores, a read costing 2.24 copies, interleaved runs, ring -> direct, us: 3 ranks
  // 256 KiB 120/159/113 -> 70/69/68, 1 MiB 615/609/616 -> 470/620/458, 4 MiB 2731/2905/2409 -> 2264/1952/1597, 16 MiB
  // 10466/11311/11277 -> 7914/9483/10682; 4 ranks 256 KiB 209/222/168 -> 204/122/163, 1 MiB 705/1321/844 ->
  // 653/718/593, 4 MiB 2695/2815/4050 -> 1533/2974/2615, 16 MiB 16106/17353/13366 -> 14792/13544/14648, 64 MiB
  // 68370/107834 -> 43930/45779; below 256 KiB even (4 ranks 64 KiB 47/61/37 -> 51/44/49). On 8 ranks the ring kept
  // level or ahead (1 MiB 1788/1509/1638 -> 2774/1584/1732, 16 MiB 35224/26896/29685 -> 44043/31551/44283); on 2 the
  // ring's single step each way beat the reads (below, directMinDetPairReduce). A deterministic AllReduce takes the
  // same reads from the same size, so the two cost alike there. ReduceScatter: never across processes (the ring
  // moves only the blocks each rank needs). Deterministic reductions: every call past the one-shot path among
  // threads (2-3 times faster than the exchange from 1 MiB); across processes, below.
  bool otherProcess = false;
  for (const tuttiPeerInfo_t& p : comm->peers) otherProcess |= p.pidHash != comm->peers[comm->rank].pidHash;
  const int64_t directMin = paramInt("TUTTI_DIRECT_MIN_BYTES");
  const bool forced = paramIsSet("NCCL_ALGO") || paramIsSet("NCCL_PROTO");
  comm->directOverOneShot = 0;
  if (forced || directMin == 0) {
    comm->directMinGather = comm->directMinBcast = comm->directMinAlltoAll = comm->directMinReduce =
        comm->directMinReduceScatter = 0;
  } else if (directMin > 0) {
    comm->directMinGather = comm->directMinBcast = comm->directMinAlltoAll = comm->directMinReduce =
        comm->directMinReduceScatter = static_cast<size_t>(directMin);
  } else {
    // Ranks as processes, on a later 2-core VM (the median of three runs, one-shot, binomial tree, doubling or ring ->
    // cross memory attach, us): AllGather 2 ranks 128 KiB 17.2 -> 12.3, 1 MiB 138 -> 84; 4 ranks 256 KiB 99 -> 65,
    // 1 MiB 496 -> 371; 8 ranks 256 KiB 235 -> 189, 1 MiB 921 -> 571; Broadcast 2 ranks 128 KiB 14.3 -> 11.0, 1 MiB
    // 169 -> 103, 4 MiB 735 -> 497; 4 ranks 256 KiB 86 -> 56; 8 ranks 64 KiB 48 -> 61, 256 KiB 208 -> 159; AlltoAll 2
    // ranks 128 KiB 14.2 -> 11.7, 256 KiB 25.5 -> 16.0, 1 MiB 96 -> 103. There these reads take over from 128 KiB
    // (AllGather on more ranks from 256 KiB), ahead of the one-shot plan's paths.
    // Ranks as threads with a core each (2 threads on 2 cores, the best of two or three runs, one-shot -> direct, us):
    // AllGather 16 KiB 6.7 -> 3.4, 64 KiB 22 -> 4.9, 256 KiB 80 -> 15 (4 KiB 0.8 -> 3.0); Broadcast, its root writing
    // a share (directRootShareMin), 16 KiB 11.4 -> 2.7, 64 KiB 36 -> 6.7, 256 KiB 142 -> 10; AlltoAll 64 KiB 51 ->
    // 23, 256 KiB 122 -> 38 (16 KiB about even). There the reads take over from 16 KiB (AlltoAll from 64 KiB),
    // ahead of the one-shot plan's paths.
    const bool pair = nRanks == 2, ownCores = localRanks <= cores;
    comm->directMinGather = otherProcess ? (pair ? size_t{128} : size_t{256}) << 10
                            : ownCores   ? size_t{16} << 10
                                         : size_t{4} << 20;
    // Processes that outnumber the cores read no Broadcast: without the root's share (directRootShareMin) each reader
    // copies the whole buffer through the page pinning, n - 1 reads of it in all on cores the readers share, where the
    // binomial tree and the ring pass it through FIFOs that stay in cache (2-core AMD EPYC VM, a read costing 3.75
    // copies, processes over shm, in place, 50 to 100 calls after 10, three interleaved runs, us, reads -> tree or
    // ring, Open MPI beside: 4 ranks 128 KiB 41/40/43 -> 16/14/13, 1 MiB 230/213/336 -> 90/113/113 (200/223/202), 4 MiB
    // 913/860/880 -> 350/436/422 (770/829/773), 16 MiB 5922/5210/5991 -> 1982/2168/2496 (5629/6191/6783); 8 ranks 128
    // KiB 77/105/129 -> 36/36/44, 1 MiB 310/297/525 -> 259/324/370 (655/462/443), 4 MiB 1391/1339/1764 ->
    // 1177/1888/1290 (1988/1865/1636), 16 MiB 7803/9741/11097 -> 5434/6196/6396 (11667/11833/10754); 64 and 256 MiB
    // even or ahead, 4 ranks 64 MiB 10435/10000 -> 9305/8973).
    comm->directMinBcast = otherProcess ? (ownCores ? size_t{128} << 10 : 0)
                           : !ownCores  ? size_t{64} << 10
                                        : size_t{16} << 10;
    comm->directMinAlltoAll = otherProcess && pair    ? size_t{128} << 10
                              : pair && ownCores      ? size_t{64} << 10
                              : localRanks > cores    ? size_t{256} << 10
                                                      : size_t{1} << 20;
    comm->directMinReduce = !otherProcess ? 1 : nRanks == 3 || nRanks == 4 ? size_t{256} << 10 : 0;
    comm->directMinReduceScatter = otherProcess ? 0 : size_t{128} << 10;
    const bool coreSet = paramIsSet("TUTTI_ONESHOT_MAX_BYTES") || paramIsSet("TUTTI_DOUBLING_MAX_BYTES") ||
                         paramIsSet("TUTTI_BINOMIAL_BCAST_MAX_BYTES") || paramIsSet("TUTTI_ONESHOT_ALLTOALL_MAX_BYTES");
    comm->directOverOneShot =
        otherProcess || paramIsSet("TUTTI_ONESHOT_MAX_BYTES") || paramIsSet("TUTTI_DOUBLING_MAX_BYTES")
            ? 0
            : size_t{16} << 10;
    comm->directCopiesFirst = (otherProcess || ownCores) && !coreSet;
    // How much a read from another process costs against a copy varies from host to host (the page pinning, the
    // kernel's copy): directProbe measures it and turns the AllGather reads off where the one-shot's and ring's two
    // copies in cache cost less than one read (direct_copy.cc, kCostlyReadPercent) (2 cores, AMD EPYC VM, a read of 256
    // KiB costing 3.5 copies, the median of three runs, us, one-shot or ring -> cross memory attach: 2 ranks 128 KiB
    // 7.8 -> 16.3, 512 KiB 32.4 -> 51.4, 1 MiB 87 -> 94; 4 ranks 1 MiB 221 -> 280, 2 MiB 939 -> 541, where later sets
    // had the reads lose too). Broadcast, its root writing a share, gains from 128 KiB even there (on 2 ranks from 512
    // KiB); AlltoAll takes sends and receives there but on 8 ranks or more from 128 MiB (direct_copy.cc,
    // costlyReadMinAlltoAll).
    comm->directReadCostGate = otherProcess;
  }
  // Deterministic AllReduce across processes: from 256 KiB, once the fold of n rows ran in one pass (reduce_copy.cc,
  // det_sum_simd.cc); shm, 2 cores, the median of five runs, exchange -> direct, us: 4 ranks 256 KiB 242 -> 150,
  // 1 MiB 753 -> 686, 4 MiB 3184 -> 2761; 8 ranks 256 KiB 454 -> 398, 1 MiB 1602 -> 1106, 4 MiB 7448 -> 6428; even
  // at 16 MiB; below 256 KiB the exchange (4 ranks 64 KiB 57 against 74). A ReduceScatter's exchange moves only the
  // blocks each rank needs: the direct path lost there at every size (4 ranks 256 KiB 78 -> 95, 8 ranks 1 MiB 710 ->
  // 852).
  // A single-copy Broadcast leaves the root idle while every reader copies the whole buffer. Where each rank has a
  // core of its own, the root writes the last 1/n of every reader's buffer itself (process_vm_writev), so the root
  // and the readers copy (n - 1) / n of the bytes each, side by side. Measured on 2 cores, 2 ranks, one process
  // reading another's 16 / 64 / 256 MiB: 5.9 / 5.6 / 5.2 GB/s alone, 7.3 / 10.1 / 7.6 GB/s with the owner writing
  // half; Broadcast 2 ranks in place, the median of three to five runs, us, without -> with: 128 KiB 20.2 -> 14.1,
  // 512 KiB 68.8 -> 42.0, 4 MiB 512 -> 267, 16 MiB 3969 -> 1475, 256 MiB 52246 -> 28814 (Open MPI: 50766). Where
  // ranks outnumber cores the root's copies would take the core from a reader.
  const int64_t rootShare = paramInt("TUTTI_DIRECT_ROOT_SHARE_MIN_BYTES");
  comm->directRootShareMin = rootShare >= 0 ? static_cast<size_t>(rootShare) : localRanks <= cores ? 1 : 0;
  const int64_t detDirect = paramInt("TUTTI_DET_DIRECT_MIN_BYTES");
  comm->directMinDetReduce = forced           ? 0
                             : detDirect >= 0 ? static_cast<size_t>(detDirect)
                             : otherProcess   ? size_t{256} << 10
                                              : 1;
  // A ReduceScatter of threads reads the peers' blocks from 128 KiB, as the default path's does; below, the exchange
  // (threads of one process, 2-core AMD EPYC (Zen 4) VM, deterministic time / the default's in the same launch, three
  // launches, direct -> exchange: 4 ranks 32 KiB 1.37/1.24/1.10 -> 1.05/0.72/0.86, 64 KiB 0.80/1.40/0.91 ->
  // 0.71/0.71/0.67; 8 ranks 32 KiB 0.90/1.16/0.94 -> 1.07/1.11/1.01, 64 KiB 1.57/1.61/1.76 -> 0.93/1.23/0.99).
  comm->directMinDetReduceScatter = forced           ? 0
                                    : detDirect >= 0 ? static_cast<size_t>(detDirect)
                                    : otherProcess   ? 0
                                                     : size_t{128} << 10;
  // Where a read costs 2.5 copies or more (directProbe), the exchange beat those reads on 4 ranks at every size (2-core
  // AMD EPYC VM, a read of 256 KiB costing 3.5 copies, processes over shm, the median of five runs, direct ->
  // exchange, us: 256 KiB 167 -> 135, 1 MiB 588 -> 530, 4 MiB 3518 -> 2785, 16 MiB 15475 -> 13093) and ran even on 8
  // (256 KiB 525 -> 496, 1 MiB 2054 -> 2212, 4 MiB 7928 -> 7937, 16 MiB 31113 -> 32200).
  comm->directDetReadCostGate = otherProcess && !forced && detDirect < 0;
  // Two ranks, Sum, Prod or Avg (detPairPath): every path folds both raw inputs alike, so such an AllReduce takes the
  // default's paths, across processes the ring rather than the direct path (2 processes over shm, 2 cores, medians
  // of five, direct -> ring, us: 1 MiB 185 -> 108, 4 MiB 1117 -> 638, 16 MiB 6012 -> 3657; the default's 97, 636,
  // 3833).
  comm->directMinDetPairReduce = forced           ? 0
                                 : detDirect >= 0 ? static_cast<size_t>(detDirect)
                                                  : comm->directMinReduce;
  // One-shot collectives. Unset: on 2 ranks, where it sends what the ring sends in one step instead of two, 256 KiB
  // (measured on 2 cores, 2 ranks, 4 KiB to 512 KiB: shm 64 KiB 22.6 -> 11.7 us, sockets 64 KiB 58.9 -> 36.2 us; at
  // 512 KiB the ring's pipelined steps win); 8 KiB on 3 ranks, 16 KiB on more (AllReduce over shm, 2 cores, the best
  // of three runs, ring -> one-shot: 3 ranks 8 KiB 9.9 -> 7.5 us, 16 KiB 11.0 -> 12.1; 4 ranks 16 KiB 23.2 -> 18.0,
  // 32 KiB 23.6 -> 29.3; 8 ranks 16 KiB 93 -> 73, 32 KiB 99 -> 150), but 8 KiB where ranks talk over the network
  // (sockets, 8 ranks, 16 KiB, the best of four: 434 us on the ring, 537 one-shot). Transports are chosen alike on
  // both sides of every pair, so every rank decides alike.
  bool overNetwork = false;
  for (int p = 0; p < nRanks && !overNetwork; ++p)
    if (p != rank) TUTTI_CHECK(commPeerOverNetwork(comm, p, &overNetwork));
  // A ring AllReduce's steps over the network on 2 ranks: 64 KiB rather than the whole 512 KiB slot, so that a
  // rank's send, the peer's receive and its fold overlap within the call (2 processes over sockets, 2 cores, the
  // median of five runs, whole slot -> 64 KiB, us: 512 KiB 392 -> 316, 2 MiB 1793 -> 1337, 8 MiB 7004 -> 5447,
  // 32 MiB 29075 -> 21897; of six: 1 MiB 737 -> 554, 4 MiB 2696 -> 2319, 16 MiB 11219 -> 10106, 64 MiB 44346 ->
  // 39213). 32 KiB steps lost (1 MiB 1527, each step's hand-offs), 128 KiB won nothing; a ReduceScatter's ring,
  // which only receives and folds on 2 ranks, moved both ways (512 KiB 167 -> 214, 2 MiB 678 -> 592, 8 MiB 2877 ->
  // 3338). On 4 ranks the ring's pipeline across the ranks already overlaps them and 64 KiB slots lost (AllReduce
  // 4 MiB 9168 -> 11273 us); 8 ranks about even. Since the receiver reads what passes 16 KiB of a message straight
  // into the posted buffer, 256 KiB steps beat 64 KiB ones at every size from 512 KiB (2 processes over sockets, a later
  // 2-core VM, the median of five runs, us, 64 KiB -> 256 KiB: 512 KiB 239 -> 209, 1 MiB 440 -> 328, 2 MiB 940 -> 796,
  // 4 MiB 2341 -> 1657, 16 MiB 10546 -> 8909, 64 MiB 41965 -> 34484; 128 KiB in between, the whole slot even at 512 KiB
  // to 8 MiB and 10% slower at 32 MiB). Within a node (shm, p2p) 128 KiB steps: a step's slot, the input it folds
  // and the slot it fills then stay in the cores' caches between the sender's copy and the receiver's fold, where a
  // 512 KiB step (1.5 MiB of lines per step, past a 1 MiB L2) goes through L3 or memory, and the FIFO a call cycles
  // through shrinks from 4 MiB to 1 MiB per connection (2-core VM, processes over shm, medians of three interleaved
  // runs, us, whole slot -> 128 KiB: 2 ranks 4 MiB 1119 -> 625, 16 MiB 5867 -> 4571; 4 ranks 16 MiB 22116 -> 14893,
  // 64 MiB 86710 -> 55958; 8 ranks 4 MiB 11549 -> 6882, 16 MiB 41807 -> 25660, 64 MiB 173016 -> 99874; 64 KiB steps
  // between the two, 1 MiB to 256 KiB even). Over sockets on 4 ranks 128 KiB lost (64 MiB 176 -> 219 ms).
  // AllGather's ring within a node moved within the noise on that VM; on a later one it gained (below). A
  // ReduceScatter's ring within a node, which folds every step as AllReduce's first half does, takes the same steps
  // (medians of three interleaved runs, us, whole slot -> 128 KiB: 2 ranks 4 MiB 670 -> 501, 64 MiB 20474 -> 16775; 4
  // ranks 4 MiB 1564 -> 1057, 16 MiB 6892 -> 5804, 64 MiB 30995 -> 24690; 8 ranks 1 MiB 1052 -> 731, 16 MiB 19562 ->
  // 12576, 64 MiB 82219 -> 61196; threads of one process even). Every rank of a communicator decides alike (overNetwork
  // above), as a ring's sender and receiver must.
  const int64_t ringStep = paramInt("TUTTI_NET_RING_STEP_BYTES");
  comm->ringStepMaxBytes = comm->backend != Backend::Host ? 0
                           : ringStep >= 0                ? static_cast<size_t>(ringStep)
                           : !overNetwork                 ? size_t{128} << 10
                           : nRanks == 2                  ? size_t{256} << 10
                                                          : 0;
  // A ring AllGather's and Broadcast's steps within a node too (ringStepEveryRing, with ReduceScatter's): their FIFOs
  // then hold 1 MiB a connection where whole slots cycled through 4 MiB, and on a host whose caches the FIFOs of every
  // rank outgrew, each copy in and out of them went to memory (2-core AMD EPYC VM, 32 MiB L3, processes over shm,
  // medians of three interleaved runs, us, whole slot -> 128 KiB, Open MPI beside: Broadcast 8 ranks 4 MiB 5320 -> 2893
  // (3198); AllGather 8 ranks 4 MiB 4711 -> 3615 (3541), 16 MiB 17005 -> 15669 (19719)). On earlier VMs AllGather's
  // ring moved within the runs' spread.
  comm->ringStepEveryRing = !overNetwork;
  // Point-to-point within a node, for the same reason: a message of at least 16 MiB / n bytes (an AlltoAll of 16 MiB
  // a rank and more, whose FIFOs, one per peer each way, cycled through 4 MiB each) moves in 64 KiB steps. Same VM,
  // AlltoAll, medians of three to five interleaved runs, us, whole slots -> 128 KiB -> 64 KiB steps (Open MPI beside):
  // 2 ranks 16 MiB 3716 -> 3254 -> 3158 (3325); 4 ranks 16 MiB 8773 -> 8773 -> 7409 (7435) and, with NCCL_BUFFSIZE 1
  // MiB and 512 KiB in an earlier set, 10081 -> 8122 -> 8180; 8 ranks 16 MiB, so, 21443 -> 20151 -> 16616 (14779), 32
  // KiB steps 16420 against 16802; whole slots -> 64 KiB steps, medians of four: 2 ranks 16 MiB 3762 -> 2941 (3121), 4
  // ranks 11960 -> 9585 (9291), 8 ranks 21528 -> 15922 (16779). Smaller
  // messages keep their steps: on 2 ranks at 4 MiB (2 MiB messages, in the caches either way) 64 KiB steps lost,
  // 330 -> 512 us.
  const int64_t p2pStep = paramInt("TUTTI_P2P_STEP_BYTES");
  const bool p2pStepHere = comm->backend == Backend::Host && !overNetwork && nRanks > 1;
  comm->p2pStepMaxBytes = !p2pStepHere   ? 0
                          : p2pStep >= 0 ? static_cast<size_t>(p2pStep) & ~size_t{63}
                                         : size_t{64} << 10;
  comm->p2pStepMinMessage = p2pStepHere && p2pStep < 0 ? (size_t{16} << 20) / static_cast<size_t>(nRanks) : 0;
  if (comm->ringStepMaxBytes >= 64)
    TUTTI_INFO(NCCL_INIT, "rank {}: ring {} steps of at most {} bytes", rank,
               comm->ringStepEveryRing ? "AllReduce, ReduceScatter, AllGather and Broadcast" : "AllReduce",
               comm->ringStepMaxBytes & ~size_t{63});
  if (comm->p2pStepMaxBytes >= 64)
    TUTTI_INFO(NCCL_INIT, "rank {}: point-to-point messages past {} steps and from {} bytes take steps of at most {} "
               "bytes", rank, TUTTI_STEPS, comm->p2pStepMinMessage, comm->p2pStepMaxBytes);
  // One-shot AllReduce on 4 ranks within a node: n - 1 times the input's bytes to every rank, in one step where recursive
  // doubling takes two and the ring six. Unset: up to 128 KiB (processes over shm, 2 cores, the median of three
  // interleaved runs, doubling or ring -> one-shot, us: 16 KiB 18.3 -> 16.2, 32 KiB 24.4 -> 21.0, 128 KiB 88 -> 55;
  // 64 KiB even; 256 KiB 127 -> 130, where processes take the fixed-order paths from 128 KiB anyway, below). On 8
  // ranks, whose one-shot folds 8 rows, the ring keeps 256 KiB and 512 KiB (498 -> 638 us, 687 -> 1298).
  const int64_t oneShot = paramInt("TUTTI_ONESHOT_MAX_BYTES");
  const size_t oneShotMax = oneShot >= 0                    ? static_cast<size_t>(oneShot)
                            : nRanks == 2                  ? size_t{256} << 10
                            : nRanks == 3 || overNetwork ? size_t{8} << 10
                            : nRanks == 4                  ? size_t{128} << 10
                                                           : size_t{16} << 10;
  comm->oneShotMaxBytes =
      comm->backend == Backend::Host && !paramIsSet("NCCL_ALGO") && !paramIsSet("NCCL_PROTO") ? oneShotMax : 0;
  // An AlltoAll's one-shot sends each peer its block, the grouped sends' bytes, in one go from the calling thread.
  // Unset: up to 256 KiB in all (the median of three runs, grouped sends or single copy -> one-shot, us: sockets 8
  // ranks 64 KiB 972 -> 528, 256 KiB 989 -> 675, 1 MiB 2485 -> 2920; 4 ranks 64 KiB 191 -> 118, 256 KiB 405 -> 272;
  // shm 8 ranks 64 KiB 159 -> 78, 256 KiB 366 -> 252; 4 ranks 256 KiB 118 -> 95, 1 MiB 310 -> 441).
  // Messages in LL lanes, written as packets (data, then one header word: host/prims.h, llLaneBytes). Unset: up to
  // 4 KiB on 2 to 4 ranks, 1 KiB beyond (2 cores, the median of three runs against 256 B, us: 2 ranks AlltoAll 1 KiB
  // 0.66 -> 0.31, AllGather 4 KiB 0.89 -> 0.55, ReduceScatter 4 KiB 0.94 -> 0.72; 4 ranks AlltoAll 4 KiB 7.9 -> 4.3,
  // Broadcast 4 KiB 1.72 -> 0.91; 8 ranks Broadcast 1 KiB 4.9 -> 1.2, but AllReduce 2 and 4 KiB 23.5 -> 27.4 and
  // 24.5 -> 28.5 at 4 KiB, five runs).
  const int64_t llMax = paramInt("TUTTI_ONESHOT_LL_MAX_BYTES");
  const size_t llDefault = nRanks <= 4 ? size_t{4} << 10 : size_t{1} << 10;
  comm->oneShotLLMaxBytes = comm->oneShotMaxBytes ? (llMax >= 0 ? static_cast<size_t>(llMax) : llDefault) : 0;
  const int64_t a2aMax = paramInt("TUTTI_ONESHOT_ALLTOALL_MAX_BYTES");
  comm->oneShotAlltoAllMaxBytes =
      comm->oneShotMaxBytes ? (a2aMax >= 0 ? static_cast<size_t>(a2aMax) : size_t{256} << 10) : 0;
  // An AllGather's or ReduceScatter's one-shot sends each peer its block, the ring's bytes, in one step where the ring
  // takes n - 1 and every step waits for a peer to be scheduled. Unset: up to 256 KiB on 4 to 8 ranks within a node
  // (processes over shm, 2 cores, the median of three interleaved runs, ring, doubling, halving or tree -> one-shot,
  // us: ReduceScatter 4 ranks 32 KiB 22.8 -> 13.5, 64 KiB 30.9 -> 16.1, 256 KiB 61 -> 35; 6 ranks 24 KiB 66 -> 29,
  // 96 KiB 88 -> 40; 8 ranks 32 KiB 62-83 -> 42-53, 128 KiB 181 -> 73, 256 KiB 215 -> 106; AllGather 4 ranks 32 KiB
  // 23.2 -> 18.2, 256 KiB 55 -> 45; 6 ranks 24 KiB 73 -> 39, 96 KiB 85 -> 46; 8 ranks 64 KiB 100 -> 74, 256 KiB
  // 216 -> 128). Deterministic ReduceScatters alike (8 ranks 32 KiB 70-98 -> 42-54 us).
  const int64_t gatherOneShot = paramInt("TUTTI_ONESHOT_GATHER_MAX_BYTES");
  const size_t gatherOneShotMax = gatherOneShot >= 0                ? static_cast<size_t>(gatherOneShot)
                                  : !overNetwork && nRanks >= 4 ? size_t{256} << 10
                                                                 : 0;
  comm->oneShotGatherMaxBytes = comm->oneShotMaxBytes ? gatherOneShotMax : 0;
  // Recursive doubling AllReduce: log2 n exchanges with one peer each, n - 1 fewer messages than the one-shot's
  // n - 1 at once for more steps in a row. Unset: over the network, where each message costs system calls on both
  // sides, from 3 ranks and 1 byte to 128 KiB; elsewhere from 4 ranks, 4 KiB to 64 KiB (2 cores, the median of three
  // runs, one-shot or ring -> doubling, in us: sockets 4 ranks 8 B 103 -> 82, 32 KiB 366 -> 182, 128 KiB 797 -> 657,
  // 256 KiB 921 -> 1224; 8 ranks 8 B 525 -> 350, 32 KiB 1024 -> 645; 3 ranks 8 B 67 -> 47; 6 ranks 8 B 257 -> 148;
  // shm 4 ranks 8 B 6.4 -> 8.7, 4 KiB 10.5 -> 10.2, 32 KiB 38.7 -> 22.9, 128 KiB 73 -> 91; 8 ranks 8 B 23 -> 36,
  // 4 KiB 44 -> 32, 64 KiB 187 -> 164; 3 ranks 32 KiB 17.6 -> 16.5).
  const int64_t dMax = paramInt("TUTTI_DOUBLING_MAX_BYTES"), dMin = paramInt("TUTTI_DOUBLING_MIN_BYTES"),
                dRanks = paramInt("TUTTI_DOUBLING_MIN_RANKS");
  const size_t doublingMax = dMax >= 0 ? static_cast<size_t>(dMax) : (overNetwork ? size_t{128} : size_t{64}) << 10;
  comm->doublingMaxBytes = comm->oneShotMaxBytes ? doublingMax : 0;
  // AllGather by recursive doubling, ReduceScatter by recursive halving (4 or 8 ranks): log2 n messages per rank
  // where the ring sends n - 1, the same bytes. Unset: AllGather up to 1 MiB over the network, 128 KiB elsewhere;
  // ReduceScatter up to 64 KiB over the network, never elsewhere (the median of three runs, ring or one-shot ->
  // doubling/halving, in us: sockets AllGather 4 ranks 64 KiB 177 -> 130, 1 MiB 769 -> 846; 8 ranks 64 KiB 682 ->
  // 429, 1 MiB 2445 -> 1765; ReduceScatter 4 ranks 4 KiB 133 -> 98, 256 KiB 342 -> 404; 8 ranks 16 KiB 459 -> 306,
  // 64 KiB 593 -> 462, 256 KiB 772 -> 943; shm AllGather 4 ranks 64 KiB 28.4 -> 19.4, 1 MiB 223 -> 348; 8 ranks 64
  // KiB 81 -> 55, 256 KiB 148 -> 158; shm ReduceScatter 4 ranks 64 KiB 37 -> 47).
  const int64_t gMax = paramInt("TUTTI_DOUBLING_GATHER_MAX_BYTES"), hMax = paramInt("TUTTI_HALVING_MAX_BYTES");
  const size_t gatherMax = gMax >= 0 ? static_cast<size_t>(gMax) : overNetwork ? size_t{1} << 20 : size_t{128} << 10;
  // Within a node on 8 ranks too, where the halving's log2 n steps side by side beat the tree's hops one after another
  // (the median of five runs, tree -> halving, us: 64 B 43 -> 21, 1 KiB 50 -> 23, 16 KiB 62 -> 34, 32 KiB 71 -> 38,
  // 64 KiB 83 -> 59, 128 KiB 115 -> 149; 4 ranks, one-shot -> halving: 64 B 5.2 -> 7.7, 4 KiB 6.7 -> 10.1).
  const size_t halvingMax = hMax >= 0                     ? static_cast<size_t>(hMax)
                            : overNetwork || nRanks >= 8 ? size_t{64} << 10
                                                         : 0;
  comm->gatherDoublingMaxBytes = comm->oneShotMaxBytes ? gatherMax : 0;
  comm->halvingMaxBytes = comm->oneShotMaxBytes ? halvingMax : 0;
  // Within a node on 8 ranks, since one-shot messages travel as packets in LL lanes, the one-shot's n - 1 messages at
  // once are ahead of doubling's, halving's and the trees' log2 n in a row for small calls (processes over shm, the
  // median of seven runs, us; AllReduce one-hop tree or doubling -> one-shot: 8 B 26.9 -> 15.9, 128 B 30.6 -> 16.4,
  // 512 B 30.0 -> 19.0, of five: 1 KiB 37.7 -> 29.8, 2 KiB 32.9 -> 43.9 past the lanes; of three, AllGather doubling ->
  // one-shot: 64 B 35.0 -> 15.4, 4 KiB 32.8 -> 25.7, 16 KiB 39.6 -> 34.9, 32 KiB 60.0 -> 89.5; ReduceScatter halving ->
  // one-shot: 64 B 27.6 -> 18.9, 4 KiB 31.4 -> 21.9, 16 KiB 48.9 -> 40.8, 32 KiB 65.0 -> 83.5). Deterministic calls
  // alike (of five: AllReduce doubling -> one-shot gather 8 B 33.6 -> 22.9, 512 B 38.9 -> 27.5, 4 KiB 40.6 -> 65.8;
  // ReduceScatter tree -> one-shot 4 KiB 33.4 -> 22.2, 16 KiB 43.3 -> 35.6).
  // On 4 ranks within a node, the one-shot's single step is ahead of doubling's two from 4 KiB to 32 KiB and of the
  // one-hop tree below (the median of three interleaved runs, us: 4 KiB 14.2 -> 10.7, 16 KiB 15.8 -> 13.5, deterministic
  // 16 KiB tree -> one-shot 20.1 -> 14.0, 32 KiB scatter-gather -> one-shot 29.4 -> 23.5), and an AllGather's or
  // ReduceScatter's one-shot ahead of doubling and halving up to its maximum (above).
  const int64_t firstMax = paramInt("TUTTI_ONESHOT_FIRST_MAX_BYTES");
  const bool firstByDefault = !overNetwork && nRanks >= 8;
  comm->oneShotFirstAllReduceBytes = !comm->oneShotMaxBytes            ? 0
                                     : firstMax >= 0                    ? static_cast<size_t>(firstMax)
                                     : firstByDefault                   ? comm->oneShotLLMaxBytes
                                     : !overNetwork && nRanks == 4 ? size_t{32} << 10
                                                                        : 0;
  comm->oneShotFirstBytes = !comm->oneShotMaxBytes ? 0
                            : firstMax >= 0      ? static_cast<size_t>(firstMax)
                            : !overNetwork && nRanks >= 4
                                ? std::max(comm->oneShotMaxBytes, comm->oneShotGatherMaxBytes)
                                : 0;
  // AllReduce by recursive halving then doubling: the ring's bytes in 2 log2 n messages instead of 2(n - 1). Unset: up
  // to 1 MiB (the largest whose halves fit a slot) over the network, never elsewhere (the ring -> halving and
  // doubling, the median of three runs, us: sockets 4 ranks 512 KiB 1079 -> 937, 1 MiB 2023 -> 1643; 8 ranks 256 KiB
  // 1875 -> 1321, 1 MiB 6821 -> 4643; shm 4 ranks 1 MiB 248 -> 550, 8 ranks 256 KiB 260 -> 320).
  const int64_t hdMax = paramInt("TUTTI_HALVING_DOUBLING_MAX_BYTES");
  const size_t halvingDoublingMax = hdMax >= 0 ? static_cast<size_t>(hdMax) : overNetwork ? size_t{1} << 20 : 0;
  comm->halvingDoublingMaxBytes = comm->oneShotMaxBytes ? halvingDoublingMax : 0;
  // A deterministic AllReduce by recursive doubling sends its partial results in the fixed order's accumulator
  // (twice fp32's bytes, twice a half type's) and widens and narrows them: worth it for a few small messages over the
  // network only. Unset: up to 4 KiB over the network on 4 ranks, never elsewhere (the median of four runs, one-shot gather ->
  // doubling, us: sockets 4 ranks 8 B 68 -> 62, 512 B 70 -> 59, 4 KiB 90 -> 96, 32 KiB 170 -> 302; 8 ranks 8 B 381 ->
  // 289, 4 KiB 388 -> 377, 32 KiB 846 -> 905; shm 8 ranks 4 KiB 39 -> 59).
  const int64_t detDMax = paramInt("TUTTI_DET_DOUBLING_MAX_BYTES");
  // From 6 ranks the deterministic tree below is ahead (sockets, 8 ranks, the median of five runs, doubling -> tree, us:
  // 8 B 153 -> 148, 512 B 167 -> 135, 4 KiB 216 -> 163; the default's 138, 132 and 149).
  // Within a node on 8 ranks, where the default takes doubling below 32 KiB, up to 2 KiB (processes over shm, the
  // median of five runs, tree -> doubling, us: 8 B 33.8 -> 21.5, 512 B 34.5 -> 23.3, 4 KiB 42.4 -> 42.4; 4 ranks, one-shot
  // gather -> doubling: 8 B 6.2 -> 6.4, 4 KiB 14.3 -> 15.6; since the first exchange sends raw rows, the median of
  // seven: 1 KiB 34.6 -> 23.3, 2 KiB 36.6 -> 27.3, 4 KiB 39.8 -> 35.7 with the best runs 25.9 -> 30.9, 8 KiB 42.5 -> 61.7).
  // Since the tree's one hop up got faster it is ahead there too, so no doubling within a node (8 processes over shm,
  // the median of seven interleaved runs, doubling -> tree, us: 8 B 17.2 -> 15.6, 128 B 17.6 -> 17.2, 512 B 21.7 ->
  // 20.9, 2 KiB 33.4 -> 29.1, the default's 19.6, 17.1, 20.8 and 28.7; of five: 1 KiB 36.7 -> 31.7, 2 KiB 36.4 -> 28.3).
  const size_t detDoublingMax = detDMax >= 0                 ? static_cast<size_t>(detDMax)
                                : overNetwork && nRanks <= 4 ? size_t{4} << 10
                                                             : 0;
  comm->detDoublingMaxBytes = comm->oneShotMaxBytes ? detDoublingMax : 0;
  const int64_t detHMax = paramInt("TUTTI_DET_HALVING_MAX_BYTES");
  // The same for a ReduceScatter by recursive halving: up to 16 KiB over the network (one-shot or exchange ->
  // halving, the median of three runs, us: sockets 4 ranks 512 B 136 -> 81, 4 KiB 100 -> 87, 32 KiB 101 -> 175;
  // 8 ranks 64 B 390 -> 299, 4 KiB 405 -> 309, 32 KiB 492 -> 478, 256 KiB 883 -> 1023). Since the deterministic tree
  // ReduceScatter goes up in one hop (below), it is ahead on 4 and 8 ranks too, so unset: never (the median of five
  // runs, halving -> tree, us: sockets 4 ranks 64 B 32.9 -> 29.1, 4 KiB 37.4 -> 32.2, 32 KiB 71.6 -> 53.6; 8 ranks
  // 64 B 106 -> 79, 4 KiB 116 -> 91, 32 KiB 136 -> 142).
  const size_t detHalvingMax = detHMax >= 0 ? static_cast<size_t>(detHMax) : 0;
  comm->detHalvingMaxBytes = comm->oneShotMaxBytes ? detHalvingMax : 0;
  // AlltoAll by Bruck's algorithm: ceil(log2 n) messages where the one-shot and the grouped sends take n - 1, for about
  // (log2 n) / 2 times their bytes. Unset: up to 8 KiB per rank over the network (32 KiB on 4 ranks, 64 KiB on 8),
  // never elsewhere (the median of three to six runs, one-shot or grouped sends -> Bruck, us: sockets 4 ranks 64 B
  // 113 -> 88, 16 KiB 147 -> 117, 64 KiB 164 -> 218; 6 ranks 64 B 219 -> 175, 16 KiB 273 -> 236; 8 ranks 64 B 559
  // -> 394, 4 KiB 573 -> 438, 16 KiB 674 -> 442, 64 KiB 899 -> 775, 256 KiB 1073 -> 3425; shm 8 ranks 16 KiB 38 -> 48,
  // 4 ranks 16 KiB 12.7 -> 21).
  const int64_t bMax = paramInt("TUTTI_BRUCK_MAX_BYTES");
  const size_t bruckMax = bMax >= 0 ? static_cast<size_t>(bMax) : overNetwork ? static_cast<size_t>(nRanks) << 13 : 0;
  comm->bruckMaxBytes = comm->oneShotMaxBytes ? bruckMax : 0;
  // Broadcast down a binomial tree: the root sends log2 n messages where the one-shot's sends n - 1, and calls issued
  // back to back go at the busiest sender's pace. Unset: up to 512 KiB over the network (a slot), 256 KiB within a
  // node, from any size (the median of three or four runs, one-shot -> binomial, us: sockets 4 ranks 512 B 20.5 ->
  // 14.7, 32 KiB 51 -> 40, 512 KiB 707 -> 389; 8 ranks 8 B 42.7 -> 34.4, 32 KiB 122 -> 103, 512 KiB 1437 -> 1054;
  // shm 4 ranks 8 B 1.89 -> 1.46, 256 KiB 81 -> 57; 8 ranks 8 B 4.2 -> 3.7, 256 KiB 148 -> 120).
  const int64_t bbMax = paramInt("TUTTI_BINOMIAL_BCAST_MAX_BYTES");
  const size_t binomialBcastMax = bbMax >= 0 ? static_cast<size_t>(bbMax) : (overNetwork ? size_t{512} : size_t{256}) << 10;
  comm->binomialBcastMaxBytes = comm->oneShotMaxBytes ? binomialBcastMax : 0;
  // AllReduce up a binomial tree to rank 0 and back down: n - 1 messages each way in all where recursive doubling
  // sends n log2 n (and the one-shot n(n - 1)), for 2 log2 n hops in a row. Unset: over the network from 4 ranks up to
  // 128 KiB; within a node on 8 ranks up to 64 KiB (the median of three to five runs, 2 cores, one-shot or doubling
  // -> tree, us: sockets 4 ranks 8 B 42 -> 36, 32 KiB 114 -> 69; 6 ranks 8 B 115 -> 89, 32 KiB 220 -> 151; 8 ranks
  // 4 KiB 160 -> 109, 32 KiB 343 -> 241, 128 KiB 1382 -> 721, 256 KiB 1125 -> 1458; 3 ranks 8 B 24 -> 27; shm 8
  // ranks 8 B 26 -> 22, 32 KiB 123 -> 67, 64 KiB 282 -> 119, 128 KiB 240 -> 295; 6 ranks 4 KiB 18.6 -> 17.0, 32 KiB
  // 42.7 -> 43.4; 4 ranks 32 KiB 28.8 -> 26.1, 128 KiB 72 -> 83).
  // A deterministic one, when its partial results still went up the tree in the fixed order's accumulator (twice fp32's
  // bytes), was taken: over the network from 4 ranks up to 64 KiB (past the deterministic doubling, on 4 ranks), within
  // a node from 6 ranks up to 32 KiB (deterministic one-shot gather, exchange or doubling -> tree: sockets 4 ranks 8 B
  // 36 -> 45 (doubling, kept), 32 KiB 256 -> 135; 6 ranks 8 B 146 -> 69, 32 KiB 532 -> 214; 8 ranks 4 KiB 216 -> 165, 32
  // KiB 1311 -> 494, 64 KiB 895 -> 549, 128 KiB 977 -> 1047; shm 6 ranks 4 KiB 29.8 -> 19.1; 8 ranks 4 KiB 62 -> 37, 16
  // KiB 182 -> 84, 32 KiB 201 -> 121, 64 KiB 209 -> 234; 4 ranks 32 KiB 56 -> 50, 128 KiB 93 -> 232).
  const int64_t tMax = paramInt("TUTTI_TREE_ALLREDUCE_MAX_BYTES"), detTMax = paramInt("TUTTI_DET_TREE_ALLREDUCE_MAX_BYTES");
  const size_t treeMax = tMax >= 0          ? static_cast<size_t>(tMax)
                         : overNetwork      ? (nRanks >= 4 ? size_t{128} << 10 : 0)
                                            : (nRanks >= 8 ? size_t{64} << 10 : 0);
  // Since a deterministic call goes up in one hop (runTreeAllReduce: raw rows to rank 0, no accumulator), further:
  // over the network to 128 KiB (512 KiB since, below), within a node from 6 ranks to 128 KiB (exchange -> tree, the
  // median of five runs:
  // sockets 8 ranks 128 KiB 1056 -> 506 us, 4 ranks 128 KiB 400 -> 279, 256 KiB 449 -> 588; shm 8 ranks 64 KiB 192
  // -> 125, 128 KiB 308 -> 249).
  // On 4 and 5 ranks within a node, from 16 KiB and 4 KiB, up to 32 KiB, where the one-shot gather's
  // n - 1 whole inputs per rank or the exchange's two phases cost more (the median of five runs, one-shot or
  // exchange -> tree, us: 4 ranks 8 KiB 8.8 -> 9.3, 16 KiB 13.7 -> 11.4, 32 KiB 25.4 -> 20.2 (the default's 20.3),
  // 64 KiB 36.8 -> 36.6; 5 ranks 2 KiB 9.1 -> 8.9, 4 KiB 12.4 -> 9.4, 16 KiB 27.4 -> 14.8, 32 KiB 41.6 -> 26.5,
  // 64 KiB 57.0 -> 58.5; below, the one-shot stays ahead: 5 ranks 8 B 4.2 -> 6.5).
  const int64_t detTMin = paramInt("TUTTI_DET_TREE_ALLREDUCE_MIN_BYTES");
  // Over the network, since the exchange's steps grow with its slices, timed on the same ranks (--det-pairs, two
  // rounds a launch, two launches, the deterministic call's time, tree to 128 KiB -> to 512 KiB, us): 8 ranks 256 KiB
  // 1460 and 1553 -> 707 and 790, 512 KiB 2147 and 2559 -> 1304 and 1538; 6 ranks 256 KiB 1013 and 846 -> 443 and
  // 413; 4 ranks 256 KiB 310, 311, 392 -> 206, 324, 198, 512 KiB 908 and 901 -> 681 and 702. 512 KiB is a Simple
  // slot, the most a one-shot step carries.
  const size_t detTreeMax = detTMax >= 0    ? static_cast<size_t>(detTMax)
                            : overNetwork   ? (nRanks >= 4 ? size_t{512} << 10 : 0)
                            : nRanks >= 6   ? size_t{128} << 10
                            : nRanks >= 4   ? size_t{32} << 10
                                            : 0;
  comm->treeAllReduceMaxBytes = comm->oneShotMaxBytes ? treeMax : 0;
  comm->detTreeAllReduceMaxBytes = comm->oneShotMaxBytes ? detTreeMax : 0;
  // Its way up in one hop, as a deterministic call's: n - 1 rows to rank 0 at once instead of log2 n folds one after
  // another. Unset: up to 64 KiB on 8 ranks as processes within a node (under the minimum above, in place of the
  // doubling); not over the network, on threads or on fewer ranks (the median of five runs, 2 cores, doubling or tree
  // -> one hop, us: 8 processes 8 B 24.3 -> 24.8, 128 B 27.1 -> 23.4, 2 KiB 28.2 -> 25.9, 8 KiB 38.3 -> 31.7, 32 KiB
  // 70.4 -> 61.3, 64 KiB 140 -> 129, 128 KiB 239 -> 267; 8 threads 64 B 17.4 -> 20.8, 4 KiB 25.2 -> 27.2; 6
  // processes 2 KiB 12.6 -> 16.7; sockets 8 ranks 16 KiB 133 -> 178).
  const int64_t ohMax = paramInt("TUTTI_TREE_ALLREDUCE_ONE_HOP_MAX_BYTES");
  const size_t oneHopMax = ohMax >= 0                                    ? static_cast<size_t>(ohMax)
                           : !overNetwork && otherProcess && nRanks >= 8 ? size_t{64} << 10
                                                                         : 0;
  comm->oneHopTreeAllReduceMaxBytes = comm->oneShotMaxBytes ? oneHopMax : 0;
  comm->detTreeAllReduceMinBytes = detTMin >= 0                   ? static_cast<size_t>(detTMin)
                                   : !overNetwork && nRanks == 4 ? size_t{16} << 10
                                   : !overNetwork && nRanks == 5 ? size_t{4} << 10
                                                                 : 1;
  // A deterministic AllReduce as a one-shot ReduceScatter (block p of every row to rank p, folded there in the fixed
  // order) then a one-shot AllGather of the blocks: 2(n - 1) messages of a block each per rank in two hops, where the
  // tree sends rank 0 n - 1 whole rows and takes 1 + log2 n hops, and the exchange pipelines its slices in steps.
  // Unset: from 8 KiB a rank within a node, 128 KiB a rank over the network, up to a Simple slot a rank (timed on the
  // same ranks, --det-pairs, the deterministic call's time, tree or exchange -> scatter-gather, us: shm 4 ranks 32 KiB
  // 25.5 and 26.2 -> 24.8 and 25.7, 64 KiB 43 -> 31, 256 KiB 79 -> 66, 1 MiB 256 -> 193, 2 MiB 519 -> 399; 8 ranks
  // 16 KiB 81 -> 90 (below the minimum), 64 KiB 114 -> 104, 256 KiB 310 -> 185, 512 KiB 411 -> 288, 2 MiB 1301 ->
  // 1441, 4 MiB 3038 -> 2825; sockets 4 ranks 256 KiB 292 -> 294, 512 KiB 486 -> 414, 1 MiB 1024 -> 865, 2 MiB 1871
  // -> 1665; 8 ranks 512 KiB 1276 -> 1446 (below), 1 MiB 3325 -> 2216, 2 MiB 6191 -> 5044, 4 MiB 11134 -> 10072).
  const int64_t sgMax = paramInt("TUTTI_DET_SCATTER_GATHER_MAX_BYTES"), sgMin = paramInt("TUTTI_DET_SCATTER_GATHER_MIN_BYTES");
  comm->detScatterGatherMaxBytes = !comm->oneShotMaxBytes ? 0 : sgMax >= 0 ? static_cast<size_t>(sgMax) : SIZE_MAX;
  comm->detScatterGatherMinBytes = sgMin >= 0 ? static_cast<size_t>(sgMin)
                                   : static_cast<size_t>(nRanks) * (overNetwork ? size_t{128} << 10 : size_t{8} << 10);
  // Past a slot a rank, the same in rounds of a slot a rank, where the exchange and the ring's AllGather after it
  // would run instead. Unset: over the network on 8 ranks, at every size (8 processes over sockets, 2 cores,
  // interleaved, us, exchange -> rounds, the medians of three or four runs: 8 MiB 42849 -> 33836, 16 MiB 78658 ->
  // 65309, 32 MiB 146371 -> 132477, 64 MiB 303935 -> 279500, 128 MiB 714944 -> 596223, 256 MiB 1416750 -> 1238156;
  // 4 ranks about even, 4 to 64 MiB: 7444-30169 -> 8109-16631 at 4 and 8 MiB, 28544 -> 29269 at 16, 141211 ->
  // 144349 at 64). Within a node the single-copy reads come first where a read is cheap: not there.
  const int64_t sgRounds = paramInt("TUTTI_DET_SCATTER_GATHER_ROUNDS_MAX_BYTES");
  comm->detScatterGatherRoundsMaxBytes = sgRounds >= 0              ? static_cast<size_t>(sgRounds)
                                         : overNetwork && nRanks >= 8 ? SIZE_MAX
                                                                      : 0;
  // Within a node, recursive doubling stays ahead of the tree below 32 KiB: its log2 n steps run side by side where
  // the tree's 2 log2 n wake one rank after another (8 ranks as processes, 2 cores, the median of five runs, tree ->
  // doubling, us: 8 B 30.9 -> 22.8, 512 B 33.4 -> 23.2, 4 KiB 40.5 -> 30.8, 8 KiB 43.9 -> 33.4, 16 KiB 51.8 -> 49.1,
  // 32 KiB 77 -> 87, 64 KiB 132 -> 181). Over the network the tree's fewer messages win from the first byte.
  const int64_t tMin = paramInt("TUTTI_TREE_ALLREDUCE_MIN_BYTES");
  comm->treeAllReduceMinBytes = tMin >= 0 ? static_cast<size_t>(tMin) : overNetwork ? 1 : size_t{32} << 10;
  // ReduceScatter up the same tree (the whole input) and its blocks back down: 2(n - 1) messages where recursive
  // halving sends n log2 n, for n - 1 times its bytes up. Unset: over the network from 6 ranks, up to 32 KiB of input;
  // never within a node, where the halving is ahead on 8 ranks (above) (the median of three runs, 2 cores, halving, one-shot or ring -> tree, us: sockets 8 ranks 64 B
  // 163 -> 115, 4 KiB 184 -> 158, 32 KiB 237 -> 243; 6 ranks 64 B 134 -> 82, 4 KiB 181 -> 98, 32 KiB 199 -> 165; 4
  // ranks 64 B 40 -> 37, 32 KiB 56 -> 84; shm 8 ranks 64 B 30 -> 26, 4 KiB 34 -> 27, 32 KiB 62 -> 45). A
  // deterministic one, while its partial results went up the tree in the accumulator, was taken over the network from
  // 6 ranks up to 64 KiB only (sockets 8 ranks 32 KiB 716 -> 426; 6 ranks 64 B 176 -> 83, 32 KiB 285 -> 230; 4 ranks
  // 32 KiB 94 -> 132; shm 8 ranks 32 KiB 79 -> 96). Up in one hop: over the network from 4 ranks up to 32 KiB too
  // (the median of three to five runs, the exchange -> tree, us: sockets 5 ranks 64 B 72 -> 62, 4 KiB 77 -> 68, 32 KiB
  // 127 -> 112; 4 ranks 64 KiB 99 -> 108; 3 ranks, about even: 64 B 20.0 -> 19.4, 32 KiB 39.0 -> 35.0). Within a node
  // on 8 ranks from 2 KiB up to 32 KiB,
  // where the one-shot gather's 56 messages or the exchange cost more (the median of five runs, one-shot or exchange
  // -> tree, us: threads 2 KiB 28.2 -> 14.2, 8 KiB 18.1 -> 18.5, 32 KiB 49.1 -> 40.1, 128 KiB 64.5 -> 115.5;
  // processes 512 B 11.5 -> 14.5, 2 KiB 15.4 -> 15.4, 8 KiB 19.7 -> 19.0, 32 KiB 41.4 -> 35.3; 6 ranks about even).
  const int64_t trsMax = paramInt("TUTTI_TREE_REDUCESCATTER_MAX_BYTES"),
                detTrsMax = paramInt("TUTTI_DET_TREE_REDUCESCATTER_MAX_BYTES"),
                detTrsMin = paramInt("TUTTI_DET_TREE_REDUCESCATTER_MIN_BYTES");
  const size_t treeRsMax = trsMax >= 0 ? static_cast<size_t>(trsMax) : overNetwork && nRanks >= 6 ? size_t{32} << 10 : 0;
  const size_t detTreeRsMax = detTrsMax >= 0 ? static_cast<size_t>(detTrsMax)
                              : overNetwork && nRanks >= 6 ? size_t{64} << 10
                              : overNetwork && nRanks >= 4 ? size_t{32} << 10
                              : !overNetwork && nRanks >= 8 ? size_t{32} << 10
                                                            : 0;
  comm->treeReduceScatterMaxBytes = comm->oneShotMaxBytes ? treeRsMax : 0;
  comm->detTreeReduceScatterMaxBytes = comm->oneShotMaxBytes ? detTreeRsMax : 0;
  comm->detTreeReduceScatterMinBytes = detTrsMin >= 0 ? static_cast<size_t>(detTrsMin) : overNetwork ? 1 : size_t{2} << 10;
  // From 5 ranks within a node, doubling from the first byte: the one-shot's n(n - 1) messages then cost more than
  // log2 n steps (2 cores, the median of five runs, one-shot -> doubling, us: 6 ranks 8 B 20.5 -> 9.2, 512 B 21.4 ->
  // 9.7, 4 KiB 24.6 -> 13.1; 5 ranks 8 B 10.4 -> 11.0, 4 KiB 17.9 -> 15.7; 4 ranks 8 B 6.8 -> 6.3, 512 B 6.5 -> 7.5;
  // AllGather 8 ranks 64 B 26.5 -> 20.7, 4 KiB 26.0 -> 23.0).
  comm->doublingMinBytes = dMin >= 0                    ? static_cast<size_t>(dMin)
                           : overNetwork || nRanks >= 5 ? 1
                                                        : size_t{4} << 10;
  comm->doublingMinRanks = dRanks >= 0 ? static_cast<int>(std::max<int64_t>(2, dRanks)) : overNetwork ? 3 : 4;
  // A deterministic call's gather of every input whole (det_coll.h) against the exchange of slices, unset: up to
  // 256 KiB of inputs in all, but 128 KiB on the host backend where no rank talks over the network (processes over
  // shm, 2 cores, the best of three or four runs, one-shot -> exchange: 4 ranks 32 KiB 27.6 -> 26.3 us, 64 KiB 41.4
  // -> 35.8; 8 ranks 16 KiB 76 -> 78, 32 KiB 140 -> 134; over sockets the gather stays ahead, 8 ranks 16 KiB 625
  // -> 1023). Since the default's 4-rank AllReduce of 32 KiB takes recursive doubling (22 us), 64 KiB (the median of
  // five runs, 4 ranks, 32 KiB: 38.8 us with 128 KiB, 30.4 with 64 KiB).
  if (paramInt("TUTTI_DET_ONESHOT_BYTES") < 0 && comm->backend == Backend::Host && !overNetwork)
    comm->det.oneShotBytes = size_t{64} << 10;
  // The fused exchange's steps (device/host/det_exchange.h) where no rank talks over the network: each rank's sends
  // cycle through slots of every peer's connection, all of it written and then read by another process. Unset, a
  // step is the largest power of two from 16 to 64 KiB with (n - 1) * 8 steps within 4 MiB per rank, so that what
  // the n ranks cycle through stays in the caches: 64 KiB up to 9 ranks, 32 KiB from 10 to 17, 16 KiB from 18. With
  // 2 MiB (32 KiB from 6 ranks), measured while the sends cycled through all 8 slots, before kDetSlotRing halved
  // that: 8 processes over shm, 16 MiB ReduceScatter, the median of five interleaved runs, time against 64 KiB steps:
  // 32 KiB 0.66 and 0.82 in two series, 16 KiB 0.65. Since then (half the slots, AllReduce whole from 5 ranks) 64 KiB
  // is ahead (2-core AMD EPYC (Zen 4) VM, processes over shm, deterministic time / the default's in the same launch,
  // 32 -> 64 KiB: 8 ranks ReduceScatter 1 MiB 0.93/0.71 -> 0.61/0.57, 16 MiB 1.01/0.95 -> 0.82/0.72, AllReduce 4 MiB
  // 0.94/1.07/0.86/0.98 -> 0.85/0.96/0.86/0.88, 16 MiB 1.01/0.97/0.79/0.96 -> 0.73/0.77/0.69/0.73; 6 ranks
  // ReduceScatter 1 MiB 1.21 -> 0.52, 16 MiB 1.17 -> 0.78, AllReduce 16 MiB 1.08 -> 0.89).
  // Over the network each step is a message: a call's steps grow with its slices (det_coll.cc, stepGrows).
  comm->det.stepGrows = paramInt("TUTTI_DET_STEP_BYTES") < 0 && comm->backend == Backend::Host && overNetwork;
  if (paramInt("TUTTI_DET_STEP_BYTES") < 0 && comm->backend == Backend::Host && !overNetwork && nRanks > 1) {
    const size_t fit = (size_t{4} << 20) / (size_t{TUTTI_STEPS} * static_cast<size_t>(nRanks - 1));
    size_t step = size_t{64} << 10;
    while (step > (size_t{16} << 10) && step > fit) step /= 2;
    comm->det.stepBytes = step;
  }
  // A deterministic AllReduce's segments (det_coll.cc, pipelineElems), unset: 512 KiB within a node, where each
  // segment is gathered while its reduced slices are in cache; none over the network, where each segment pays its
  // AllGather's n - 1 hops of latency and the data passes the kernel's socket buffers anyway (processes over
  // sockets, 2 cores, the median of five interleaved runs, deterministic time / the default's, 512 KiB -> whole: 8
  // ranks 1 MiB 1.28 -> 1.11, 4 MiB 1.26 -> 1.09, 16 MiB 1.36 -> 0.99, 64 MiB 1.32 -> 0.98 (three runs); 4 ranks
  // 1 MiB 1.03 -> 1.00, 4 MiB 0.89 -> 0.93, 16 MiB 1.04 -> 1.06). Within a node from 5 ranks too, where each
  // segment's exchange and AllGather cost every rank a round of wake-ups (processes over shm, 2-core AMD EPYC (Zen 4)
  // VM, deterministic time / the default's in the same launch, three launches, 512 KiB -> whole: 8 ranks 1 MiB
  // 0.94-1.00 -> 0.90-0.95, 4 MiB 0.97-1.02 -> 0.84-0.94, 16 MiB 1.04-1.15 -> 0.88-0.93; 6 ranks, two launches, 1 MiB
  // 0.84/0.96 -> 0.77/0.89, 4 MiB 0.90/0.95 -> 0.80/0.86, 16 MiB 0.95/0.96 -> 0.84/0.98), while 4 ranks keep the
  // segments (2 and 4 MiB 0.63-0.65 -> 0.63-0.84, 16 MiB 0.78/0.86 -> 0.71/0.81).
  if (!paramIsSet("TUTTI_DET_PIPELINE_BYTES") && comm->backend == Backend::Host && (overNetwork || nRanks > 4))
    comm->det.pipelineBytes = 0;
  if (comm->backend == Backend::Host)
    TUTTI_INFO(NCCL_INIT, "rank {}: deterministic exchange steps of {} bytes, {}", rank,
               comm->det.stepGrows ? fmt::format("{} to a Simple slot's", comm->det.stepBytes)
                                   : fmt::format("at most {}", comm->det.stepBytes),
               comm->det.pipelineBytes ? fmt::format("an AllReduce in segments of {} bytes", comm->det.pipelineBytes)
                                       : std::string("an AllReduce whole"));
  // Probed whatever the settings, so that ranks whose environments differ still make the same bootstrap calls.
  TUTTI_CHECK(directProbe(comm));
  comm->rings.resize(comm->nChannels);
  for (int c = 0; c < comm->nChannels; ++c) {
    ChannelRing& ring = comm->rings[c];
    ring.ranks = topoRing(comm->peers, c);
    for (int i = 0; i < nRanks; ++i)
      if (ring.ranks[i] == rank) ring.index = i;
    ring.next = ring.ranks[(ring.index + 1) % nRanks];
    ring.prev = ring.ranks[(ring.index + nRanks - 1) % nRanks];
  }
  TUTTI_CHECK(topoDoubleTree(topoNodeOf(comm->peers), &comm->trees));

  int64_t simple = paramInt("NCCL_BUFFSIZE");
  if (simple < TUTTI_STEPS * 64)
    TUTTI_FAIL(ncclInvalidArgument, "NCCL_BUFFSIZE={} is too small (at least {} bytes)", simple, TUTTI_STEPS * 64);
  comm->buffSizes[TUTTI_PROTO_SIMPLE] = static_cast<size_t>(simple) & ~size_t{TUTTI_STEPS * 64 - 1};
  const int64_t p2pNet = paramInt("TUTTI_NET_P2P_BUFFSIZE");
  if (comm->backend == Backend::Host && p2pNet != 0) {
    const size_t want = p2pNet < 0 ? size_t{8} << 20 : static_cast<size_t>(p2pNet) & ~size_t{TUTTI_STEPS * 64 - 1};
    if (want > comm->buffSizes[TUTTI_PROTO_SIMPLE]) comm->p2pNetBuffSize = want;
  }
  int64_t ll = paramInt("NCCL_LL_BUFFSIZE");
  if (ll < TUTTI_STEPS * 64)
    TUTTI_FAIL(ncclInvalidArgument, "NCCL_LL_BUFFSIZE={} is too small (at least {} bytes)", ll, TUTTI_STEPS * 64);
  comm->buffSizes[TUTTI_PROTO_LL] = static_cast<size_t>(ll) & ~size_t{TUTTI_STEPS * 64 - 1};
  // LL128 slots hold whole 128-byte lines.
  int64_t ll128 = paramInt("NCCL_LL128_BUFFSIZE");
  if (ll128 < TUTTI_STEPS * 128)
    TUTTI_FAIL(ncclInvalidArgument, "NCCL_LL128_BUFFSIZE={} is too small (at least {} bytes)", ll128,
               TUTTI_STEPS * 128);
  comm->buffSizes[TUTTI_PROTO_LL128] = static_cast<size_t>(ll128) & ~size_t{TUTTI_STEPS * 128 - 1};
  TUTTI_CHECK(commLL128Vote(comm, &comm->ll128));
  const int64_t p2pLL = paramInt("NCCL_P2P_LL_THRESHOLD");
  // Unset: LL below nChannels x 16 KiB on the device backends, where it saves a GPU its fence and flag round trip.
  // The host backend's Simple slot costs the receiver one tail load, where LL makes both sides touch twice the
  // bytes: Simple is as fast from 8 B on (2 ranks over shm, send/recv 8 B: 0.7 us either way; 32 KiB AlltoAll:
  // 5 us against 15-21 us with LL), so the host uses LL only when asked.
  const int64_t p2pLLDefault = comm->backend == Backend::Host ? -1 : int64_t{comm->nChannels} * 16384;
  comm->p2pLLThreshold = p2pLL >= 0 ? p2pLL : p2pLLDefault;
  TUTTI_CHECK(tunerChainCreate(comm));
  // The core's own paths outside the tuners' table (one-shot AllReduce, single-copy AllGather / Broadcast) are taken
  // only where the default tuner alone decides: a tuner plugin or YAML rule keeps every decision to itself.
  if (comm->tuners) {
    const auto& e = comm->tuners->entries();
    comm->corePaths = e.size() == 1 && e[0].name == "default" && e[0].stateless;
  } else {
    comm->corePaths = true;
  }
  // Over the network from 6 ranks the deterministic paths beat the ring and the tree at nearly every size (2 cores, 8
  // processes over sockets, the same launch, float sum, default -> deterministic, us: AllReduce 8 B 210 -> 153, 4 KiB
  // 249 -> 193, 256 KiB 861 -> 672, 1 MiB 2555 -> 2467, 4 MiB 13801 -> 10992, 16 MiB 64696 -> 51177, 256 MiB 1.24 ->
  // 1.00 s; ReduceScatter 64 B 223 -> 165, 256 KiB 744 -> 630, 4 MiB 7456 -> 6278, 16 MiB 28305 -> 19649, 256 MiB 556
  // -> 416 ms; benchmarks/results/deterministic.md at 49ea1c8): each rank sends its slices to every peer at once,
  // where the ring's 2(n - 1) steps wake the ranks one after another. 6 ranks, the same way: AllReduce 512 B 134 ->
  // 112, 8 KiB 149 -> 123, 512 KiB 1290 -> 1005, 2 MiB 4579 -> 4565, 8 MiB 16403 -> 17139; ReduceScatter 6 KiB 140 ->
  // 121, 384 KiB 574 -> 474, 6 MiB 8495 -> 6100. On 4 ranks the ring stays ahead from 1 MiB.
  const int64_t foMin = paramInt("TUTTI_FIXED_ORDER_NET_MIN_RANKS");
  const int fixedOrderMin = foMin >= 0 ? static_cast<int>(std::min<int64_t>(foMin, INT32_MAX)) : 6;
  comm->fixedOrderPaths = comm->backend == Backend::Host && overNetwork && comm->corePaths && !forced &&
                          fixedOrderMin > 0 && nRanks >= fixedOrderMin;
  // Except where the halving then doubling runs, past the deterministic tree: on 8 ranks from 512 KiB to 1 MiB (the
  // tree to 512 KiB, the one-shot ReduceScatter then AllGather past it). 8 processes over sockets, 2-core AMD EPYC VM,
  // interleaved runs of 100 calls of the sweep's segment (256 KiB and 1 MiB), 1 MiB, medians, us: 2756 -> 2580 (9
  // runs, faster in each pair; Open MPI 2841) and 3246 -> 2914 (11 more, faster in 9 pairs); where the tree runs it
  // stays ahead (256 KiB 703 against 929, 512 KiB 1620 against 1866, medians of seven).
  const int64_t foHd = paramInt("TUTTI_FIXED_ORDER_NET_HALVING_DOUBLING");
  comm->fixedOrderKeepsHalvingDoubling = comm->fixedOrderPaths && foHd != 0;
  // Within a node, 4 to 8 ranks each in its own process, the same from 128 KiB of input: the one-shot ReduceScatter
  // then AllGather, the direct reads and the fused exchange send every peer its slice at once where the ring's 2(n - 1)
  // steps wait on the ranks in turn (2 cores, processes over shm, the same launch, float sum, default ->
  // deterministic, us: AllReduce 4 ranks 128 KiB 55 -> 46, 256 KiB 120 -> 75, 1 MiB 380 -> 206, 16 MiB 5675 -> 5030,
  // 256 MiB 103 -> 86 ms; 6 ranks 96 KiB 181 -> 120, 1.5 MiB 1120 -> 924, 6 MiB 5001 -> 5515; 8 ranks 256 KiB 371 ->
  // 229, 16 MiB 18736 -> 11763, 256 MiB 279 -> 229 ms; ReduceScatter 4 ranks 1 MiB 179 -> 124, 256 MiB 71 -> 54 ms;
  // 6 ranks 1.5 MiB 502 -> 350; 8 ranks 1 MiB 504 -> 288, 256 MiB 146 -> 99 ms; benchmarks/results/deterministic.md
  // at 73d97e6). Ranks as threads read one another's inputs in place on either path: no gain there.
  std::set<uint64_t> processes;
  for (const tuttiPeerInfo_t& p : comm->peers) processes.insert(p.pidHash);
  const int64_t foShm = paramInt("TUTTI_FIXED_ORDER_SHM_MIN_BYTES");
  const size_t fixedOrderShmMin = foShm >= 0 ? static_cast<size_t>(foShm) : size_t{128} << 10;
  if (!comm->fixedOrderPaths && comm->backend == Backend::Host && !overNetwork && comm->corePaths && !forced &&
      fixedOrderShmMin > 0 && nRanks >= 4 && nRanks <= 8 && processes.size() == static_cast<size_t>(nRanks)) {
    comm->fixedOrderPaths = true;
    comm->fixedOrderMinBytes = fixedOrderShmMin;
  }
  // AllGather over the network as grouped sends, every block to every peer at once, past the recursive doubling's
  // 1 MiB, from 4 ranks (2 cores, processes over sockets, ring -> sends, us, three pairs of runs: 8 ranks 2 MiB 2918,
  // 2983, 5020 -> 1854, 2046, 1923; 4 MiB 6290, 5345, 7156 -> 3465, 3726, 3892; 16 MiB 27992, 29429, 31117 -> 20505,
  // 20483, 21179; two pairs: 64 MiB 118298, 123051 -> 101324, 92907; 4 ranks 4 MiB 2852, 2506 -> 2327, 1850, 16 MiB
  // 11916, 11454 -> 12939, 10050, 64 MiB 50056, 54189 -> 39822, 38852; at 1 MiB even with the doubling on 8 ranks).
  const int64_t agSends = paramInt("TUTTI_ALLGATHER_SENDS_MIN_BYTES");
  comm->allGatherSendsMinBytes = agSends >= 0 ? static_cast<size_t>(agSends)
                                 : comm->backend == Backend::Host && overNetwork && comm->corePaths && !forced &&
                                           nRanks >= 4
                                     ? size_t{2} << 20
                                     : 0;
  TUTTI_CHECK(profilerCommInit(comm));

  {
    bool det = false;
    std::string from, why;
    if (!deterministicOfNewComms(&det, &from, &why)) TUTTI_FAIL(ncclInvalidArgument, "rank {}: {}", rank, why);
    comm->deterministic.store(det);
  }

  // Connections at init (NCCL_RUNTIME_CONNECT). Where two ranks of the communicator share a GPU in one process,
  // a connection opened during a call would register host memory with CUDA (cudaHostRegister), which waits for the
  // device's running kernels, among them the other rank's, which may be spinning for this one. Every rank decides
  // alike from the peers' info; the barrier keeps every rank from launching before all have registered.
  if (comm->backend != Backend::Host && nRanks > 1) {
    std::set<std::pair<uint64_t, int>> gpus;  // (process, device) of each rank
    bool sharedGpu = false;
    for (const tuttiPeerInfo_t& p : comm->peers)
      sharedGpu |= comm->backend == Backend::Cuda && !gpus.insert({p.pidHash, p.cudaDev}).second;
    if (sharedGpu) TUTTI_CHECK(warnFewHardwareQueues(comm));
    const int64_t runtimeConnect = paramInt("NCCL_RUNTIME_CONNECT");
    if (runtimeConnect == 0 || (runtimeConnect < 0 && sharedGpu)) {
      TUTTI_CHECK(host::connectAll(comm));
      TUTTI_CHECK(comm->bootstrap->barrier());
      TUTTI_INFO(NCCL_INIT, "rank {}: every connection opened at init ({})", rank,
                 runtimeConnect == 0 ? "NCCL_RUNTIME_CONNECT=0" : "ranks share a GPU in one process");
    }
  }

  TUTTI_INFO(NCCL_INIT, "comm {} rank {} nRanks {} nNodes {} channels {} buffSize {} deterministic {} - init done",
             static_cast<void*>(comm), rank, nRanks, comm->nNodes, comm->nChannels,
             comm->buffSizes[TUTTI_PROTO_SIMPLE], comm->deterministic.load() ? 1 : 0);
  return ncclSuccess;
}

namespace {
// Bootstrap tag of the note a failing rank sends its network peers: why it is closing their connections.
constexpr int kFailureNoteTag = 0x300000;
}  // namespace

int commAskFailure(void* c, int peer) {
  auto* comm = static_cast<ncclComm*>(c);
  // Held across the bounded wait: a second channel asking about the same peer waits for the first one's
  // answer instead of for a second note that never comes (it then blamed the peer that only passed it on).
  std::lock_guard<std::mutex> lock(comm->failureNotesMutex);
  if (auto it = comm->failureNotes.find(peer); it != comm->failureNotes.end()) return it->second;
  int record = -1;
  if (!comm->bootstrap || comm->bootstrap->recvWithin(peer, kFailureNoteTag, &record, sizeof record, 500) != ncclSuccess)
    return -1;
  comm->failureNotes[peer] = record;
  return record;
}

void commCancelOps(ncclComm* comm) {
  // Peers reached over the network only see a closed socket: tell them why, before closing anything.
  if (const int failure = comm->failure.load(); failure >= 0 && comm->bootstrap && !comm->abortFlag.load()) {
    std::vector<int> told;
    LastErrorKeeper keep;  // a note to a dead peer fails: that must not hide the error being reported
    std::lock_guard<std::mutex> lock(comm->connMutex);
    for (auto& [key, c] : comm->connections) {
      const int peer = std::get<2>(key);
      if (!(c->host.conn.flags & TUTTI_CONN_PROXIED) || std::find(told.begin(), told.end(), peer) != told.end()) continue;
      told.push_back(peer);
      comm->bootstrap->send(peer, kFailureNoteTag, &failure, sizeof failure);
    }
  }
  comm->abortFlag.store(true, std::memory_order_release);
  if (uint32_t* word = comm->rmaAbortWord.load(std::memory_order_acquire)) __atomic_store_n(word, 1u, __ATOMIC_RELEASE);
  std::lock_guard<std::mutex> lock(comm->connMutex);
  for (auto& [key, c] : comm->connections)
    if (c->host.conn.ctrl) {
      host::closeEnd(c->host.conn.ctrl, c->isSend, c->host.conn.shared, comm->failure.load());
      // A network end its rank drove is closed by whoever progresses it next: here, or the proxy thread.
      if (c->host.proxyTask) proxyRelease(c->host.proxyTask);
    }
  // An end that may move user buffers (zero copy) is closed before the error reaches the caller, who may free
  // those buffers at once: the proxy thread, if it holds the end now, closes it within a round.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (auto& [key, c] : comm->connections) {
    if (!c->host.netEnd || !c->host.conn.ctrl) continue;
    while (!netEndClosed(c->host.netEnd) && std::chrono::steady_clock::now() < deadline) {
      proxyRelease(c->host.proxyTask);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

void commSignalAbort(ncclComm* comm) {
  commCancelOps(comm);
  std::lock_guard<std::mutex> lock(comm->lifeMutex);
  if (comm->bootstrap) comm->bootstrap->abort();
}

ncclResult_t commCheckUsable(ncclComm* comm, const char* call) {
  const ncclResult_t err = comm->asyncError.load();
  switch (comm->state.load()) {
    case CommState::Ready: break;
    case CommState::Initializing:
      if (err == ncclInProgress)
        TUTTI_FAIL(ncclInvalidArgument, "{}: the communicator is still initializing (wait until "
                   "ncclCommGetAsyncError returns ncclSuccess)", call);
      TUTTI_FAIL(err, "{}: the communicator failed to initialize ({})", call, ncclGetErrorString(err));
    case CommState::Finalized:
      TUTTI_FAIL(ncclInvalidUsage, "{}: rank {}: the communicator was finalized", call, comm->rank);
    case CommState::Revoked:
      TUTTI_FAIL(ncclInvalidUsage, "{}: rank {}: the communicator was revoked (only destroy, abort, split and "
                 "shrink remain)", call, comm->rank);
    case CommState::Aborted:
      TUTTI_FAIL(ncclInvalidUsage, "{}: rank {}: the communicator was aborted", call, comm->rank);
  }
  if (err == ncclInProgress)
    TUTTI_FAIL(ncclInvalidArgument, "{}: rank {}: the previous nonblocking operation is still in progress (wait "
               "until ncclCommGetAsyncError returns ncclSuccess)", call, comm->rank);
  if (err != ncclSuccess)
    TUTTI_FAIL(err, "{}: rank {}: the communicator has a pending error ({}) from an earlier operation", call,
               comm->rank, ncclGetErrorString(err));
  return ncclSuccess;
}

void commQuiesce(ncclComm* comm) {
  std::shared_ptr<AsyncJob> job;
  {
    std::lock_guard<std::mutex> lock(comm->lifeMutex);
    job = comm->asyncJob;
  }
  if (job) job->join();
  // Calls on other threads leave within one wait slice once aborted; without an abort they finish their work.
  int64_t waitedMs = 0;
  while (comm->activeOps.load(std::memory_order_acquire) > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (++waitedMs % 10000 == 0)
      TUTTI_WARN("rank {}: still waiting for {} call(s) on other threads to leave the communicator", comm->rank,
                 comm->activeOps.load());
  }
}

ncclResult_t commScratch(ncclComm* comm, size_t bytes, void** out, bool staging) {
  std::lock_guard<std::mutex> lock(comm->scratchMutex);
  auto& list = staging ? comm->staging : comm->scratch;
  if (!list.empty() && list.back().second >= bytes) {
    *out = list.back().first;
    return ncclSuccess;
  }
  // Doubling: the outgrown buffers kept until commFree add up to less than the newest.
  const size_t size = std::max(bytes, list.empty() ? size_t{0} : 2 * list.back().second);
  void* p = nullptr;
  if (rt::Runtime* rt = device::runtimeOf(comm)) {
    TUTTI_CHECK(rt->alloc(&p, size, /*shareable=*/false));
  } else if (!(p = std::malloc(size))) {
    TUTTI_FAIL(ncclSystemError, "rank {}: cannot allocate {} bytes of scratch memory", comm->rank, size);
  }
  list.emplace_back(p, size);
  TUTTI_INFO(NCCL_ALLOC, "rank {}: {} memory of {} bytes", comm->rank, staging ? "staging" : "scratch", size);
  *out = p;
  return ncclSuccess;
}

ncclResult_t commFree(ncclComm* comm) {
  commRegistryRemove(comm);  // first: from here on the handle is refused, never read
  commQuiesce(comm);
  device::commDeviceFree(comm);  // its watcher and internal stream end before the connections go
  comm->rma.reset();              // windows never deregistered, signal blocks
  for (auto* list : {&comm->scratch, &comm->staging}) {
    for (auto [p, bytes] : *list) {
      if (rt::Runtime* rt = device::runtimeOf(comm)) rt->free(p);
      else std::free(p);
    }
    list->clear();
  }
  for (auto [p, bytes] : comm->detScratchFree) std::free(p);
  comm->detScratchFree.clear();
  {
    std::lock_guard<std::mutex> lock(comm->connMutex);
    for (auto& [key, c] : comm->connections) {
      device::unregisterConnection(comm, c.get());  // before the transport unmaps the memory
      if (c->transport && c->res) {
        ncclResult_t r = c->transport->api().free(c->res);
        if (r != ncclSuccess) TUTTI_WARN("rank {}: transport {} failed to free a connection", comm->rank,
                                         c->transport->name());
      }
    }
    comm->directConns.store(nullptr, std::memory_order_release);
    comm->connections.clear();  // stops the proxy events still open on them
  }
  comm->profiler.reset();  // finalizes every profiler context
  comm->tuners.reset();  // finalizes every tuner context
  {
    std::lock_guard<std::mutex> lock(comm->lifeMutex);
    comm->bootstrap.reset();
    comm->asyncJob.reset();
  }
  comm->magic = kCommDeadMagic;
  delete comm;
  return ncclSuccess;
}

}  // namespace tutti
