// Connection setup of net-ib: queue pairs and FIFO registrations of a comm, the RTR/RTS transitions, and
// listen / connect / accept as non-blocking state machines over a TCP side channel that carries the two
// Endpoint records and a final "ready" byte (the acceptor returns its comm only once the connector's QPs
// are in RTS, so the first CTS write never meets an unready QP).
#include "netib.h"
#include "options.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

namespace tutti::netib {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t randomU64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof v))
    v = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) * 0x9e3779b97f4a7c15ull;
  return v == 0 ? 1 : v;
}

void closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

socklen_t addrLen(const SockAddr& a) {
  return a.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

std::string addrToString(const SockAddr& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (a.sa.sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &a.sin.sin_addr, host, sizeof host);
    port = ntohs(a.sin.sin_port);
  } else if (a.sa.sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &a.sin6.sin6_addr, host, sizeof host);
    port = ntohs(a.sin6.sin6_port);
  }
  return std::string(host) + "<" + std::to_string(port) + ">";
}

Clock::time_point deadlineFromNow() { return Clock::now() + std::chrono::milliseconds(options().timeoutMs); }

enum class Io { Done, Again, Error };

// Moves bytes [*offset, size) of buf on a non-blocking socket; advances *offset.
Io progressIo(int fd, bool send, void* buf, size_t size, size_t* offset) {
  char* p = static_cast<char*>(buf);
  while (*offset < size) {
    ssize_t n = send ? ::send(fd, p + *offset, size - *offset, MSG_NOSIGNAL | MSG_DONTWAIT)
                     : ::recv(fd, p + *offset, size - *offset, MSG_DONTWAIT);
    if (n > 0) {
      *offset += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Io::Again;
    return Io::Error;
  }
  return Io::Done;
}

// ---- one handshake in progress (either side).
enum class Step { TcpConnecting, SendLocal, RecvRemote, SendReady, RecvReady, Done };

struct Handshake {
  int fd = -1;
  Step step = Step::TcpConnecting;
  Endpoint local{};
  Endpoint remote{};
  uint8_t ready = 1;
  size_t offset = 0;
  uint64_t magic = 0;
  uint32_t psn = 0;
  CommBase* comm = nullptr;  // owned until handed out
  Clock::time_point deadline;
  ~Handshake() {
    closeFd(fd);
    if (comm) destroyComm(comm);
  }
};

struct ListenComm {
  uint32_t magic = kListenMagic;
  int fd = -1;
  int dev = 0;
  uint64_t secret = 0;
  std::vector<std::unique_ptr<Handshake>> pending;
};

constexpr size_t kMaxPendingAccepts = 1024;

std::mutex gConnectMu;
std::map<uint64_t, std::unique_ptr<Handshake>> gConnects;  // by Handle::connectId

ibv_qp* createQp(CommBase* c, bool isSend) {
  ibv_qp_init_attr a;
  std::memset(&a, 0, sizeof a);
  a.send_cq = c->cq;
  a.recv_cq = c->cq;
  a.qp_type = IBV_QPT_RC;
  int cap = c->dev->maxQpWr > 0 ? c->dev->maxQpWr : 1024;
  // Sender: per slot up to kMaxRecvs data writes + a size record + the immediate. Receiver: one CTS write
  // per slot on QP 0 and one receive per slot on every QP.
  int sendWr = isSend ? kFifoDepth * (kMaxRecvs + 2) : kFifoDepth + 1;
  int recvWr = isSend ? 1 : kFifoDepth;
  a.cap.max_send_wr = static_cast<uint32_t>(std::min(sendWr, cap));
  a.cap.max_recv_wr = static_cast<uint32_t>(std::min(recvWr, cap));
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  ibv_qp* qp = verbs().createQp(c->pd, &a);
  if (qp == nullptr) {
    IB_WARN("NET/IB : %s:%d: ibv_create_qp failed: %s", c->dev->name.c_str(), c->dev->port, std::strerror(errno));
    return nullptr;
  }
  ibv_qp_attr q;
  std::memset(&q, 0, sizeof q);
  q.qp_state = IBV_QPS_INIT;
  q.pkey_index = 0;
  q.port_num = c->dev->port;
  q.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (verbs().modifyQp(qp, &q, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    IB_WARN("NET/IB : %s:%d: QP to INIT failed: %s", c->dev->name.c_str(), c->dev->port, std::strerror(errno));
    verbs().destroyQp(qp);
    return nullptr;
  }
  return qp;
}

ibv_mr* regLocal(CommBase* c, void* p, size_t n) {
  ibv_mr* mr = verbs().regMr(c->pd, p, n, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (mr == nullptr) IB_WARN("NET/IB : %s: ibv_reg_mr of a FIFO failed: %s", c->dev->name.c_str(), std::strerror(errno));
  return mr;
}

}  // namespace

// ---- comm resources.

ncclResult_t failComm(CommBase* c, ncclResult_t code) {
  if (c->error == ncclSuccess) c->error = code;
  return c->error;
}

ncclResult_t setupComm(CommBase* c, int devIndex, int nQps, bool isSend) {
  c->devIndex = devIndex;
  c->dev = device(devIndex);
  c->nQps = nQps;
  c->adaptiveRouting = c->dev->adaptiveRouting;
  if (ncclResult_t r = getPd(c->dev, &c->pd); r != ncclSuccess) {
    c->dev = nullptr;  // nothing to release
    return r;
  }
  int cqe = kFifoDepth * (nQps + 1) * 2;
  if (c->dev->maxCqe > 0) cqe = std::min(cqe, c->dev->maxCqe);
  c->cq = verbs().createCq(c->dev->context, cqe, nullptr, nullptr, 0);
  if (c->cq == nullptr) {
    IB_WARN("NET/IB : %s: ibv_create_cq(%d) failed: %s", c->dev->name.c_str(), cqe, std::strerror(errno));
    return ncclSystemError;
  }
  for (int i = 0; i < nQps; i++)
    if ((c->qps[i] = createQp(c, isSend)) == nullptr) return ncclSystemError;
  if (isSend) {
    auto* s = static_cast<SendComm*>(c);
    std::memset(s->fifo, 0, sizeof s->fifo);
    if ((s->fifoMr = regLocal(c, s->fifo, sizeof s->fifo)) == nullptr) return ncclSystemError;
    if ((s->sizeStageMr = regLocal(c, s->sizeStage, sizeof s->sizeStage)) == nullptr) return ncclSystemError;
  } else {
    auto* r = static_cast<RecvComm*>(c);
    if ((r->sizeFifoMr = regLocal(c, r->sizeFifo, sizeof r->sizeFifo)) == nullptr) return ncclSystemError;
    if ((r->ctsStageMr = regLocal(c, r->ctsStage, sizeof r->ctsStage)) == nullptr) return ncclSystemError;
  }
  return ncclSuccess;
}

void describeComm(const CommBase* c, uint64_t magic, uint32_t psn, Endpoint* e) {
  std::memset(e, 0, sizeof *e);
  e->marker = kEndpointMarker;
  e->version = kWireVersion;
  e->nQps = static_cast<uint16_t>(c->nQps);
  e->magic = magic;
  for (int i = 0; i < c->nQps; i++) e->qpn[i] = c->qps[i]->qp_num;
  std::memcpy(e->gid, c->dev->gid.raw, 16);
  e->lid = c->dev->lid;
  e->linkLayer = c->dev->linkLayer;
  e->mtu = c->dev->mtu;
  e->psn = psn;
  if (c->magic == kSendMagic) {
    auto* s = static_cast<const SendComm*>(c);
    e->remoteAddr = reinterpret_cast<uint64_t>(&s->fifo[0][0]);
    e->remoteRkey = s->fifoMr->rkey;
  } else {
    auto* r = static_cast<const RecvComm*>(c);
    e->remoteAddr = reinterpret_cast<uint64_t>(&r->sizeFifo[0]);
    e->remoteRkey = r->sizeFifoMr->rkey;
  }
}

ncclResult_t connectQps(CommBase* c, const Endpoint& peer, uint32_t localPsn) {
  const Device& d = *c->dev;
  const Options& o = options();
  if (peer.linkLayer != d.linkLayer) {
    IB_WARN("NET/IB : %s:%d is %s but the peer's port is %s", d.name.c_str(), d.port,
            d.linkLayer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB", peer.linkLayer == 2 ? "RoCE" : "IB");
    return ncclInvalidUsage;
  }
  c->remoteAddr = peer.remoteAddr;
  c->remoteRkey = peer.remoteRkey;
  for (int i = 0; i < c->nQps; i++) {
    ibv_qp_attr q;
    std::memset(&q, 0, sizeof q);
    q.qp_state = IBV_QPS_RTR;
    q.path_mtu = static_cast<ibv_mtu>(std::min(d.mtu, peer.mtu));
    q.dest_qp_num = peer.qpn[i];
    q.rq_psn = peer.psn;
    q.max_dest_rd_atomic = 1;
    q.min_rnr_timer = 12;
    bool global = d.linkLayer == IBV_LINK_LAYER_ETHERNET || (d.portFlags & IBV_QPF_GRH_REQUIRED);
    if (global) {
      q.ah_attr.is_global = 1;
      std::memcpy(q.ah_attr.grh.dgid.raw, peer.gid, 16);
      q.ah_attr.grh.sgid_index = static_cast<uint8_t>(d.gidIndex);
      q.ah_attr.grh.hop_limit = 255;
      q.ah_attr.grh.traffic_class = static_cast<uint8_t>(o.trafficClass);
    }
    q.ah_attr.dlid = peer.lid;
    q.ah_attr.sl = static_cast<uint8_t>(o.serviceLevel);
    q.ah_attr.port_num = d.port;
    int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    if (verbs().modifyQp(c->qps[i], &q, mask) != 0) {
      IB_WARN("NET/IB : %s:%d: QP %u to RTR failed: %s", d.name.c_str(), d.port, c->qps[i]->qp_num,
              std::strerror(errno));
      return ncclSystemError;
    }
    std::memset(&q, 0, sizeof q);
    q.qp_state = IBV_QPS_RTS;
    q.timeout = static_cast<uint8_t>(o.timeout);
    q.retry_cnt = static_cast<uint8_t>(o.retryCount);
    q.rnr_retry = 7;
    q.sq_psn = localPsn;
    q.max_rd_atomic = 1;
    mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
    if (verbs().modifyQp(c->qps[i], &q, mask) != 0) {
      IB_WARN("NET/IB : %s:%d: QP %u to RTS failed: %s", d.name.c_str(), d.port, c->qps[i]->qp_num,
              std::strerror(errno));
      return ncclSystemError;
    }
  }
  return ncclSuccess;
}

void destroyComm(CommBase* c) {
  if (c == nullptr) return;
  if (c->dev != nullptr) {
    const Verbs& v = verbs();
    for (int i = 0; i < kMaxQps; i++)
      if (c->qps[i]) v.destroyQp(c->qps[i]);
    if (c->magic == kSendMagic) {
      auto* s = static_cast<SendComm*>(c);
      if (s->fifoMr) v.deregMr(s->fifoMr);
      if (s->sizeStageMr) v.deregMr(s->sizeStageMr);
    } else {
      auto* r = static_cast<RecvComm*>(c);
      if (r->flushQp) v.destroyQp(r->flushQp);
      if (r->flushMr) v.deregMr(r->flushMr);
      if (r->sizeFifoMr) v.deregMr(r->sizeFifoMr);
      if (r->ctsStageMr) v.deregMr(r->ctsStageMr);
    }
    if (c->cq) v.destroyCq(c->cq);
    if (c->pd) putPd(c->dev);
  }
  bool isSend = c->magic == kSendMagic;
  c->magic = kDeadMagic;
  if (isSend)
    delete static_cast<SendComm*>(c);
  else
    delete static_cast<RecvComm*>(c);
}

// ---- listen.

ncclResult_t netListen(int dev, void* opaqueHandle, void** listenComm) {
  if (device(dev) == nullptr || opaqueHandle == nullptr || listenComm == nullptr) {
    IB_WARN("NET/IB : listen: bad arguments (dev %d of %d, handle %p, listenComm %p)", dev, deviceCount(),
            opaqueHandle, static_cast<void*>(listenComm));
    return ncclInvalidArgument;
  }
  auto l = std::make_unique<ListenComm>();
  l->dev = dev;
  SockAddr a = sideChannelAddr();
  if (a.sa.sa_family == AF_INET) a.sin.sin_port = 0;
  if (a.sa.sa_family == AF_INET6) a.sin6.sin6_port = 0;
  l->fd = ::socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  socklen_t len = sizeof a;
  if (l->fd < 0 || ::bind(l->fd, &a.sa, addrLen(a)) != 0 || ::listen(l->fd, SOMAXCONN) != 0 ||
      ::getsockname(l->fd, &a.sa, &len) != 0) {
    IB_WARN("NET/IB : cannot open the side channel on %s: %s", addrToString(a).c_str(), std::strerror(errno));
    closeFd(l->fd);
    return ncclSystemError;
  }
  l->secret = randomU64();
  Handle h;
  std::memset(&h, 0, sizeof h);
  h.marker = kHandleMarker;
  h.version = kWireVersion;
  h.magic = l->secret;
  h.addr = a;
  std::memset(opaqueHandle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(opaqueHandle, &h, sizeof h);
  IB_TRACE(NCCL_NET, "NET/IB : listening for %s on %s", device(dev)->name.c_str(), addrToString(a).c_str());
  *listenComm = l.release();
  return ncclSuccess;
}

ncclResult_t netCloseListen(void* listenComm) {
  auto* l = static_cast<ListenComm*>(listenComm);
  if (l == nullptr) return ncclSuccess;
  if (l->magic != kListenMagic) {
    IB_WARN("NET/IB : closeListen: not a net-ib listen comm");
    return ncclInvalidArgument;
  }
  closeFd(l->fd);
  l->magic = kDeadMagic;
  delete l;
  return ncclSuccess;
}

// ---- connect: TCP connect, build the send comm, send our endpoint, read theirs, RTR/RTS, send "ready".

namespace {

// Advances a connector handshake as far as it goes without blocking.
ncclResult_t stepConnect(Handshake& hs, int dev, const Handle& h) {
  if (hs.step == Step::TcpConnecting) {
    if (hs.fd < 0) {
      hs.fd = ::socket(h.addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (hs.fd < 0) {
        IB_WARN("NET/IB : socket() failed: %s", std::strerror(errno));
        return ncclSystemError;
      }
      int one = 1;
      (void)setsockopt(hs.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (::connect(hs.fd, &h.addr.sa, addrLen(h.addr)) != 0 && errno != EINPROGRESS && errno != EINTR) {
        if (errno == ECONNREFUSED || errno == EAGAIN) {
          closeFd(hs.fd);  // retried on the next call until the deadline
          return ncclSuccess;
        }
        IB_WARN("NET/IB : connect to %s failed: %s", addrToString(h.addr).c_str(), std::strerror(errno));
        return ncclSystemError;
      }
    }
    pollfd p{hs.fd, POLLOUT, 0};
    int n = ::poll(&p, 1, 0);
    if (n == 0) return ncclSuccess;
    int err = 0;
    socklen_t len = sizeof err;
    if (n < 0 || getsockopt(hs.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN) {
      closeFd(hs.fd);
      return ncclSuccess;
    }
    if (err != 0) {
      IB_WARN("NET/IB : connect to %s failed: %s", addrToString(h.addr).c_str(), std::strerror(err));
      return ncclSystemError;
    }
    auto* s = new SendComm();
    s->magic = kSendMagic;
    hs.comm = s;
    if (ncclResult_t r = setupComm(s, dev, options().qpsPerConnection, true); r != ncclSuccess) return r;
    hs.psn = static_cast<uint32_t>(randomU64() & 0xffffff);
    describeComm(s, h.magic, hs.psn, &hs.local);
    hs.step = Step::SendLocal;
    hs.offset = 0;
  }
  if (hs.step == Step::SendLocal) {
    Io io = progressIo(hs.fd, true, &hs.local, sizeof hs.local, &hs.offset);
    if (io == Io::Again) return ncclSuccess;
    if (io == Io::Error) {
      IB_WARN("NET/IB : connect: side channel to %s failed: %s", addrToString(h.addr).c_str(), std::strerror(errno));
      return ncclRemoteError;
    }
    hs.step = Step::RecvRemote;
    hs.offset = 0;
  }
  if (hs.step == Step::RecvRemote) {
    Io io = progressIo(hs.fd, false, &hs.remote, sizeof hs.remote, &hs.offset);
    if (io == Io::Again) return ncclSuccess;
    if (io == Io::Error) {
      IB_WARN("NET/IB : connect: %s closed the side channel before sending its endpoint (rejected?)",
              addrToString(h.addr).c_str());
      return ncclRemoteError;
    }
    if (const char* why = checkEndpoint(hs.remote, h.magic)) {
      IB_WARN("NET/IB : connect: bad endpoint from %s: %s", addrToString(h.addr).c_str(), why);
      return ncclRemoteError;
    }
    if (hs.remote.nQps != hs.comm->nQps) {
      IB_WARN("NET/IB : connect: the peer answered with %u QPs for %d", hs.remote.nQps, hs.comm->nQps);
      return ncclRemoteError;
    }
    if (ncclResult_t r = connectQps(hs.comm, hs.remote, hs.psn); r != ncclSuccess) return r;
    hs.step = Step::SendReady;
    hs.offset = 0;
  }
  if (hs.step == Step::SendReady) {
    Io io = progressIo(hs.fd, true, &hs.ready, 1, &hs.offset);
    if (io == Io::Again) return ncclSuccess;
    if (io == Io::Error) return ncclRemoteError;
    hs.step = Step::Done;
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t netConnect(int dev, void* opaqueHandle, void** sendComm) {
  if (sendComm == nullptr || opaqueHandle == nullptr || device(dev) == nullptr) {
    IB_WARN("NET/IB : connect: bad arguments (dev %d of %d)", dev, deviceCount());
    return ncclInvalidArgument;
  }
  *sendComm = nullptr;
  Handle h;
  std::memcpy(&h, opaqueHandle, sizeof h);
  sa_family_t fam = h.addr.sa.sa_family;
  if (h.marker != kHandleMarker || h.version != kWireVersion || (fam != AF_INET && fam != AF_INET6)) {
    IB_WARN("NET/IB : connect: the handle was not made by net-ib listen() (or is corrupted)");
    return ncclInvalidArgument;
  }
  std::unique_ptr<Handshake> owned;
  Handshake* hs = nullptr;
  if (h.connectId != 0) {
    std::lock_guard<std::mutex> lock(gConnectMu);
    auto it = gConnects.find(h.connectId);
    if (it == gConnects.end()) {
      IB_WARN("NET/IB : connect: the handle names no connection in progress (corrupted or copied handle)");
      return ncclInvalidArgument;
    }
    owned = std::move(it->second);
    gConnects.erase(it);
  } else {
    owned = std::make_unique<Handshake>();
    owned->deadline = deadlineFromNow();
  }
  hs = owned.get();
  ncclResult_t r = stepConnect(*hs, dev, h);
  if (r == ncclSuccess && hs->step != Step::Done && Clock::now() > hs->deadline) {
    IB_WARN("NET/IB : connect to %s did not complete within %d ms", addrToString(h.addr).c_str(), options().timeoutMs);
    r = ncclRemoteError;
  }
  h.connectId = 0;
  if (r == ncclSuccess && hs->step != Step::Done) {  // park the attempt, name it in the handle
    h.connectId = randomU64();
    std::memcpy(opaqueHandle, &h, sizeof h);
    std::lock_guard<std::mutex> lock(gConnectMu);
    gConnects.emplace(h.connectId, std::move(owned));
    return ncclSuccess;
  }
  std::memcpy(opaqueHandle, &h, sizeof h);
  if (r != ncclSuccess) return r;  // owned frees the socket and the half-built comm
  *sendComm = hs->comm;
  hs->comm = nullptr;
  IB_TRACE(NCCL_NET, "NET/IB : connected to %s with %d QP(s)", addrToString(h.addr).c_str(), hs->local.nQps);
  return ncclSuccess;
}

// ---- accept: read the connector's endpoint, build the recv comm, RTR/RTS, answer, wait for "ready".

namespace {

// Advances one acceptor handshake; returns false (with a warning) when it must be dropped.
bool stepAccept(ListenComm& l, Handshake& hs) {
  if (hs.step == Step::RecvRemote) {
    Io io = progressIo(hs.fd, false, &hs.remote, sizeof hs.remote, &hs.offset);
    if (io == Io::Again) return true;
    if (io == Io::Error) {
      IB_WARN("NET/IB : accept: a peer closed the side channel during the handshake");
      return false;
    }
    if (const char* why = checkEndpoint(hs.remote, l.secret)) {
      IB_WARN("NET/IB : accept: dropping a side-channel peer: %s", why);
      return false;
    }
    auto* rc = new RecvComm();
    rc->magic = kRecvMagic;
    hs.comm = rc;
    hs.psn = static_cast<uint32_t>(randomU64() & 0xffffff);
    if (setupComm(rc, l.dev, hs.remote.nQps, false) != ncclSuccess) return false;
    if (connectQps(rc, hs.remote, hs.psn) != ncclSuccess) return false;
    describeComm(rc, l.secret, hs.psn, &hs.local);
    hs.step = Step::SendLocal;
    hs.offset = 0;
  }
  if (hs.step == Step::SendLocal) {
    Io io = progressIo(hs.fd, true, &hs.local, sizeof hs.local, &hs.offset);
    if (io == Io::Again) return true;
    if (io == Io::Error) {
      IB_WARN("NET/IB : accept: side channel failed while answering: %s", std::strerror(errno));
      return false;
    }
    hs.step = Step::RecvReady;
    hs.offset = 0;
  }
  if (hs.step == Step::RecvReady) {
    uint8_t b = 0;
    Io io = progressIo(hs.fd, false, &b, 1, &hs.offset);
    if (io == Io::Again) return true;
    if (io == Io::Error || b != 1) {
      IB_WARN("NET/IB : accept: the connector failed before its queue pairs were ready");
      return false;
    }
    hs.step = Step::Done;
  }
  return true;
}

}  // namespace

ncclResult_t netAccept(void* listenComm, void** recvComm) {
  auto* l = static_cast<ListenComm*>(listenComm);
  if (l == nullptr || recvComm == nullptr || l->magic != kListenMagic) {
    IB_WARN("NET/IB : accept: NULL or foreign listenComm, or NULL recvComm");
    return ncclInvalidArgument;
  }
  *recvComm = nullptr;
  while (true) {
    int fd = ::accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      IB_WARN("NET/IB : accept failed: %s", std::strerror(errno));
      return ncclSystemError;
    }
    if (l->pending.size() >= kMaxPendingAccepts) {
      ::close(fd);
      continue;
    }
    auto hs = std::make_unique<Handshake>();
    hs->fd = fd;
    hs->step = Step::RecvRemote;
    hs->deadline = deadlineFromNow();
    l->pending.push_back(std::move(hs));
  }
  auto now = Clock::now();
  for (size_t i = 0; i < l->pending.size();) {
    Handshake& hs = *l->pending[i];
    bool keep = stepAccept(*l, hs);
    if (keep && hs.step != Step::Done && now > hs.deadline) {
      IB_WARN("NET/IB : accept: dropping a side-channel peer that stalled for %d ms", options().timeoutMs);
      keep = false;
    }
    if (keep && hs.step == Step::Done) {
      *recvComm = hs.comm;
      hs.comm = nullptr;
      l->pending.erase(l->pending.begin() + static_cast<long>(i));
      return ncclSuccess;
    }
    if (!keep) {
      l->pending.erase(l->pending.begin() + static_cast<long>(i));
      continue;
    }
    i++;
  }
  return ncclSuccess;
}

}  // namespace tutti::netib
