// The device primitives (core/src/device/kernels/prims.h) on the CPU SIMT emulator, one connection at a
// time, checked at the level of the FIFO itself: Simple slices and step counters, LL flag lines and their
// header, the LL128 line layout, the flag wrap at 2^32 steps, and both directions between the device
// primitives and the host backend's (the formats are one, so either end may be either backend). Each test
// runs under several emulator seeds (TUTTI_SIM_SEED's switch points), printed with any failure.
#include "device/host/prims.h"
#include "device/kernels/kernel.h"
#include "device/simt/emulator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

namespace tutti::dev {
namespace {

using T = float;
using CopyOp = OpSum<T>;

constexpr uint64_t kSeeds[] = {0, 1, 7, 20261125};
constexpr int kThreads = 64;  // two warps: the wait threads (0.., 8..) and an LL128 warp of 4 lines
// Small FIFOs so a few thousand elements make many steps and wrap the NCCL_STEPS slots several times.
constexpr size_t kBuffBytes[TUTTI_NUM_PROTOCOLS] = {8 * 256, 8 * 4 * 128, 8 * 1024};  // LL, LL128, Simple

const char* protoName(int p) { return p == TUTTI_PROTO_LL ? "LL" : p == TUTTI_PROTO_LL128 ? "LL128" : "Simple"; }

// One connection: the receiver's FIFOs and control block, and each end's step count.
struct Link {
  std::vector<char> buffs[TUTTI_NUM_PROTOCOLS];
  alignas(64) tuttiConnCtrl_t ctrl{};
  uint64_t sendStep = 0, recvStep = 0;
  DevConn sendEnd{}, recvEnd{};
  host::HostConn hostSend, hostRecv;

  explicit Link(uint64_t firstStep = 0) : sendStep(firstStep), recvStep(firstStep) {
    ctrl.tail = ctrl.head = firstStep;
    for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) buffs[p].assign(kBuffBytes[p] + 16, 0);
    for (DevConn* d : {&sendEnd, &recvEnd}) {
      for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
        d->buffs[p] = align16(buffs[p].data());
        d->slotBytes[p] = kBuffBytes[p] / TUTTI_STEPS;
      }
      d->ctrl = &ctrl;
      d->flags = TUTTI_CONN_LL128_SAFE;
    }
    sendEnd.step = &sendStep;
    sendEnd.peer = 1;
    recvEnd.step = &recvStep;
    recvEnd.peer = 0;
    for (host::HostConn* h : {&hostSend, &hostRecv}) {
      for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
        h->conn.buffs[p] = align16(buffs[p].data());
        h->conn.buffSizes[p] = kBuffBytes[p];
      }
      h->conn.ctrl = &ctrl;
      h->conn.flags = TUTTI_CONN_LL128_SAFE;
      h->step = firstStep;
    }
    hostSend.peer = 1;
    hostRecv.peer = 0;
  }
  static char* align16(char* p) {
    return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p) + 15) & ~uintptr_t{15});
  }
  char* fifo(int proto) { return sendEnd.buffs[proto]; }
};

// What one launch does: block 0 sends `n` elements of `in` on `send` (if set), block 1 receives them into
// `out` from `recv` (if set). Each block reports its primitive's result and stop status.
struct Job {
  const DevConn* send = nullptr;
  const DevConn* recv = nullptr;
  const T* in = nullptr;
  T* out = nullptr;
  size_t n = 0;
  int proto = TUTTI_PROTO_SIMPLE;
  uint32_t abortWord = 0;
  ncclResult_t result[2] = {ncclSuccess, ncclSuccess};
  DevStatus status[2]{};
};

Job makeJob(const DevConn* send, const DevConn* recv, const T* in, T* out, size_t n, int proto) {
  Job job;
  job.send = send;
  job.recv = recv;
  job.in = in;
  job.out = out;
  job.n = n;
  job.proto = proto;
  return job;
}

