// Connection setup of net-socket: listen / connect / accept as non-blocking state machines, the hello
// handshake that groups a comm's sockets and rejects strangers, and the socket helpers.
#include "connect.h"
#include "options.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

namespace tutti::netsock {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t randomU64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof v)) {
    static std::mutex mu;
    static std::mt19937_64 gen{std::random_device{}() ^ static_cast<uint64_t>(Clock::now().time_since_epoch().count())};
    std::lock_guard<std::mutex> lock(mu);
    v = gen();
  }
  return v == 0 ? 1 : v;  // 0 means "none" in Handle::connectId
}

void closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void setNoDelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Whether a connected socket's two ends are this host: the same address, or loopback addresses. Its data then never
// leaves the host's TCP stack: the receiver copies it out of the pages the sender copied it into.
bool sameHostConnection(int fd) {
  sockaddr_storage self{}, peer{};
  socklen_t selfLen = sizeof self, peerLen = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &selfLen) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peerLen) != 0 || self.ss_family != peer.ss_family)
    return false;
  if (self.ss_family == AF_INET) {
    const in_addr a = reinterpret_cast<const sockaddr_in*>(&self)->sin_addr;
    const in_addr b = reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr;
    auto loopback = [](in_addr x) { return (ntohl(x.s_addr) >> 24) == 127; };
    return a.s_addr == b.s_addr || (loopback(a) && loopback(b));
  }
  if (self.ss_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&self)->sin6_addr;
    const in6_addr& b = reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr;
    return std::memcmp(&a, &b, sizeof a) == 0;
  }
  return false;
}

// The send buffer of a sending comm's socket, once connected (TUTTI_NET_SOCKET_SNDBUF). Inside the host a transfer
// costs its two copies, into the socket's pages by the sender and out of them by the receiver (a third of the CPU
// time of an AlltoAll over loopback); with the kernel's autotuning the send buffer grows to tcp_wmem's largest
// (4 MiB on Debian), and a sender that runs that far ahead of its receiver leaves pages that have left the caches
// by the time the receiver copies them. 768 KiB (SO_SNDBUF 384 KiB, which the kernel doubles) keeps the sender
// within about a core's L2 of its receiver (README.md, measurements). Elsewhere a fixed buffer could cap a path whose
// bandwidth-delay product is larger: the kernel keeps its choice there unless the variable is set.
void sizeSendBuffer(int fd) {
  const long long want = options().sendBufBytes;
  if (want == 0 || (want == kSameHostSendBuffer && !sameHostConnection(fd))) return;
  const int bytes = want == kSameHostSendBuffer ? kSameHostSendBufBytes : static_cast<int>(want);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) != 0)
    SOCK_INFO(NCCL_NET, "NET/Socket : SO_SNDBUF %d: %s (the kernel's send buffer stays)", bytes, std::strerror(errno));
}

Clock::time_point deadlineFromNow() { return Clock::now() + std::chrono::milliseconds(options().timeoutMs); }

// ---- listening side.

// A connection accepted but whose hello has not fully arrived.
struct HalfOpen {
  int fd = -1;
  Hello hello{};
  size_t offset = 0;
  Clock::time_point deadline;
};

// The sockets of one connecting comm gathered so far, by hello index (nSocks data + 1 control).
struct PendingAccept {
  std::vector<int> fds;
  int count = 0;
  Clock::time_point deadline;
};

struct ListenComm {
  int fd = -1;
  int dev = 0;
  uint64_t magic = 0;
  uint32_t nSocks = 0;
  uint32_t nThreads = 0;
  std::vector<HalfOpen> halfOpen;
  std::map<uint64_t, PendingAccept> pending;
};

constexpr size_t kMaxHalfOpen = 1024;  // stray connections beyond this are refused, not buffered

void dropPending(PendingAccept& p) {
  for (int& fd : p.fds) closeFd(fd);
}

// Validates a complete hello against the listener; returns a reason or nullptr when acceptable.
const char* helloProblem(const ListenComm& l, const Hello& h) {
  return helloProblem(h, l.magic, l.nSocks, l.nThreads);
}

