// What net-socket puts on the wire: the listen handle exchanged out of band, the hello every new TCP
// connection starts with, and the header in front of every message on the control socket. Plain PODs,
// host byte order (both ends run the same plugin on the same architecture; the marker catches a mix-up).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include <tutti/net_common.h>

namespace tutti::netsock {

constexpr uint32_t kHandleMarker = 0x4b535454;  // "TTSK"
constexpr uint32_t kHelloMarker = 0x4c485454;   // "TTHL"
constexpr uint32_t kMsgMarker = 0x474d5454;     // "TTMG"
constexpr uint16_t kWireVersion = 2;  // 2: kMsgHeld

// Limits that bound every count read from a handle or from the wire.
constexpr int kMaxSockets = 64;  // data sockets per comm
constexpr int kMaxThreads = 16;  // helper threads per comm

union SockAddr {
  sockaddr sa;
  sockaddr_in sin;
  sockaddr_in6 sin6;
};

// listen() writes this into the caller's NCCL_NET_HANDLE_MAXSIZE buffer. Everything but connectId travels
// to the peer; connectId is scratch owned by connect(): 0 on the wire, then the id of the connection
// attempt in progress so that the next connect() call on the same handle resumes it.
struct Handle {
  uint32_t marker;
  uint16_t version;
  uint16_t reserved;
  uint64_t magic;     // random per listen; accept() drops connections that do not present it
  SockAddr addr;      // where the listener waits
  uint32_t nSocks;    // data sockets the connector must open (the listener's choice)
  uint32_t nThreads;  // helper threads per comm on both sides
  uint64_t connectId;
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle must fit NCCL_NET_HANDLE_MAXSIZE");

// First bytes on every connection, connector -> acceptor. `nonce` groups the nSocks + 1 connections of one
// comm; index == nSocks marks the control socket.
struct Hello {
  uint32_t marker;
  uint16_t version;
  uint16_t reserved;
  uint64_t magic;
  uint64_t nonce;
  uint32_t index;
  uint32_t nSocks;
  uint32_t nThreads;
  uint32_t pad;
};

constexpr uint32_t kMsgInline = 0x1;  // payload follows the header on the control socket
// The sender's control socket holds short segments behind an unacknowledged one (Nagle's algorithm: a one-way flow
// of small messages, transfer.cc): the receiver acknowledges what it read once the socket runs dry, which lets the
// held messages go, several in one segment.
constexpr uint32_t kMsgHeld = 0x2;

// Sent on the control socket for every message, sender -> receiver. Without kMsgInline the payload is cut
// into chunkBytes pieces spread round-robin over the data sockets.
struct MsgHeader {
  uint32_t marker;
  uint32_t flags;
  uint64_t size;
  uint64_t chunkBytes;
};

// ---- Validation of what arrives from a peer or from a caller's handle buffer. Pure functions used by
// connect.cc / transfer.cc and driven with arbitrary bytes by tests/fuzz. Each returns nullptr when the
// input is acceptable, else the reason to log.

// A handle that connect() may act on (connectId == 0, a fresh connection): made by listen(), a port to
// reach, and socket/thread counts within the limits (every thread owns at least one data socket).
inline const char* handleProblem(const Handle& h) {
  if (h.marker != kHandleMarker || h.version != kWireVersion) return "not a net-socket handle";
  const sa_family_t fam = h.addr.sa.sa_family;
  const uint16_t port = fam == AF_INET ? h.addr.sin.sin_port : fam == AF_INET6 ? h.addr.sin6.sin6_port : 0;
  if (port == 0) return "no address family or port";
  if (h.nSocks > static_cast<uint32_t>(kMaxSockets) || h.nThreads > static_cast<uint32_t>(kMaxThreads))
    return "socket or thread count above the limit";
  if (h.nSocks > 0 && (h.nThreads == 0 || h.nSocks < h.nThreads))
    return "socket and thread counts do not fit";
  return nullptr;
}

// A complete hello read by a listener whose handle carried `magic`, `nSocks` and `nThreads`. An accepted
// hello has index <= nSocks (index nSocks is the control socket).
inline const char* helloProblem(const Hello& h, uint64_t magic, uint32_t nSocks, uint32_t nThreads) {
  if (h.marker != kHelloMarker) return "not a net-socket hello";
  if (h.version != kWireVersion) return "wire version mismatch";
  if (h.magic != magic) return "wrong magic (handle of another listener, or a stale one)";
  if (h.nSocks != nSocks || h.nThreads != nThreads) return "socket/thread counts differ from the handle";
  if (h.index > nSocks) return "socket index out of range";
  return nullptr;
}

// Chunks of a chunked message: ceil(size / chunkBytes) without overflow (chunkBytes > 0).
inline uint64_t chunkCount(uint64_t size, uint64_t chunkBytes) {
  return size / chunkBytes + (size % chunkBytes != 0 ? 1 : 0);
}

// A received message header on a comm with `nDataSocks` data sockets. An accepted chunked header has
// chunkBytes > 0 and chunkCount(size, chunkBytes) <= nDataSocks, so the receiver queues at most one chunk
// per data socket and the chunks cover exactly `size` bytes. The posted receive's size is the caller's.
inline const char* msgHeaderProblem(const MsgHeader& h, size_t nDataSocks) {
  if (h.marker != kMsgMarker) return "corrupted message header (stream out of sync)";
  if (!(h.flags & kMsgInline)) {
    if (nDataSocks == 0) return "chunked message on a comm without data sockets";
    // chunkCount, not (size + chunkBytes - 1) / chunkBytes: that sum wraps for sizes near 2^64.
    if (h.chunkBytes == 0 || chunkCount(h.size, h.chunkBytes) > nDataSocks)
      return "invalid chunk size in message header";
  }
  return nullptr;
}

}  // namespace tutti::netsock