void jobEntry(const void* arg) {
  Job& job = *const_cast<Job*>(static_cast<const Job*>(arg));
  auto* sh = reinterpret_cast<BlockShared*>(simt::sharedMem());
  const int b = simt::bid();
  if (simt::tid() == 0) {
    sh->stop = 0;
    sh->status = DevStatus{};
  }
  simt::syncBlock();
  const WaitEnv env{&job.abortWord, uint64_t{20} * 1000000000, 0, nullptr, sh, 0};
  const DevConn* conns[1] = {b == 0 ? job.send : job.recv};
  ncclResult_t r = ncclSuccess;
  if (b == 0 && job.send) {
    DevPrims<T, CopyOp> p(nullptr, 0, conns, 1, job.in, nullptr, CopyOp{}, job.proto, env);
    r = p.send(0, job.n);
    p.finish();
  } else if (b == 1 && job.recv) {
    DevPrims<T, CopyOp> p(conns, 1, nullptr, 0, nullptr, job.out, CopyOp{}, job.proto, env);
    r = p.recv(0, job.n);
    p.finish();
  }
  simt::syncBlock();
  if (simt::tid() == 0) {
    job.result[b] = r;
    job.status[b] = sh->status;
  }
}

// Runs the job; false (with *error) only when the emulator itself failed. Blocks may have stopped.
bool launchAllowingStops(Job& job, uint64_t seed, std::string* error) {
  simt::emu::LaunchParams p;
  p.grid = 2;
  p.block = kThreads;
  p.sharedBytes = sizeof(BlockShared);
  p.seed = seed;
  return simt::emu::launch(p, &jobEntry, &job, error);
}

// Runs the job and expects both blocks to finish their primitive.
void launch(Job& job, uint64_t seed) {
  std::string error;
  ASSERT_TRUE(launchAllowingStops(job, seed, &error)) << error;
  for (int b = 0; b < 2; ++b) {
    EXPECT_EQ(job.result[b], ncclSuccess) << "block " << b << " stopped: reason "
                                          << static_cast<int>(job.status[b].reason) << " step " << job.status[b].step
                                          << " detail " << job.status[b].detail;
  }
}

std::vector<T> pattern(size_t n, int salt) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(static_cast<int>(i * 7 + salt) % 1000) + 0.25f;
  return v;
}

size_t slotData(int proto) {
  const size_t slot = kBuffBytes[proto] / TUTTI_STEPS;
  return proto == TUTTI_PROTO_LL ? llSlotData(slot) : proto == TUTTI_PROTO_LL128 ? ll128SlotData(slot) : slot;
}
// Steps a transfer of `bytes` takes: one per slot's worth of whole elements, at least one.
uint64_t stepsOf(int proto, size_t bytes) {
  const size_t perStep = slotData(proto) / sizeof(T) * sizeof(T);
  return bytes == 0 ? 1 : divUp(bytes, perStep);
}

class SimPrims : public testing::TestWithParam<uint64_t> {
 protected:
  void SetUp() override { RecordProperty("TUTTI_SIM_SEED", std::to_string(GetParam())); }
  uint64_t seed() const { return GetParam(); }
};

// Sender and receiver together over every protocol; counts from empty to many times the FIFO.
// Step counters, sizes and protocols in the control block are what the host backend would leave.
TEST_P(SimPrims, SlicesAndStepCounters) {
  for (int proto : {TUTTI_PROTO_SIMPLE, TUTTI_PROTO_LL, TUTTI_PROTO_LL128}) {
    const size_t slotElems = slotData(proto) / sizeof(T);
    for (size_t n : {size_t{0}, size_t{1}, slotElems - 1, slotElems, slotElems + 1, 3 * slotElems + 5,
                     3 * TUTTI_STEPS * slotElems + 11}) {
      SCOPED_TRACE(testing::Message() << protoName(proto) << " n=" << n << " seed=" << seed());
      Link link;
      const std::vector<T> in = pattern(n, 3);
      std::vector<T> out(n + 1, -1.0f);
      Job job = makeJob(&link.sendEnd, &link.recvEnd, in.data(), out.data(), n, proto);
      launch(job, seed());
      EXPECT_TRUE(std::equal(in.begin(), in.end(), out.begin())) << "data differs";
      EXPECT_EQ(out[n], -1.0f) << "wrote past the end";
      const uint64_t steps = stepsOf(proto, n * sizeof(T));
      EXPECT_EQ(link.ctrl.tail, steps);
      EXPECT_EQ(link.ctrl.head, steps);
      EXPECT_EQ(link.sendStep, steps);
      EXPECT_EQ(link.recvStep, steps);
      const size_t lastBytes = n * sizeof(T) - (steps - 1) * (slotData(proto) / sizeof(T) * sizeof(T));
      const int lastSlot = static_cast<int>((steps - 1) % TUTTI_STEPS);
      EXPECT_EQ(link.ctrl.sizes[lastSlot], static_cast<int64_t>(n ? lastBytes : 0));
      EXPECT_EQ(link.ctrl.protos[lastSlot], proto);
    }
  }
}

