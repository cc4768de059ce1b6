#include "device/enqueue.h"

#include "comm/comm.h"
#include "comm/profiler.h"
#include "device/common/pat.h"
#include "device/cuda/kernels.h"
#include "device/host/prims.h"
#include "device/kernels/dev_work.h"
#include "device/kernels/kernel.h"
#include "device/sim/kernels.h"
#include "plugin/params.h"
#include "proxy/proxy.h"
#include "rma/kernel_fns.h"
#include "util/check.h"

#include <tutti/tuner.h>


#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <map>
#include <mutex>
#include <thread>

#include <unistd.h>

namespace tutti::device {

using dev::DevConn;
using dev::DevSlowWait;
using dev::DevStatus;
using dev::DevWork;
using dev::KernelArgs;
using dev::StopReason;
using dev::WorkKind;

// Threads per block on a GPU (NCCL's default NCCL_NTHREADS); the sim takes TUTTI_SIM_NTHREADS.
constexpr int kCudaThreads = 512;

namespace {

// Peer processes on this host whose death the kernels could not notice (nobody closes their connections).
struct Watched {
  const std::atomic<uint8_t>* gone;  // the peer's bootstrap lifeline (host::WaitContext::peerGone)
  int rank;
};

struct DeviceLaunch;

// Pinned host memory of launches (abort word, connection and work lists, status words), kept for reuse per
// runtime: every group is a launch, and on a GPU a cudaHostAlloc / cudaFreeHost pair per launch would cost
// more than a small collective. Blocks come in power-of-two sizes and are never given back: a launch ends
// in a host function, where CUDA calls are not permitted, and cudaFreeHost elsewhere would wait for the
// whole device, kernels of other ranks waiting for this one included. The pool holds what the most
// launches in flight at once needed. Blocks up to kSlabBytes / 8 are carved from slabs, and communicators
// reserve a slab when they are created (reserve): a cudaHostAlloc during a call may wait while peers' kernels
// spin for this rank, so the usual calls find their blocks without one.
class PinnedPool {
 public:
  static constexpr size_t kSlabBytes = size_t{1} << 20;

  ncclResult_t get(rt::Runtime* rt, size_t bytes, void** out) {
    const size_t size = sizeClass(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    auto& list = free_[size];
    if (!list.empty()) {
      *out = list.back();
      list.pop_back();
      return ncclSuccess;
    }
    if (size > kSlabBytes / 8) {
      TUTTI_INFO(NCCL_ALLOC, "launch memory: a pinned block of {} bytes", size);
      return rt->hostAlloc(out, size);
    }
    if (slabLeft_ < size) TUTTI_CHECK(newSlab(rt));
    *out = slabNext_;
    slabNext_ += size;
    slabLeft_ -= size;
    return ncclSuccess;
  }
  void put(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[sizeClass(bytes)].push_back(p);
  }
  // At least `bytes` carvable without another cudaHostAlloc (at most one slab's worth).
  ncclResult_t reserve(rt::Runtime* rt, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (slabLeft_ < std::min(bytes, kSlabBytes)) TUTTI_CHECK(newSlab(rt));
    return ncclSuccess;
  }
  static size_t sizeClass(size_t bytes) {
    size_t size = 256;  // every class a multiple of 256: blocks carved in turn stay 256-byte aligned
    while (size < bytes) size *= 2;
    return size;
  }

 private:
  // The rest of the current slab is dropped (never freed, like the blocks).
  ncclResult_t newSlab(rt::Runtime* rt) {
    void* p = nullptr;
    TUTTI_CHECK(rt->hostAlloc(&p, kSlabBytes));
    TUTTI_INFO(NCCL_ALLOC, "launch memory: a pinned slab of {} bytes", kSlabBytes);
    slabNext_ = static_cast<char*>(p);
    slabLeft_ = kSlabBytes;
    return ncclSuccess;
  }

  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
  char* slabNext_ = nullptr;
  size_t slabLeft_ = 0;
};

PinnedPool& pinnedPoolOf(rt::Runtime* rt) {
  static std::mutex m;
  static auto* all = new std::map<rt::Runtime*, std::unique_ptr<PinnedPool>>();  // lives as long as the runtimes
  std::lock_guard<std::mutex> lock(m);
  auto& p = (*all)[rt];
  if (!p) p = std::make_unique<PinnedPool>();
  return *p;
}

}  // namespace

ncclResult_t pinnedGet(rt::Runtime* rt, size_t bytes, void** out) { return pinnedPoolOf(rt).get(rt, bytes, out); }
void pinnedPut(rt::Runtime* rt, void* p, size_t bytes) { pinnedPoolOf(rt).put(p, bytes); }

namespace {

// One kernel of a launch: work items [begin, end), all of one datatype.
struct KernelRun {
  DeviceLaunch* launch = nullptr;
  size_t begin = 0, end = 0;
  int grid = 0;
  const void* fn = nullptr;
  KernelArgs args{};
  DevStatus* status = nullptr;    // pinned, one per block
  DevSlowWait* slow = nullptr;    // pinned, one per item (TUTTI_WAIT_WARN), or null
  uint64_t* times = nullptr;      // pinned, start and end per item (profiler), or null
  std::vector<bool> warned;       // per item: its slow wait was reported (this run)
};

// Everything one group of one communicator uses on the device, alive until its kernels have run (or, once
// captured, as long as the graph).
struct DeviceLaunch {
  ncclComm* comm = nullptr;
  rt::Runtime* rt = nullptr;
  std::vector<CollPlan> colls;
  std::vector<Task> sends, recvs;   // point-to-point, in the order host::orderP2p gives
  std::vector<host::SelfCopy> selfCopies;  // send/receive pairs with this rank: copies on the stream
  std::vector<DevConn> conns;
  std::vector<Connection*> connOf;  // the Connection behind conns[i]
  std::vector<DevWork> work;        // in launch order
  std::vector<ProfEvent*> prof;     // per work item: the profiler's Coll / P2p event (KernelCh parent), or null
  std::vector<Watched> watched;
  bool proxied = false;             // some connection goes through the network proxy
  bool captured = false;            // part of a graph: may run many times
  int collChannels = 0;
  std::vector<std::unique_ptr<KernelRun>> kernels;
  // Device-visible (pinned) memory.
  DevConn* connsDev = nullptr;
  DevWork* workDev = nullptr;
  uint32_t* abortWord = nullptr;
  std::vector<std::pair<void*, size_t>> pinned;  // blocks of the runtime's PinnedPool, with their sizes
  // Per run.
  std::unique_ptr<CommOpsGuard> running;  // the communicator stays alive while the launch runs
  bool failed = false;
  int deadPeer = -1;
  rt::Event ended = nullptr;  // recorded after the kernel where the launch ends by event (retireEnded), else null

