// Fuzz target: net-socket's decoders of untrusted bytes (plugins/net-socket/wire.h), the functions that
// connect(), accept() and the receive path call. The first input byte picks the decoder:
//   0  handleProblem: a handle buffer of NCCL_NET_HANDLE_MAXSIZE bytes as connect() receives it
//   1  helloProblem: the listener's magic (8), nSocks (4), nThreads (4), then Hellos as accept() reads them
//   2  msgHeaderProblem: data sockets (1 byte), posted receive size (8), then MsgHeaders
// Beyond "no crash": an accepted handle keeps every count within the limits connect() sizes arrays with;
// an accepted hello indexes the listener's nSocks + 1 slots; an accepted chunked header is cut into at most
// one chunk per data socket, and those chunks cover exactly the message (no overflow in the count).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "wire.h"
#include "fuzz_common.h"

using namespace tutti::netsock;

namespace {

constexpr const char* kFuzzTarget = "fuzz_net_socket_wire";

template <typename T>
bool take(const uint8_t*& p, const uint8_t* end, T* out) {
  if (static_cast<size_t>(end - p) < sizeof(T)) return false;
  std::memcpy(out, p, sizeof(T));
  p += sizeof(T);
  return true;
}

void fuzzHandle(const uint8_t* p, const uint8_t* end) {
  char buf[NCCL_NET_HANDLE_MAXSIZE] = {};
  std::memcpy(buf, p, std::min<size_t>(sizeof buf, end - p));
  Handle h;
  std::memcpy(&h, buf, sizeof h);  // as netConnect reads the caller's buffer
  if (handleProblem(h) != nullptr) return;
  std::string d = "nSocks " + std::to_string(h.nSocks) + " nThreads " + std::to_string(h.nThreads);
  CHECK_OR_DIE(h.marker == kHandleMarker && h.version == kWireVersion, d);
  const int fam = h.addr.sa.sa_family;
  CHECK_OR_DIE(
      (fam == AF_INET && h.addr.sin.sin_port != 0) || (fam == AF_INET6 && h.addr.sin6.sin6_port != 0), d);
  CHECK_OR_DIE(h.nSocks <= uint32_t(kMaxSockets) && h.nThreads <= uint32_t(kMaxThreads), d);
  // Helper threads each own sockets s, s + nThreads, ...: none may be left without one.
  CHECK_OR_DIE(h.nSocks == 0 || (h.nThreads >= 1 && h.nSocks >= h.nThreads), d);
}

void fuzzHello(const uint8_t* p, const uint8_t* end) {
  uint64_t magic;
  uint32_t nSocks, nThreads;
  if (!take(p, end, &magic) || !take(p, end, &nSocks) || !take(p, end, &nThreads)) return;
  nSocks %= kMaxSockets + 1;  // a listener's own counts are within the limits
  nThreads %= kMaxThreads + 1;
  std::vector<int> slots(nSocks + 1, -1);  // accept()'s per-comm fds
  Hello h;
  while (take(p, end, &h)) {
    if (helloProblem(h, magic, nSocks, nThreads) != nullptr) continue;
    std::string d = "index " + std::to_string(h.index) + " of " + std::to_string(nSocks);
    CHECK_OR_DIE(h.marker == kHelloMarker && h.version == kWireVersion && h.magic == magic, d);
    CHECK_OR_DIE(h.nSocks == nSocks && h.nThreads == nThreads, d);
    CHECK_OR_DIE(h.index < slots.size(), d);
    slots[h.index] = 1;
  }
}

void fuzzHeader(const uint8_t* p, const uint8_t* end) {
  uint8_t socks;
  uint64_t posted;
  if (!take(p, end, &socks) || !take(p, end, &posted)) return;
  const size_t nDataSocks = socks % (kMaxSockets + 1);
  MsgHeader h;
  while (take(p, end, &h)) {
    if (msgHeaderProblem(h, nDataSocks) != nullptr) continue;
    std::string d = "size " + std::to_string(h.size) + " chunkBytes " + std::to_string(h.chunkBytes) +
                    " flags " + std::to_string(h.flags) + " sockets " + std::to_string(nDataSocks);
    CHECK_OR_DIE(h.marker == kMsgMarker, d);
    if (h.flags & kMsgInline) continue;
    CHECK_OR_DIE(nDataSocks > 0 && h.chunkBytes > 0, d);
    // The exact chunk count, computed without overflow.
    const unsigned __int128 exact =
        (static_cast<unsigned __int128>(h.size) + h.chunkBytes - 1) / h.chunkBytes;
    CHECK_OR_DIE(exact <= nDataSocks, d);
    CHECK_OR_DIE(chunkCount(h.size, h.chunkBytes) == exact, d);
    if (h.size > posted) continue;  // the receive path rejects it as a truncation
    // The receiver's partition (dispatchChunks): chunk i is [i * chunkBytes, min(+chunkBytes, size)).
    uint64_t covered = 0;
    for (uint64_t i = 0; i < chunkCount(h.size, h.chunkBytes); ++i) {
      const uint64_t off = i * h.chunkBytes;
      CHECK_OR_DIE(off < h.size, d);
      covered += std::min<uint64_t>(h.chunkBytes, h.size - off);
    }
    CHECK_OR_DIE(covered == h.size, d);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t* p = data + 1;
  const uint8_t* end = data + size;
  switch (data[0] % 3) {
    case 0:
      fuzzHandle(p, end);
      break;
    case 1:
      fuzzHello(p, end);
      break;
    case 2:
      fuzzHeader(p, end);
      break;
  }
  return 0;
}
