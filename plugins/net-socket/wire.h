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
constexpr uint16_t kWireVersion = 1;

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

// Sent on the control socket for every message, sender -> receiver. Without kMsgInline the payload is cut
// into chunkBytes pieces spread round-robin over the data sockets.
struct MsgHeader {
  uint32_t marker;
  uint32_t flags;
  uint64_t size;
  uint64_t chunkBytes;
};

}  // namespace tutti::netsock