  ~DeviceLaunch() {
    for (auto [p, bytes] : pinned) pinnedPoolOf(rt).put(p, bytes);
  }
  template <typename T>
  ncclResult_t pin(T** out, size_t n) {
    void* p = nullptr;
    const size_t bytes = std::max<size_t>(n, 1) * sizeof(T);
    TUTTI_CHECK(pinnedPoolOf(rt).get(rt, bytes, &p));
    pinned.emplace_back(p, bytes);
    std::memset(p, 0, bytes);
    *out = static_cast<T*>(p);
    return ncclSuccess;
  }
};

}  // namespace

struct CommDevice {
  rt::Runtime* rt = nullptr;
  rt::Stream stream = nullptr;  // the internal stream the kernels run on
  std::vector<rt::Event> fanIn;  // one per user stream of a group
  rt::Event done = nullptr;
  // The watcher.
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<DeviceLaunch*> active;
  bool stop = false;
  std::thread watcher;
  // NCCL_GRAPH_MIXING_SUPPORT: every launch waits for the one before it and records its end here, with the
  // runtime's external record and wait, so a graph replayed on one stream and work queued on another (or
  // another graph) never run at once on the communicator's connections. Null when the application opts out.
  rt::Event serial = nullptr;
  // Uncaptured launches queued and not yet ended, at most `depth` (TUTTI_LAUNCH_DEPTH): ranks sharing a GPU in
  // one process share the driver's launch queue, and a rank far ahead could fill it with kernels that wait
  // for a peer whose own launch call then blocks in the driver. A call beyond the depth waits here instead.
  int queued = 0;
  int64_t depth = 16;
  std::condition_variable ended;
  // Launches that end by an event on the stream rather than a host function (queueKernels), oldest first, and the
  // events of those that ended, for reuse. retireMutex: one thread at a time ends them, in order.
  std::deque<DeviceLaunch*> evented;
  std::vector<rt::Event> spareEvents;
  std::mutex retireMutex;
};

namespace {

int connIndex(DeviceLaunch& l, Connection* c) {
  if (!c) return dev::kNoConn;
  for (size_t i = 0; i < l.connOf.size(); ++i)
    if (l.connOf[i] == c) return static_cast<int>(i);
  DevConn d{};
  const tuttiConnector_t& k = c->host.conn;
  size_t stride = 0;
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
    d.buffs[p] = static_cast<char*>(k.buffs[p]);
    d.slotBytes[p] = k.buffSizes[p] / TUTTI_STEPS;
    stride = std::max(stride, d.slotBytes[p]);
  }
  if (k.flags & TUTTI_CONN_PROXIED) {  // a proxied slot lands whole in the SIMPLE buffer (transport.h)
    d.landing = d.buffs[TUTTI_PROTO_SIMPLE];
    d.landingStride = stride;
    l.proxied = true;
  }
  d.ctrl = k.ctrl;
  d.step = &c->host.step;
  d.flags = k.flags;
  d.peer = c->host.peer;
  l.conns.push_back(d);
  l.connOf.push_back(c);
  return static_cast<int>(l.conns.size() - 1);
}

int16_t findConn(DeviceLaunch& l, int channel, int connIx, int peer, bool isSend) {
  return static_cast<int16_t>(connIndex(l, commFindConnection(l.comm, channel, connIx, peer, isSend)));
}

ncclResult_t addCollectives(DeviceLaunch& l) {
  ncclComm* comm = l.comm;
  for (const CollPlan& p : l.colls) {
    for (int c = 0; c < static_cast<int>(p.work.size()); ++c) {
      DevWork w{};
      w.coll = p.work[c];
      w.op = p.op;
      w.sendbuff = p.task.sendbuff;
      w.recvbuff = p.task.recvbuff;
      w.opCount = p.opCount;
      w.proto = static_cast<uint8_t>(p.protocol);
      w.eltSize = static_cast<uint8_t>(p.eltSize);
      w.block = static_cast<uint8_t>(c);
      w.channel = static_cast<int16_t>(c);
      w.recvConn = w.sendConn = dev::kNoConn;
      for (int i = 0; i < kTreeMaxArity; ++i) w.childRecv[i] = w.childSend[i] = dev::kNoConn;
      if (p.algorithm == kAlgoSymmetric) {
        // No connection: the peers' buffers and barrier blocks, in launch memory the kernel reads (sym.h).
        w.kind = WorkKind::Sym;
        SymPeers* peers = nullptr;
        TUTTI_CHECK(l.pin(&peers, 1));
        *peers = *p.sym;
        w.sym = peers;
      } else if (p.algorithm == NCCL_ALGO_TREE) {
        const TreeLinks links = comm->trees.channelLinks(c, comm->rank);
        w.kind = WorkKind::Tree;
        w.isRoot = links.up < 0;
        w.nChildren = static_cast<int8_t>(links.nDown());
        if (links.up >= 0) {
          w.recvConn = findConn(l, c, kConnColl, links.up, false);
          w.sendConn = findConn(l, c, kConnColl, links.up, true);
        }
        for (int i = 0; i < w.nChildren; ++i) {
          w.childRecv[i] = findConn(l, c, kConnColl, links.down[i], false);
          w.childSend[i] = findConn(l, c, kConnColl, links.down[i], true);
        }
        bool missing = (links.up >= 0 && (w.recvConn < 0 || w.sendConn < 0));
        for (int i = 0; i < w.nChildren; ++i) missing |= w.childRecv[i] < 0 || w.childSend[i] < 0;
        if (missing) TUTTI_FAIL(ncclInternalError, "rank {}: channel {} lacks a tree connection", comm->rank, c);
      } else if (p.algorithm == NCCL_ALGO_PAT) {
        // The connections of every step, in launch memory the kernel reads (pat.h, patPeers).
        w.kind = WorkKind::Pat;
        const int steps = comm->nRanks > 1 ? patSteps(comm->nRanks) : 0;
        int16_t* conns = nullptr;
        TUTTI_CHECK(l.pin(&conns, 2 * static_cast<size_t>(steps)));
        for (int d = 0; d < steps; ++d) {
          int from = 0, to = 0;
          patPeers(p.task.func, comm->rank, d, comm->nRanks, &from, &to);
          conns[2 * d] = findConn(l, c, kConnColl, from, false);
          conns[2 * d + 1] = findConn(l, c, kConnColl, to, true);
          if (conns[2 * d] < 0 || conns[2 * d + 1] < 0)
            TUTTI_FAIL(ncclInternalError, "rank {}: channel {} lacks the PAT connections of step {}", comm->rank, c, d);
        }
        w.patConns = conns;
      } else {
        w.kind = WorkKind::Ring;
        if (comm->nRanks > 1) {
          w.recvConn = static_cast<int16_t>(connIndex(l, comm->rings[c].recvConn));
          w.sendConn = static_cast<int16_t>(connIndex(l, comm->rings[c].sendConn));
          if (w.recvConn < 0 || w.sendConn < 0)
            TUTTI_FAIL(ncclInternalError, "rank {}: channel {} has no ring connection", comm->rank, c);
        }
      }
      l.collChannels = std::max(l.collChannels, c + 1);
      l.work.push_back(w);
      l.prof.push_back(p.task.prof.get());
    }
  }
  return ncclSuccess;
}

// Point-to-point, as the host backend orders it (host::orderP2p), sends on one block and receives on another
// so neither waits for the other.
ncclResult_t addP2p(DeviceLaunch& l, const std::vector<Task>& p2p) {
  ncclComm* comm = l.comm;
  std::vector<Task>& sends = l.sends;
  TUTTI_CHECK(host::orderP2p(comm, p2p, &sends, &l.recvs, &l.selfCopies));
  ResolvedRedOp copy{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copy);
  const uint8_t sendBlock = static_cast<uint8_t>(l.collChannels);
  const uint8_t recvBlock = static_cast<uint8_t>(l.collChannels + (sends.empty() ? 0 : 1));
  auto add = [&](const Task& t, bool sending) -> ncclResult_t {
    DevWork w{};
    const size_t bytes = t.count * dataTypeSize(t.datatype);
    w.kind = sending ? WorkKind::Send : WorkKind::Recv;
    w.coll.count = bytes;
    w.op = copy;
    w.sendbuff = t.sendbuff;
    w.recvbuff = t.recvbuff;
    w.opCount = comm->p2pOpCount;
    w.proto = static_cast<uint8_t>(host::p2pProtocol(comm, bytes));
    w.eltSize = 1;
    w.block = sending ? sendBlock : recvBlock;
    w.recvConn = w.sendConn = dev::kNoConn;
    for (int i = 0; i < kTreeMaxArity; ++i) w.childRecv[i] = w.childSend[i] = dev::kNoConn;
    const int16_t c = findConn(l, 0, kConnP2p, t.root, sending);
    if (c < 0) TUTTI_FAIL(ncclInternalError, "rank {}: no p2p connection to rank {}", comm->rank, t.root);
    (sending ? w.sendConn : w.recvConn) = c;
    l.work.push_back(w);
    l.prof.push_back(t.prof.get());
    return ncclSuccess;
  };
  for (const Task& t : sends) TUTTI_CHECK(add(t, true));
  for (const Task& t : l.recvs) TUTTI_CHECK(add(t, false));
  return ncclSuccess;
}

const char* workName(const DevWork& w) {
  if (w.kind == WorkKind::Send) return "Send";
  if (w.kind == WorkKind::Recv) return "Recv";
  return funcName(w.coll.func);
}

const char* protoText(int64_t proto) {
  switch (proto) {
    case TUTTI_PROTO_LL: return "LL";
    case TUTTI_PROTO_LL128: return "LL128";
    case TUTTI_PROTO_SIMPLE: return "Simple";
    default: return "?";
  }
}

// Turns the status of the block that stopped into the error the host backend would report for the same
// wait, and records the communicator's failure for its peers.
ncclResult_t reportStop(ncclComm* comm, const DevWork& w, const DevStatus& s) {
  const char* name = workName(w);
  const char* what = s.sending ? "a free slot towards" : "data from";
  const bool coll = w.kind != WorkKind::Send && w.kind != WorkKind::Recv;
  auto record = [&](int failure) {
    int none = -1;
    comm->failure.compare_exchange_strong(none, failure);
  };
  auto arrived = [&] { return coll ? callCheckWhoArrived(comm, w.opCount) : std::string(); };
  switch (s.reason) {
    case StopReason::Aborted:
      // A consequence, not a cause: the error that aborted the communicator was reported where it happened.
      TUTTI_INFO(NCCL_COLL | NCCL_P2P, "rank {}: {} (opCount {}, channel {}) aborted while waiting for {} rank {}",
                 comm->rank, name, w.opCount, w.channel, what, s.peer);
      return ncclRemoteError;
    case StopReason::TimedOut:
      record(host::failureRecord(s.peer, true));
      TUTTI_FAIL(ncclTimeout, "rank {}: {} (opCount {}, channel {}) timed out waiting for {} rank {} (step {}){}",
                 comm->rank, name, w.opCount, w.channel, what, s.peer, s.step,
                 arrived().empty() ? fmt::format(": did rank {} call the same operation?", s.peer) : arrived());
    case StopReason::PeerClosed: {
      const uint32_t closed = static_cast<uint32_t>(s.detail);
      int failure = host::closedFailure(closed, s.peer);
      if (closed == 1) {  // a network peer sends its reason through the bootstrap
        const int told = commAskFailure(comm, s.peer);
        if (told >= 0) failure = told;
      }
      record(failure);
      const int cause = host::failureRank(failure);
      if (host::failureTimedOut(failure))
        TUTTI_FAIL(ncclTimeout, "rank {}: {} (opCount {}, channel {}): rank {} did not take part in time (rank {} "
                   "timed out waiting for it and closed its connection){}", comm->rank, name, w.opCount, w.channel,
                   cause, s.peer, arrived());
      if (cause != s.peer)
        TUTTI_FAIL(ncclRemoteError, "rank {}: {} (opCount {}, channel {}): rank {} failed (rank {} gave up on it and "
                   "closed its connection)", comm->rank, name, w.opCount, w.channel, cause, s.peer);
      TUTTI_FAIL(ncclRemoteError, "rank {}: {} (opCount {}, channel {}): rank {} died or closed the connection",
                 comm->rank, name, w.opCount, w.channel, s.peer);
    }
    case StopReason::Mismatch:
      if (s.detail2 < 0)
        TUTTI_FAIL(ncclInvalidUsage, "rank {}: {} (opCount {}, channel {}): rank {} sent a {}-byte slot where {} bytes "
                   "of data (protocol {}) were expected (mismatched calls across ranks? TUTTI_CHECK_CALLS=1 names both "
                   "calls)", comm->rank, name, w.opCount, w.channel, s.peer, s.detail, s.want, protoText(w.proto));
      TUTTI_FAIL(ncclInvalidUsage, "rank {}: {} (opCount {}, channel {}): rank {} sent {} bytes (protocol {}) where {} "
                 "bytes (protocol {}) were expected (mismatched calls across ranks? TUTTI_CHECK_CALLS=1 names both "
                 "calls)", comm->rank, name, w.opCount, w.channel, s.peer, s.detail, protoText(s.detail2), s.want,
                 protoText(w.proto));
    case StopReason::Incomplete:
      TUTTI_FAIL(ncclInternalError, "rank {}: {} (opCount {}, channel {}): {} slot from rank {} (step {}) was "
                 "published incomplete", comm->rank, name, w.opCount, w.channel, protoText(w.proto), s.peer, s.step);
    case StopReason::Unsupported:
      TUTTI_FAIL(ncclInvalidArgument, "rank {}: {} (opCount {}, channel {}): the kernels for this GPU leave out {} "
                 "reductions (they need sm_{})", comm->rank, name, w.opCount, w.channel, dataTypeName(w.op.datatype),
                 minArchForReduction(w.op.datatype));
    default:
      TUTTI_FAIL(ncclInternalError, "rank {}: {} (opCount {}, channel {}): the kernel stopped on a corrupt work item",
                 comm->rank, name, w.opCount, w.channel);
  }
}

// TUTTI_WAIT_WARN: one WARN per operation whose wait outlasted the threshold, as the host backend words it.
void warnSlowWait(ncclComm* comm, const DevWork& w, const DevSlowWait& s) {
  const char* name = workName(w);
  if (!host::firstSlowWarning(&comm->calls.warnedOp, name, w.opCount)) return;
  TUTTI_WARN("rank {}: {} (opCount {}, channel {}) has waited {} s for {} rank {} (step {}); still waiting "
             "(TUTTI_WAIT_WARN; TUTTI_TIMEOUT turns long waits into errors)", comm->rank, name, w.opCount, w.channel,
             s.waitedNs / 1000000000, s.sending ? "a free slot towards" : "data from", s.peer, s.step);
}

// A failure of the launch running now: the communicator is poisoned (as a failed host-backend work item), the
// launch's later kernels are aborted, and the stream reports it where the runtime can (sim).
void failLaunch(DeviceLaunch& l, ncclResult_t res) {
  if (l.failed) return;
  l.failed = true;
  __atomic_store_n(l.abortWord, 1u, __ATOMIC_RELEASE);
  ncclResult_t expected = ncclSuccess;
  l.comm->asyncError.compare_exchange_strong(expected, res);
  commCancelOps(l.comm);
  l.rt->failCurrentWork(res);
}

// The watcher's look at one running launch.
void watchLaunch(DeviceLaunch& l) {
  ncclComm* comm = l.comm;
  if (l.proxied) proxyRing();  // the proxy sleeps when nothing is in flight: the kernels cannot ring it
  if (comm->abortFlag.load(std::memory_order_acquire)) __atomic_store_n(l.abortWord, 1u, __ATOMIC_RELEASE);
  for (auto& k : l.kernels) {
    if (!k->slow) continue;
    for (size_t i = 0; i < k->warned.size(); ++i)
      if (!k->warned[i] && __atomic_load_n(&k->slow[i].ready, __ATOMIC_ACQUIRE)) {
        k->warned[i] = true;
        warnSlowWait(comm, l.work[k->begin + i], k->slow[i]);
      }
  }
  if (l.deadPeer >= 0) return;
  for (const Watched& p : l.watched) {
    if (!p.gone->load(std::memory_order_acquire)) continue;
    // A dead process cannot close its ends; close them for it. The kernel sees that only where it still
    // waits on the peer: data the peer published before it exited (a last send of a Reduce whose sender
    // finished and left) is still consumed, as on the host backend. No cause is recorded: the peer may have
    // exited after giving up on another rank, and the failure note it left on the bootstrap names that rank
    // (reportStop asks for it). A closed word the peer wrote before it died (with its cause) is kept.
    l.deadPeer = p.rank;
    for (size_t i = 0; i < l.connOf.size(); ++i) {
      if (l.connOf[i]->host.peer != p.rank) continue;
      const bool peerSends = !l.connOf[i]->isSend;
      tuttiConnCtrl_t* ctrl = l.conns[i].ctrl;
      if (__atomic_load_n(peerSends ? &ctrl->senderClosed : &ctrl->receiverClosed, __ATOMIC_ACQUIRE) == 0)
        host::closeEnd(ctrl, peerSends, /*shared=*/true);
    }
    break;
  }
}

void retireEnded(CommDevice& d);

void watcherLoop(CommDevice* d, ncclComm* comm) {
  logSetThreadRank(comm->rank);
  std::unique_lock<std::mutex> lock(d->mutex);
  while (true) {
    d->cv.wait(lock, [&] { return d->stop || !d->active.empty(); });
    if (d->stop) return;
    bool proxied = false;
    for (DeviceLaunch* l : d->active) {
      watchLaunch(*l);
      proxied |= l->proxied;
    }
    const bool evented = !d->evented.empty();
    if (evented) {
      lock.unlock();
      retireEnded(*d);
      lock.lock();
      if (d->stop) return;
    }
    d->cv.wait_for(lock, proxied || evented ? std::chrono::microseconds(50) : std::chrono::microseconds(1000));
  }
}

// ---- Host functions on the internal stream ----------------------------------------------------------------

void startLaunch(DeviceLaunch& l) {
  ncclComm* comm = l.comm;
  CommDevice& d = *comm->device;
  if (!l.running) l.running = std::make_unique<CommOpsGuard>(comm);
  l.failed = false;
  l.deadPeer = -1;
  __atomic_store_n(l.abortWord, 0u, __ATOMIC_RELEASE);
  for (auto& k : l.kernels) {
    std::memset(static_cast<void*>(k->status), 0, sizeof(DevStatus) * k->grid);
    const size_t n = k->end - k->begin;
    if (k->slow) std::memset(static_cast<void*>(k->slow), 0, sizeof(DevSlowWait) * n);
    if (k->times) std::memset(k->times, 0, 2 * n * sizeof(uint64_t));
    k->warned.assign(k->slow ? n : 0, false);
  }
  // An aborted or failed communicator runs nothing more: the kernels stop at their first wait.
  const ncclResult_t pending = comm->asyncError.load();  // ncclInProgress: a nonblocking group is running
  if (comm->abortFlag.load(std::memory_order_acquire) || (pending != ncclSuccess && pending != ncclInProgress)) {
    __atomic_store_n(l.abortWord, 1u, __ATOMIC_RELEASE);
    l.failed = true;
    l.rt->failCurrentWork(pending != ncclSuccess && pending != ncclInProgress ? pending : ncclRemoteError);
  } else {
    auto prepare = [&]() -> ncclResult_t {
      // Profiler ProxyOps first: a proxy must know an op before it touches the op's first announced step.
      if (comm->profiler && !l.captured) [[unlikely]] {
        for (int c = 0; c < l.collChannels; ++c) TUTTI_CHECK(host::profileChannelProxyOps(comm, l.colls, c));
        for (const Task& t : l.sends) host::profileP2pProxyOp(comm, t, true);
        for (const Task& t : l.recvs) host::profileP2pProxyOp(comm, t, false);
      }
      // Network proxies post receives for announced steps only: announce everything the kernels will take.
      for (int c = 0; c < l.collChannels; ++c) TUTTI_CHECK(host::announceChannelSteps(comm, l.colls, c));
      for (const DevWork& w : l.work) {
        if (w.kind != WorkKind::Recv) continue;
        Connection* conn = l.connOf[w.recvConn];
        host::HostStepCounter steps(&conn->host, w.proto, 1);
        steps.recv(0, w.coll.count);
        host::announceRecvSteps(&conn->host, steps.recvSteps());
      }
      return ncclSuccess;
    };
    if (ncclResult_t res = prepare(); res != ncclSuccess) failLaunch(l, res);
  }
  std::lock_guard<std::mutex> lock(d.mutex);
  d.active.push_back(&l);
  d.cv.notify_all();
}

void beginLaunch(void* arg) {
  auto& l = *static_cast<DeviceLaunch*>(arg);
  logSetThreadRank(l.comm->rank);
  startLaunch(l);
}

void checkKernel(void* arg) {
  auto& k = *static_cast<KernelRun*>(arg);
  DeviceLaunch& l = *k.launch;
  ncclComm* comm = l.comm;
  // KernelCh events, timed by the kernel's own clock (CLOCK_MONOTONIC on the sim, as the profiler's timer).
  for (size_t i = 0; k.times && i < k.end - k.begin; ++i) {
    ProfEvent* parent = l.prof[k.begin + i];
    if (!parent || k.times[2 * i] == 0) continue;  // not profiled, or never started (the kernel stopped before)
    ProfEvent* e = profKernelChStart(parent, l.work[k.begin + i].channel, k.times[2 * i]);
    profKernelChStop(e, k.times[2 * i + 1]);
  }
  // The root cause first: a block that was only aborted reports a consequence.
  const DevStatus* stop = nullptr;
  for (int b = 0; b < k.grid; ++b) {
    const DevStatus& s = k.status[b];
    if (s.reason != StopReason::None && (!stop || stop->reason == StopReason::Aborted)) stop = &s;
  }
  if (!stop || l.failed) return;
  failLaunch(l, reportStop(comm, l.work[k.begin + stop->work], *stop));
}

void endLaunch(void* arg) {
  auto* l = static_cast<DeviceLaunch*>(arg);
  CommDevice& d = *l->comm->device;
  if (!l->kernels.empty()) checkKernel(l->kernels.back().get());  // the last kernel's check (queueKernels)
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    d.active.erase(std::find(d.active.begin(), d.active.end(), l));
    if (!l->captured) --d.queued;
  }
  d.ended.notify_all();
  l->running.reset();
  if (!l->captured) delete l;  // a graph keeps its launches (keepWithCapture)
}

// Ends the launches whose end is an event (CommDevice::evented) once their kernels have run, oldest first: the
// kernel's stop is checked, the launch leaves the watcher and is freed, as endLaunch does on the stream. They run in
// order on the internal stream, so the first one still running ends the pass.
void retireEnded(CommDevice& d) {
  std::lock_guard<std::mutex> one(d.retireMutex);
  while (true) {
    DeviceLaunch* l = nullptr;
    {
      std::lock_guard<std::mutex> lock(d.mutex);
      if (d.evented.empty()) return;
      l = d.evented.front();
    }
    const ncclResult_t q = d.rt->eventQuery(l->ended);
    if (q == ncclInProgress) return;
    if (q != ncclSuccess) failLaunch(*l, q);
    {
      std::lock_guard<std::mutex> lock(d.mutex);
      d.evented.pop_front();
      d.spareEvents.push_back(l->ended);
    }
    endLaunch(l);
  }
}

// Waits until the communicator has fewer than its depth of uncaptured launches queued (CommDevice::queued).
// Each of them ends: its kernels finish, time out (TUTTI_TIMEOUT) or stop on abort. Launches that end by an event
// are ended here too, as soon as they have run (the watcher looks every 50 us).
void waitLaunchRoom(CommDevice& d) {
  retireEnded(d);
  std::unique_lock<std::mutex> lock(d.mutex);
  while (d.queued >= d.depth) {
    if (d.evented.empty()) {
      d.ended.wait(lock);
      continue;
    }
    lock.unlock();
    retireEnded(d);
    lock.lock();
    if (d.queued >= d.depth) d.ended.wait_for(lock, std::chrono::microseconds(20));
  }
}

void deleteLaunch(void* arg) { delete static_cast<DeviceLaunch*>(arg); }

// The sim backend's stand-in for the GPU's page tables: every address a kernel will dereference that the
// host side put in the launch (connection FIFOs, control blocks, step counters, ring tables) must be memory
// the runtime made device-visible. The emulator itself reaches any address, so without this check a pointer
// to plain host memory would work on the CPU and fault on a GPU.
ncclResult_t checkDeviceVisible(const DeviceLaunch& l) {
  auto check = [&](const void* p, const char* what, int peer) -> ncclResult_t {
    if (!p) return ncclSuccess;
    rt::MemKind kind = rt::MemKind::Unknown;
    TUTTI_CHECK(l.rt->pointerKind(p, &kind));
    if (kind != rt::MemKind::Host) return ncclSuccess;
    const std::string of = peer >= 0 ? fmt::format(" of the connection with rank {}", peer) : std::string();
    TUTTI_FAIL(ncclInternalError, "rank {}: a kernel argument ({}{}) points at host memory the device cannot reach "
               "({})", l.comm->rank, what, of, p);
  };
  for (const DevConn& c : l.conns) {
    for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) TUTTI_CHECK(check(c.buffs[p], "a FIFO", c.peer));
    TUTTI_CHECK(check(c.landing, "the landing area", c.peer));
    TUTTI_CHECK(check(c.ctrl, "the control block", c.peer));
    TUTTI_CHECK(check(c.step, "the step counter", c.peer));
  }
  for (const DevWork& w : l.work) {
    TUTTI_CHECK(check(w.coll.ringRanks, "the ring table", -1));
    TUTTI_CHECK(check(w.patConns, "the PAT connection table", -1));
    TUTTI_CHECK(check(w.coll.scratch, "the PAT scratch memory", -1));
  }
  return ncclSuccess;
}

