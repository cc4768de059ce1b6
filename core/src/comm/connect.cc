// Lazy connection establishment: pick the first transport (config order) that accepts the pair, let
// each end set up, swap the connect info through the bootstrap, and connect.
#include "comm/comm.h"

#include "plugin/transport_plugin.h"
#include "util/check.h"

#include <cstring>

namespace tutti {
namespace {

// Bootstrap tags of connection messages: distinct per (channel, connIndex, direction of the message).
int connectTag(int channel, int connIndex, bool fromSender) {
  return 0x100000 + ((connIndex * kMaxChannels + channel) << 1) + (fromSender ? 0 : 1);
}

struct ConnectMsg {
  char transport[32];  // both ends must have chosen the same transport
  unsigned char info[TUTTI_CONNECT_INFO_BYTES];
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

Connection* commFindConnection(ncclComm* comm, int channel, int connIndex, int peer, bool isSend) {
  std::lock_guard<std::mutex> lock(comm->connMutex);
  auto it = comm->connections.find({channel, connIndex, peer, isSend});
  return it == comm->connections.end() ? nullptr : it->second.get();
}

ncclResult_t commConnect(ncclComm* comm, const std::vector<ConnRequest>& wanted) {
  struct Pending {
    ConnRequest req;
    std::unique_ptr<Connection> conn;
  };
  std::vector<Pending> pending;
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
    TUTTI_CHECK(pickTransport(comm, p.req.peer, &conn->transport));
    tuttiConnectRequest_t req{};
    req.channel = p.req.channel;
    req.connIndex = p.req.connIndex;
    req.peer = p.req.peer;
    for (int i = 0; i < TUTTI_NUM_PROTOCOLS; ++i) req.buffSizes[i] = comm->buffSizes[i];
    req.shared = comm->peers[p.req.peer].pidHash != comm->peers[comm->rank].pidHash;
    ConnectMsg msg{};
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
  // Step 2: receive the other end's info and connect.
  for (Pending& p : pending) {
    ConnectMsg msg{};
    TUTTI_CHECK(comm->bootstrap->recv(p.req.peer, connectTag(p.req.channel, p.req.connIndex, !p.req.isSend), &msg,
                                      sizeof msg));
    Connection& c = *p.conn;
    msg.transport[sizeof msg.transport - 1] = '\0';
    if (c.transport->name() != msg.transport)
      TUTTI_FAIL(ncclInvalidUsage, "rank {}: rank {} chose transport {} where this rank chose {} (different "
                 "configs on the two ranks?)", comm->rank, p.req.peer, msg.transport, c.transport->name());
    const auto& api = c.transport->api();
    ncclResult_t res = c.isSend ? api.sendConnect(c.res, msg.info, &c.host.conn) : api.recvConnect(c.res, msg.info, &c.host.conn);
    if (res != ncclSuccess)
      TUTTI_FAIL(res, "rank {}: transport {} could not connect to rank {} (channel {})", comm->rank,
                 c.transport->name(), p.req.peer, p.req.channel);
    TUTTI_INFO(NCCL_INIT, "rank {} channel {} {} {} rank {} via {}", comm->rank, p.req.channel,
               p.req.connIndex == kConnP2p ? "p2p" : "coll", c.isSend ? "->" : "<-", p.req.peer, c.transport->name());
    std::lock_guard<std::mutex> lock(comm->connMutex);
    comm->connections[{p.req.channel, p.req.connIndex, p.req.peer, p.req.isSend}] = std::move(p.conn);
  }
  return ncclSuccess;
}

}  // namespace tutti