// LL: a send alone leaves its lines in the FIFO: line i holds data word i and the step's flag, and the
// header line after the data holds the byte count under the header flag.
TEST_P(SimPrims, LLFlagLines) {
  Link link;
  const size_t n = slotData(TUTTI_PROTO_LL) / sizeof(T) - 3;  // one step, not a full slot
  const std::vector<T> in = pattern(n, 11);
  Job job = makeJob(&link.sendEnd, nullptr, in.data(), nullptr, n, TUTTI_PROTO_LL);
  launch(job, seed());
  const auto* lines = reinterpret_cast<const uint64_t*>(link.fifo(TUTTI_PROTO_LL));
  for (size_t i = 0; i < n; ++i) {
    uint32_t word;
    std::memcpy(&word, &in[i], 4);
    ASSERT_EQ(lines[i], llLine(word, llFlag(0))) << "line " << i;
  }
  EXPECT_EQ(lines[n], llLine(static_cast<uint32_t>(n * sizeof(T)), llHeaderFlag(0))) << "header line";
  EXPECT_EQ(lines[n + 1], 0u) << "a line past the header was written";
  EXPECT_EQ(link.ctrl.tail, 1u);
  EXPECT_EQ(link.ctrl.head, 0u);
  // The receiver alone now takes the step.
  std::vector<T> out(n, 0.0f);
  Job recv = makeJob(nullptr, &link.recvEnd, nullptr, out.data(), n, TUTTI_PROTO_LL);
  launch(recv, seed());
  EXPECT_EQ(out, in);
  EXPECT_EQ(link.ctrl.head, 1u);
}

// LL128: every 128-byte line carries 120 data bytes and, in its last 8 bytes, the step's flag.
TEST_P(SimPrims, LL128LineLayout) {
  Link link;
  const size_t n = slotData(TUTTI_PROTO_LL128) / sizeof(T) - 5;  // a partial last line
  const std::vector<T> in = pattern(n, 5);
  Job job = makeJob(&link.sendEnd, nullptr, in.data(), nullptr, n, TUTTI_PROTO_LL128);
  launch(job, seed());
  const char* fifo = link.fifo(TUTTI_PROTO_LL128);
  const char* data = reinterpret_cast<const char*>(in.data());
  const size_t bytes = n * sizeof(T);
  const size_t nLines = divUp(bytes, kLL128DataPerLine);
  for (size_t l = 0; l < nLines; ++l) {
    const char* line = fifo + l * kLL128LineBytes;
    const size_t have = std::min(kLL128DataPerLine, bytes - l * kLL128DataPerLine);
    ASSERT_EQ(std::memcmp(line, data + l * kLL128DataPerLine, have), 0) << "line " << l << " data";
    uint64_t flag;
    std::memcpy(&flag, line + kLL128DataPerLine, 8);
    ASSERT_EQ(flag, ll128Flag(0)) << "line " << l << " flag";
  }
  uint64_t after;
  std::memcpy(&after, fifo + nLines * kLL128LineBytes + kLL128DataPerLine, 8);
  EXPECT_EQ(after, 0u) << "a line past the data was flagged";
  std::vector<T> out(n, 0.0f);
  Job recv = makeJob(nullptr, &link.recvEnd, nullptr, out.data(), n, TUTTI_PROTO_LL128);
  launch(recv, seed());
  EXPECT_EQ(out, in);
}