// ---- connecting side.

enum class ConnState { Start, Connecting, SendingHello, Done };

struct ConnSock {
  int fd = -1;
  ConnState state = ConnState::Start;
  Hello hello{};
  size_t offset = 0;
};

struct PendingConnect {
  int dev = 0;
  Handle handle{};
  std::vector<ConnSock> socks;  // nSocks data sockets, then the control socket
  Clock::time_point deadline;
  ~PendingConnect() {
    for (ConnSock& s : socks) closeFd(s.fd);
  }
};

std::mutex gConnectMu;
std::map<uint64_t, std::unique_ptr<PendingConnect>> gConnects;  // by Handle::connectId

// Starts (or restarts after a refusal) the TCP connection of one socket.
ncclResult_t startConnect(PendingConnect& pc, ConnSock& s) {
  closeFd(s.fd);
  const SockAddr& a = pc.handle.addr;
  s.fd = ::socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.fd < 0) {
    SOCK_WARN("NET/Socket : socket() failed: %s", std::strerror(errno));
    return ncclSystemError;
  }
  setNoDelay(s.fd);
  s.offset = 0;
  if (::connect(s.fd, &a.sa, addrLen(a)) == 0 || errno == EINPROGRESS || errno == EINTR) {
    s.state = ConnState::Connecting;
    return ncclSuccess;
  }
  if (errno == ECONNREFUSED || errno == EAGAIN || errno == ETIMEDOUT) {
    s.state = ConnState::Start;  // retried on the next call until the deadline
    closeFd(s.fd);
    return ncclSuccess;
  }
  SOCK_WARN("NET/Socket : connect to %s failed: %s", addrToString(a).c_str(), std::strerror(errno));
  return ncclSystemError;
}

// Advances one socket as far as it goes without blocking.
ncclResult_t stepConnect(PendingConnect& pc, ConnSock& s) {
  if (s.state == ConnState::Start) {
    if (ncclResult_t r = startConnect(pc, s); r != ncclSuccess) return r;
    if (s.state == ConnState::Start) return ncclSuccess;
  }
  if (s.state == ConnState::Connecting) {
    pollfd p{s.fd, POLLOUT, 0};
    int n = ::poll(&p, 1, 0);
    if (n == 0) return ncclSuccess;
    int err = 0;
    socklen_t len = sizeof err;
    if (n < 0 || getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN) {
      closeFd(s.fd);
      s.state = ConnState::Start;
      return ncclSuccess;
    }
    if (err != 0) {
      SOCK_WARN("NET/Socket : connect to %s failed: %s", addrToString(pc.handle.addr).c_str(), std::strerror(err));
      return ncclSystemError;
    }
    sizeSendBuffer(s.fd);
    s.state = ConnState::SendingHello;
  }
  if (s.state == ConnState::SendingHello) {
    ncclResult_t code = ncclSuccess;
    Io io = progressIo(s.fd, true, &s.hello, sizeof s.hello, &s.offset, &code);
    if (io == Io::Error) return code;
    if (io == Io::Done) s.state = ConnState::Done;
  }
  return ncclSuccess;
}

}  // namespace

// ---- socket helpers.

