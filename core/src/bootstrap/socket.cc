#include "bootstrap/socket.h"

#include "util/check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

namespace tutti {

std::string toString(const SocketAddress& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr.sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &addr.sin.sin_addr, host, sizeof(host));
    return fmt::format("{}:{}", host, ntohs(addr.sin.sin_port));
  }
  if (addr.sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &addr.sin6.sin6_addr, host, sizeof(host));
    return fmt::format("[{}]:{}", host, ntohs(addr.sin6.sin6_port));
  }
  return "<no address>";
}

socklen_t addressLength(const SocketAddress& addr) {
  return addr.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

bool sameAddress(const SocketAddress& a, const SocketAddress& b) {
  if (a.sa.sa_family != b.sa.sa_family) return false;
  if (a.sa.sa_family == AF_INET)
    return a.sin.sin_port == b.sin.sin_port && a.sin.sin_addr.s_addr == b.sin.sin_addr.s_addr;
  if (a.sa.sa_family == AF_INET6)
    return a.sin6.sin6_port == b.sin6.sin6_port &&
           std::memcmp(&a.sin6.sin6_addr, &b.sin6.sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

ncclResult_t parseHostPort(std::string_view text, SocketAddress* out) {
  std::string host, port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      TUTTI_FAIL(ncclInvalidArgument, "bad address '{}': expected [ipv6]:port", text);
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0)
      TUTTI_FAIL(ncclInvalidArgument, "bad address '{}': expected host:port", text);
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 1 || p > 65535)
    TUTTI_FAIL(ncclInvalidArgument, "bad port in address '{}' (1..65535)", text);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr)
    TUTTI_FAIL(ncclInvalidArgument, "cannot resolve host '{}' of address '{}': {}", host, text, gai_strerror(rc));
  SocketAddress a{};
  std::memcpy(&a, res->ai_addr, std::min<size_t>(res->ai_addrlen, sizeof(a)));
  freeaddrinfo(res);
  if (a.sa.sa_family == AF_INET) a.sin.sin_port = htons(static_cast<uint16_t>(p));
  else if (a.sa.sa_family == AF_INET6) a.sin6.sin6_port = htons(static_cast<uint16_t>(p));
  else TUTTI_FAIL(ncclInvalidArgument, "address '{}' is neither IPv4 nor IPv6", text);
  *out = a;
  return ncclSuccess;
}

int64_t nowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

int pollTimeout(int64_t deadlineMs) {
  if (deadlineMs == kNoDeadline) return -1;
  int64_t left = deadlineMs - nowMs();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

ncclResult_t newSocket(int family, Socket* out) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  TUTTI_SYSCHECK(fd, "socket()");
  *out = Socket(fd);
  int one = 1;
  // Bootstrap messages are small and latency-bound.
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return ncclSuccess;
}

bool aborted(int abortFd) {
  if (abortFd < 0) return false;
  pollfd p{abortFd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

// Waits until `fd` has `events` or the deadline / abort. ncclSuccess when ready.
ncclResult_t waitFd(int fd, short events, int64_t deadlineMs, int abortFd, const char* what) {
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {abortFd, POLLIN, 0}};
    int n = ::poll(p, abortFd >= 0 ? 2 : 1, pollTimeout(deadlineMs));
    if (n < 0) {
      if (errno == EINTR) continue;
      TUTTI_FAIL(ncclSystemError, "poll() during {} failed: {}", what, std::strerror(errno));
    }
    if (abortFd >= 0 && p[1].revents) TUTTI_FAIL(ncclInternalError, "{} aborted", what);
    if (n > 0 && p[0].revents) return ncclSuccess;
    if (deadlineMs != kNoDeadline && nowMs() >= deadlineMs) TUTTI_FAIL(ncclTimeout, "{} timed out", what);
  }
}

}  // namespace

ncclResult_t socketListen(const SocketAddress& bindAddr, Socket* out, SocketAddress* bound) {
  Socket s;
  TUTTI_CHECK(newSocket(bindAddr.sa.sa_family, &s));
  int one = 1;
  // A fixed NCCL_COMM_ID port must be reusable right after the previous root exited (TIME_WAIT).
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s.fd(), &bindAddr.sa, addressLength(bindAddr)) != 0)
    TUTTI_FAIL(ncclSystemError, "bind to {} failed: {}", toString(bindAddr), std::strerror(errno));
  if (::listen(s.fd(), SOMAXCONN) != 0)
    TUTTI_FAIL(ncclSystemError, "listen on {} failed: {}", toString(bindAddr), std::strerror(errno));
  SocketAddress a{};
  socklen_t len = sizeof(a);
  TUTTI_SYSCHECK(::getsockname(s.fd(), &a.sa, &len), "getsockname()");
  *bound = a;
  *out = std::move(s);
  return ncclSuccess;
}