// Steps crossing 2^32: the LL flag is the low 32 bits of step + 1 and must never be 0 (a zeroed line);
// the transfer still completes and the counters keep counting in 64 bits.
TEST_P(SimPrims, FlagWrapsPast32Bits) {
  const uint64_t first = (uint64_t{1} << 32) - 3;
  for (int proto : {TUTTI_PROTO_LL, TUTTI_PROTO_LL128}) {
    SCOPED_TRACE(protoName(proto));
    Link link(first);
    const size_t n = 6 * slotData(proto) / sizeof(T);
    const std::vector<T> in = pattern(n, 1);
    std::vector<T> out(n, 0.0f);
    Job job = makeJob(&link.sendEnd, &link.recvEnd, in.data(), out.data(), n, proto);
    launch(job, seed());
    EXPECT_EQ(out, in);
    EXPECT_EQ(link.ctrl.tail, first + 6);
    EXPECT_EQ(link.recvStep, first + 6);
  }
}

// The device sends, the host backend receives, and the other way round: the two backends share every
// FIFO format, so a connection's ends may be either.
TEST_P(SimPrims, HostAndDeviceEndsInteroperate) {
  ResolvedRedOp copy{};
  resolveBuiltinRedOp(ncclSum, ncclFloat32, 1, &copy);
  const host::WaitContext wait;
  const host::OpLabel label;
  for (int proto : {TUTTI_PROTO_SIMPLE, TUTTI_PROTO_LL, TUTTI_PROTO_LL128}) {
    for (bool deviceSends : {true, false}) {
      SCOPED_TRACE(testing::Message() << protoName(proto) << (deviceSends ? " device -> host" : " host -> device"));
      Link link;
      const size_t n = 2 * TUTTI_STEPS * slotData(proto) / sizeof(T) + 13;
      const std::vector<T> in = pattern(n, 9);
      std::vector<T> out(n, 0.0f);
      Job job = makeJob(nullptr, nullptr, in.data(), out.data(), n, proto);
      (deviceSends ? job.send : job.recv) = deviceSends ? &link.sendEnd : &link.recvEnd;
      std::atomic<ncclResult_t> hostResult{ncclSuccess};
      std::thread hostEnd([&] {
        if (deviceSends) {
          host::HostPrims p(&link.hostRecv, nullptr, nullptr, out.data(), sizeof(T), copy, wait, label, proto);
          hostResult = p.recv(0, n);
        } else {
          host::HostPrims p(nullptr, &link.hostSend, in.data(), nullptr, sizeof(T), copy, wait, label, proto);
          hostResult = p.send(0, n);
        }
      });
      launch(job, seed());
      hostEnd.join();
      EXPECT_EQ(hostResult.load(), ncclSuccess);
      EXPECT_EQ(out, in);
      EXPECT_EQ(link.ctrl.tail, stepsOf(proto, n * sizeof(T)));
      EXPECT_EQ(link.ctrl.head, stepsOf(proto, n * sizeof(T)));
    }
  }
}

// A receiver whose slot holds less than it expects stops with a Mismatch naming both sizes, instead of
// reading past what was sent or waiting forever.
TEST_P(SimPrims, SizeMismatchIsReported) {
  for (int proto : {TUTTI_PROTO_SIMPLE, TUTTI_PROTO_LL, TUTTI_PROTO_LL128}) {
    SCOPED_TRACE(protoName(proto));
    Link link;
    const std::vector<T> in = pattern(10, 2);
    std::vector<T> out(40, 0.0f);
    Job send = makeJob(&link.sendEnd, nullptr, in.data(), nullptr, 10, proto);
    launch(send, seed());
    // More than were sent, and more LL128 lines (an LL128 reader checks no size word while flags show).
    Job recv = makeJob(nullptr, &link.recvEnd, nullptr, out.data(), 40, proto);
    std::string error;
    ASSERT_TRUE(launchAllowingStops(recv, seed(), &error)) << error;
    EXPECT_NE(recv.result[1], ncclSuccess);
    EXPECT_EQ(recv.status[1].reason, StopReason::Mismatch);
    EXPECT_EQ(recv.status[1].detail, 40);  // bytes the sender put in the slot
    EXPECT_EQ(recv.status[1].want, static_cast<int64_t>(std::min<size_t>(160, slotData(proto))));  // first step
  }
}

