// Fuzz target: the bootstrap's decoders of socket bytes (bootstrap/wire.h), exactly the functions the root,
// the mailbox and create() call. The first input byte picks the decoder:
//   0  decodeId: 128 bytes of a unique id
//   1  checkRootHello: magic (8 bytes), nRanks the root already knows (4 bytes), then a RootHello
//   2  checkMsgHeader over one mailbox connection: magic (8), nRanks (4), then MsgHeaders in order,
//      carrying the connection's sender from its hello as the mailbox does, until one is rejected
//   3  decodeRootReply: a kRootReply payload of any length
// Beyond "no crash": what is accepted satisfies the bounds the callers rely on (rank < nRanks, a payload
// within its limit, a RootReply only from the root, a valid address family, text within the payload).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bootstrap/wire.h"
#include "fuzz_common.h"

using namespace tutti;
using namespace tutti::wire;

namespace {

constexpr const char* kFuzzTarget = "fuzz_bootstrap_wire";

// Reads a T from the front of [p, end); false when too few bytes are left.
template <typename T>
bool take(const uint8_t*& p, const uint8_t* end, T* out) {
  if (static_cast<size_t>(end - p) < sizeof(T)) return false;
  std::memcpy(out, p, sizeof(T));
  p += sizeof(T);
  return true;
}

void fuzzId(const uint8_t* p, const uint8_t* end) {
  uint8_t id[kUniqueIdBytes] = {};
  std::memcpy(id, p, std::min<size_t>(sizeof id, end - p));
  UniqueId a, b;
  bool ok = decodeId(id, &a);
  CHECK_OR_DIE(ok == decodeId(id, &b), "decodeId is deterministic");
  if (ok) CHECK_OR_DIE(a.version == kIdVersion && validFamily(a.root), "accepted id has version and family");
}

void fuzzHello(const uint8_t* p, const uint8_t* end) {
  uint64_t magic;
  uint32_t known;
  RootHello h;
  if (!take(p, end, &magic) || !take(p, end, &known) || !take(p, end, &h)) return;
  std::string why;
  HelloVerdict v = checkRootHello(h, magic, known, &why);
  std::string detail = "rank " + std::to_string(h.rank) + " nRanks " + std::to_string(h.nRanks) + " known " +
                       std::to_string(known) + ": " + why;
  if (v == HelloVerdict::kDrop) {
    CHECK_OR_DIE(!why.empty(), detail);
    return;
  }
  // Not dropped: ours, well-formed, so the root may size its tables from nRanks.
  CHECK_OR_DIE(h.magic == magic && validFamily(h.listen), detail);
  CHECK_OR_DIE(h.nRanks >= 1 && h.nRanks <= uint32_t(kMaxRanks), detail);
  if (v == HelloVerdict::kAccept) {
    CHECK_OR_DIE(h.rank < h.nRanks && (known == 0 || known == h.nRanks), detail);
  } else {
    CHECK_OR_DIE(v == HelloVerdict::kRefuse && !why.empty(), detail);
    CHECK_OR_DIE(h.rank >= h.nRanks || (known != 0 && known != h.nRanks), detail);
  }
}

void fuzzHeaders(const uint8_t* p, const uint8_t* end) {
  uint64_t magic;
  uint32_t n;
  if (!take(p, end, &magic) || !take(p, end, &n)) return;
  const int nRanks = static_cast<int>(n % (kMaxRanks + 1));  // 0 included: must accept no rank
  int peer = kPeerUnknown;
  MsgHeader h;
  while (take(p, end, &h)) {
    int helloPeer = peer;
    std::string why = checkMsgHeader(h, magic, nRanks, peer, &helloPeer);
    std::string detail = "peer " + std::to_string(peer) + " rank " + std::to_string(h.rank) + " kind " +
                         std::to_string(h.kind) + " bytes " + std::to_string(h.bytes) + ": " + why;
    if (!why.empty()) {
      CHECK_OR_DIE(helloPeer == peer, detail);
      return;  // the mailbox drops the connection
    }
    CHECK_OR_DIE(h.magic == magic && h.kind >= 1 && h.kind <= kMaxKind, detail);
    if (peer == kPeerUnknown) {
      CHECK_OR_DIE(h.kind == kHello && h.bytes == 0, detail);
      CHECK_OR_DIE(helloPeer == kPeerRoot || (helloPeer >= 0 && helloPeer < nRanks), detail);
      peer = helloPeer;
      continue;
    }
    CHECK_OR_DIE(helloPeer == peer && h.kind != kHello, detail);
    CHECK_OR_DIE(peer == kPeerRoot ? h.rank == kRootRank : h.rank == uint32_t(peer), detail);
    CHECK_OR_DIE(h.bytes <= kMaxMessageBytes, detail);
    if (peer == kPeerRoot)
      CHECK_OR_DIE(h.kind == kRootReply && h.bytes <= sizeof(RootReply) + kMaxReplyText, detail);
    else
      CHECK_OR_DIE(h.kind != kRootReply, detail);
  }
}

void fuzzReply(const uint8_t* p, const uint8_t* end) {
  const size_t bytes = static_cast<size_t>(end - p);
  DecodedRootReply r;
  r.text = "untouched";
  std::string why = decodeRootReply(p, bytes, &r);
  if (!why.empty()) {
    CHECK_OR_DIE(r.text == "untouched", "a rejected reply leaves the output alone");
    return;
  }
  CHECK_OR_DIE(bytes >= sizeof(RootReply), "accepted reply is complete");
  CHECK_OR_DIE(r.result >= ncclSuccess && r.result < ncclNumResults, "result is a valid code");
  RootReply raw;
  std::memcpy(&raw, p, sizeof raw);
  if (r.result == ncclSuccess) {
    CHECK_OR_DIE(raw.result == 0 && r.text.empty() && validFamily(r.next), "success has an address");
  } else {
    CHECK_OR_DIE(r.text.size() <= kMaxReplyText && r.text.size() <= raw.textBytes, "text within its bounds");
    CHECK_OR_DIE(r.text.size() <= bytes - sizeof raw, "text within the payload");
    CHECK_OR_DIE(std::memcmp(r.text.data(), p + sizeof raw, r.text.size()) == 0, "text is the payload's");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t* p = data + 1;
  const uint8_t* end = data + size;
  switch (data[0] % 4) {
    case 0:
      fuzzId(p, end);
      break;
    case 1:
      fuzzHello(p, end);
      break;
    case 2:
      fuzzHeaders(p, end);
      break;
    case 3:
      fuzzReply(p, end);
      break;
  }
  return 0;
}