// Builds the kernels of `l` (runs of one datatype) and their device-visible memory.
ncclResult_t buildKernels(DeviceLaunch& l) {
  ncclComm* comm = l.comm;
  TUTTI_CHECK(l.pin(&l.abortWord, 1));
  // The ring position -> rank tables AllGather and ReduceScatter index blocks by live in the communicator's
  // host memory: the kernels get copies in the launch's device-visible memory.
  std::map<const int*, int*> ringTables;
  for (DevWork& w : l.work) {
    if (!w.coll.ringRanks) continue;
    int*& copy = ringTables[w.coll.ringRanks];
    if (!copy) {
      TUTTI_CHECK(l.pin(&copy, static_cast<size_t>(w.coll.nRanks)));
      std::copy_n(w.coll.ringRanks, w.coll.nRanks, copy);
    }
    w.coll.ringRanks = copy;
  }
  TUTTI_CHECK(l.pin(&l.connsDev, l.conns.size()));
  TUTTI_CHECK(l.pin(&l.workDev, l.work.size()));
  std::copy(l.conns.begin(), l.conns.end(), l.connsDev);
  std::copy(l.work.begin(), l.work.end(), l.workDev);
  const bool sim = l.rt == rt::simRuntime();
  if (sim) TUTTI_CHECK(checkDeviceVisible(l));
  for (size_t i = 0; i < l.work.size();) {
    size_t j = i;
    while (j < l.work.size() && l.work[j].op.datatype == l.work[i].op.datatype) ++j;
    auto k = std::make_unique<KernelRun>();
    k->launch = &l;
    k->begin = i;
    k->end = j;
    const ncclDataType_t type = l.work[i].op.datatype;
#ifdef TUTTI_HAVE_CUDA_KERNELS
    k->fn = sim ? reinterpret_cast<const void*>(sim::simKernelFor(type)) : cuda::cudaKernelFor(type);
#else
    k->fn = sim ? reinterpret_cast<const void*>(sim::simKernelFor(type)) : nullptr;
#endif
    if (!k->fn)
      TUTTI_FAIL(ncclInvalidUsage, "rank {}: this build's {} kernels leave out {} (configured with TUTTI_KERNELS={})",
                 comm->rank, l.rt->name(), dataTypeName(type), sim::simKernelFilter());
    const size_t n = j - i;
    for (size_t w = i; w < j; ++w) k->grid = std::max(k->grid, l.work[w].block + 1);
    TUTTI_CHECK(l.pin(&k->status, k->grid));
    KernelArgs& a = k->args;
    a.nWork = static_cast<int32_t>(n);
    for (size_t w = i; w < j && w - i < static_cast<size_t>(dev::kMaxLaunchWork); ++w) a.work[w - i] = l.work[w];
    a.moreWork = n > static_cast<size_t>(dev::kMaxLaunchWork) ? l.workDev + i + dev::kMaxLaunchWork : nullptr;
    a.conns = l.connsDev;
    a.status = k->status;
    a.abortWord = l.abortWord;
    a.timeoutNs = static_cast<uint64_t>(comm->timeoutNs);
    a.nBlocks = k->grid;
    if (comm->calls.waitWarnNs > 0) {
      TUTTI_CHECK(l.pin(&k->slow, n));
      a.warnNs = static_cast<uint64_t>(comm->calls.waitWarnNs);
      a.slowWaits = k->slow;
    }
    if (!l.captured &&
        std::any_of(l.prof.begin() + i, l.prof.begin() + j, [](ProfEvent* e) { return e != nullptr; })) {
      TUTTI_CHECK(l.pin(&k->times, 2 * n));
      a.workTimes = k->times;
    }
    l.kernels.push_back(std::move(k));
    i = j;
  }
  return ncclSuccess;
}

