#include "device/host/launch.h"

#include "comm/comm.h"
#include "device/common/ring.h"
#include "device/host/prims.h"
#include "device/host/reduce_copy.h"
#include "util/check.h"

#include <cstring>
#include <memory>

namespace tutti::host {
namespace {

HostConn* connOf(ncclComm* comm, int channel, int connIndex, int peer, bool isSend) {
  Connection* c = commFindConnection(comm, channel, connIndex, peer, isSend);
  return c ? &c->host : nullptr;
}

// Any failure poisons the communicator: its other waits end and its peers see the connections close,
// so an error on one rank never leaves another rank waiting forever.
WorkItem guarded(ncclComm* comm, WorkItem item) {
  return [comm, item = std::move(item)]() -> ncclResult_t {
    logSetThreadRank(comm->rank);
    ncclResult_t res = item();
    if (res != ncclSuccess) {
      ncclResult_t expected = ncclSuccess;
      comm->asyncError.compare_exchange_strong(expected, res);
      commSignalAbort(comm);
    }
    return res;
  };
}

ncclResult_t runP2pList(ncclComm* comm, const std::vector<Task>& tasks, bool sending) {
  ResolvedRedOp copyOp{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copyOp);  // byte copy
  const ResolvedRedOp* copy = &copyOp;
  const WaitContext wait = commWaitContext(comm);
  for (const Task& t : tasks) {
    const size_t bytes = t.count * dataTypeSize(t.datatype);
    HostConn* conn = connOf(comm, 0, kConnP2p, t.root, sending);
    if (!conn) TUTTI_FAIL(ncclInternalError, "rank {}: no p2p connection to rank {}", comm->rank, t.root);
    OpLabel label{comm->rank, sending ? "Send" : "Recv", comm->p2pOpCount, 0, &comm->failure, commAskFailure, comm};
    if (sending) {
      HostPrims prims(nullptr, conn, t.sendbuff, nullptr, 1, *copy, wait, label);
      TUTTI_CHECK(prims.send(0, bytes));
    } else {
      const size_t slotBytes = conn->conn.buffSizes[TUTTI_PROTO_SIMPLE] / TUTTI_STEPS;
      announceRecvSteps(conn, bytes == 0 ? 1 : (bytes + slotBytes - 1) / slotBytes);
      HostPrims prims(conn, nullptr, nullptr, t.recvbuff, 1, *copy, wait, label);
      TUTTI_CHECK(prims.recv(0, bytes));
    }
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t launchConnect(CommLaunch& launch) {
  ncclComm* comm = launch.comm;
  logSetThreadRank(comm->rank);
  std::vector<ConnRequest> wanted;
  if (comm->nRanks > 1) {
    int channels = 0;
    for (const CollPlan& p : launch.colls) channels = std::max(channels, static_cast<int>(p.work.size()));
    for (int c = 0; c < channels; ++c) {
      ChannelRing& ring = comm->rings[c];
      if (ring.sendConn && ring.recvConn) continue;
      wanted.push_back({c, kConnColl, ring.next, true});
      wanted.push_back({c, kConnColl, ring.prev, false});
    }
  }
  for (const Task& t : launch.p2p)
    if (t.root != comm->rank) wanted.push_back({0, kConnP2p, t.root, t.func == ncclFuncSend});
  if (wanted.empty()) return ncclSuccess;
  TUTTI_CHECK(commConnect(comm, wanted));
  for (ChannelRing& ring : comm->rings) {
    if (comm->nRanks == 1 || (ring.sendConn && ring.recvConn)) continue;
    const int c = static_cast<int>(&ring - comm->rings.data());
    ring.sendConn = commFindConnection(comm, c, kConnColl, ring.next, true);
    ring.recvConn = commFindConnection(comm, c, kConnColl, ring.prev, false);
  }
  return ncclSuccess;
}

ncclResult_t launchItems(CommLaunch& launch, std::vector<WorkItem>* items) {
  ncclComm* comm = launch.comm;
  // Collectives: one item per channel, running that channel's share of every collective in order.
  int channels = 0;
  for (const CollPlan& p : launch.colls) channels = std::max(channels, static_cast<int>(p.work.size()));
  auto colls = std::make_shared<std::vector<CollPlan>>(std::move(launch.colls));
  for (int c = 0; c < channels; ++c) {
    items->push_back(guarded(comm, [comm, colls, c]() -> ncclResult_t {
      const WaitContext wait = commWaitContext(comm);
      const ChannelRing& ring = comm->rings[c];
      HostConn* recv = comm->nRanks > 1 && ring.recvConn ? &ring.recvConn->host : nullptr;
      HostConn* send = comm->nRanks > 1 && ring.sendConn ? &ring.sendConn->host : nullptr;
      if (recv) {
        // Tell the receive side (a network proxy) how many steps this launch will take from it.
        uint64_t steps = 0;
        for (const CollPlan& p : *colls) {
          if (c >= static_cast<int>(p.work.size())) continue;
          HostStepCounter counter(recv, p.protocol, p.eltSize);
          runRingCollective(counter, p.work[c]);
          steps += counter.recvSteps();
        }
        announceRecvSteps(recv, steps);
      }
      for (const CollPlan& p : *colls) {
        if (c >= static_cast<int>(p.work.size())) continue;
        OpLabel label{comm->rank, funcName(p.task.func), p.opCount, c, &comm->failure, commAskFailure, comm};
        HostPrims prims(recv, send, p.task.sendbuff, p.task.recvbuff, p.eltSize, p.op, wait, label, p.protocol);
        TUTTI_CHECK(runRingCollective(prims, p.work[c]));
      }
      return ncclSuccess;
    }));
  }

  // Point-to-point: self pairs now; the rest in round order (send to rank+i, receive from rank-i).
  std::vector<Task> selfSends, selfRecvs;
  std::vector<Task> sends, recvs;
  const int k = comm->nRanks;
  for (int i = 0; i < k; ++i) {
    const int sendPeer = (comm->rank + i) % k, recvPeer = (comm->rank + k - i) % k;
    for (const Task& t : launch.p2p) {
      if (t.func == ncclFuncSend && t.root == sendPeer) (i == 0 ? selfSends : sends).push_back(t);
      if (t.func == ncclFuncRecv && t.root == recvPeer) (i == 0 ? selfRecvs : recvs).push_back(t);
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
    if (sb && selfSends[i].sendbuff != selfRecvs[i].recvbuff)
      std::memmove(selfRecvs[i].recvbuff, selfSends[i].sendbuff, sb);
  }
  if (!sends.empty())
    items->push_back(guarded(comm, [comm, sends = std::move(sends)] { return runP2pList(comm, sends, true); }));
  if (!recvs.empty())
    items->push_back(guarded(comm, [comm, recvs = std::move(recvs)] { return runP2pList(comm, recvs, false); }));
  if (!launch.p2p.empty()) ++comm->p2pOpCount;
  return ncclSuccess;
}

}  // namespace tutti::host