Io progressIo(int fd, bool send, void* buf, size_t size, size_t* offset, ncclResult_t* code) {
  char* p = static_cast<char*>(buf);
  while (*offset < size) {
    ssize_t n = send ? ::send(fd, p + *offset, size - *offset, MSG_NOSIGNAL | MSG_DONTWAIT)
                     : ::recv(fd, p + *offset, size - *offset, MSG_DONTWAIT);
    if (n > 0) {
      *offset += static_cast<size_t>(n);
      continue;
    }
    if (n == 0 && !send) {
      SOCK_WARN("NET/Socket : peer closed the connection (%zu of %zu bytes received)", *offset, size);
      *code = ncclRemoteError;
      return Io::Error;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Io::Again;
    int err = errno;
    bool remote = err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == EHOSTUNREACH;
    SOCK_WARN("NET/Socket : %s failed: %s", send ? "send" : "recv", std::strerror(err));
    *code = remote ? ncclRemoteError : ncclSystemError;
    return Io::Error;
  }
  return Io::Done;
}

Io progressIo2(int fd, const void* a, size_t aSize, const void* b, size_t bSize, size_t* offset, ncclResult_t* code) {
  const size_t total = aSize + bSize;
  while (*offset < total) {
    iovec iov[2];
    int n = 0;
    if (*offset < aSize) iov[n++] = {const_cast<char*>(static_cast<const char*>(a)) + *offset, aSize - *offset};
    const size_t bOff = *offset > aSize ? *offset - aSize : 0;
    if (bSize > bOff) iov[n++] = {const_cast<char*>(static_cast<const char*>(b)) + bOff, bSize - bOff};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      *offset += static_cast<size_t>(sent);
      continue;
    }
    if (sent == 0) return Io::Again;  // not expected for a non-empty stream write; retried on the next call
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::Again;
    int err = errno;
    bool remote = err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == EHOSTUNREACH;
    SOCK_WARN("NET/Socket : send failed: %s", std::strerror(err));
    *code = remote ? ncclRemoteError : ncclSystemError;
    return Io::Error;
  }
  return Io::Done;
}