// Host memory registered with a runtime, in blocks of whole pages: a run of pages is registered once, by the
// first connection that needs it, and released when the last one using it goes (cudaHostRegister refuses a
// page registered twice, and two connections' control blocks may share a page). Every page registered here
// belongs to the library (Connection is page-aligned; transports give FIFOs and control blocks pages of their
// own): a page shared with the application's heap would make its cudaMemcpy calls fail.
struct HostBlocks {
  struct Block {
    uintptr_t end;
    int users;
  };
  std::mutex mutex;
  std::map<uintptr_t, Block> blocks;  // by start

  ncclResult_t add(rt::Runtime* rt, const void* p, size_t bytes, std::vector<uintptr_t>* used) {
    if (!p || bytes == 0) return ncclSuccess;
    static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    uintptr_t cur = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) & ~(page - 1);
    std::lock_guard<std::mutex> lock(mutex);
    while (cur < end) {
      auto next = blocks.upper_bound(cur);
      if (next != blocks.begin()) {
        auto in = std::prev(next);
        if (in->second.end > cur) {  // already registered: count this user
          ++in->second.users;
          used->push_back(in->first);
          cur = in->second.end;
          continue;
        }
      }
      const uintptr_t stop = next == blocks.end() ? end : std::min(end, next->first);
      TUTTI_CHECK(rt->hostRegister(reinterpret_cast<void*>(cur), stop - cur));
      blocks[cur] = {stop, 1};
      used->push_back(cur);
      cur = stop;
    }
    return ncclSuccess;
  }
  void release(rt::Runtime* rt, std::vector<uintptr_t>* used) {
    std::lock_guard<std::mutex> lock(mutex);
    for (uintptr_t start : *used) {
      auto it = blocks.find(start);
      if (it == blocks.end() || --it->second.users > 0) continue;
      rt->hostUnregister(reinterpret_cast<void*>(start));
      blocks.erase(it);
    }
    used->clear();
  }
};

