// Lazy connection establishment: pick the first transport (config order) that accepts the pair, let
// each end set up, swap the connect info through the bootstrap, and connect.
#include "comm/comm.h"

#include "device/enqueue.h"
#include "plugin/params.h"
#include "plugin/transport_plugin.h"
#include "proxy/net_transport.h"
#include "util/check.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace tutti {
namespace {

// Bootstrap tags of connection messages: distinct per (channel, connIndex, direction of the message).
int connectTag(int channel, int connIndex, bool fromSender) {
  return 0x100000 + ((connIndex * kMaxChannels + channel) << 1) + (fromSender ? 0 : 1);
}

struct ConnectMsg {
  char transport[32];  // both ends must have chosen the same transport
  unsigned char info[TUTTI_CONNECT_INFO_BYTES];
  uint64_t llLaneRegion;  // the writing end's ncclComm::llLaneRegion: both ends take the tighter bound
};

ncclResult_t pickTransport(ncclComm* comm, int peer, TransportPlugin** out) {
  const std::vector<TransportPlugin*>* list = nullptr;
  TUTTI_CHECK(transportPlugins(&list));
  for (TransportPlugin* t : *list) {
    int ok = 0;
    if (t->api().canConnect(t->ctx(), &comm->peers[comm->rank], &comm->peers[peer], &ok) == ncclSuccess && ok) {
      *out = t;
      return ncclSuccess;
    }
  }
  std::string names;
  for (TransportPlugin* t : *list) names += (names.empty() ? "" : ", ") + t->name();
  TUTTI_FAIL(ncclSystemError, "rank {}: no transport can connect to rank {} (transports loaded: {})", comm->rank,
             peer, names.empty() ? "none" : names);
}

}  // namespace

ncclResult_t commLL128Vote(ncclComm* comm, bool* out) {
  std::vector<int> votes(comm->nRanks, 1);
  for (int p = 0; p < comm->nRanks && votes[comm->rank]; ++p) {
    if (p == comm->rank) continue;
    TransportPlugin* t = nullptr;
    TUTTI_CHECK(pickTransport(comm, p, &t));
    if (!(t->api().caps & TUTTI_TRANSPORT_CAP_LL128)) {
      TUTTI_INFO(NCCL_INIT, "rank {}: transport {} to rank {} does not guarantee LL128 ordering: LL128 disabled",
                 comm->rank, t->name(), p);
      votes[comm->rank] = 0;
    }
  }
  if (comm->nRanks > 1) TUTTI_CHECK(comm->bootstrap->allGather(votes.data(), sizeof(int)));
  *out = std::all_of(votes.begin(), votes.end(), [](int v) { return v != 0; });
  return ncclSuccess;
}

ncclResult_t commPeerOverNetwork(ncclComm* comm, int peer, bool* out) {
  TransportPlugin* t = nullptr;
  TUTTI_CHECK(pickTransport(comm, peer, &t));
  *out = netTransportIs(t->api());
  return ncclSuccess;
}

Connection* commFindConnection(ncclComm* comm, int channel, int connIndex, int peer, bool isSend) {
  std::lock_guard<std::mutex> lock(comm->connMutex);
  auto it = comm->connections.find({channel, connIndex, peer, isSend});
  return it == comm->connections.end() ? nullptr : it->second.get();
}

void commPublishDirectConns(ncclComm* comm) {
  if (comm->directConns.load(std::memory_order_acquire)) return;
  const int n = comm->nRanks;
  auto table = std::make_unique<Connection*[]>(2 * static_cast<size_t>(n));
  for (int p = 0; p < n; ++p)
    for (bool isSend : {false, true})
      table[2 * p + isSend] = p == comm->rank ? nullptr : commFindConnection(comm, 0, kConnColl, p, isSend);
  comm->directConnTable = std::move(table);
  comm->directConns.store(comm->directConnTable.get(), std::memory_order_release);
}

