// TCP socket helpers for the bootstrap (and, later, the net-socket plugin): addresses, listen, connect
// with retry, accept, and full send/recv loops. Every socket is non-blocking; waits use poll() with a
// deadline and an optional abort fd (readable = abort), so no call can hang forever or spin.
#pragma once

#include <tutti/common.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tutti {

// A socket address that fits in the unique id (no pointers; 28 bytes). family 0 = unset.
union SocketAddress {
  sockaddr sa;
  sockaddr_in sin;
  sockaddr_in6 sin6;
};
static_assert(sizeof(SocketAddress) == 28);

std::string toString(const SocketAddress& addr);  // "1.2.3.4:5" or "[::1]:5"
socklen_t addressLength(const SocketAddress& addr);
bool sameAddress(const SocketAddress& a, const SocketAddress& b);
// Parses "host:port", "[v6addr]:port" or "v6addr:port" (last colon is the port); resolves host names.
ncclResult_t parseHostPort(std::string_view text, SocketAddress* out);

// Milliseconds on the monotonic clock; kNoDeadline waits forever.
int64_t nowMs();
constexpr int64_t kNoDeadline = INT64_MAX;

// Owns one file descriptor; closes it on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept;
  ~Socket() { reset(); }
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { int f = fd_; fd_ = -1; return f; }
  void reset();

 private:
  int fd_ = -1;
};

// Binds to `bindAddr` (port 0 = any) and listens. `bound` receives the actual address.
ncclResult_t socketListen(const SocketAddress& bindAddr, Socket* out, SocketAddress* bound);
// Connects, retrying refused / unreachable attempts with backoff (10 ms doubling to 500 ms) until the
// deadline, so a peer whose listen socket is not up yet is waited for. ncclTimeout at the deadline,
// ncclInternalError if abortFd became readable.
ncclResult_t socketConnect(const SocketAddress& addr, int64_t deadlineMs, int abortFd, Socket* out);
// Accepts one pending connection (the caller polled the listen fd). Returns ncclSuccess with an invalid
// socket if none was pending after all (EAGAIN, ECONNABORTED).
ncclResult_t socketAccept(int listenFd, Socket* out, SocketAddress* peer);

// Sends / receives exactly `bytes`, waiting in poll() as needed. A closed peer is ncclRemoteError,
// the deadline ncclTimeout, abort ncclInternalError. `what` names the transfer in error messages.
ncclResult_t socketSendAll(int fd, const void* data, size_t bytes, int64_t deadlineMs, int abortFd,
                           const char* what);
ncclResult_t socketRecvAll(int fd, void* data, size_t bytes, int64_t deadlineMs, int abortFd,
                           const char* what);

// One non-blocking read attempt: returns bytes read (>0), 0 on orderly close, -1 if it would block,
// -2 on error (errno set).
ssize_t socketTryRecv(int fd, void* data, size_t bytes);

// Converts a deadline to a poll() timeout (ms, -1 = infinite, clamped to int).
int pollTimeout(int64_t deadlineMs);

}  // namespace tutti