HostBlocks& hostBlocksOf(rt::Runtime* rt) {
  static std::mutex m;
  static auto* all = new std::map<rt::Runtime*, std::unique_ptr<HostBlocks>>();
  std::lock_guard<std::mutex> lock(m);
  auto& b = (*all)[rt];
  if (!b) b = std::make_unique<HostBlocks>();
  return *b;
}

}  // namespace

ncclResult_t registerConnection(ncclComm* comm, Connection* c) {
  rt::Runtime* rt = runtimeOf(comm);
  if (!rt) return ncclSuccess;
  HostBlocks& hb = hostBlocksOf(rt);
  const tuttiConnector_t& k = c->host.conn;
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
    rt::MemKind kind = rt::MemKind::Unknown;
    if (k.buffs[p]) TUTTI_CHECK(rt->pointerKind(k.buffs[p], &kind));
    if (kind == rt::MemKind::Device || kind == rt::MemKind::Managed) continue;  // FIFOs the transport put there
    TUTTI_CHECK(hb.add(rt, k.buffs[p], k.buffSizes[p], &c->devBlocks));
  }
  TUTTI_CHECK(hb.add(rt, k.ctrl, sizeof(tuttiConnCtrl_t), &c->devBlocks));
  TUTTI_CHECK(hb.add(rt, &c->host.step, sizeof c->host.step, &c->devBlocks));
  return ncclSuccess;
}

