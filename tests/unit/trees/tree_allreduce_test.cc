// treeAllReduce run by k simulated ranks, one std::thread per (rank, channel), over bounded blocking
// queues (one per tree edge and direction, NCCL_STEPS deep so back-pressure is real). Checks the sums,
// that both ends of every edge agree on each step's size, and that a counting primitives type predicts
// the steps each receive connection sees.
#include "device/common/tree.h"
#include "topo/trees.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace tutti {
namespace {

using Elem = int64_t;
constexpr size_t kSlots = 8;  // NCCL_STEPS
constexpr auto kStallLimit = std::chrono::seconds(20);

// A bounded FIFO of steps. Waits give up when another thread failed (abort) or after kStallLimit, so a
// deadlocking program fails the test instead of hanging it.
class StepQueue {
 public:
  explicit StepQueue(std::atomic<bool>* abort) : abort_(abort) {}
  bool push(std::vector<Elem> step) {
    std::unique_lock lk(mu_);
    if (!waitFor(lk, [&] { return q_.size() < kSlots; })) return false;
    q_.push_back(std::move(step));
    ++pushed_;
    cv_.notify_all();
    return true;
  }
  bool pop(std::vector<Elem>* step) {
    std::unique_lock lk(mu_);
    if (!waitFor(lk, [&] { return !q_.empty(); })) return false;
    *step = std::move(q_.front());
    q_.pop_front();
    ++popped_;
    cv_.notify_all();
    return true;
  }
  uint64_t popped() const { return popped_; }
  uint64_t pushed() const { return pushed_; }
  void wakeAll() {
    std::lock_guard lk(mu_);
    cv_.notify_all();
  }

 private:
  template <typename Pred>
  bool waitFor(std::unique_lock<std::mutex>& lk, Pred ready) {
    const auto deadline = std::chrono::steady_clock::now() + kStallLimit;
    while (!ready()) {
      if (abort_->load() || std::chrono::steady_clock::now() > deadline) return false;
      cv_.wait_for(lk, std::chrono::milliseconds(50));
    }
    return true;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<Elem>> q_;
  uint64_t pushed_ = 0, popped_ = 0;
  std::atomic<bool>* abort_;
};

// Fake primitives over StepQueues implementing the contract in tree.h: every recv step takes one message
// from each recv queue and checks its size; every send step writes to each send queue. Sum reduction.
class SimPrims {
 public:
  SimPrims(std::vector<StepQueue*> recvs, std::vector<StepQueue*> sends, const Elem* in, Elem* out)
      : recvs_(std::move(recvs)), sends_(std::move(sends)), in_(in), out_(out) {}

  ncclResult_t send(size_t in, size_t n) { return oneSend() ? push(in_ + in, n) : ncclInternalError; }
  ncclResult_t sendFromOutput(size_t out, size_t n) {
    return recvs_.empty() && !sends_.empty() ? push(out_ + out, n) : ncclInternalError;
  }
  ncclResult_t recv(size_t out, size_t n) {
    if (recvs_.size() != 1 || !sends_.empty()) return ncclInternalError;
    return take(nullptr, out_ + out, n);
  }
  ncclResult_t recvCopySend(size_t out, size_t n) {
    if (recvs_.size() != 1 || sends_.empty()) return ncclInternalError;
    if (ncclResult_t r = take(nullptr, out_ + out, n); r != ncclSuccess) return r;
    return push(out_ + out, n);
  }
  ncclResult_t recvReduceSend(size_t in, size_t n) {
    if (recvs_.empty() || !oneSend()) return ncclInternalError;
    std::vector<Elem> acc(n);
    if (ncclResult_t r = take(in_ + in, acc.data(), n); r != ncclSuccess) return r;
    return push(acc.data(), n);
  }
  ncclResult_t recvReduceCopy(size_t in, size_t out, size_t n) {
    if (recvs_.empty() || !sends_.empty()) return ncclInternalError;
    return take(in_ + in, out_ + out, n);
  }
  ncclResult_t localCopy(size_t in, size_t out, size_t n) {
    if (!recvs_.empty() || !sends_.empty()) return ncclInternalError;
    std::copy(in_ + in, in_ + in + n, out_ + out);
    return ncclSuccess;
  }

