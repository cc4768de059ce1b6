#include "device/host/launch.h"

#include "comm/comm.h"
#include "device/common/pat.h"
#include "device/common/ring.h"
#include "device/common/tree.h"
#include "device/host/det_exchange.h"
#include "device/host/direct_copy.h"
#include "device/host/oneshot.h"
#include "device/host/prims.h"
#include "device/host/reduce_copy.h"
#include "device/host/sym.h"
#include "plugin/transport_plugin.h"
#include "proxy/net_transport.h"
#include "proxy/proxy.h"
#include "util/check.h"

#include <tutti/tuner.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <tuple>
#include <utility>

namespace tutti::host {
namespace {

HostConn* connOf(ncclComm* comm, int channel, int connIndex, int peer, bool isSend) {
  Connection* c = commFindConnection(comm, channel, connIndex, peer, isSend);
  return c ? &c->host : nullptr;
}

}  // namespace

// Any failure poisons the communicator: its other waits end and its peers see the connections close,
// so an error on one rank never leaves another rank waiting forever. The bootstrap stays usable, so the
// survivors can still shrink the communicator.
WorkItem guarded(ncclComm* comm, WorkItem item) {
  return [comm, item = std::move(item)]() -> ncclResult_t {
    logSetThreadRank(comm->rank);
    ncclResult_t res = item();
    if (res != ncclSuccess) {
      ncclResult_t expected = ncclSuccess;
      comm->asyncError.compare_exchange_strong(expected, res);
      commCancelOps(comm);
    }
    return res;
  };
}

namespace {

bool isTree(const CollPlan& p) { return p.algorithm == NCCL_ALGO_TREE; }
bool isPat(const CollPlan& p) { return p.algorithm == NCCL_ALGO_PAT; }
// Symmetric collectives (sym.h) use no connection: no steps, no proxy operations.
bool isSym(const CollPlan& p) { return p.algorithm == kAlgoSymmetric; }
bool isDetx(const CollPlan& p) { return p.algorithm == kAlgoDetExchange; }
bool isDirect(const CollPlan& p) {
  return p.algorithm == kAlgoDirect || p.algorithm == kAlgoOneShot || p.algorithm == kAlgoDoubling;
}
bool isRing(const CollPlan& p) { return !isTree(p) && !isPat(p) && !isSym(p) && !isDetx(p) && !isDirect(p); }

// Channel c's ring connections, read only when a plan of `colls` runs a ring there. A channel that no ring
// plan of the launch uses may be getting its ring connected by a later launch on the calling thread while
// this one runs: its ring is not read at all.
void ringConnsOf(const ncclComm* comm, const std::vector<CollPlan>& colls, int c, HostConn** recv, HostConn** send) {
  *recv = *send = nullptr;
  if (comm->nRanks == 1) return;
  for (const CollPlan& p : colls)
    if (c < static_cast<int>(p.work.size()) && isRing(p)) {
      const ChannelRing& ring = comm->rings[c];
      *recv = ring.recvConn ? &ring.recvConn->host : nullptr;
      *send = ring.sendConn ? &ring.sendConn->host : nullptr;
      return;
    }
}

// The connections of PAT step d on channel c (pat.h, patPeers): where it receives from and sends to.
ncclResult_t patConns(ncclComm* comm, int channel, ncclFunc_t func, int d, HostConn** recv, HostConn** send) {
  int from = 0, to = 0;
  patPeers(func, comm->rank, d, comm->nRanks, &from, &to);
  *recv = connOf(comm, channel, kConnColl, from, false);
  *send = connOf(comm, channel, kConnColl, to, true);
  if (!*recv || !*send)
    TUTTI_FAIL(ncclInternalError, "rank {}: channel {} has no PAT connection of step {} (ranks {} and {})", comm->rank,
               channel, d, from, to);
  return ncclSuccess;
}

// A tree plan's connections on one channel, as the primitives objects of treeAllReduce use them.
struct TreeConns {
  HostConn* childRecv[kTreeMaxArity] = {};
  HostConn* childSend[kTreeMaxArity] = {};
  HostConn* parentRecv = nullptr;
  HostConn* parentSend = nullptr;
  int nChildren = 0;
};

ncclResult_t treeConns(ncclComm* comm, int channel, const TreeLinks& links, TreeConns* out) {
  out->nChildren = links.nDown();
  for (int i = 0; i < out->nChildren; ++i) {
    out->childRecv[i] = connOf(comm, channel, kConnColl, links.down[i], false);
    out->childSend[i] = connOf(comm, channel, kConnColl, links.down[i], true);
    if (!out->childRecv[i] || !out->childSend[i])
      TUTTI_FAIL(ncclInternalError, "rank {}: channel {} has no tree connection to child rank {}", comm->rank,
                 channel, links.down[i]);
  }
  if (links.up >= 0) {
    out->parentRecv = connOf(comm, channel, kConnColl, links.up, false);
    out->parentSend = connOf(comm, channel, kConnColl, links.up, true);
    if (!out->parentRecv || !out->parentSend)
      TUTTI_FAIL(ncclInternalError, "rank {}: channel {} has no tree connection to parent rank {}", comm->rank,
                 channel, links.up);
  }
  return ncclSuccess;
}

TreeWork treeWorkOf(const ncclComm* comm, const CollWork& w, int channel) {
  return TreeWork{w.chOffset, w.chCount, w.chunkCount, comm->trees.channelLinks(channel, comm->rank)};
}

// Steps the channel's collectives will take from each receive connection, so a network proxy can post
// exactly those receives. A connection may serve several plans (ring and tree share them), so counts add up.
// A channel receives from its ring predecessor, its tree parent and children and its PAT sources: a fixed,
// small set (no allocation on the launch path).
struct StepCounts {
  std::pair<HostConn*, uint64_t> entries[2 + kTreeMaxArity + kPatMaxSteps] = {};
  int n = 0;
};
void addSteps(StepCounts* counts, HostConn* conn, uint64_t steps) {
  if (!conn) return;
  for (int i = 0; i < counts->n; ++i)
    if (counts->entries[i].first == conn) {
      counts->entries[i].second += steps;
      return;
    }
  counts->entries[counts->n++] = {conn, steps};
}

// One plan's steps on channel c. A ring plan whose receive end takes user buffers also records, in
// *userSteps (when given), the steps HostPrims::useUserBuffers receives straight into the output.
ncclResult_t countPlanSteps(ncclComm* comm, const CollPlan& p, int c, HostConn* ringRecv, StepCounts* counts,
                            std::vector<HostStepCounter::UserStep>* userSteps = nullptr) {
  {
    if (c >= static_cast<int>(p.work.size()) || isSym(p) || isDetx(p) || isDirect(p)) return ncclSuccess;
    if (isTree(p)) {
      const TreeWork tw = treeWorkOf(comm, p.work[c], c);
      TreeConns tc;
      TUTTI_CHECK(treeConns(comm, c, tw.links, &tc));
      HostStepCounter up(tc.childRecv[0], p.protocol, p.eltSize), down(tc.parentRecv, p.protocol, p.eltSize);
      TUTTI_CHECK(treeAllReduce(up, down, tw));
      for (int i = 0; i < tc.nChildren; ++i) addSteps(counts, tc.childRecv[i], up.recvSteps());
      addSteps(counts, tc.parentRecv, down.recvSteps());
    } else if (isPat(p)) {
      auto dim = [&](int d, auto&& body) -> ncclResult_t {
        HostConn *recv = nullptr, *send = nullptr;
        TUTTI_CHECK(patConns(comm, c, p.task.func, d, &recv, &send));
        HostStepCounter counter(recv, p.protocol, p.eltSize);
        TUTTI_CHECK(body(counter));
        addSteps(counts, recv, counter.recvSteps());
        return ncclSuccess;
      };
      TUTTI_CHECK(runPatCollective(dim, p.work[c], p.task.sendbuff, p.task.recvbuff));
    } else if (ringRecv) {
      HostStepCounter counter(ringRecv, p.protocol, p.eltSize);
      if (userSteps && ringRecv->netEnd)
        counter.recordUserBuffers(ringRecv, p.protocol, p.task.recvbuff, p.eltSize, userSteps);
      TUTTI_CHECK(runRingCollective(counter, p.work[c]));
      addSteps(counts, ringRecv, counter.recvSteps());
    }
  }
  return ncclSuccess;
}

ncclResult_t countChannelSteps(ncclComm* comm, const std::vector<CollPlan>& colls, int c, HostConn* ringRecv,
                               StepCounts* counts) {
  for (const CollPlan& p : colls) TUTTI_CHECK(countPlanSteps(comm, p, c, ringRecv, counts));
  return ncclSuccess;
}

// Hands the network end of `conn` the steps counted from its current step that land in user buffers.
void registerUserSteps(HostConn* conn, const std::vector<HostStepCounter::UserStep>& steps) {
  if (steps.empty() || !conn->netEnd) return;
  std::vector<NetUserStep> abs;
  abs.reserve(steps.size());
  for (const HostStepCounter::UserStep& u : steps) abs.push_back({conn->step + u.step, u.ptr, u.bytes});
  netRecvInto(conn->netEnd, abs.data(), abs.size());
}

}  // namespace

ncclResult_t announceChannelSteps(ncclComm* comm, const std::vector<CollPlan>& colls, int c) {
  if (comm->nRanks == 1) return ncclSuccess;
  HostConn *recv = nullptr, *send = nullptr;
  ringConnsOf(comm, colls, c, &recv, &send);
  StepCounts counts;
  TUTTI_CHECK(countChannelSteps(comm, colls, c, recv, &counts));
  for (int i = 0; i < counts.n; ++i) announceRecvSteps(counts.entries[i].first, counts.entries[i].second);
  return ncclSuccess;
}

int p2pProtocol(const ncclComm* comm, size_t bytes) {
  return comm->p2pLLThreshold >= 0 && bytes <= static_cast<uint64_t>(comm->p2pLLThreshold) ? TUTTI_PROTO_LL
                                                                                           : TUTTI_PROTO_SIMPLE;
}

size_t p2pStepBytes(const ncclComm* comm, const HostConn* conn, int proto, size_t bytes) {
  const size_t slot = HostPrims::slotDataBytes(conn->conn, proto);
  const size_t small = comm->buffSizes[TUTTI_PROTO_SIMPLE] / TUTTI_STEPS;
  if (proto != TUTTI_PROTO_SIMPLE) return slot;
  const size_t cap = comm->p2pStepMaxBytes;
  if (cap >= 64 && cap < slot && bytes > cap * TUTTI_STEPS && bytes >= comm->p2pStepMinMessage)
    return cap;  // within a node: the FIFOs stay in cache
  if (slot <= small) return slot;
  if (bytes <= small * TUTTI_STEPS || bytes > slot * TUTTI_STEPS) return small;
  return divUp(divUp(bytes, size_t{TUTTI_STEPS}), size_t{64}) * 64;  // NCCL_STEPS steps, at most a slot each
}

uint64_t p2pSteps(size_t bytes, size_t stepBytes) { return bytes == 0 ? 1 : divUp(bytes, stepBytes); }

// ---- profiling (only when comm->profiler is set) --------------------------------------------------------

namespace {

// Steps already queued as ProxyOps per network connection end of one channel, during one launch.
struct QueuedSteps {
  std::vector<std::pair<Connection*, uint64_t>> v;
  uint64_t& of(Connection* c) {
    for (auto& [conn, n] : v)
      if (conn == c) return n;
    return v.emplace_back(c, 0).second;
  }
};

// Queues a ProxyOp of `nSteps` under `parent` on the end (channel, connIndex, peer, isSend) if it is a
// network connection: its proxy then reports one ProxyStep per step. Must precede the steps themselves
// (and, for receives, their announcement), so the proxy knows the op before it touches its first step.
void postProxyOp(ncclComm* comm, ProfEvent* parent, int channel, int connIndex, int peer, bool isSend,
                 uint64_t nSteps, int proto, QueuedSteps* queued) {
  if (nSteps == 0) return;
  Connection* conn = commFindConnection(comm, channel, connIndex, peer, isSend);
  if (!conn || !conn->transport || !netTransportIs(conn->transport->api())) return;
  uint64_t& before = queued->of(conn);
  const int chunk = static_cast<int>(HostPrims::slotDataBytes(conn->host.conn, proto));
  ProfEvent* op = profProxyOpStart(parent, channel, peer, static_cast<int>(nSteps), chunk, isSend);
  netProfilePost(conn->res, op, conn->host.step + before, nSteps);
  before += nSteps;
}

// ProxyOps of every collective of channel `c`, in the order the channel runs them.
}  // namespace

ncclResult_t profileChannelProxyOps(ncclComm* comm, const std::vector<CollPlan>& colls, int c) {
  if (comm->nRanks == 1 || !comm->profiler->wants(ncclProfileProxyOp | ncclProfileProxyStep)) return ncclSuccess;
  QueuedSteps queued;
  const ChannelRing& ring = comm->rings[c];
  for (const CollPlan& p : colls) {
    if (c >= static_cast<int>(p.work.size()) || !p.task.prof || isSym(p) || isDetx(p) || isDirect(p)) continue;
    ProfEvent* parent = p.task.prof.get();
    if (isTree(p)) {
      const TreeWork tw = treeWorkOf(comm, p.work[c], c);
      TreeConns tc;
      TUTTI_CHECK(treeConns(comm, c, tw.links, &tc));
      // Every connection has the communicator's geometry: any one gives the slot size.
      const HostConn* any = tc.nChildren ? tc.childRecv[0] : tc.parentRecv;
      HostStepCounter up(any, p.protocol, p.eltSize), down(any, p.protocol, p.eltSize);
      TUTTI_CHECK(treeAllReduce(up, down, tw));
      for (int i = 0; i < tc.nChildren; ++i) {
        postProxyOp(comm, parent, c, kConnColl, tw.links.down[i], false, up.recvSteps(), p.protocol, &queued);
        postProxyOp(comm, parent, c, kConnColl, tw.links.down[i], true, down.sendSteps(), p.protocol, &queued);
      }
      if (tw.links.up >= 0) {
        postProxyOp(comm, parent, c, kConnColl, tw.links.up, true, up.sendSteps(), p.protocol, &queued);
        postProxyOp(comm, parent, c, kConnColl, tw.links.up, false, down.recvSteps(), p.protocol, &queued);
      }
      continue;
    }
    if (isPat(p)) {
      auto dim = [&](int d, auto&& body) -> ncclResult_t {
        HostConn *recv = nullptr, *send = nullptr;
        TUTTI_CHECK(patConns(comm, c, p.task.func, d, &recv, &send));
        HostStepCounter counter(recv, p.protocol, p.eltSize);
        TUTTI_CHECK(body(counter));
        postProxyOp(comm, parent, c, kConnColl, recv->peer, false, counter.recvSteps(), p.protocol, &queued);
        postProxyOp(comm, parent, c, kConnColl, send->peer, true, counter.sendSteps(), p.protocol, &queued);
        return ncclSuccess;
      };
      TUTTI_CHECK(runPatCollective(dim, p.work[c], p.task.sendbuff, p.task.recvbuff));
      continue;
    }
    const Connection* geometry = ring.recvConn ? ring.recvConn : ring.sendConn;
    if (!geometry) continue;
    HostStepCounter counter(&geometry->host, p.protocol, p.eltSize);
    TUTTI_CHECK(runRingCollective(counter, p.work[c]));
    postProxyOp(comm, parent, c, kConnColl, ring.prev, false, counter.recvSteps(), p.protocol, &queued);
    postProxyOp(comm, parent, c, kConnColl, ring.next, true, counter.sendSteps(), p.protocol, &queued);
  }
  return ncclSuccess;
}


void profileP2pProxyOp(ncclComm* comm, const Task& t, bool sending) {
  if (!t.prof || !comm->profiler->wants(ncclProfileProxyOp | ncclProfileProxyStep)) return;
  const size_t bytes = t.count * dataTypeSize(t.datatype);
  const int proto = p2pProtocol(comm, bytes);
  Connection* conn = commFindConnection(comm, 0, kConnP2p, t.root, sending);
  if (!conn) return;
  QueuedSteps queued;
  const uint64_t steps = p2pSteps(bytes, p2pStepBytes(comm, &conn->host, proto, bytes));
  postProxyOp(comm, t.prof.get(), 0, kConnP2p, t.root, sending, steps, proto, &queued);
}

namespace {

// Stops a KernelCh event on every path out of a channel's work.
struct KernelChGuard {
  ProfEvent* e = nullptr;
  ~KernelChGuard() {
    if (e) [[unlikely]] profKernelChStop(e);
  }
};

// The steps a launch's point-to-point tasks make on each connection (channel 0), in first-use order, summed over
// the tasks of each; with `simpleOnly`, of the Simple-protocol tasks alone. False when a task has no connection
// (those are left out).
bool p2pStepsPerConn(ncclComm* comm, const std::vector<Task>& tasks, bool sending, bool simpleOnly,
                     std::vector<std::pair<HostConn*, uint64_t>>* steps) {
  bool all = true;
  for (const Task& t : tasks) {
    const size_t bytes = t.count * dataTypeSize(t.datatype);
    HostConn* conn = connOf(comm, 0, kConnP2p, t.root, sending);
    const int proto = p2pProtocol(comm, bytes);
    if (!conn) all = false;
    if (!conn || (simpleOnly && proto != TUTTI_PROTO_SIMPLE)) continue;
    auto it = std::find_if(steps->begin(), steps->end(), [&](const auto& e) { return e.first == conn; });
    if (it == steps->end()) it = steps->insert(steps->end(), {conn, 0});
    it->second += p2pSteps(bytes, p2pStepBytes(comm, conn, proto, bytes));
  }
  return all;
}

// The slots each connection's Simple steps of a launch cycle through (HostPrims::useSlotRing): as many as the launch
// makes on it, where they fit the FIFO (NCCL_STEPS slots), so that a connection's calls of one size write the same
// slots every time, which stay in cache, rather than a new part of its FIFO each call (the whole of it every few
// calls: an AlltoAll on 4 ranks over shm cycles 12 FIFOs of 4 MiB a rank). Both ends count the same steps (the send
// and the receive of a pair are the same size), so both take the same ring; a launch whose steps outnumber the slots
// keeps them all. Only direct connections cycle a ring of their own (HostPrims::ringOf): a network end keeps its
// NCCL_STEPS slots. 2-core AMD EPYC VM, processes over shm, AlltoAll, interleaved runs of 20 calls after 3, us, all 8
// slots -> the launch's steps (Open MPI beside): 4 ranks 1 MiB (one step a peer) 146-177 -> 136-158 (190-234), 4 MiB
// 750-893 -> 554-669 (691-1151); 2 ranks 1 MiB 54-59 -> 45-48 (44-52), 4 MiB 198-217 -> 190-202 (184-195); 8 ranks
// 1 MiB 552-609 -> 347-360, 4 MiB 5376-6149 -> 2001-2453; 16 MiB on 2 and 4 ranks (8 steps a peer: the same ring)
// within the spread. A ring of at least 2 slots (a call of slack) did worse on 8 ranks: 1 MiB 419-465, 4 MiB
// 2161-2630.
std::vector<std::pair<HostConn*, uint32_t>> p2pSlotRings(ncclComm* comm, const std::vector<Task>& tasks,
                                                         bool sending) {
  std::vector<std::pair<HostConn*, uint64_t>> steps;
  p2pStepsPerConn(comm, tasks, sending, /*simpleOnly=*/true, &steps);
  std::vector<std::pair<HostConn*, uint32_t>> rings;
  rings.reserve(steps.size());
  for (const auto& [conn, n] : steps) rings.push_back({conn, static_cast<uint32_t>(std::min<uint64_t>(n, TUTTI_STEPS))});
  return rings;
}

// userBuffers: sends leave from and receives land in the tasks' buffers where the network end allows it
// (HostConn::userBufferMinBytes). Sends from user buffers complete before the call returns, or, with
// `userSent`, are left in flight and listed there for waitUserSends.
ncclResult_t runP2pList(ncclComm* comm, const std::vector<Task>& tasks, bool sending, bool userBuffers,
                        std::vector<HostConn*>* userSent = nullptr) {
  ResolvedRedOp copyOp{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copyOp);  // byte copy
  const ResolvedRedOp* copy = &copyOp;
  const WaitContext wait = commWaitContext(comm);
  const std::vector<std::pair<HostConn*, uint32_t>> rings = p2pSlotRings(comm, tasks, sending);
  for (const Task& t : tasks) {
    const size_t bytes = t.count * dataTypeSize(t.datatype);
    HostConn* conn = connOf(comm, 0, kConnP2p, t.root, sending);
    if (!conn) TUTTI_FAIL(ncclInternalError, "rank {}: no p2p connection to rank {}", comm->rank, t.root);
    OpLabel label{comm->rank, sending ? "Send" : "Recv", comm->p2pOpCount, 0, &comm->failure, commAskFailure, comm};
    const int proto = p2pProtocol(comm, bytes);
    uint32_t ring = TUTTI_STEPS;
    for (const auto& [c, slots] : rings)
      if (c == conn) ring = slots;
    KernelChGuard kernelCh;
    if (t.prof) [[unlikely]] {
      kernelCh.e = profKernelChStart(t.prof.get(), 0);
      profileP2pProxyOp(comm, t, sending);
    }
    // Steps of stepBytes (p2pStepBytes), both ends alike: the primitives cut a call into slots, so a step shorter
    // than the slot is a call of its own.
    const size_t stepBytes = p2pStepBytes(comm, conn, proto, bytes);
    const size_t callBytes = stepBytes < HostPrims::slotDataBytes(conn->conn, proto) ? stepBytes : bytes;
    TUTTI_INFO(NCCL_P2P, "{} {} bytes {} rank {} proto {} steps of {} bytes (opCount {})", sending ? "Send" : "Recv",
               bytes, sending ? "to" : "from", t.root, proto == TUTTI_PROTO_LL ? "LL" : "Simple", stepBytes,
               comm->p2pOpCount);
    auto inSteps = [&](auto&& move) -> ncclResult_t {
      size_t off = 0;
      do {
        const size_t n = std::min(callBytes, bytes - off);
        TUTTI_CHECK(move(off, n));
        off += n;
      } while (off < bytes);
      return ncclSuccess;
    };
    if (sending) {
      HostPrims prims(nullptr, conn, t.sendbuff, nullptr, 1, *copy, wait, label, proto);
      prims.useUserBuffers(false, userBuffers);
      prims.useSlotRing(ring);
      TUTTI_CHECK(inSteps([&](size_t off, size_t n) { return prims.send(off, n); }));
      if (prims.sentFromUser() && userSent) {
        if (std::find(userSent->begin(), userSent->end(), conn) == userSent->end()) userSent->push_back(conn);
      } else {
        TUTTI_CHECK(prims.waitSent());
      }
    } else {
      HostStepCounter steps(conn, proto, 1);
      std::vector<HostStepCounter::UserStep> userSteps;
      if (userBuffers && conn->netEnd) steps.recordUserBuffers(conn, proto, t.recvbuff, 1, &userSteps);
      TUTTI_CHECK(inSteps([&](size_t off, size_t n) { return steps.recv(off, n); }));
      registerUserSteps(conn, userSteps);
      announceRecvSteps(conn, steps.recvSteps());
      HostPrims prims(conn, nullptr, nullptr, t.recvbuff, 1, *copy, wait, label, proto);
      prims.useUserBuffers(userBuffers, false);
      prims.useSlotRing(ring);
      TUTTI_CHECK(inSteps([&](size_t off, size_t n) { return prims.recv(off, n); }));
    }
  }
  return ncclSuccess;
}

// Waits until the sends runP2pList left in flight from user buffers have left (see HostPrims::waitSent).
ncclResult_t waitUserSends(ncclComm* comm, const std::vector<HostConn*>& conns) {
  ResolvedRedOp copyOp{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copyOp);
  const WaitContext wait = commWaitContext(comm);
  for (HostConn* conn : conns) {
    OpLabel label{comm->rank, "Send", comm->p2pOpCount, 0, &comm->failure, commAskFailure, comm};
    HostPrims prims(nullptr, conn, nullptr, nullptr, 1, copyOp, wait, label, TUTTI_PROTO_SIMPLE);
    TUTTI_CHECK(prims.waitSent(true));
  }
  return ncclSuccess;
}

// Whether a launch's point-to-point calls may use user buffers on the network: no send buffer overlaps a
// receive buffer (a receive landing early would overwrite data still to be sent). Large groups are not
// searched.
bool p2pUserBuffersSafe(const std::vector<Task>& sends, const std::vector<Task>& recvs) {
  if (sends.size() * recvs.size() > 4096) return false;
  for (const Task& s : sends) {
    const auto* sb = static_cast<const char*>(s.sendbuff);
    const size_t sn = s.count * dataTypeSize(s.datatype);
    for (const Task& r : recvs) {
      const auto* rb = static_cast<const char*>(r.recvbuff);
      const size_t rn = r.count * dataTypeSize(r.datatype);
      if (sn && rn && sb < rb + rn && rb < sb + sn) return false;
    }
  }
  return true;
}

// Whether every connection's sends of this launch fit its FIFO (at most NCCL_STEPS steps): they then complete
// without the peers receiving anything of this launch. Slots still held by earlier launches free up by
// themselves, since every peer finishes its earlier launches without this one.
bool sendsFitFifos(ncclComm* comm, const std::vector<Task>& sends) {
  std::vector<std::pair<HostConn*, uint64_t>> steps;
  if (!p2pStepsPerConn(comm, sends, /*sending=*/true, /*simpleOnly=*/false, &steps)) return false;
  return std::all_of(steps.begin(), steps.end(), [](const auto& e) { return e.second <= TUTTI_STEPS; });
}

// The collective connections of channel c's tree links (both ways with the parent and each child), through
// want(channel, peer, isSend).
template <typename Want>
void wantTreeLinks(const ncclComm* comm, int c, Want&& want) {
  const TreeLinks& links = comm->trees.channelLinks(c, comm->rank);
  if (links.up >= 0) {
    want(c, links.up, true);
    want(c, links.up, false);
  }
  for (int i = 0; i < links.nDown(); ++i) {
    want(c, links.down[i], true);
    want(c, links.down[i], false);
  }
}

// The same for the peers of a PAT collective on channel c.
template <typename Want>
void wantPatPeers(const ncclComm* comm, ncclFunc_t func, int c, Want&& want) {
  for (int d = 0; d < patSteps(comm->nRanks); ++d) {
    int from = 0, to = 0;
    patPeers(func, comm->rank, d, comm->nRanks, &from, &to);
    want(c, to, true);
    want(c, from, false);
  }
}

// Points channel c's ring at its connections, once they are open.
void setRingConns(ncclComm* comm, int c) {
  ChannelRing& ring = comm->rings[c];
  ring.sendConn = commFindConnection(comm, c, kConnColl, ring.next, true);
  ring.recvConn = commFindConnection(comm, c, kConnColl, ring.prev, false);
}

}  // namespace

ncclResult_t launchConnect(CommLaunch& launch) {
  ncclComm* comm = launch.comm;
  logSetThreadRank(comm->rank);
  std::vector<ConnRequest> wanted;
  std::set<std::tuple<int, int, bool>> seen;  // (channel, peer, isSend) of collective connections
  // Rings this launch connects. Only these are written: a launch still running on the stream may read the
  // ring of any channel it runs a ring plan on, and those rings are connected already.
  std::set<int> ringsToSet;
  auto want = [&](int c, int peer, bool isSend) {
    if (seen.insert({c, peer, isSend}).second) wanted.push_back({c, kConnColl, peer, isSend});
  };
  if (comm->nRanks > 1) {
    for (const CollPlan& p : launch.colls) {
      if (isSym(p)) continue;
      if (isDetx(p)) {  // point-to-point connections with every peer, both ways
        for (int peer = 0; peer < comm->nRanks; ++peer) {
          if (peer == comm->rank) continue;
          wanted.push_back({0, kConnP2p, peer, true});
          wanted.push_back({0, kConnP2p, peer, false});
        }
        continue;
      }
      if (isDirect(p)) {  // channel 0's collective connections with every peer, both ways
        for (int peer = 0; peer < comm->nRanks; ++peer) {
          if (peer == comm->rank) continue;
          want(0, peer, true);
          want(0, peer, false);
        }
        continue;
      }
      for (int c = 0; c < static_cast<int>(p.work.size()); ++c) {
        if (isTree(p)) {
          wantTreeLinks(comm, c, want);
          continue;
        }
        if (isPat(p)) {
          wantPatPeers(comm, p.task.func, c, want);
          continue;
        }
        const ChannelRing& ring = comm->rings[c];
        if (ring.sendConn && ring.recvConn) continue;
        want(c, ring.next, true);
        want(c, ring.prev, false);
        ringsToSet.insert(c);
      }
    }
  }
  for (const Task& t : launch.p2p)
    if (t.root != comm->rank) wanted.push_back({0, kConnP2p, t.root, t.func == ncclFuncSend});
  if (!wanted.empty()) TUTTI_CHECK(commConnect(comm, wanted));
  if (!comm->directConnsReady && std::any_of(launch.colls.begin(), launch.colls.end(), isDirect)) {
    commPublishDirectConns(comm);
    comm->directConnsReady = true;
  }
  for (int c : ringsToSet) setRingConns(comm, c);
  return ncclSuccess;
}

ncclResult_t connectAll(ncclComm* comm) {
  const int n = comm->nRanks, me = comm->rank;
  if (n == 1) return ncclSuccess;
  std::vector<ConnRequest> wanted;
  std::set<std::tuple<int, int, bool>> seen;  // (channel, peer, isSend) of collective connections
  auto want = [&](int c, int peer, bool isSend) {
    if (peer != me && seen.insert({c, peer, isSend}).second) wanted.push_back({c, kConnColl, peer, isSend});
  };
  const int channels = static_cast<int>(comm->rings.size());
  for (int c = 0; c < channels; ++c) {
    want(c, comm->rings[c].next, true);
    want(c, comm->rings[c].prev, false);
    wantTreeLinks(comm, c, want);
    for (ncclFunc_t func : {ncclFuncAllGather, ncclFuncReduceScatter}) wantPatPeers(comm, func, c, want);
  }
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    wanted.push_back({0, kConnP2p, peer, true});
    wanted.push_back({0, kConnP2p, peer, false});
  }
  TUTTI_CHECK(commConnect(comm, wanted));
  for (int c = 0; c < channels; ++c) setRingConns(comm, c);
  return ncclSuccess;
}