ncclResult_t socketConnect(const SocketAddress& addr, int64_t deadlineMs, int abortFd, Socket* out) {
  int backoffMs = 10;
  int attempts = 0;
  for (;;) {
    if (aborted(abortFd)) TUTTI_FAIL(ncclInternalError, "connect to {} aborted", toString(addr));
    Socket s;
    TUTTI_CHECK(newSocket(addr.sa.sa_family, &s));
    ++attempts;
    int rc = ::connect(s.fd(), &addr.sa, addressLength(addr));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS || err == EINTR) {
      // Completion is reported through writability, the result through SO_ERROR.
      pollfd p[2] = {{s.fd(), POLLOUT, 0}, {abortFd, POLLIN, 0}};
      int n;
      do n = ::poll(p, abortFd >= 0 ? 2 : 1, pollTimeout(deadlineMs));
      while (n < 0 && errno == EINTR);
      if (abortFd >= 0 && n > 0 && p[1].revents)
        TUTTI_FAIL(ncclInternalError, "connect to {} aborted", toString(addr));
      if (n <= 0) {
        err = ETIMEDOUT;
      } else {
        socklen_t len = sizeof(err);
        if (::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err == 0) {
      *out = std::move(s);
      return ncclSuccess;
    }
    bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
                 err == ECONNRESET || err == EAGAIN || err == EADDRNOTAVAIL;
    if (!retry)
      TUTTI_FAIL(ncclSystemError, "connect to {} failed: {}", toString(addr), std::strerror(err));
    int64_t now = nowMs();
    if (deadlineMs != kNoDeadline && now >= deadlineMs)
      TUTTI_FAIL(ncclTimeout, "connect to {} failed after {} attempts: {}", toString(addr), attempts,
                 std::strerror(err));
    int64_t sleepMs = std::min<int64_t>(backoffMs, deadlineMs == kNoDeadline ? backoffMs : deadlineMs - now);
    if (abortFd >= 0) {
      pollfd p{abortFd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(sleepMs));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs));
    }
    backoffMs = std::min(backoffMs * 2, 500);
  }
}

ncclResult_t socketAccept(int listenFd, Socket* out, SocketAddress* peer) {
  SocketAddress a{};
  socklen_t len = sizeof(a);
  int fd;
  do fd = ::accept4(listenFd, &a.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) {
      *out = Socket();
      return ncclSuccess;
    }
    TUTTI_FAIL(ncclSystemError, "accept() failed: {}", std::strerror(errno));
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  *out = Socket(fd);
  if (peer) *peer = a;
  return ncclSuccess;
}

ncclResult_t socketSendAll(int fd, const void* data, size_t bytes, int64_t deadlineMs, int abortFd,
                           const char* what) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::send(fd, p + done, bytes - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      TUTTI_CHECK(waitFd(fd, POLLOUT, deadlineMs, abortFd, what));
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
      TUTTI_FAIL(ncclRemoteError, "{}: peer closed the connection", what);
    TUTTI_FAIL(ncclSystemError, "{}: send() failed: {}", what, std::strerror(errno));
  }
  return ncclSuccess;
}

ssize_t socketTryRecv(int fd, void* data, size_t bytes) {
  for (;;) {
    ssize_t n = ::recv(fd, data, bytes, MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return -1;
    return -2;
  }
}

ncclResult_t socketRecvAll(int fd, void* data, size_t bytes, int64_t deadlineMs, int abortFd,
                           const char* what) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = socketTryRecv(fd, p + done, bytes - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0) {
      TUTTI_FAIL(ncclRemoteError, "{}: peer closed the connection after {} of {} bytes", what, done, bytes);
    } else if (n == -1) {
      TUTTI_CHECK(waitFd(fd, POLLIN, deadlineMs, abortFd, what));
    } else {
      TUTTI_FAIL(ncclSystemError, "{}: recv() failed: {}", what, std::strerror(errno));
    }
  }
  return ncclSuccess;
}

}  // namespace tutti
