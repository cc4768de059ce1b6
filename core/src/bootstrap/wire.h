// On-the-wire layouts of the bootstrap: the unique id, the rank -> root hello, the root's reply and the
// header of every peer message. All fixed-size PODs; every field read from a socket is validated before
// use (magic first, then ranges), never trusted as a length or index.
#pragma once

#include "bootstrap/socket.h"

#include <cstdint>
#include <cstring>

namespace tutti::wire {

constexpr size_t kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
constexpr uint32_t kIdVersion = 0x54540001;  // "TT" + layout version
constexpr uint32_t kIdRootAtRank0 = 1u << 0;  // NCCL_COMM_ID: rank 0 runs the root
constexpr int kMaxRanks = 1 << 20;
// Upper bound of one peer message; a header announcing more is treated as corrupt.
constexpr uint64_t kMaxMessageBytes = uint64_t(1) << 36;
// Upper bound of the error text a root reply may carry.
constexpr uint32_t kMaxReplyText = 4096;

struct UniqueId {
  uint64_t magic;
  uint32_t version;
  uint32_t flags;
  SocketAddress root;
};
static_assert(sizeof(UniqueId) <= kUniqueIdBytes);

inline bool decodeId(const void* id128, UniqueId* out) {
  std::memcpy(out, id128, sizeof(*out));
  int f = out->root.sa.sa_family;
  return out->version == kIdVersion && (f == AF_INET || f == AF_INET6);
}

// Rank -> root, first and only message on the connection.
struct RootHello {
  uint64_t magic;
  uint32_t rank;
  uint32_t nRanks;
  SocketAddress listen;  // where the root replies and peers connect
  uint32_t pad;
};
static_assert(sizeof(RootHello) == 48);

// Root -> rank, payload of a kRootReply message; `textBytes` of error text follow when result != 0.
struct RootReply {
  int32_t result;  // ncclResult_t
  uint32_t textBytes;
  SocketAddress next;  // listen address of rank (rank + 1) % nRanks
  uint32_t pad;
};
static_assert(sizeof(RootReply) == 40);

// Precedes every message on a peer connection. The first message of a connection is a kHello naming
// the sender; every later header must repeat the same magic and rank.
struct MsgHeader {
  uint64_t magic;
  uint32_t rank;  // sender, kRootRank for the root
  uint32_t kind;  // MsgKind
  int32_t tag;
  uint32_t pad;
  uint64_t bytes;
};
static_assert(sizeof(MsgHeader) == 32);

constexpr uint32_t kRootRank = 0xffffffffu;

enum MsgKind : uint32_t {
  kHello = 1,
  kRootReply = 2,
  kUser = 3,
  kAddrRing = 4,  // ring allgather of listen addresses during create
  kAllGather = 5,
  kBarrier = 6,
  kMaxKind = 6,
};

}  // namespace tutti::wire