void unregisterConnection(ncclComm* comm, Connection* c) {
  rt::Runtime* rt = runtimeOf(comm);
  if (!rt || c->devBlocks.empty()) return;
  hostBlocksOf(rt).release(rt, &c->devBlocks);
}

namespace {

// tuttiDeviceMem_t over one runtime (transports get it in tuttiConnectRequest_t).
template <rt::Runtime* (*Rt)()>
struct DevMemOf {
  static ncclResult_t alloc(void** ptr, size_t bytes) {
    TUTTI_CHECK(Rt()->alloc(ptr, bytes, /*shareable=*/true));
    return Rt()->allocIsZeroed() ? ncclSuccess : Rt()->memset(*ptr, 0, bytes);
  }
  static ncclResult_t free(void* ptr) { return Rt()->free(ptr); }
  static ncclResult_t exportHandle(void* ptr, void* handle) {
    static_assert(sizeof(rt::MemExport) <= TUTTI_DEVMEM_HANDLE_BYTES, "handle too large");
    rt::MemExport h;
    TUTTI_CHECK(Rt()->exportMem(ptr, &h));
    std::memcpy(handle, &h, sizeof h);
    return ncclSuccess;
  }
  static ncclResult_t importHandle(const void* handle, void** ptr) {
    rt::MemExport h;
    std::memcpy(&h, handle, sizeof h);
    return Rt()->importMem(h, ptr);
  }
  static ncclResult_t closeImport(void* ptr) { return Rt()->closeImport(ptr); }
  static ncclResult_t dmabufFd(void* ptr, size_t bytes, int* fd, uint64_t* offset) {
    return Rt()->dmabufFd(ptr, bytes, fd, offset);
  }
  static constexpr tuttiDeviceMem_t table{alloc, free, exportHandle, importHandle, closeImport, dmabufFd};
};

}  // namespace

