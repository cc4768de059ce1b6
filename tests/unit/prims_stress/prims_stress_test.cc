// One sender and one receiver over one connection, for every protocol (Simple, LL, LL128) and transport
// (p2p, twice-mapped shared memory, proxied), thousands of steps of random sizes whose data changes every
// operation. Built with ThreadSanitizer: a receiver that read a line before it was complete shows either
// as a TSan report (the process exits, the test fails) or as a wrong byte.
#include "stress_links.h"

#include "device/common/reduce_ops.h"
#include "util/check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ostream>
#include <random>
#include <thread>

namespace tutti::stress {
namespace {

constexpr int kOps = 2000;
constexpr int kLineOps = 10000;
constexpr size_t kGuard = 64;  // bytes past each receive that must stay untouched
constexpr unsigned char kGuardByte = 0xa5;

struct PairCase {
  Transport transport;
  int proto;
};
void PrintTo(const PairCase& c, std::ostream* os) { *os << transportName(c.transport) << " " << protoName(c.proto); }

std::string callError(const char* what, size_t op, size_t bytes, ncclResult_t r) {
  return std::string(what) + " of operation " + std::to_string(op) + " (" + std::to_string(bytes) + " bytes) returned " +
         std::to_string(static_cast<int>(r)) + ": " + lastErrorText();
}

void maybePause(const PlannedOp& op, int self) {
  if (op.pauser == self) std::this_thread::sleep_for(std::chrono::microseconds(op.pauseUs));
}

// Which end of operation i of a mixed run (runPair's `mixSmall`) takes llSendSmall / llRecvSmall instead of a
// HostPrims in lanes (useLanes, as the small functions' own waits do): the sender, the receiver, or both, in turn.
// Only single-step operations (at most one slot).
bool smallSendAt(size_t i) { return i % 3 != 1; }
bool smallRecvAt(size_t i) { return i % 3 != 0; }

// The slot ring of operation i of a run with mixed rings (runPair's `mixRings`, HostPrims::useSlotRing): runs of
// three operations on one ring, then another (the sender drains when it changes), all 8 slots among them.
uint32_t slotRingAt(size_t i) {
  constexpr uint32_t kRings[] = {4, 4, 8, 2, 4, 1, 8, 3};
  return kRings[(i / 3) % (sizeof kRings / sizeof kRings[0])];
}

// Runs `plan` through `link` (sender thread, receiver thread, wire thread when proxied) and checks every
// received byte, the guard bytes after it, and the step counters at the end. mixSmall (LL on a direct link): the
// operations of one slot or less take lanes (llLaneBytes) and alternate between HostPrims and the small-message
// functions at either end; larger ones take slots, so the sender changes geometry (and drains) often. mixRings
// (Simple): both ends of operation i cycle through slotRingAt(i) slots (a proxied link keeps all 8).
void runPair(Link* link, int proto, const std::vector<PlannedOp>& plan, bool mixSmall = false, bool mixRings = false) {
  const size_t slotData = host::HostPrims::slotDataBytes(link->send.conn, proto);
  const uint64_t steps = planSteps(plan, slotData);
  const size_t most = maxBytes(plan);
  ResolvedRedOp sum;
  ASSERT_TRUE(resolveBuiltinRedOp(ncclSum, ncclUint8, 2, &sum));
  std::atomic<bool> abort{false};
  // Receiver's announcement for rendezvous operations. Relaxed on both sides on purpose: it must not give
  // TSan a happens-before edge that would hide a missing one in the primitives.
  std::atomic<int64_t> arrived{-1};

  std::vector<std::function<std::string()>> bodies;
  bodies.push_back([&]() -> std::string {  // sender, thread 0
    std::vector<char> in(most + 1);
    for (size_t i = 0; i < plan.size(); ++i) {
      const PlannedOp& op = plan[i];
      maybePause(op, 0);
      fillPattern(op.seed, 0, in.data(), op.bytes);
      host::OpLabel label{0, "stress send", i, 0};
      const host::WaitContext wait = stressWait(op.spinCount, &abort);
      host::HostPrims prims(nullptr, &link->send, in.data(), nullptr, 1, sum, wait, label, proto);
      const bool small = mixSmall && op.bytes <= slotData;
      if (small) prims.useLanes(host::llLaneBytes(link->send.conn, op.bytes));  // as llSendSmall places it
      if (mixRings) prims.useSlotRing(slotRingAt(i));
      for (int polls = 0; op.rendezvous && arrived.load(std::memory_order_relaxed) < static_cast<int64_t>(i) &&
                          !abort.load(std::memory_order_relaxed);)
        if (++polls % 64 == 0) std::this_thread::yield();
      const ncclResult_t r = small && smallSendAt(i)
                                 ? host::llSendSmall(&link->send, in.data(), op.bytes, wait, label)
                                 : prims.send(0, op.bytes);
      if (r != ncclSuccess) return callError("send", i, op.bytes, r);
    }
    return "";
  });
  bodies.push_back([&]() -> std::string {  // receiver, thread 1
    std::vector<char> out(most + kGuard), want(most + 1), guard(kGuard, static_cast<char>(kGuardByte));
    for (size_t i = 0; i < plan.size(); ++i) {
      const PlannedOp& op = plan[i];
      maybePause(op, 1);
      std::memset(out.data() + op.bytes, kGuardByte, kGuard);
      host::OpLabel label{1, "stress recv", i, 0};
      const host::WaitContext wait = stressWait(op.spinCount, &abort);
      host::HostPrims prims(&link->recv, nullptr, nullptr, out.data(), 1, sum, wait, label, proto);
      const bool small = mixSmall && op.bytes <= slotData;
      if (small) prims.useLanes(host::llLaneBytes(link->recv.conn, op.bytes));
      if (mixRings) prims.useSlotRing(slotRingAt(i));
      if (op.rendezvous) arrived.store(static_cast<int64_t>(i), std::memory_order_relaxed);
      const ncclResult_t r = small && smallRecvAt(i)
                                 ? host::llRecvSmall(&link->recv, out.data(), op.bytes, wait, label)
                                 : prims.recv(0, op.bytes);
      if (r != ncclSuccess) return callError("recv", i, op.bytes, r);
      fillPattern(op.seed, 0, want.data(), op.bytes);
      const std::string where = "operation " + std::to_string(i);
      std::string bad = compareBytes(where.c_str(), out.data(), want.data(), op.bytes);
      if (bad.empty()) bad = compareBytes((where + " guard").c_str(), out.data() + op.bytes, guard.data(), kGuard);
      if (!bad.empty()) return bad;
    }
    return "";
  });
  if (link->kind == Transport::Proxied)
    bodies.push_back([&] { return forwardSteps(link, steps, stressWait(4, &abort)); });

  EXPECT_EQ(runThreads(bodies, &abort), "");
  EXPECT_EQ(link->send.step, steps);
  EXPECT_EQ(link->recv.step, steps);
  EXPECT_EQ(std::atomic_ref<uint64_t>(link->recv.conn.ctrl->tail).load(), steps);
  EXPECT_EQ(std::atomic_ref<uint64_t>(link->send.conn.ctrl->head).load(), steps);
}

class PairStress : public ::testing::TestWithParam<PairCase> {};

TEST_P(PairStress, EveryByteArrivesWholeAndInOrder) {
  const auto [transport, proto] = GetParam();
  std::string err;
  std::unique_ptr<Link> link = makeLink(transport, 0, 1, &err);
  ASSERT_TRUE(link) << err;
  const size_t slotData = host::HostPrims::slotDataBytes(link->send.conn, proto);
  ASSERT_GT(slotData, 0u);
  // Large-slot protocols (Simple 512 KiB, LL128 562.5 KiB) cross a slot boundary less often: each such
  // operation moves megabytes through instrumented code.
  const int bigEvery = slotData > 65536 ? 80 : 10;
  const std::vector<PlannedOp> plan = makePlan(proto, slotData, kOps, 2, 1000 + proto * 10 + int(transport), bigEvery);
  EXPECT_GE(planSteps(plan, slotData), static_cast<uint64_t>(kOps));
  runPair(link.get(), proto, plan);
}

// Operations of one or two lines only, every one a rendezvous: the reader is polling the line the writer is
// writing, thousands of times (direct transports: a proxied reader never polls flags).
class LineStress : public ::testing::TestWithParam<PairCase> {};

TEST_P(LineStress, LinesPolledWhileWritten) {
  const auto [transport, proto] = GetParam();
  std::string err;
  std::unique_ptr<Link> link = makeLink(transport, 0, 1, &err);
  ASSERT_TRUE(link) << err;
  runPair(link.get(), proto, makeLinePlan(proto, kLineOps, 3000 + proto * 10 + int(transport)));
}

// The one-shot path's small LL messages (llSendSmall / llRecvSmall) against HostPrims in lanes at the other end and
// against each other: the same lines, lanes and counters, a sender that finds every lane taken, geometry changes
// that must drain the FIFO first, and a receiver that sleeps handing over to a HostPrims mid-step.
class SmallLLStress : public ::testing::TestWithParam<Transport> {};

TEST_P(SmallLLStress, MixedWithPrimsEveryByteArrives) {
  std::string err;
  std::unique_ptr<Link> link = makeLink(GetParam(), 0, 1, &err);
  ASSERT_TRUE(link) << err;
  ASSERT_TRUE(host::llSmallConn(&link->send) && host::llSmallConn(&link->recv));
  const size_t slotData = host::HostPrims::slotDataBytes(link->send.conn, TUTTI_PROTO_LL);
  runPair(link.get(), TUTTI_PROTO_LL, makePlan(TUTTI_PROTO_LL, slotData, kOps, 2, 5000 + int(GetParam()), 10), true);
}

TEST_P(SmallLLStress, LinesPolledWhileWritten) {
  std::string err;
  std::unique_ptr<Link> link = makeLink(GetParam(), 0, 1, &err);
  ASSERT_TRUE(link) << err;
  runPair(link.get(), TUTTI_PROTO_LL, makeLinePlan(TUTTI_PROTO_LL, kLineOps, 6000 + int(GetParam())), true);
}

// A link whose two ends bound their lanes of each size to `region` bytes (HostConn::laneRegion; 0: no bound).
std::unique_ptr<Link> makeRegionLink(Transport transport, size_t region, std::string* err) {
  std::unique_ptr<Link> link = makeLink(transport, 0, 1, err);
  if (link) link->send.laneRegion = link->recv.laneRegion = region;
  return link;
}

// Long runs of packets of 1 to 56 bytes, several to a cache line where they are small (lanes of 16 and 32 bytes): the
// receiver reads a packet while the sender writes the next ones in the same line, and the sender overwrites a lane
// whose neighbours the receiver has not read yet.
TEST_P(SmallLLStress, PacketsSharingLinesEveryByteArrives) {
  // Unbounded lanes (256 of each size), then lanes bounded by bytes (kMinRegionLanes: 16 lanes of 16 B, 256 B).
  for (const size_t region : {size_t{0}, size_t{64}}) {
    SCOPED_TRACE("lane region " + std::to_string(region));
    std::string err;
    std::unique_ptr<Link> link = makeRegionLink(GetParam(), region, &err);
    ASSERT_TRUE(link) << err;
    ASSERT_EQ(host::llLaneBytes(link->send.conn, 8), 16u);
    ASSERT_EQ(host::llLaneBytes(link->send.conn, 9), 32u);
    ASSERT_EQ(host::llLaneBytes(link->send.conn, 24), 32u);
    ASSERT_EQ(host::llLaneBytes(link->send.conn, 25), 64u);
    runPair(link.get(), TUTTI_PROTO_LL, makeTinyPlan(kLineOps, 9000 + region + int(GetParam())), true);
  }
}

// The same with both ends' lanes bounded by bytes (HostConn::laneRegion, as connect sets it where every rank has a
// core): 2 KiB, so each lane size wraps after 2 KiB of lanes or 16 of them (kMinRegionLanes), a sender fills them
// often and the receiver must find every step in the lane the sender chose.
TEST_P(SmallLLStress, LaneRegionEveryByteArrives) {
  std::string err;
  std::unique_ptr<Link> link = makeLink(GetParam(), 0, 1, &err);
  ASSERT_TRUE(link) << err;
  link->send.laneRegion = link->recv.laneRegion = 2048;
  const size_t slotData = host::HostPrims::slotDataBytes(link->send.conn, TUTTI_PROTO_LL);
  ASSERT_EQ(host::llDepth(link->send, host::llLaneBytes(link->send.conn, 8)), 128u);  // lanes of 16 B
  ASSERT_EQ(host::llDepth(link->send, host::llLaneBytes(link->send.conn, 20)), 64u);   // lanes of 32 B
  ASSERT_EQ(host::llDepth(link->send, host::llLaneBytes(link->send.conn, 40)), 32u);   // lanes of 64 B
  ASSERT_EQ(host::llDepth(link->recv, host::llLaneBytes(link->recv.conn, 200)), host::kMinRegionLanes);  // 256 B

  runPair(link.get(), TUTTI_PROTO_LL, makePlan(TUTTI_PROTO_LL, slotData, kOps, 2, 8000 + int(GetParam()), 10), true);
}

// A receiver that polls a step before its sender wrote it finds there whatever older steps left: every packet's data
// here is made of the headers of later steps (the step that takes the same lane next, or any of the next 600), as a
// user's data may happen to be, in lanes of three sizes and LL slots whose geometry changes every few steps, with
// lanes wrapping after 16 (a lane region) or 256. Before each step is sent, a receive that gives up at once must find
// nothing (ncclTimeout); once it is sent, the receive must return exactly its data. One thread, no timing involved.
TEST_P(SmallLLStress, StaleBytesNeverPassForAHeader) {
  for (const size_t region : {size_t{0}, size_t{64}}) {
    SCOPED_TRACE("lane region " + std::to_string(region));
    std::string err;
    std::unique_ptr<Link> link = makeRegionLink(GetParam(), region, &err);
    ASSERT_TRUE(link) << err;
    ResolvedRedOp sum;
    ASSERT_TRUE(resolveBuiltinRedOp(ncclSum, ncclUint8, 2, &sum));
    constexpr int kSteps = 1500;
    constexpr size_t kSlotMax = 96;
    std::mt19937_64 rng(11000 + region + int(GetParam()));
    // The plan: runs of 3 to 40 steps of one kind (lanes of 16, 32 or 64 bytes, or LL slots) and their sizes.
    static constexpr size_t kLo[] = {0, 9, 25, 1}, kHi[] = {8, 24, 56, kSlotMax};
    std::vector<size_t> bytes(kSteps);
    std::vector<bool> slot(kSteps);
    for (int t = 0, left = 0, kind = 0; t < kSteps; ++t, --left) {
      if (left == 0) {
        kind = static_cast<int>(rng() % 4);
        left = 3 + static_cast<int>(rng() % 38);
      }
      bytes[t] = kLo[kind] + rng() % (kHi[kind] - kLo[kind] + 1);
      slot[t] = kind == 3;
    }
    const host::WaitContext wait = stressWait(0, nullptr);
    host::WaitContext probe = wait;
    probe.timeoutNs = 1;  // gives up after its first sleep
    std::vector<char> in(kSlotMax + 8), out(kSlotMax + 8);
    for (int t = 0; t < kSteps; ++t) {
      host::OpLabel label{1, "stale probe", static_cast<uint64_t>(t), 0};
      const size_t lane = slot[t] ? 0 : host::llLaneBytes(link->send.conn, bytes[t]);
      const uint64_t depth = host::llDepth(link->send, lane);
      for (size_t w = 0; w * 8 < bytes[t]; ++w) {
        int u = t + static_cast<int>(depth);
        if (rng() % 2 || u >= kSteps) u = t + 1 + static_cast<int>(rng() % 600);
        u = std::min(u, kSteps - 1);
        const uint64_t forged = llLine(static_cast<uint32_t>(bytes[u]), llHeaderFlag(u));
        std::memcpy(in.data() + w * 8, &forged, 8);
      }
      auto recvStep = [&](const host::WaitContext& w) {
        if (!slot[t]) return host::llRecvSmall(&link->recv, out.data(), bytes[t], w, label);
        host::HostPrims prims(&link->recv, nullptr, nullptr, out.data(), 1, sum, w, label, TUTTI_PROTO_LL);
        return prims.recv(0, bytes[t]);
      };
      const ncclResult_t early = recvStep(probe);
      ASSERT_EQ(early, ncclTimeout) << "step " << t << " (" << bytes[t] << " bytes, " << (slot[t] ? "slot" : "lane")
                                    << ") before it was sent: " << lastErrorText();
      ASSERT_EQ(link->recv.step, static_cast<uint64_t>(t));
      host::OpLabel sendLabel{0, "stale send", static_cast<uint64_t>(t), 0};
      if (slot[t]) {
        host::HostPrims prims(nullptr, &link->send, in.data(), nullptr, 1, sum, wait, sendLabel, TUTTI_PROTO_LL);
        ASSERT_EQ(prims.send(0, bytes[t]), ncclSuccess) << lastErrorText();
      } else {
        ASSERT_EQ(host::llSendSmall(&link->send, in.data(), bytes[t], wait, sendLabel), ncclSuccess)
            << lastErrorText();
      }
      std::fill(out.begin(), out.end(), char{0});
      ASSERT_EQ(recvStep(wait), ncclSuccess) << "step " << t << ": " << lastErrorText();
      ASSERT_EQ(compareBytes(("step " + std::to_string(t)).c_str(), out.data(), in.data(), bytes[t]), "");
    }
  }
}

// Simple steps cycling through fewer slots than NCCL_STEPS (the deterministic exchange's slot ring), the ring
// changing every few operations: the receiver must find each step where the sender put it, and a sender changing
// rings must not overwrite a slot the receiver has not read (the sender runs ahead up to the ring's depth).
class RingStress : public ::testing::TestWithParam<Transport> {};

TEST_P(RingStress, SlotRingsMixedEveryByteArrives) {
  std::string err;
  std::unique_ptr<Link> link = makeLink(GetParam(), 0, 1, &err);
  ASSERT_TRUE(link) << err;
  const size_t slotData = host::HostPrims::slotDataBytes(link->send.conn, TUTTI_PROTO_SIMPLE);
  runPair(link.get(), TUTTI_PROTO_SIMPLE,
          makePlan(TUTTI_PROTO_SIMPLE, slotData, kOps, 2, 7000 + int(GetParam()), 80), false, true);
}

INSTANTIATE_TEST_SUITE_P(Tsan, RingStress, ::testing::Values(Transport::P2p, Transport::ShmTwice, Transport::Proxied),
                         [](const ::testing::TestParamInfo<Transport>& info) {
                           return std::string(transportName(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(Tsan, SmallLLStress, ::testing::Values(Transport::P2p, Transport::ShmTwice),
                         [](const ::testing::TestParamInfo<Transport>& info) {
                           return std::string(transportName(info.param));
                         });

std::vector<PairCase> pairCases() {
  std::vector<PairCase> cases;
  for (Transport t : {Transport::P2p, Transport::ShmTwice, Transport::Proxied})
    for (int p : {TUTTI_PROTO_SIMPLE, TUTTI_PROTO_LL, TUTTI_PROTO_LL128}) cases.push_back({t, p});
  return cases;
}

std::string caseName(const ::testing::TestParamInfo<PairCase>& info) {
  return std::string(transportName(info.param.transport)) + "_" + protoName(info.param.proto);
}

INSTANTIATE_TEST_SUITE_P(Tsan, PairStress, ::testing::ValuesIn(pairCases()), caseName);
INSTANTIATE_TEST_SUITE_P(Tsan, LineStress,
                         ::testing::Values(PairCase{Transport::P2p, TUTTI_PROTO_LL},
                                           PairCase{Transport::P2p, TUTTI_PROTO_LL128},
                                           PairCase{Transport::ShmTwice, TUTTI_PROTO_LL},
                                           PairCase{Transport::ShmTwice, TUTTI_PROTO_LL128}),
                         caseName);

}  // namespace
}  // namespace tutti::stress
