// What net-ib exchanges with its peer: the listen handle (out of band, through the core), the endpoint
// record each side sends over the TCP side channel during connect/accept, the clear-to-send (CTS) record
// the receiver RDMA-writes into the sender's CTS FIFO, and the size record of grouped receives. Plain
// PODs in host byte order (both ends run the same plugin; markers and versions catch a mix-up). Every
// decoder is bounds-checked and returns a reason instead of trusting the bytes.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include <tutti/net_common.h>

namespace tutti::netib {

constexpr uint32_t kHandleMarker = 0x42495454;    // "TTIB"
constexpr uint32_t kEndpointMarker = 0x50454954;  // "TIEP"
constexpr uint16_t kWireVersion = 1;

constexpr int kMaxQps = 32;          // NCCL_IB_QPS_PER_CONNECTION upper bound
constexpr int kMaxRecvs = 8;         // grouped receive width (NCCL_NET_IB_MAX_RECVS)
constexpr int kFifoDepth = NCCL_NET_MAX_REQUESTS;  // CTS slots per comm = requests in flight

union SockAddr {
  sockaddr sa;
  sockaddr_in sin;
  sockaddr_in6 sin6;
};

// listen() writes this into the caller's NCCL_NET_HANDLE_MAXSIZE buffer. connectId is scratch owned by
// connect(): 0 on the wire, then the id of the attempt in progress so the next call resumes it.
struct Handle {
  uint32_t marker;
  uint16_t version;
  uint16_t reserved;
  uint64_t magic;  // random per listen; accept() drops side-channel peers that do not present it
  SockAddr addr;   // TCP side channel of the listener
  uint64_t connectId;
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle must fit NCCL_NET_HANDLE_MAXSIZE");

// One side of a connection: its QPs and where the peer may RDMA-write. Sent connector -> acceptor, then
// acceptor -> connector. remoteAddr/remoteRkey: the sender's CTS FIFO (connector) or the receiver's size
// FIFO (acceptor).
struct Endpoint {
  uint32_t marker;
  uint16_t version;
  uint16_t nQps;
  uint64_t magic;
  uint32_t qpn[kMaxQps];
  uint8_t gid[16];
  uint16_t lid;
  uint8_t linkLayer;  // IBV_LINK_LAYER_INFINIBAND (1) or IBV_LINK_LAYER_ETHERNET (2)
  uint8_t mtu;        // enum ibv_mtu, 1 (256) .. 5 (4096)
  uint32_t psn;       // first packet sequence number of the sender's QPs (24 bits)
  uint64_t remoteAddr;
  uint32_t remoteRkey;
  uint32_t reserved2;
};

// Checks an endpoint read from the side channel. Returns nullptr when valid, else the reason.
const char* checkEndpoint(const Endpoint& e, uint64_t expectMagic);

// One clear-to-send entry: the receiver tells the sender where the n-th buffer of a receive lives. An irecv
// of n buffers writes n consecutive entries of one FIFO slot in a single RDMA WRITE; `seq` is written in
// every entry and names the irecv (1, 2, ... per comm), so the sender knows an entry is fresh.
struct CtsRecord {
  uint64_t addr;
  uint64_t size;  // capacity of the buffer
  uint32_t rkey;
  int32_t tag;
  uint32_t nreqs;  // n of the irecv, same in each of its entries
  uint32_t seq;
};
static_assert(sizeof(CtsRecord) == 32, "CTS record layout is part of the wire format");

enum class CtsState { NotReady, Ready, Corrupt };

// Examines FIFO slot `entries` (kMaxRecvs of them) for irecv number `seq`. NotReady while entry 0 is not
// yet written (or any of its n entries is still stale); Corrupt (with *why) for an out-of-range n.
CtsState examineCts(const volatile CtsRecord* entries, uint32_t seq, int* nreqs, const char** why);

// Size record of a grouped receive: the sender RDMA-writes the bytes it sent into each buffer before the
// completion immediate. Single receives carry the size in the immediate itself.
struct SizeRecord {
  int64_t sizes[kMaxRecvs];
};

// Splits `size` bytes over nQps queue pairs in pieces aligned to `align` bytes (the last takes the rest).
// Out: the byte range of queue pair q. Zero-length ranges are possible for small messages.
void splitAcrossQps(uint64_t size, int nQps, int q, uint64_t align, uint64_t* offset, uint64_t* length);

// Work-request ids: kind in the top byte, request index below, so one CQ can serve every kind.
enum class WrKind : uint8_t { Data = 1, Cts = 2, Recv = 3, Flush = 4 };
inline uint64_t makeWrId(WrKind k, uint32_t index) { return (static_cast<uint64_t>(k) << 56) | index; }
inline WrKind wrKind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
inline uint32_t wrIndex(uint64_t id) { return static_cast<uint32_t>(id & 0xffffffffu); }

}  // namespace tutti::netib
