// A tree node under ThreadSanitizer: one primitives object receives from 2 or 3 connections (children),
// reduces them with its own input, optionally keeps the result, and sends it to 2 connections, as a double
// binary tree's interior rank does. The "mixed" cases give the node one child over each transport (proxied,
// twice-mapped shared memory, p2p) and one proxied parent, so every read path runs inside one step.
#include "stress_links.h"

#include "device/common/reduce_ops.h"
#include "util/check.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <ostream>
#include <thread>

namespace tutti::stress {
namespace {

constexpr int kOps = 500;
constexpr int kOuts = 2;

struct TreeCase {
  int proto;
  int fanIn;
  bool mixed;
};
void PrintTo(const TreeCase& c, std::ostream* os) {
  *os << protoName(c.proto) << " fan-in " << c.fanIn << (c.mixed ? " mixed transports" : " p2p");
}

std::string callError(const char* what, size_t op, size_t bytes, ncclResult_t r) {
  return std::string(what) + " of operation " + std::to_string(op) + " (" + std::to_string(bytes) + " bytes) returned " +
         std::to_string(static_cast<int>(r)) + ": " + lastErrorText();
}

// What the node computes for one operation: the byte-wise sum (mod 256) of its input (pattern 0) and every
// child's (patterns 1..fanIn).
void expectedSum(uint64_t seed, int fanIn, size_t bytes, std::vector<char>* scratch, char* out) {
  fillPattern(seed, 0, out, bytes);
  for (int c = 1; c <= fanIn; ++c) {
    char* in = scratch->data();
    fillPattern(seed, c, in, bytes);
    // Eight byte lanes per word, carries kept inside each lane: an eighth of the (instrumented) accesses.
    constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7full;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
      uint64_t a, b;
      std::memcpy(&a, out + i, 8);
      std::memcpy(&b, in + i, 8);
      const uint64_t s = ((a & kLow7) + (b & kLow7)) ^ ((a ^ b) & ~kLow7);
      std::memcpy(out + i, &s, 8);
    }
    for (; i < bytes; ++i) out[i] = static_cast<char>(out[i] + in[i]);
  }
}

class TreeStress : public ::testing::TestWithParam<TreeCase> {};

TEST_P(TreeStress, NodeReducesChildrenAndFeedsBothParents) {
  const auto [proto, fanIn, mixed] = GetParam();
  std::string err;
  std::vector<std::unique_ptr<Link>> ins, outs;
  static constexpr Transport kMixedIn[] = {Transport::Proxied, Transport::ShmTwice, Transport::P2p};
  static constexpr Transport kMixedOut[] = {Transport::P2p, Transport::Proxied};
  // Ranks: children 1..fanIn, the node 0, parents fanIn+1, fanIn+2 (only names in error messages).
  for (int c = 0; c < fanIn; ++c) {
    ins.push_back(makeLink(mixed ? kMixedIn[c] : Transport::P2p, c + 1, 0, &err));
    ASSERT_TRUE(ins.back()) << err;
  }
  for (int p = 0; p < kOuts; ++p) {
    outs.push_back(makeLink(mixed ? kMixedOut[p] : Transport::P2p, 0, fanIn + 1 + p, &err));
    ASSERT_TRUE(outs.back()) << err;
  }
  const size_t slotData = host::HostPrims::slotDataBytes(outs[0]->send.conn, proto);
  const int nThreads = fanIn + 1 + kOuts;
  const std::vector<PlannedOp> plan =
      makePlan(proto, slotData, kOps, nThreads, 7000 + proto * 100 + fanIn * 10 + mixed, slotData > 65536 ? 100 : 12);
  const uint64_t steps = planSteps(plan, slotData);
  const size_t most = maxBytes(plan);
  ResolvedRedOp sum;
  ASSERT_TRUE(resolveBuiltinRedOp(ncclSum, ncclUint8, nThreads, &sum));
  std::atomic<bool> abort{false};

  std::vector<std::function<std::string()>> bodies;
  for (int c = 0; c < fanIn; ++c) {  // children: threads 0..fanIn-1
    bodies.push_back([&, c]() -> std::string {
      std::vector<char> in(most + 1);
      for (size_t i = 0; i < plan.size(); ++i) {
        const PlannedOp& op = plan[i];
        if (op.pauser == c) std::this_thread::sleep_for(std::chrono::microseconds(op.pauseUs));
        fillPattern(op.seed, c + 1, in.data(), op.bytes);
        host::OpLabel label{c + 1, "stress child send", i, 0};
        host::HostPrims prims(nullptr, &ins[c]->send, in.data(), nullptr, 1, sum, stressWait(op.spinCount, &abort),
                              label, proto);
        const ncclResult_t r = prims.send(0, op.bytes);
        if (r != ncclSuccess) return callError("child send", i, op.bytes, r);
      }
      return "";
    });
  }
  bodies.push_back([&]() -> std::string {  // the node: thread fanIn
    std::vector<char> in(most + 1), out(most + 1), want(most + 1), scratch(most + 1);
    host::HostConn* recvs[3] = {};
    host::HostConn* sends[kOuts] = {};
    for (int c = 0; c < fanIn; ++c) recvs[c] = &ins[c]->recv;
    for (int p = 0; p < kOuts; ++p) sends[p] = &outs[p]->send;
    for (size_t i = 0; i < plan.size(); ++i) {
      const PlannedOp& op = plan[i];
      if (op.pauser == fanIn) std::this_thread::sleep_for(std::chrono::microseconds(op.pauseUs));
      fillPattern(op.seed, 0, in.data(), op.bytes);
      host::OpLabel label{0, "stress node", i, 0};
      host::HostPrims prims(recvs, fanIn, sends, kOuts, in.data(), out.data(), 1, sum,
                            stressWait(op.spinCount, &abort), label, proto);
      const ncclResult_t r = op.copyOut ? prims.recvReduceCopySend(0, 0, op.bytes) : prims.recvReduceSend(0, op.bytes);
      if (r != ncclSuccess) return callError("node reduce", i, op.bytes, r);
      if (!op.copyOut) continue;
      expectedSum(op.seed, fanIn, op.bytes, &scratch, want.data());
      std::string bad = compareBytes(("node output, operation " + std::to_string(i)).c_str(), out.data(), want.data(),
                                     op.bytes);
      if (!bad.empty()) return bad;
    }
    return "";
  });
  for (int p = 0; p < kOuts; ++p) {  // parents: threads fanIn+1, fanIn+2
    bodies.push_back([&, p]() -> std::string {
      const int self = fanIn + 1 + p;
      std::vector<char> out(most + 1), want(most + 1), scratch(most + 1);
      for (size_t i = 0; i < plan.size(); ++i) {
        const PlannedOp& op = plan[i];
        if (op.pauser == self) std::this_thread::sleep_for(std::chrono::microseconds(op.pauseUs));
        host::OpLabel label{self, "stress parent recv", i, 0};
        host::HostPrims prims(&outs[p]->recv, nullptr, nullptr, out.data(), 1, sum, stressWait(op.spinCount, &abort),
                              label, proto);
        const ncclResult_t r = prims.recv(0, op.bytes);
        if (r != ncclSuccess) return callError("parent recv", i, op.bytes, r);
        expectedSum(op.seed, fanIn, op.bytes, &scratch, want.data());
        std::string bad = compareBytes(("parent " + std::to_string(p) + ", operation " + std::to_string(i)).c_str(),
                                       out.data(), want.data(), op.bytes);
        if (!bad.empty()) return bad;
      }
      return "";
    });
  }
  for (auto* links : {&ins, &outs})
    for (auto& l : *links)
      if (l->kind == Transport::Proxied)
        bodies.push_back([&, link = l.get()] { return forwardSteps(link, steps, stressWait(4, &abort)); });

  EXPECT_EQ(runThreads(bodies, &abort), "");
  for (auto* links : {&ins, &outs}) {
    for (auto& l : *links) {
      EXPECT_EQ(l->send.step, steps) << transportName(l->kind);
      EXPECT_EQ(l->recv.step, steps) << transportName(l->kind);
    }
  }
}

std::vector<TreeCase> treeCases() {
  std::vector<TreeCase> cases;
  for (int p : {TUTTI_PROTO_SIMPLE, TUTTI_PROTO_LL, TUTTI_PROTO_LL128}) {
    cases.push_back({p, 2, false});
    cases.push_back({p, 3, true});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Tsan, TreeStress, ::testing::ValuesIn(treeCases()),
                         [](const ::testing::TestParamInfo<TreeCase>& info) {
                           return std::string(protoName(info.param.proto)) + "_fanin" +
                                  std::to_string(info.param.fanIn) + (info.param.mixed ? "_mixed" : "_p2p");
                         });

}  // namespace
}  // namespace tutti::stress
