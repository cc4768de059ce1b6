#include "device/sim/launch.h"

#include "comm/comm.h"
#include "comm/profiler.h"
#include "device/host/prims.h"
#include "device/kernels/kernel.h"
#include "device/sim/kernels.h"
#include "device/simt/emulator.h"
#include "plugin/params.h"
#include "proxy/proxy.h"
#include "util/check.h"

#include <tutti/tuner.h>

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

namespace tutti::sim {
namespace {

using dev::DevConn;
using dev::DevStatus;
using dev::DevWork;
using dev::KernelArgs;
using dev::StopReason;
using dev::WorkKind;

// Everything one group's kernels use, alive until they have run (its memory is the kernels' device memory).
struct SimLaunch {
  ncclComm* comm = nullptr;
  std::vector<CollPlan> colls;
  std::vector<Task> sends, recvs;   // point-to-point, in the order host::orderP2p gives
  std::vector<DevConn> conns;
  std::vector<Connection*> connOf;  // the Connection behind conns[i]
  std::vector<DevWork> work;        // in launch order
  std::vector<ProfEvent*> prof;     // per work item: the profiler's Coll / P2p event (KernelCh parent), or null
  bool proxied = false;             // some connection goes through the network proxy
  int collChannels = 0;
};

int connIndex(SimLaunch& l, Connection* c) {
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

int16_t findConn(SimLaunch& l, int channel, int connIx, int peer, bool isSend) {
  return static_cast<int16_t>(connIndex(l, commFindConnection(l.comm, channel, connIx, peer, isSend)));
}

ncclResult_t addCollectives(SimLaunch& l) {
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
      if (p.algorithm == NCCL_ALGO_TREE) {
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
ncclResult_t addP2p(SimLaunch& l, const std::vector<Task>& p2p) {
  ncclComm* comm = l.comm;
  std::vector<Task>& sends = l.sends;
  TUTTI_CHECK(host::orderP2p(comm, p2p, &sends, &l.recvs));
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
  const bool coll = w.kind == WorkKind::Ring || w.kind == WorkKind::Tree;
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
void warnSlowWait(ncclComm* comm, const DevWork& w, const dev::DevSlowWait& s) {
  const char* name = workName(w);
  if (!host::firstSlowWarning(&comm->calls.warnedOp, name, w.opCount)) return;
  TUTTI_WARN("rank {}: {} (opCount {}, channel {}) has waited {} s for {} rank {} (step {}); still waiting "
             "(TUTTI_WAIT_WARN; TUTTI_TIMEOUT turns long waits into errors)", comm->rank, name, w.opCount, w.channel,
             s.waitedNs / 1000000000, s.sending ? "a free slot towards" : "data from", s.peer, s.step);
}

// Peer processes on this host whose death the kernels could not notice (nobody closes their connections).
struct Watched {
  int pid, rank;
};

// Runs work[begin, end) (one datatype) as one kernel on the emulator and watches it until it ends.
ncclResult_t runKernel(SimLaunch& l, size_t begin, size_t end, const std::vector<Watched>& watched) {
  ncclComm* comm = l.comm;
  const ncclDataType_t type = l.work[begin].op.datatype;
  SimKernelFn fn = simKernelFor(type);
  if (!fn)
    TUTTI_FAIL(ncclInvalidUsage, "rank {}: this build's sim kernels leave out {} (configured with TUTTI_KERNELS={})",
               comm->rank, dataTypeName(type), simKernelFilter());
  auto args = std::make_unique<KernelArgs>();
  args->nWork = static_cast<int32_t>(end - begin);
  int grid = 0;
  for (size_t i = begin; i < end; ++i) grid = std::max(grid, l.work[i].block + 1);
  for (size_t i = begin; i < end && i - begin < static_cast<size_t>(dev::kMaxLaunchWork); ++i)
    args->work[i - begin] = l.work[i];
  args->moreWork = end - begin > static_cast<size_t>(dev::kMaxLaunchWork) ? &l.work[begin + dev::kMaxLaunchWork] : nullptr;
  std::vector<DevStatus> status(grid);
  uint32_t abortWord = 0;
  args->conns = l.conns.data();
  args->status = status.data();
  args->abortWord = &abortWord;
  args->timeoutNs = static_cast<uint64_t>(comm->timeoutNs);
  args->nBlocks = grid;
  const size_t n = end - begin;
  std::vector<dev::DevSlowWait> slow(comm->calls.waitWarnNs > 0 ? n : 0);
  if (!slow.empty()) {
    args->warnNs = static_cast<uint64_t>(comm->calls.waitWarnNs);
    args->slowWaits = slow.data();
  }
  std::vector<uint64_t> times;
  if (std::any_of(l.prof.begin() + begin, l.prof.begin() + end, [](ProfEvent* e) { return e != nullptr; })) {
    times.assign(2 * n, 0);
    args->workTimes = times.data();
  }
  std::vector<bool> warned(slow.size(), false);

  simt::emu::LaunchParams params;
  params.grid = grid;
  params.block = static_cast<int>(paramInt("TUTTI_SIM_NTHREADS"));
  params.sharedBytes = sizeof(dev::KernelShared);
  params.seed = static_cast<uint64_t>(paramInt("TUTTI_SIM_SEED"));
  // The kernel runs on its own threads; this one watches it as a GPU's host thread would.
  std::mutex m;
  std::condition_variable cv;
  bool done = false, ok = false;
  std::string emuError;
  std::thread runner([&] {
    logSetThreadRank(comm->rank);
    const bool r = simt::emu::launch(params, fn, args.get(), &emuError);
    std::lock_guard<std::mutex> lock(m);
    ok = r;
    done = true;
    cv.notify_all();
  });
  int deadPeer = -1;
  auto lastPidCheck = std::chrono::steady_clock::now();
  {
    std::unique_lock<std::mutex> lock(m);
    while (!done) {
      // The proxy sleeps when nothing is in flight: the kernel's sends cannot ring it, so the host does.
      cv.wait_for(lock, l.proxied ? std::chrono::microseconds(50) : std::chrono::microseconds(1000));
      if (done) break;
      if (l.proxied) proxyRing();
      if (comm->abortFlag.load(std::memory_order_acquire)) __atomic_store_n(&abortWord, 1u, __ATOMIC_RELEASE);
      for (size_t i = 0; i < slow.size(); ++i)
        if (!warned[i] && __atomic_load_n(&slow[i].ready, __ATOMIC_ACQUIRE)) {
          warned[i] = true;
          warnSlowWait(comm, l.work[begin + i], slow[i]);
        }
      const auto now = std::chrono::steady_clock::now();
      if (!watched.empty() && deadPeer < 0 && now - lastPidCheck > std::chrono::milliseconds(50)) {
        lastPidCheck = now;
        for (const Watched& p : watched)
          if (kill(p.pid, 0) != 0 && errno == ESRCH) {
            // A dead process cannot close its ends; close them for it. The kernel sees that only where it
            // still waits on the peer: data the peer published before it exited (a last send of a Reduce
            // whose sender finished and left) is still consumed, as on the host backend. No cause is
            // recorded: the peer may have exited after giving up on another rank, and the failure note it
            // left on the bootstrap names that rank (reportStop asks for it).
            // A closed word the peer wrote before it died (with the cause it gave up on) is kept.
            deadPeer = p.rank;
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
    }
  }
  runner.join();
  // KernelCh events, timed by the kernel's own clock (CLOCK_MONOTONIC, as the profiler's host timer).
  for (size_t i = 0; i < times.size() / 2; ++i) {
    ProfEvent* parent = l.prof[begin + i];
    if (!parent || times[2 * i] == 0) continue;  // not profiled, or never started (the kernel stopped before)
    ProfEvent* e = profKernelChStart(parent, l.work[begin + i].channel, times[2 * i]);
    profKernelChStop(e, times[2 * i + 1]);
  }
  if (!ok) TUTTI_FAIL(ncclInternalError, "rank {}: sim kernel ({}) failed: {}", comm->rank, dataTypeName(type), emuError);
  // The root cause first: a block that was only aborted reports a consequence.
  const DevStatus* stop = nullptr;
  for (const DevStatus& s : status)
    if (s.reason != StopReason::None && (!stop || stop->reason == StopReason::Aborted)) stop = &s;
  if (!stop) return ncclSuccess;
  return reportStop(comm, l.work[begin + stop->work], *stop);
}

ncclResult_t runLaunch(SimLaunch& l) {
  ncclComm* comm = l.comm;
  // Profiler ProxyOps first: a proxy must know an op before it touches the op's first announced step.
  if (comm->profiler) [[unlikely]] {
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
  std::vector<Watched> watched;
  for (const Connection* c : l.connOf)
    if (c->host.peerPid > 0) watched.push_back({c->host.peerPid, c->host.peer});
  for (size_t i = 0; i < l.work.size();) {
    size_t j = i;
    while (j < l.work.size() && l.work[j].op.datatype == l.work[i].op.datatype) ++j;
    TUTTI_CHECK(runKernel(l, i, j, watched));
    i = j;
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t launchItems(host::CommLaunch& launch, std::vector<host::WorkItem>* items) {
  ncclComm* comm = launch.comm;
  auto l = std::make_shared<SimLaunch>();
  l->comm = comm;
  l->colls = std::move(launch.colls);
  TUTTI_CHECK(addCollectives(*l));
  TUTTI_CHECK(addP2p(*l, launch.p2p));
  if (!launch.p2p.empty()) ++comm->p2pOpCount;
  if (l->work.empty()) return ncclSuccess;
  items->push_back(host::guarded(comm, [l]() -> ncclResult_t { return runLaunch(*l); }));
  return ncclSuccess;
}

}  // namespace tutti::sim