ncclResult_t commConnect(ncclComm* comm, const std::vector<ConnRequest>& wanted) {
  struct Pending {
    ConnRequest req;
    std::unique_ptr<Connection> conn;
  };
  std::vector<Pending> pending;
  // Ends set up but not handed to the communicator (a failure part-way) are released on the way out.
  struct Cleanup {
    std::vector<Pending>& list;
    ~Cleanup() {
      for (Pending& p : list) {
        if (!p.conn) continue;
        if (comm->backend != Backend::Host) device::unregisterConnection(comm, p.conn.get());
        if (p.conn->res) p.conn->transport->api().free(p.conn->res);
      }
    }
    ncclComm* comm;
  } cleanup{pending, comm};
  for (const ConnRequest& r : wanted) {
    if (commFindConnection(comm, r.channel, r.connIndex, r.peer, r.isSend)) continue;
    bool dup = false;
    for (const Pending& p : pending)
      dup |= p.req.channel == r.channel && p.req.connIndex == r.connIndex && p.req.peer == r.peer &&
             p.req.isSend == r.isSend;
    if (!dup) pending.push_back({r, nullptr});
  }
  // Step 1: set up every end and send its info (sends do not wait for the peer).
  for (Pending& p : pending) {
    auto conn = std::make_unique<Connection>();
    conn->isSend = p.req.isSend;
    conn->host.peer = p.req.peer;
    const tuttiPeerInfo_t& me = comm->peers[comm->rank];
    const tuttiPeerInfo_t& them = comm->peers[p.req.peer];
    TUTTI_CHECK(pickTransport(comm, p.req.peer, &conn->transport));
    // A peer process on this host whose death its connection cannot show (shm, p2p) is watched through its
    // bootstrap lifeline: not its pid, which a zombie keeps and another pid namespace reuses. A network
    // connection shows a death by closing, after everything the peer sent before it exited has arrived: a
    // liveness check there would fail a receive whose data is still in flight (a Gather root still receiving
    // the last send of a rank that has finished and left).
    if (them.hostHash == me.hostHash && them.pidHash != me.pidHash && !netTransportIs(conn->transport->api()))
      conn->host.peerGone = comm->bootstrap->peerGoneFlag(p.req.peer);
    tuttiConnectRequest_t req{};
    req.channel = p.req.channel;
    req.connIndex = p.req.connIndex;
    req.peer = p.req.peer;
    for (int i = 0; i < TUTTI_NUM_PROTOCOLS; ++i) req.buffSizes[i] = comm->buffSizes[i];
    if (p.req.connIndex == kConnP2p && comm->p2pNetBuffSize && netTransportIs(conn->transport->api()))
      req.buffSizes[TUTTI_PROTO_SIMPLE] = comm->p2pNetBuffSize;
    req.shared = comm->peers[p.req.peer].pidHash != comm->peers[comm->rank].pidHash;
    // Device memory goes to another process as a descriptor borrowed by pid, which names that process only in
    // its own pid namespace: across namespaces the transport keeps its FIFOs in (registered) host memory.
    req.devMem = them.hostHash != me.hostHash || them.pidNs == me.pidNs ? device::deviceMemOf(comm) : nullptr;
    ConnectMsg msg{};
    msg.llLaneRegion = comm->llLaneRegion;
    std::snprintf(msg.transport, sizeof msg.transport, "%s", conn->transport->name().c_str());
    const auto& api = conn->transport->api();
    const tuttiPeerInfo_t* self = &comm->peers[comm->rank];
    const tuttiPeerInfo_t* peer = &comm->peers[p.req.peer];
    ncclResult_t res = p.req.isSend ? api.sendSetup(conn->transport->ctx(), &req, self, peer, msg.info, &conn->res)
                                    : api.recvSetup(conn->transport->ctx(), &req, self, peer, msg.info, &conn->res);
    if (res != ncclSuccess)
      TUTTI_FAIL(res, "rank {}: transport {} could not set up the {} end towards rank {} (channel {})", comm->rank,
                 conn->transport->name(), p.req.isSend ? "send" : "receive", p.req.peer, p.req.channel);
    p.conn = std::move(conn);
    TUTTI_CHECK(comm->bootstrap->send(p.req.peer, connectTag(p.req.channel, p.req.connIndex, p.req.isSend), &msg,
                                      sizeof msg));
  }
  // Step 2: receive the other end's info, then connect every end. A transport may answer ncclInProgress
  // (a network connect waiting for the peer's accept): all ends are polled together, so two ranks that
  // each connect one way and accept the other never wait on each other.
  std::vector<ConnectMsg> infos(pending.size());
  for (size_t i = 0; i < pending.size(); ++i) {
    Pending& p = pending[i];
    ConnectMsg& msg = infos[i];
    TUTTI_CHECK(comm->bootstrap->recv(p.req.peer, connectTag(p.req.channel, p.req.connIndex, !p.req.isSend), &msg,
                                      sizeof msg));
    msg.transport[sizeof msg.transport - 1] = '\0';
    if (p.conn->transport->name() != msg.transport)
      TUTTI_FAIL(ncclInvalidUsage, "rank {}: rank {} chose transport {} where this rank chose {} (different "
                 "configs on the two ranks?)", comm->rank, p.req.peer, msg.transport, p.conn->transport->name());
    // Both ends must place a step in the same lane: each takes the tighter of the two bounds (0: none).
    const uint64_t mine = comm->llLaneRegion;
    p.conn->host.laneRegion = mine && msg.llLaneRegion ? std::min<uint64_t>(mine, msg.llLaneRegion) : 0;
  }
  const auto start = std::chrono::steady_clock::now();
  const int64_t limitSec = std::max<int64_t>(comm->timeoutNs / 1000000000, 120);
  size_t left = pending.size();
  std::vector<bool> connected(pending.size(), false);
  while (left > 0) {
    bool progressed = false;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (connected[i]) continue;
      Pending& p = pending[i];
      Connection& c = *p.conn;
      const auto& api = c.transport->api();
      ncclResult_t res = c.isSend ? api.sendConnect(c.res, infos[i].info, &c.host.conn)
                                  : api.recvConnect(c.res, infos[i].info, &c.host.conn);
      if (res == ncclInProgress) continue;
      if (res != ncclSuccess)
        TUTTI_FAIL(res, "rank {}: transport {} could not connect to rank {} (channel {})", comm->rank,
                   c.transport->name(), p.req.peer, p.req.channel);
      // Device backends: the kernels reach the connection's host memory (FIFOs, staging, control block).
      if (comm->backend != Backend::Host) TUTTI_CHECK(device::registerConnection(comm, &c));
      // A host rank sends and receives on its own network ends (no proxy wake-up on the critical path), except
      // the one-sided service's, which its service thread polls without driving.
      if (comm->backend == Backend::Host && p.req.connIndex != kConnRma && netTransportIs(api)) {
        c.host.proxyTask = netProxyTaskOf(c.res);
        const int64_t zeroCopy = paramInt("TUTTI_NET_ZERO_COPY_MIN_BYTES");
        const size_t minBytes = zeroCopy > 0                                 ? static_cast<size_t>(zeroCopy)
                                : zeroCopy < 0 && netTakesUserBuffers(c.res) ? netZeroCopyAutoMinBytes(c.res)
                                                                             : 0;
        if (minBytes > 0 && netTakesUserBuffers(c.res)) {
          c.host.netEnd = c.res;
          c.host.userBufferMinBytes = minBytes;
          c.host.sendFromUser = netSendFrom;
        }
      }
      connected[i] = true;
      progressed = true;
      --left;
      TUTTI_INFO(NCCL_INIT, "rank {} channel {} {} {} rank {} via {}", comm->rank, p.req.channel,
                 p.req.connIndex == kConnP2p ? "p2p" : "coll", c.isSend ? "->" : "<-", p.req.peer,
                 c.transport->name());
      std::lock_guard<std::mutex> lock(comm->connMutex);
      comm->connections[{p.req.channel, p.req.connIndex, p.req.peer, p.req.isSend}] = std::move(p.conn);
    }
    if (left > 0 && !progressed) {
      if (comm->abortFlag.load()) TUTTI_FAIL(ncclInvalidUsage, "rank {}: aborted while connecting", comm->rank);
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(limitSec)) {
        std::string peers;
        for (size_t i = 0; i < pending.size(); ++i)
          if (!connected[i]) peers += (peers.empty() ? "" : ",") + std::to_string(pending[i].req.peer);
        TUTTI_FAIL(ncclTimeout, "rank {}: connections to rank(s) {} not established within {} s", comm->rank, peers,
                   limitSec);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  return ncclSuccess;
}

}  // namespace tutti