const tuttiDeviceMem_t* deviceMemOf(const ncclComm* comm) {
  switch (comm->backend) {
    case Backend::Sim: return &DevMemOf<rt::simRuntime>::table;
    case Backend::Cuda: return &DevMemOf<rt::cudaRuntime>::table;
    default: return nullptr;
  }
}

rt::Runtime* runtimeOf(const ncclComm* comm) {
  switch (comm->backend) {
    case Backend::Sim: return rt::simRuntime();
    case Backend::Cuda: return rt::cudaRuntime();
    default: return nullptr;
  }
}

ncclResult_t commDeviceInit(ncclComm* comm) {
  auto d = std::make_unique<CommDevice>();
  d->rt = runtimeOf(comm);
#ifdef TUTTI_HAVE_CUDA_KERNELS
  // Every kernel the communicator may launch is loaded now, before any runs (rt::Runtime::loadKernel): CUDA's
  // lazy loading at a first launch can wait for kernels already spinning for this very rank.
  if (comm->backend == Backend::Cuda) {
    for (int t = 0; t < ncclNumTypes; ++t)
      if (const void* fn = cuda::cudaKernelFor(static_cast<ncclDataType_t>(t)))
        TUTTI_CHECK(d->rt->loadKernel(fn, sizeof(dev::KernelShared)));
    TUTTI_CHECK(d->rt->loadKernel(rma::cudaSignalKernel(), 0));
    TUTTI_CHECK(d->rt->loadKernel(rma::cudaWaitKernel(), 0));
  }
#endif
  // Launch memory for the first calls, taken now rather than by a cudaHostAlloc during a call (PinnedPool).
  TUTTI_CHECK(pinnedPoolOf(d->rt).reserve(d->rt, PinnedPool::kSlabBytes / 4));
  TUTTI_CHECK(d->rt->streamCreate(&d->stream));
  TUTTI_CHECK(d->rt->eventCreate(&d->done));
  if (paramInt("NCCL_GRAPH_MIXING_SUPPORT") != 0) TUTTI_CHECK(d->rt->eventCreate(&d->serial));
  d->depth = std::max<int64_t>(1, paramInt("TUTTI_LAUNCH_DEPTH"));
  CommDevice* raw = d.get();
  d->watcher = std::thread([raw, comm] { watcherLoop(raw, comm); });
  comm->device = d.release();
  return ncclSuccess;
}

void commDeviceFree(ncclComm* comm) {
  CommDevice* d = comm->device;
  if (!d) return;
  comm->device = nullptr;
  if (d->rt->streamSynchronize(d->stream) != ncclSuccess)
    TUTTI_INFO(NCCL_INIT, "rank {}: the internal stream ended with an error (reported by its operations)", comm->rank);
  {
    std::lock_guard<std::mutex> lock(d->mutex);
    d->stop = true;
  }
  d->cv.notify_all();
  d->watcher.join();
  retireEnded(*d);  // the stream has run dry: every launch that ends by an event has ended
  for (rt::Event e : d->spareEvents) d->rt->eventDestroy(e);
  for (rt::Event e : d->fanIn) d->rt->eventDestroy(e);
  d->rt->eventDestroy(d->done);
  if (d->serial) d->rt->eventDestroy(d->serial);
  d->rt->streamDestroy(d->stream);
  delete d;
}