bool peerGone(int fd) {
  char c;
  ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  // The receiver never writes to a sender's sockets: anything readable is an EOF or a reset.
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// ---- listen.

ncclResult_t netListen(int dev, void* opaqueHandle, void** listenComm) {
  const Device* d = device(dev);
  if (d == nullptr || opaqueHandle == nullptr || listenComm == nullptr) {
    SOCK_WARN("NET/Socket : listen: bad arguments (dev %d of %d, handle %p, listenComm %p)", dev, deviceCount(),
              opaqueHandle, static_cast<void*>(listenComm));
    return ncclInvalidArgument;
  }
  auto l = std::make_unique<ListenComm>();
  l->dev = dev;
  l->fd = ::socket(d->addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (l->fd < 0) {
    SOCK_WARN("NET/Socket : socket() failed: %s", std::strerror(errno));
    return ncclSystemError;
  }
  SockAddr a = d->addr;
  if (::bind(l->fd, &a.sa, addrLen(a)) != 0 || ::listen(l->fd, SOMAXCONN) != 0) {
    SOCK_WARN("NET/Socket : cannot listen on %s (%s): %s", d->name.c_str(), addrToString(a).c_str(),
              std::strerror(errno));
    closeFd(l->fd);
    return ncclSystemError;
  }
  socklen_t len = sizeof a;
  if (::getsockname(l->fd, &a.sa, &len) != 0) {
    SOCK_WARN("NET/Socket : getsockname failed: %s", std::strerror(errno));
    closeFd(l->fd);
    return ncclSystemError;
  }
  const Options& o = options();
  l->magic = randomU64();
  int nThreads = 0, nSocksPerThread = 0;
  socketCounts(o, d->name, &nThreads, &nSocksPerThread);
  l->nThreads = static_cast<uint32_t>(nSocksPerThread == 0 ? 0 : nThreads);
  l->nSocks = static_cast<uint32_t>(nThreads * nSocksPerThread);

  Handle h;
  std::memset(opaqueHandle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memset(&h, 0, sizeof h);
  h.marker = kHandleMarker;
  h.version = kWireVersion;
  h.magic = l->magic;
  h.addr = a;
  h.nSocks = l->nSocks;
  h.nThreads = l->nThreads;
  std::memcpy(opaqueHandle, &h, sizeof h);
  SOCK_TRACE(NCCL_NET, "NET/Socket : listening on %s %s (%u data sockets, %u threads)", d->name.c_str(),
             addrToString(a).c_str(), l->nSocks, l->nThreads);
  *listenComm = l.release();
  return ncclSuccess;
}

ncclResult_t netCloseListen(void* listenComm) {
  auto* l = static_cast<ListenComm*>(listenComm);
  if (l == nullptr) return ncclSuccess;
  closeFd(l->fd);
  for (HalfOpen& h : l->halfOpen) closeFd(h.fd);
  for (auto& [nonce, p] : l->pending) dropPending(p);
  delete l;
  return ncclSuccess;
}

// ---- connect.

ncclResult_t netConnect(int dev, void* opaqueHandle, void** sendComm) {
  if (sendComm == nullptr || opaqueHandle == nullptr || device(dev) == nullptr) {
    SOCK_WARN("NET/Socket : connect: bad arguments (dev %d of %d)", dev, deviceCount());
    return ncclInvalidArgument;
  }
  *sendComm = nullptr;
  Handle h;
  std::memcpy(&h, opaqueHandle, sizeof h);
  if (h.marker != kHandleMarker || h.version != kWireVersion) {
    SOCK_WARN("NET/Socket : connect: the handle was not made by net-socket listen() (or is corrupted)");
    return ncclInvalidArgument;
  }
  std::unique_ptr<PendingConnect> owned;
  PendingConnect* pc = nullptr;
  if (h.connectId != 0) {
    std::lock_guard<std::mutex> lock(gConnectMu);
    auto it = gConnects.find(h.connectId);
    if (it == gConnects.end()) {
      SOCK_WARN("NET/Socket : connect: the handle names no connection in progress (corrupted or copied handle)");
      return ncclInvalidArgument;
    }
    pc = it->second.get();
  } else {
    sa_family_t fam = h.addr.sa.sa_family;
    uint16_t port = fam == AF_INET ? h.addr.sin.sin_port : fam == AF_INET6 ? h.addr.sin6.sin6_port : 0;
    if (const char* why = handleProblem(h)) {
      SOCK_WARN("NET/Socket : connect: malformed handle: %s (family %d, port %u, %u sockets, %u threads)", why,
                fam, static_cast<unsigned>(ntohs(port)), h.nSocks, h.nThreads);
      return ncclInvalidArgument;
    }
    owned = std::make_unique<PendingConnect>();
    pc = owned.get();
    pc->dev = dev;
    pc->handle = h;
    pc->deadline = deadlineFromNow();
    pc->socks.resize(h.nSocks + 1);
    uint64_t nonce = randomU64();
    for (uint32_t i = 0; i <= h.nSocks; i++) {
      Hello& hl = pc->socks[i].hello;
      hl.marker = kHelloMarker;
      hl.version = kWireVersion;
      hl.magic = h.magic;
      hl.nonce = nonce;
      hl.index = i;
      hl.nSocks = h.nSocks;
      hl.nThreads = h.nThreads;
    }
  }

  ncclResult_t r = ncclSuccess;
  bool allDone = true;
  for (ConnSock& s : pc->socks) {
    r = stepConnect(*pc, s);
    if (r != ncclSuccess) break;
    allDone = allDone && s.state == ConnState::Done;
  }
  if (r == ncclSuccess && !allDone && Clock::now() > pc->deadline) {
    SOCK_WARN("NET/Socket : connect to %s did not complete within %d ms", addrToString(pc->handle.addr).c_str(),
              options().timeoutMs);
    r = ncclRemoteError;
  }
  auto finish = [&]() {  // forget the attempt: drop it from the registry and from the handle
    h.connectId = 0;
    std::memcpy(opaqueHandle, &h, sizeof h);
    if (!owned) {
      std::lock_guard<std::mutex> lock(gConnectMu);
      auto it = gConnects.find(pc->handle.connectId);
      owned = std::move(it->second);
      gConnects.erase(it);
    }
  };
  if (r != ncclSuccess) {
    finish();
    return r;
  }
  if (!allDone) {
    if (owned) {  // first call: park the attempt, remember it in the handle
      uint64_t id = randomU64();
      owned->handle.connectId = id;
      h.connectId = id;
      std::memcpy(opaqueHandle, &h, sizeof h);
      std::lock_guard<std::mutex> lock(gConnectMu);
      gConnects.emplace(id, std::move(owned));
    }
    return ncclSuccess;
  }
  finish();
  std::vector<int> dataFds;
  for (uint32_t i = 0; i < pc->handle.nSocks; i++) {
    dataFds.push_back(pc->socks[i].fd);
    pc->socks[i].fd = -1;
  }
  int ctrlFd = pc->socks.back().fd;
  pc->socks.back().fd = -1;
  *sendComm = newComm(true, dev, ctrlFd, std::move(dataFds), static_cast<int>(pc->handle.nThreads));
  SOCK_TRACE(NCCL_NET, "NET/Socket : connected to %s", addrToString(pc->handle.addr).c_str());
  return ncclSuccess;
}

// ---- accept.

ncclResult_t netAccept(void* listenComm, void** recvComm) {
  auto* l = static_cast<ListenComm*>(listenComm);
  if (l == nullptr || recvComm == nullptr) {
    SOCK_WARN("NET/Socket : accept: NULL listenComm or recvComm");
    return ncclInvalidArgument;
  }
  *recvComm = nullptr;
  // 1. Take every connection waiting in the backlog.
  while (true) {
    int fd = ::accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      SOCK_WARN("NET/Socket : accept failed: %s", std::strerror(errno));
      return ncclSystemError;
    }
    if (l->halfOpen.size() >= kMaxHalfOpen) {
      SOCK_WARN("NET/Socket : accept: %zu connections without a hello, refusing more", l->halfOpen.size());
      ::close(fd);
      continue;
    }
    setNoDelay(fd);
    HalfOpen h;
    h.fd = fd;
    h.deadline = deadlineFromNow();
    l->halfOpen.push_back(h);
  }
  // 2. Read hellos; file complete, valid ones under their comm's nonce.
  auto now = Clock::now();
  for (size_t i = 0; i < l->halfOpen.size();) {
    HalfOpen& h = l->halfOpen[i];
    ncclResult_t code = ncclSuccess;
    Io io = progressIo(h.fd, false, &h.hello, sizeof h.hello, &h.offset, &code);
    const char* drop = nullptr;
    if (io == Io::Error) {
      drop = "connection failed during the handshake";
    } else if (io == Io::Again) {
      if (now > h.deadline) drop = "incomplete handshake timed out";
    } else if ((drop = helloProblem(*l, h.hello)) == nullptr) {
      PendingAccept& p = l->pending[h.hello.nonce];
      if (p.fds.empty()) {
        p.fds.assign(l->nSocks + 1, -1);
        p.deadline = deadlineFromNow();
      }
      if (p.fds[h.hello.index] >= 0) {
        drop = "duplicate socket index";
      } else {
        p.fds[h.hello.index] = h.fd;
        p.count++;
        h.fd = -1;
      }
    }
    if (io == Io::Again && drop == nullptr) {
      i++;
      continue;
    }
    if (drop != nullptr) {
      SOCK_WARN("NET/Socket : accept on %s: dropping a connection: %s", device(l->dev)->name.c_str(), drop);
      closeFd(h.fd);
    }
    l->halfOpen[i] = l->halfOpen.back();
    l->halfOpen.pop_back();
  }
  // 3. Hand out one complete comm per call; forget partial ones that stalled.
  for (auto it = l->pending.begin(); it != l->pending.end();) {
    PendingAccept& p = it->second;
    if (p.count == static_cast<int>(l->nSocks) + 1) {
      std::vector<int> dataFds(p.fds.begin(), p.fds.end() - 1);
      *recvComm = newComm(false, l->dev, p.fds.back(), std::move(dataFds), static_cast<int>(l->nThreads));
      l->pending.erase(it);
      return ncclSuccess;
    }
    if (now > p.deadline) {
      SOCK_WARN("NET/Socket : accept: a peer opened %d of %u sockets and stalled; dropping them", p.count,
                l->nSocks + 1);
      dropPending(p);
      it = l->pending.erase(it);
      continue;
    }
    ++it;
  }
  return ncclSuccess;
}

}  // namespace tutti::netsock