 private:
  bool oneSend() const { return sends_.size() == 1; }
  ncclResult_t push(const Elem* src, size_t n) {
    for (StepQueue* q : sends_)
      if (!q->push(std::vector<Elem>(src, src + n))) return ncclSystemError;
    return ncclSuccess;
  }
  // dst = (own ? own : 0) + sum of one step from every recv queue; every step must hold n elements.
  ncclResult_t take(const Elem* own, Elem* dst, size_t n) {
    std::vector<Elem> acc(n, 0), step;
    if (own) std::copy(own, own + n, acc.begin());
    for (StepQueue* q : recvs_) {
      if (!q->pop(&step)) return ncclSystemError;
      if (step.size() != n) return ncclInvalidUsage;  // the two ends sliced the data differently
      for (size_t i = 0; i < n; ++i) acc[i] += step[i];
    }
    std::copy(acc.begin(), acc.end(), dst);
    return ncclSuccess;
  }
  std::vector<StepQueue*> recvs_, sends_;
  const Elem* in_;
  Elem* out_;
};

// The counting requirement of tree.h: moves nothing, counts steps on each receive connection.
class StepCounter {
 public:
  ncclResult_t send(size_t, size_t) { return ncclSuccess; }
  ncclResult_t sendFromOutput(size_t, size_t) { return ncclSuccess; }
  ncclResult_t recv(size_t, size_t) { return count(); }
  ncclResult_t recvCopySend(size_t, size_t) { return count(); }
  ncclResult_t recvReduceSend(size_t, size_t) { return count(); }
  ncclResult_t recvReduceCopy(size_t, size_t, size_t) { return count(); }
  ncclResult_t localCopy(size_t, size_t, size_t) { return ncclSuccess; }
  uint64_t steps() const { return steps_; }