ncclResult_t orderP2p(ncclComm* comm, const std::vector<Task>& p2p, std::vector<Task>* sends,
                      std::vector<Task>* recvs, std::vector<SelfCopy>* selfCopies) {
  std::vector<Task> selfSends, selfRecvs;
  const int k = comm->nRanks;
  for (int i = 0; i < k; ++i) {
    const int sendPeer = (comm->rank + i) % k, recvPeer = (comm->rank + k - i) % k;
    for (const Task& t : p2p) {
      if (t.func == ncclFuncSend && t.root == sendPeer) (i == 0 ? selfSends : *sends).push_back(t);
      if (t.func == ncclFuncRecv && t.root == recvPeer) (i == 0 ? selfRecvs : *recvs).push_back(t);
    }
  }
  if (selfSends.size() != selfRecvs.size())
    TUTTI_FAIL(ncclInvalidUsage, "rank {}: {} send(s) to itself but {} receive(s) from itself in one group",
               comm->rank, selfSends.size(), selfRecvs.size());
  for (size_t i = 0; i < selfSends.size(); ++i) {
    const size_t sb = selfSends[i].count * dataTypeSize(selfSends[i].datatype);
    const size_t rb = selfRecvs[i].count * dataTypeSize(selfRecvs[i].datatype);
    if (sb != rb)
      TUTTI_FAIL(ncclInvalidUsage, "rank {}: send to itself of {} bytes matched with a receive of {} bytes",
                 comm->rank, sb, rb);
    if (sb == 0 || selfSends[i].sendbuff == selfRecvs[i].recvbuff) continue;
    if (selfCopies) selfCopies->push_back({selfRecvs[i].recvbuff, selfSends[i].sendbuff, sb});
    else std::memmove(selfRecvs[i].recvbuff, selfSends[i].sendbuff, sb);
  }
  return ncclSuccess;
}