// A receiver nobody sends to ends when the host raises the abort word, as a kernel does when its
// communicator is aborted.
TEST_P(SimPrims, AbortEndsAWait) {
  Link link;
  std::vector<T> out(4, 0.0f);
  Job job = makeJob(nullptr, &link.recvEnd, nullptr, out.data(), 4, TUTTI_PROTO_LL);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    __atomic_store_n(&job.abortWord, 1u, __ATOMIC_RELEASE);
  });
  std::string error;
  ASSERT_TRUE(launchAllowingStops(job, seed(), &error)) << error;
  aborter.join();
  EXPECT_EQ(job.status[1].reason, StopReason::Aborted);
  EXPECT_EQ(job.status[1].peer, 0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SimPrims, testing::ValuesIn(kSeeds),
                         [](const testing::TestParamInfo<uint64_t>& info) { return "seed" + std::to_string(info.param); });

// The emulator itself: a barrier that can never complete fails the launch with a message naming the
// seed, instead of hanging.
void barrierDeadlock(const void*) {
  if (simt::warp() == 0) simt::barSync(1, 64);  // only one warp of the two ever arrives
}

TEST(SimEmulator, BarrierDeadlockIsAnErrorWithTheSeed) {
  simt::emu::LaunchParams p;
  p.grid = 1;
  p.block = 64;
  p.seed = 42;
  std::string error;
  EXPECT_FALSE(simt::emu::launch(p, &barrierDeadlock, nullptr, &error));
  EXPECT_NE(error.find("deadlock"), std::string::npos) << error;
  EXPECT_NE(error.find("TUTTI_SIM_SEED=42"), std::string::npos) << error;
}

// Warp collectives: shuffle, ballot and any over the lanes of each warp, named barriers across warps.
struct WarpOut {
  uint64_t shfl[64];
  unsigned ballot[64];
  int any[64];
  int afterBarrier[64];
  int counter;
};

void warpOps(const void* arg) {
  auto* o = const_cast<WarpOut*>(static_cast<const WarpOut*>(arg));
  const int t = simt::tid(), lane = simt::lane();
  o->shfl[t] = simt::shfl(simt::kFullMask, static_cast<uint64_t>(t) * 1000, (lane + 1) % 32);
  o->ballot[t] = simt::ballot(simt::kFullMask, lane % 3 == 0);
  o->any[t] = simt::any(simt::kFullMask, t == 40);
  __atomic_fetch_add(&o->counter, 1, __ATOMIC_RELAXED);
  simt::barSync(2, 64);
  o->afterBarrier[t] = __atomic_load_n(&o->counter, __ATOMIC_RELAXED);
}

TEST(SimEmulator, WarpCollectivesAndNamedBarriers) {
  for (uint64_t seed : kSeeds) {
    WarpOut o{};
    simt::emu::LaunchParams p;
    p.grid = 1;
    p.block = 64;
    p.seed = seed;
    std::string error;
    ASSERT_TRUE(simt::emu::launch(p, &warpOps, &o, &error)) << error;
    unsigned every3 = 0;
    for (int l = 0; l < 32; l += 3) every3 |= 1u << l;
    for (int t = 0; t < 64; ++t) {
      const int w = t / 32, lane = t % 32;
      EXPECT_EQ(o.shfl[t], static_cast<uint64_t>(w * 32 + (lane + 1) % 32) * 1000) << "thread " << t;
      EXPECT_EQ(o.ballot[t], every3) << "thread " << t;
      EXPECT_EQ(o.any[t], w == 1 ? 1 : 0) << "thread " << t;
      EXPECT_EQ(o.afterBarrier[t], 64) << "thread " << t << " left the barrier early (seed " << seed << ")";
    }
  }
}

}  // namespace
}  // namespace tutti::dev
