// On-the-wire layouts of the bootstrap: the unique id, the rank -> root hello, the root's reply and the
// header of every peer message. All fixed-size PODs; every field read from a socket is validated before
// use (magic first, then ranges), never trusted as a length or index.
#pragma once

#include "bootstrap/socket.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

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

// ---- Validation of what arrives from a socket. Pure functions: the root, the mailbox and the rank's
// create() call them, and tests/fuzz drives them with arbitrary bytes.

inline bool validFamily(const SocketAddress& a) {
  return a.sa.sa_family == AF_INET || a.sa.sa_family == AF_INET6;
}

// What the root does with a complete RootHello.
enum class HelloVerdict {
  kAccept,  // record the rank
  kDrop,    // not a rank of this unique id, or malformed: log and close, no reply
  kRefuse,  // a rank of this id with inconsistent fields: reply with the error so it fails fast
};
// `knownNRanks` is the nRanks taken from the first hello that was not dropped (0 before any). `why` is
// set unless the verdict is kAccept. Whether the rank already joined is the caller's state to check.
inline HelloVerdict checkRootHello(const RootHello& h, uint64_t magic, uint32_t knownNRanks,
                                   std::string* why) {
  if (h.magic != magic) {
    *why = "wrong magic (not a rank of this unique id)";
    return HelloVerdict::kDrop;
  }
  if (!validFamily(h.listen) || h.nRanks == 0 || h.nRanks > uint32_t(kMaxRanks)) {
    *why = fmt::format("malformed hello (nRanks {}, address family {})", h.nRanks,
                       int(h.listen.sa.sa_family));
    return HelloVerdict::kDrop;
  }
  if (knownNRanks != 0 && h.nRanks != knownNRanks) {
    *why = fmt::format("bootstrap: rank {} joined with nRanks {}, but other ranks use {}", h.rank, h.nRanks,
                       knownNRanks);
    return HelloVerdict::kRefuse;
  }
  if (h.rank >= h.nRanks) {
    *why = fmt::format("bootstrap: rank {} is out of range for nRanks {}", h.rank, h.nRanks);
    return HelloVerdict::kRefuse;
  }
  return HelloVerdict::kAccept;
}

// Who a mailbox connection belongs to: unknown until its connection hello, then the root or a rank.
constexpr int kPeerUnknown = -2;
constexpr int kPeerRoot = -1;

// Checks a complete MsgHeader read on a connection of `peer` (kPeerUnknown, kPeerRoot or a rank), for a
// communicator of `nRanks` whose unique id carries `magic`. Returns "" when the header may be used, else
// why the connection must be dropped. For an accepted connection hello, *helloPeer is the sender it
// names (kPeerRoot or a rank < nRanks); later headers must repeat that sender. An accepted payload is at
// most kMaxMessageBytes, and at most a RootReply plus kMaxReplyText from the root, which sends nothing else.
inline std::string checkMsgHeader(const MsgHeader& h, uint64_t magic, int nRanks, int peer, int* helloPeer) {
  if (h.magic != magic) return "wrong magic";
  if (h.kind == 0 || h.kind > kMaxKind) return fmt::format("unknown message kind {}", h.kind);
  if (peer == kPeerUnknown) {
    bool rankOk = h.rank == kRootRank || (nRanks > 0 && h.rank < uint32_t(nRanks));
    if (h.kind != kHello || h.bytes != 0 || !rankOk) return "bad connection hello";
    *helloPeer = h.rank == kRootRank ? kPeerRoot : static_cast<int>(h.rank);
    return "";
  }
  if (h.kind == kHello || static_cast<int>(h.rank) != peer)
    return fmt::format("header claims rank {} on the connection of {} {}", static_cast<int>(h.rank),
                       peer == kPeerRoot ? "root" : "rank", peer);
  const bool fromRoot = peer == kPeerRoot;
  if (h.bytes > kMaxMessageBytes || fromRoot != (h.kind == kRootReply) ||
      (fromRoot && h.bytes > sizeof(RootReply) + kMaxReplyText))
    return fmt::format("message of {} bytes (kind {}) exceeds its limit or is not allowed from this sender",
                       h.bytes, h.kind);
  return "";
}

// A decoded kRootReply payload. `result` is always a valid ncclResult_t: a code this build does not know
// becomes ncclRemoteError. `text` (at most kMaxReplyText bytes) is set only for a failure.
struct DecodedRootReply {
  ncclResult_t result = ncclSuccess;
  std::string text;
  SocketAddress next{};
};
// Returns "" and fills *out, or says what is malformed (truncated, or success without a usable address).
inline std::string decodeRootReply(const void* data, size_t bytes, DecodedRootReply* out) {
  RootReply reply;
  if (bytes < sizeof(reply)) return "bootstrap: truncated reply from the root";
  std::memcpy(&reply, data, sizeof(reply));
  DecodedRootReply d;
  if (reply.result != ncclSuccess) {
    size_t textBytes = std::min<size_t>({reply.textBytes, bytes - sizeof(reply), size_t(kMaxReplyText)});
    d.text.assign(static_cast<const char*>(data) + sizeof(reply), textBytes);
    const bool known = reply.result > 0 && reply.result < ncclNumResults;
    d.result = known ? ncclResult_t(reply.result) : ncclRemoteError;
  } else {
    if (!validFamily(reply.next)) return "bootstrap: malformed reply from the root";
    d.next = reply.next;
  }
  *out = std::move(d);
  return "";
}

}  // namespace tutti::wire