ncclResult_t launchItems(CommLaunch& launch, std::vector<WorkItem>* items, std::vector<SelfCopy>* selfCopies) {
  ncclComm* comm = launch.comm;
  // Collectives: one item per channel, running that channel's share of every collective in order.
  int channels = 0;
  for (const CollPlan& p : launch.colls) channels = std::max(channels, static_cast<int>(p.work.size()));
  auto colls = std::make_shared<std::vector<CollPlan>>(std::move(launch.colls));
  for (int c = 0; c < channels; ++c) {
    items->push_back(guarded(comm, [comm, colls, c]() -> ncclResult_t {
      const WaitContext wait = commWaitContext(comm);
      HostConn *recv = nullptr, *send = nullptr;
      ringConnsOf(comm, *colls, c, &recv, &send);
      if (comm->nRanks > 1 && comm->profiler) [[unlikely]] TUTTI_CHECK(profileChannelProxyOps(comm, *colls, c));
      std::vector<HostStepCounter::UserStep> userSteps;
      for (const CollPlan& p : *colls) {
        if (c >= static_cast<int>(p.work.size())) continue;
        if (comm->nRanks > 1) {
          // Tell the receive sides (network proxies) how many steps this plan will take from them, and where
          // the steps that go straight into the output land. Plan by plan, just before it runs: a step received
          // into a user buffer must not land there before the earlier plans are done with that memory.
          StepCounts counts;
          userSteps.clear();
          TUTTI_CHECK(countPlanSteps(comm, p, c, recv, &counts, &userSteps));
          if (recv) registerUserSteps(recv, userSteps);
          for (int i = 0; i < counts.n; ++i) announceRecvSteps(counts.entries[i].first, counts.entries[i].second);
        }
        KernelChGuard kernelCh;
        if (p.task.prof) [[unlikely]] kernelCh.e = profKernelChStart(p.task.prof.get(), c);
        OpLabel label{comm->rank, funcName(p.task.func), p.opCount, c, &comm->failure, commAskFailure, comm};
        label.whoArrived = callCheckWhoArrived;
        if (isSym(p)) {
          TUTTI_CHECK(runSymmetric(comm, p, c, wait, label));
          continue;
        }
        if (isDetx(p)) {
          TUTTI_CHECK(runDetExchange(comm, *p.detx, c, wait, label));
          continue;
        }
        if (isDirect(p)) {
          TUTTI_CHECK(p.oneShot ? runOneShot(comm, *p.oneShot, wait, label) : runDirectCopy(comm, *p.direct, wait, label));
          continue;
        }
        if (isTree(p)) {
          const TreeWork tw = treeWorkOf(comm, p.work[c], c);
          TreeConns tc;
          TUTTI_CHECK(treeConns(comm, c, tw.links, &tc));
          const int hasParent = tc.parentSend ? 1 : 0;
          HostPrims up(tc.childRecv, tc.nChildren, &tc.parentSend, hasParent, p.task.sendbuff, p.task.recvbuff,
                       p.eltSize, p.op, wait, label, p.protocol);
          HostPrims down(&tc.parentRecv, hasParent, tc.childSend, tc.nChildren, p.task.sendbuff, p.task.recvbuff,
                         p.eltSize, p.op, wait, label, p.protocol);
          TUTTI_CHECK(treeAllReduce(up, down, tw));
          continue;
        }
        if (isPat(p)) {
          auto dim = [&](int d, auto&& body) -> ncclResult_t {
            HostConn *patRecv = nullptr, *patSend = nullptr;
            if (comm->nRanks > 1) TUTTI_CHECK(patConns(comm, c, p.task.func, d, &patRecv, &patSend));
            HostPrims prims(patRecv, patSend, p.task.sendbuff, p.task.recvbuff, p.eltSize, p.op, wait, label,
                            p.protocol);
            return body(prims);
          };
          TUTTI_CHECK(runPatCollective(dim, p.work[c], p.task.sendbuff, p.task.recvbuff));
          continue;
        }
        HostPrims prims(recv, send, p.task.sendbuff, p.task.recvbuff, p.eltSize, p.op, wait, label, p.protocol);
        // A ring writes each block of its output once, and reads a block of its input only before the data
        // that depends on it can come back: user buffers are safe to receive into and send from.
        prims.useUserBuffers(true, true);
        TUTTI_CHECK(runRingCollective(prims, p.work[c]));
        TUTTI_CHECK(prims.waitSent());
      }
      return ncclSuccess;
    }));
  }

  // Point-to-point: self pairs now (or by the caller); the rest in round order (send to rank+i, receive from rank-i).
  std::vector<Task> sends, recvs;
  TUTTI_CHECK(orderP2p(comm, launch.p2p, &sends, &recvs, selfCopies));
  const bool user = p2pUserBuffersSafe(sends, recvs);
  if (!sends.empty() && !recvs.empty() && sendsFitFifos(comm, sends)) {
    // No send waits for a receive of this launch (each fits its connection's free slots), so one thread sends
    // everything, then receives: no hand-off to a second thread (an AlltoAll, a halo exchange, small pairs).
    // Sends from user buffers are waited for last: a peer drains them only once it reaches its receives.
    items->push_back(guarded(comm, [comm, user, sends = std::move(sends), recvs = std::move(recvs)]() -> ncclResult_t {
      std::vector<HostConn*> userSent;
      ProxyDriveScope scope;  // network sends keep moving, from this thread, while it waits for the receives
      TUTTI_CHECK(runP2pList(comm, sends, true, user, &userSent));
      TUTTI_CHECK(runP2pList(comm, recvs, false, user));
      return waitUserSends(comm, userSent);
    }));
    ++comm->p2pOpCount;
    return ncclSuccess;
  }
  if (!sends.empty())
    items->push_back(
        guarded(comm, [comm, user, sends = std::move(sends)] { return runP2pList(comm, sends, true, user); }));
  if (!recvs.empty())
    items->push_back(
        guarded(comm, [comm, user, recvs = std::move(recvs)] { return runP2pList(comm, recvs, false, user); }));
  if (!launch.p2p.empty()) ++comm->p2pOpCount;
  return ncclSuccess;
}

}  // namespace tutti::host
