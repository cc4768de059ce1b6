// Wire records of net-ib: handle and endpoint layout, endpoint validation, CTS slot examination, the split
// of a message across QPs and work-request ids.
#include <gtest/gtest.h>

#include <cstring>

#include "wire.h"

using namespace tutti::netib;

namespace {
Endpoint goodEndpoint() {
  Endpoint e;
  std::memset(&e, 0, sizeof e);
  e.marker = kEndpointMarker;
  e.version = kWireVersion;
  e.nQps = 2;
  e.magic = 42;
  e.qpn[0] = 0x11;
  e.qpn[1] = 0x12;
  e.linkLayer = 2;
  e.mtu = 5;
  e.psn = 0xabcdef;
  return e;
}
}  // namespace

TEST(NetIbWire, HandleFitsTheAbiBuffer) { EXPECT_LE(sizeof(Handle), size_t{NCCL_NET_HANDLE_MAXSIZE}); }

TEST(NetIbWire, EndpointAccepted) { EXPECT_EQ(checkEndpoint(goodEndpoint(), 42), nullptr); }

TEST(NetIbWire, EndpointRejectedWithAReason) {
  struct Case {
    const char* name;
    void (*mutate)(Endpoint&);
    const char* reason;
  } cases[] = {
      {"marker", [](Endpoint& e) { e.marker = 0; }, "not a net-ib"},
      {"version", [](Endpoint& e) { e.version = 99; }, "version"},
      {"magic", [](Endpoint& e) { e.magic = 43; }, "magic"},
      {"no qps", [](Endpoint& e) { e.nQps = 0; }, "queue pair count"},
      {"too many qps", [](Endpoint& e) { e.nQps = kMaxQps + 1; }, "queue pair count"},
      {"link layer", [](Endpoint& e) { e.linkLayer = 3; }, "link layer"},
      {"mtu low", [](Endpoint& e) { e.mtu = 0; }, "MTU"},
      {"mtu high", [](Endpoint& e) { e.mtu = 6; }, "MTU"},
      {"psn", [](Endpoint& e) { e.psn = 0x1000000; }, "24 bits"},
      {"qpn zero", [](Endpoint& e) { e.qpn[1] = 0; }, "queue pair number"},
      {"qpn wide", [](Endpoint& e) { e.qpn[0] = 0x1000000; }, "queue pair number"},
  };
  for (const Case& c : cases) {
    Endpoint e = goodEndpoint();
    c.mutate(e);
    const char* why = checkEndpoint(e, 42);
    ASSERT_NE(why, nullptr) << c.name;
    EXPECT_NE(std::strstr(why, c.reason), nullptr) << c.name << ": " << why;
  }
}

TEST(NetIbWire, CtsNotReadyUntilEveryEntryIsFresh) {
  CtsRecord slot[kMaxRecvs];
  std::memset(slot, 0, sizeof slot);
  int n = -1;
  const char* why = nullptr;
  EXPECT_EQ(examineCts(slot, 1, &n, &why), CtsState::NotReady);
  slot[0] = {0x1000, 64, 7, 5, 2, 1};
  EXPECT_EQ(examineCts(slot, 1, &n, &why), CtsState::NotReady);  // entry 1 of 2 still stale
  slot[1] = {0x2000, 64, 7, 6, 2, 1};
  EXPECT_EQ(examineCts(slot, 1, &n, &why), CtsState::Ready);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(examineCts(slot, 33, &n, &why), CtsState::NotReady);  // the next lap of the FIFO
}

TEST(NetIbWire, CtsCorruptWidthIsReported) {
  CtsRecord slot[kMaxRecvs];
  std::memset(slot, 0, sizeof slot);
  int n = -1;
  const char* why = nullptr;
  slot[0] = {0x1000, 64, 7, 5, kMaxRecvs + 1, 3};
  EXPECT_EQ(examineCts(slot, 3, &n, &why), CtsState::Corrupt);
  ASSERT_NE(why, nullptr);
  slot[0].nreqs = 0;
  EXPECT_EQ(examineCts(slot, 3, &n, &why), CtsState::Corrupt);
  slot[0].nreqs = 2;
  slot[1] = {0x2000, 64, 7, 6, 3, 3};  // disagrees on the width
  why = nullptr;
  EXPECT_EQ(examineCts(slot, 3, &n, &why), CtsState::Corrupt);
  EXPECT_NE(why, nullptr);
  EXPECT_EQ(n, -1);  // untouched unless Ready
}

TEST(NetIbWire, SplitCoversTheMessageOnceInAlignedPieces) {
  for (uint64_t size : {0ull, 1ull, 127ull, 128ull, 129ull, 1000ull, 4096ull, 1000003ull}) {
    for (int nQps : {1, 2, 3, 4, 7}) {
      uint64_t expect = 0;
      for (int q = 0; q < nQps; q++) {
        uint64_t off = 0, len = 0;
        splitAcrossQps(size, nQps, q, 128, &off, &len);
        if (len == 0) {
          EXPECT_EQ(off, size);
          continue;
        }
        EXPECT_EQ(off, expect) << size << " over " << nQps << ", qp " << q;
        if (q < nQps - 1 && off + len < size) {
          EXPECT_EQ(len % 128, 0u);
        }
        expect = off + len;
      }
      EXPECT_EQ(expect, size) << size << " over " << nQps;
    }
  }
}

TEST(NetIbWire, WorkRequestIdsRoundTrip) {
  for (WrKind k : {WrKind::Data, WrKind::Cts, WrKind::Recv, WrKind::Flush}) {
    uint64_t id = makeWrId(k, 31);
    EXPECT_EQ(wrKind(id), k);
    EXPECT_EQ(wrIndex(id), 31u);
  }
}