 private:
  ncclResult_t count() {
    ++steps_;
    return ncclSuccess;
  }
  uint64_t steps_ = 0;
};

Elem inputValue(int rank, size_t i) { return (rank + 1) * 1000003 + static_cast<Elem>(i) * 31 - 7; }

struct Case {
  std::vector<int> nodeOf;
  size_t count;
  size_t chunkCount;
  int nChannels;
  bool inPlace;
};

void runCase(const Case& c) {
  const int k = static_cast<int>(c.nodeOf.size());
  DoubleTree dt;
  ASSERT_EQ(topoDoubleTree(c.nodeOf, &dt), ncclSuccess);

  std::vector<std::vector<Elem>> in(k, std::vector<Elem>(c.count)), out(k, std::vector<Elem>(c.count, -1));
  for (int r = 0; r < k; ++r)
    for (size_t i = 0; i < c.count; ++i) in[r][i] = inputValue(r, i);
  if (c.inPlace) out = in;

  std::atomic<bool> abort{false};
  // queues[{channel, from, to}]: "up" edges go child -> parent, "down" edges parent -> child.
  std::map<std::tuple<int, int, int>, std::unique_ptr<StepQueue>> queues;
  auto q = [&](int ch, int from, int to) -> StepQueue* {
    auto& slot = queues[{ch, from, to}];
    if (!slot) slot = std::make_unique<StepQueue>(&abort);
    return slot.get();
  };
  struct RankRun {
    int rank, channel;
    TreeWork work;
    std::unique_ptr<SimPrims> up, down;
    ncclResult_t result = ncclSuccess;
    uint64_t expectUp = 0, expectDown = 0;
  };
  std::vector<RankRun> runs;
  const size_t perChannel = (c.count + c.nChannels - 1) / c.nChannels;
  for (int ch = 0; ch < c.nChannels; ++ch) {
    const size_t off = std::min(c.count, ch * perChannel), n = std::min(perChannel, c.count - off);
    for (int r = 0; r < k; ++r) {
      const TreeLinks& l = dt.channelLinks(ch, r);
      std::vector<StepQueue*> upRecv, upSend, downRecv, downSend;
      for (int i = 0; i < l.nDown(); ++i) {
        upRecv.push_back(q(ch, l.down[i], r));
        downSend.push_back(q(ch, r, l.down[i]));
      }
      if (l.up >= 0) {
        upSend.push_back(q(ch, r, l.up));
        downRecv.push_back(q(ch, l.up, r));
      }
      Elem* o = c.inPlace ? in[r].data() : out[r].data();
      RankRun run{r, ch, TreeWork{off, n, c.chunkCount, l}, nullptr, nullptr};
      run.up = std::make_unique<SimPrims>(upRecv, upSend, in[r].data(), o);
      run.down = std::make_unique<SimPrims>(downRecv, downSend, in[r].data(), o);
      StepCounter cu, cd;
      EXPECT_EQ(treeAllReduce(cu, cd, run.work), ncclSuccess);
      run.expectUp = cu.steps();
      run.expectDown = cd.steps();
      runs.push_back(std::move(run));
    }
  }

  std::vector<std::thread> threads;
  for (RankRun& run : runs) {
    threads.emplace_back([&run, &abort, &queues] {
      run.result = treeAllReduce(*run.up, *run.down, run.work);
      if (run.result != ncclSuccess) {
        abort = true;
        for (auto& [key, queue] : queues) queue->wakeAll();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const RankRun& run : runs)
    ASSERT_EQ(run.result, ncclSuccess) << "rank " << run.rank << " channel " << run.channel;

  const std::vector<std::vector<Elem>>& res = c.inPlace ? in : out;
  for (size_t i = 0; i < c.count; ++i) {
    Elem sum = 0;
    for (int r = 0; r < k; ++r) sum += inputValue(r, i);
    for (int r = 0; r < k; ++r) ASSERT_EQ(res[r][i], sum) << "rank " << r << " element " << i;
  }
  // Every step sent was received, and the counter predicted each receive connection's steps.
  for (const RankRun& run : runs) {
    const TreeLinks& l = run.work.links;
    for (int i = 0; i < l.nDown(); ++i)
      EXPECT_EQ(queues.at({run.channel, l.down[i], run.rank})->popped(), run.expectUp);
    if (l.up >= 0) { EXPECT_EQ(queues.at({run.channel, l.up, run.rank})->popped(), run.expectDown); }
  }
  for (const auto& [key, queue] : queues) EXPECT_EQ(queue->pushed(), queue->popped());
}

std::vector<int> hostsOf(int k, int ppn, bool interleaved) {
  std::vector<int> m(k);
  const int hosts = (k + ppn - 1) / ppn;
  for (int r = 0; r < k; ++r) m[r] = interleaved ? r % hosts : r / ppn;
  return m;
}

TEST(TreeAllReduce, SumsMatchForOneToNineRanks) {
  struct Size {
    size_t count, chunk;
  };
  // Chunk counts from one element to more than the whole buffer; 1000/7 gives ~70 chunks per channel,
  // far more than the queue depth, so the phases must not wait on each other.
  const Size sizes[] = {{0, 4}, {1, 4}, {13, 1}, {13, 4}, {1000, 7}, {1000, 64}, {4099, 512}, {100, 1000}};
  struct Layout {
    int ppn;
    bool interleaved;
  };
  const Layout layouts[] = {{1, false}, {2, false}, {3, false}, {2, true}};
  for (int k = 1; k <= 9; ++k) {
    for (const Layout& lay : layouts) {
      for (const Size& s : sizes) {
        for (int nChannels : {1, 2}) {
          const bool inPlace = (k + s.count + nChannels) % 2 == 0;
          SCOPED_TRACE("k=" + std::to_string(k) + " ppn=" + std::to_string(lay.ppn) +
                       (lay.interleaved ? " interleaved" : "") + " count=" + std::to_string(s.count) +
                       " chunk=" + std::to_string(s.chunk) + " channels=" + std::to_string(nChannels) +
                       (inPlace ? " in-place" : ""));
          runCase({hostsOf(k, lay.ppn, lay.interleaved), s.count, s.chunk, nChannels, inPlace});
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(TreeAllReduce, StepCountsPerRole) {
  // 3 nodes, one rank each: tree 0 is 0 <- 1 -> 2 (node 1 root). 10 elements in chunks of 4: 3 steps.
  StepCounter up, down;
  TreeWork root{0, 10, 4, TreeLinks{-1, {0, 2, -1}}};
  ASSERT_EQ(treeAllReduce(up, down, root), ncclSuccess);
  EXPECT_EQ(up.steps(), 3u);    // from each child
  EXPECT_EQ(down.steps(), 0u);  // the root receives nothing in the broadcast
  StepCounter lu, ld;
  TreeWork leaf{0, 10, 4, TreeLinks{1, {-1, -1, -1}}};
  ASSERT_EQ(treeAllReduce(lu, ld, leaf), ncclSuccess);
  EXPECT_EQ(lu.steps(), 0u);
  EXPECT_EQ(ld.steps(), 3u);
}

TEST(TreeAllReduce, ZeroChunkCountIsAnErrorNotAHang) {
  StepCounter up, down;
  TreeWork w{0, 10, 0, TreeLinks{1, {-1, -1, -1}}};
  EXPECT_EQ(treeAllReduce(up, down, w), ncclInternalError);
  TreeWork alone{0, 10, 0, TreeLinks{}};  // a single rank copies locally whatever the chunking
  EXPECT_EQ(treeAllReduce(up, down, alone), ncclSuccess);
}

}  // namespace
}  // namespace tutti