namespace {

// Queues a launch's kernels on the internal stream, between the host functions that start and end it.
ncclResult_t queueKernels(ncclComm* comm, rt::Runtime* rt, CommDevice& d, std::unique_ptr<DeviceLaunch> l) {
  DeviceLaunch* raw = l.get();
  if (raw->captured) {
    TUTTI_CHECK(rt->keepWithCapture(d.stream, raw, deleteLaunch));
    l.release();  // the graph owns it now
  } else {
    // Counted busy from now until its end (commFree waits for it).
    raw->running = std::make_unique<CommOpsGuard>(comm);
  }
  // Every host function on the stream holds its next kernel back by a round trip to a CUDA callback thread, which
  // costs more than a small collective. A launch that is not captured, moves nothing through the network proxy and
  // is not profiled starts here: its own memory is fresh, and what the stream-ordered start does besides (posting
  // network receives, profiler ProxyOps, abort checks) it does not need or gets from the watcher, which sets the
  // abort word of every active launch. The others start in stream order (a graph replays its launches; a proxy
  // must learn about steps in the order the kernels take them).
  const ncclResult_t pending = comm->asyncError.load();
  const bool startNow = !raw->captured && !raw->proxied && !comm->profiler &&
                        !comm->abortFlag.load(std::memory_order_acquire) &&
                        (pending == ncclSuccess || pending == ncclInProgress);
  if (startNow) startLaunch(*raw);
  else TUTTI_CHECK(rt->launchHostFunc(d.stream, beginLaunch, raw));
  if (!raw->captured) {
    std::lock_guard<std::mutex> lock(d.mutex);
    ++d.queued;  // endLaunch, queued below whatever happens, takes it off
  }
  l.release();  // queued: endLaunch deletes it (uncaptured), the graph does (captured)
  const int threads = rt == rt::simRuntime() ? static_cast<int>(paramInt("TUTTI_SIM_NTHREADS")) : kCudaThreads;
  ncclResult_t res = ncclSuccess;
  for (size_t i = 0; i < raw->kernels.size(); ++i) {
    // Each kernel's stop is checked before the next one runs (an error aborts the rest); the last one's in endLaunch.
    if (i > 0) res = rt->launchHostFunc(d.stream, checkKernel, raw->kernels[i - 1].get());
    if (res != ncclSuccess) break;
    const auto& k = raw->kernels[i];
    rt::KernelLaunch kl;
    kl.fn = k->fn;
    kl.grid = k->grid;
    kl.block = threads;
    kl.sharedBytes = sizeof(dev::KernelShared);
    kl.args = &k->args;
    kl.argBytes = sizeof(KernelArgs);
    res = rt->launchKernel(kl, d.stream);
    if (res != ncclSuccess) break;
  }
  // The end always follows the begin: it takes the launch off the watcher and releases the run lock. A launch that
  // started at once with one kernel ends by an event that the watcher (or the next call) looks at, so the stream
  // goes on to the next kernel at once; the others by a host function.
  ncclResult_t endRes = ncclSuccess;
  bool byEvent = false;  // once in d.evented the launch may end (and be freed) at any moment: not read after that
  if (startNow && raw->kernels.size() == 1 && res == ncclSuccess) {
    {
      std::lock_guard<std::mutex> lock(d.mutex);
      if (!d.spareEvents.empty()) {
        raw->ended = d.spareEvents.back();
        d.spareEvents.pop_back();
      }
    }
    if (!raw->ended) endRes = rt->eventCreate(&raw->ended);
    if (endRes == ncclSuccess) endRes = rt->eventRecord(raw->ended, d.stream);
    if (endRes == ncclSuccess) {
      byEvent = true;
      std::lock_guard<std::mutex> lock(d.mutex);
      d.evented.push_back(raw);
      d.cv.notify_all();
    } else {
      if (raw->ended) rt->eventDestroy(raw->ended);
      raw->ended = nullptr;
    }
  }
  if (!byEvent) endRes = rt->launchHostFunc(d.stream, endLaunch, raw);
  if (endRes == ncclSuccess && d.serial) endRes = rt->eventRecordExternal(d.serial, d.stream);
  if (res == ncclSuccess) res = endRes;
  if (res != ncclSuccess) {
    // Part of the group was queued: its peers cannot complete it, so the communicator fails as a whole.
    ncclResult_t expected = ncclSuccess;
    comm->asyncError.compare_exchange_strong(expected, res);
    commCancelOps(comm);
    TUTTI_FAIL(res, "rank {}: the group's kernels could not all be queued on the {} runtime; the communicator is "
               "aborted", comm->rank, rt->name());
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t enqueue(host::CommLaunch& launch) {
  ncclComm* comm = launch.comm;
  CommDevice& d = *comm->device;
  rt::Runtime* rt = d.rt;
  // Capture: every user stream of the group is captured, or none (as NCCL requires).
  int capturing = 0;
  for (cudaStream_t s : launch.streams) {
    rt::Capture st = rt::Capture::None;
    uint64_t id = 0;
    TUTTI_CHECK(rt->captureStatus(s, &st, &id));
    if (st == rt::Capture::Invalidated)
      TUTTI_FAIL(ncclInvalidUsage, "rank {}: stream {} is in an invalidated capture", comm->rank, static_cast<void*>(s));
    capturing += st == rt::Capture::Active;
  }
  if (capturing && capturing != static_cast<int>(launch.streams.size()))
    TUTTI_FAIL(ncclInvalidUsage, "rank {}: the group's streams of this communicator are partly captured: capture all "
               "of them or none", comm->rank);

  auto l = std::make_unique<DeviceLaunch>();
  l->comm = comm;
  l->rt = rt;
  l->captured = capturing > 0;
  l->colls = std::move(launch.colls);
  TUTTI_CHECK(addCollectives(*l));
  TUTTI_CHECK(addP2p(*l, launch.p2p));
  if (!launch.p2p.empty()) ++comm->p2pOpCount;
  const std::vector<host::SelfCopy> selfCopies = std::move(l->selfCopies);
  const bool kernels = !l->work.empty();
  if (!kernels && selfCopies.empty()) return ncclSuccess;
  if (kernels) {
    for (const Connection* c : l->connOf)
      if (c->host.peerGone) l->watched.push_back({c->host.peerGone, c->host.peer});
    TUTTI_CHECK(buildKernels(*l));
    if (!l->captured) waitLaunchRoom(d);
  }

  // Fan-in: the internal stream waits for every user stream (and joins their capture through the event).
  while (d.fanIn.size() < launch.streams.size()) {
    rt::Event e = nullptr;
    TUTTI_CHECK(rt->eventCreate(&e));
    d.fanIn.push_back(e);
  }
  for (size_t i = 0; i < launch.streams.size(); ++i) {
    TUTTI_CHECK(rt->eventRecord(d.fanIn[i], launch.streams[i]));
    TUTTI_CHECK(rt->streamWaitEvent(d.stream, d.fanIn[i]));
  }
  // After the communicator's previous launch, captured or not (see CommDevice::serial).
  if (d.serial) TUTTI_CHECK(rt->streamWaitEventExternal(d.stream, d.serial));
  // Sends to and receives from this rank: a device copy each, in stream order (captured with the rest).
  for (const host::SelfCopy& c : selfCopies) TUTTI_CHECK(rt->memcpyAsync(c.dst, c.src, c.bytes, d.stream));
  if (!kernels) {
    if (d.serial) TUTTI_CHECK(rt->eventRecordExternal(d.serial, d.stream));
  } else {
    TUTTI_CHECK(queueKernels(comm, rt, d, std::move(l)));
  }
  // Fan-out: every user stream waits for the kernels (and the capture gets the internal stream back).
  TUTTI_CHECK(rt->eventRecord(d.done, d.stream));
  for (cudaStream_t s : launch.streams) TUTTI_CHECK(rt->streamWaitEvent(s, d.done));
  return ncclSuccess;
}

void commDeviceRetire(ncclComm* comm) {
  if (comm->device) retireEnded(*comm->device);
}

ncclResult_t finish(host::CommLaunch& launch) {
  ncclComm* comm = launch.comm;
  if (!launch.streams.empty() || comm->backend != Backend::Sim) return ncclSuccess;
  // The sim backend's calls without a stream return when done, with the work's error (a launch that ends by an event
  // records it when it is ended here).
  const ncclResult_t res = comm->device->rt->streamSynchronize(comm->device->stream);
  retireEnded(*comm->device);
  const ncclResult_t pending = comm->asyncError.load();
  if (pending != ncclSuccess && pending != ncclInProgress) return pending;
  return res;
}

}  // namespace tutti::device
