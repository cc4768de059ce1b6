#include "device/simt/emulator.h"

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <fmt/format.h>

#include <sched.h>
#include <time.h>

#include <array>
#include <bit>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ctx = boost::context;

namespace tutti::simt::emu {
namespace {

constexpr int kWarpLanes = 32;
constexpr int kNamedBarriers = 16;
constexpr int kMaxBlockThreads = 1024;

// Why a fiber handed the OS thread back: the scheduler counts a round without progress only when every
// fiber just polled or waits on a barrier.
enum class Yield { Preempt, Spin, Barrier };

struct Bar {
  int arrived = 0;
  uint64_t gen = 0;
};

// Warp collectives exchange through a double buffer picked by the warp barrier's generation parity: a lane
// cannot reach the next-but-one collective before every lane has left this one.
struct WarpState {
  Bar bar;
  uint64_t vals[2][kWarpLanes]{};
  unsigned ballot[2]{};  // warpBallot's result per generation parity
  unsigned ballotSum = 0;  // the bits of the lanes arrived so far
  void* ptrs[kWarpLanes]{};
  uint64_t* words[kWarpLanes]{};
};

struct FiberState {
  Thread thread;
  ctx::fiber self;  // the fiber while it is suspended
  ctx::fiber sink;  // the scheduler while the fiber runs
  Yield why = Yield::Preempt;
  int waitingBar = -1;  // named barrier (or 100 + warp) it waits on, for deadlock reports
  // The barrier it waits on and the generation it waits to end: the scheduler does not resume it before
  // that generation ends (it would only look and hand the thread back).
  const Bar* awaited = nullptr;
  uint64_t awaitedGen = 0;
};

// Stacks are reused across launches: mapping and guarding one per fiber per launch would cost more than
// the launch itself.
class StackPool {
 public:
  ctx::stack_context take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& v = free_[bytes];
      if (!v.empty()) {
        ctx::stack_context s = v.back();
        v.pop_back();
        return s;
      }
    }
    return ctx::protected_fixedsize_stack(bytes).allocate();
  }
  void give(size_t bytes, ctx::stack_context s) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[bytes].push_back(s);
  }

 private:
  std::mutex mutex_;
  struct Map {  // by stack size; one or two sizes are ever used
    std::vector<std::pair<size_t, std::vector<ctx::stack_context>>> entries;
    std::vector<ctx::stack_context>& operator[](size_t k) {
      for (auto& [size, v] : entries)
        if (size == k) return v;
      return entries.emplace_back(k, std::vector<ctx::stack_context>{}).second;
    }
  } free_;
};
StackPool& stackPool() {
  static StackPool* pool = new StackPool;  // never destroyed: fibers may outlive static destruction order
  return *pool;
}

// Hands pooled stacks to Boost.Context; deallocate returns them to the pool.
struct PooledStack {
  size_t bytes;
  ctx::stack_context allocate() { return stackPool().take(bytes); }
  void deallocate(ctx::stack_context& s) { stackPool().give(bytes, s); }
};

struct BlockRun {
  Block block;
  std::vector<FiberState> fibers;
  std::vector<WarpState> warps;
  std::array<Bar, kNamedBarriers> bars{};
  uint64_t rng = 0;  // xorshift state; 0 = no random switches
  uint64_t progress = 0;
  std::string error;
};

// Read at every emulated instruction that names its thread. initial-exec: one load from the thread pointer
// instead of a __tls_get_addr call (that call was a tenth of an emulated kernel's time).
[[gnu::tls_model("initial-exec")]] thread_local BlockRun* tBlock = nullptr;
[[gnu::tls_model("initial-exec")]] thread_local FiberState* tFiber = nullptr;

uint64_t nextRandom(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

void yieldNow(Yield why) {
  FiberState* f = tFiber;
  f->why = why;
  f->sink = std::move(f->sink).resume();
  tFiber = f;  // resumed by the scheduler of the same OS thread
}

// Arrives at `bar`; returns once `expected` threads arrived. `onComplete` runs in the thread that completes
// the barrier, before the others are released.
template <typename F>
void arriveAndWait(Bar& bar, int expected, int barId, F&& onComplete) {
  BlockRun* b = tBlock;
  const uint64_t gen = bar.gen;
  if (++bar.arrived == expected) {
    onComplete();
    bar.arrived = 0;
    ++bar.gen;
    ++b->progress;
    return;
  }
  FiberState* f = tFiber;
  f->waitingBar = barId;
  f->awaited = &bar;
  f->awaitedGen = gen;
  while (bar.gen == gen) yieldNow(Yield::Barrier);
  f->awaited = nullptr;
  f->waitingBar = -1;
  ++b->progress;
}

void fiberMain(FiberState* f, void (*entry)(const void*), const void* arg) {
  tFiber = f;
  entry(arg);
}

std::string waitingSummary(const BlockRun& b) {
  std::string s;
  int shown = 0;
  for (const FiberState& f : b.fibers) {
    if (!f.self || f.waitingBar < 0) continue;
    if (shown++ == 4) {
      s += ", ...";
      break;
    }
    s += fmt::format("{}thread {} at {}", s.empty() ? "" : ", ", f.thread.tid,
                     f.waitingBar >= 100 ? fmt::format("warp {} sync", f.waitingBar - 100)
                                         : fmt::format("barrier {}", f.waitingBar));
  }
  return s;
}

// Runs one block to completion on the calling OS thread.
void runBlock(BlockRun& b, const LaunchParams& p, void (*entry)(const void*), const void* arg) {
  tBlock = &b;
  const int n = b.block.nthreads;
  b.fibers.resize(n);
  b.warps.resize((n + kWarpLanes - 1) / kWarpLanes);
  std::vector<char> shared(p.sharedBytes + 16);
  b.block.shared = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(shared.data()) + 15) & ~uintptr_t{15});
  for (int t = 0; t < n; ++t) {
    FiberState* f = &b.fibers[t];
    f->thread.tid = t;
    f->thread.block = &b.block;
    f->self = ctx::fiber(std::allocator_arg, PooledStack{p.stackBytes}, [f, entry, arg](ctx::fiber&& sink) {
      f->sink = std::move(sink);
      fiberMain(f, entry, arg);
      return std::move(f->sink);
    });
  }
  int live = n;
  int idleRounds = 0;
  while (live > 0) {
    const uint64_t before = b.progress;
    bool allAtBarriers = true;
    for (FiberState& f : b.fibers) {
      if (!f.self) continue;
      if (f.awaited && f.awaited->gen == f.awaitedGen) continue;  // still at its barrier
      tFiber = &f;
      f.why = Yield::Preempt;
      f.self = std::move(f.self).resume();
      tFiber = nullptr;
      if (!f.self) {
        --live;
        ++b.progress;
      } else if (f.why != Yield::Barrier) {
        allAtBarriers = false;
      }
    }
    if (b.progress != before) {
      idleRounds = 0;
      continue;
    }
    if (allAtBarriers && live > 0) {
      b.error = fmt::format("block {}: deadlock: every thread still running waits on a barrier that cannot "
                            "complete ({})", b.block.bid, waitingSummary(b));
      // The fibers cannot be resumed to an end: their stacks are dropped with them (no destructors pending
      // in device code by contract: it keeps no owning objects across barriers).
      for (FiberState& f : b.fibers) f.self = ctx::fiber();
      break;
    }
    // Every fiber polls: give the OS thread to other blocks and ranks, longer the longer nothing moves.
    if (++idleRounds < 8) {
      sched_yield();
    } else {
      const long ns = std::min<long>(2000L * (idleRounds - 7), 200000L);
      timespec ts{0, ns};
      nanosleep(&ts, nullptr);
    }
  }
  tBlock = nullptr;
}

}  // namespace

Thread& current() { return tFiber->thread; }

void switchPoint() {
  BlockRun* b = tBlock;
  if (b->rng == 0) return;
  if ((nextRandom(b->rng) & 7) == 0) {
    ++b->progress;  // a preempted fiber was doing work
    yieldNow(Yield::Preempt);
  }
}

void spinYield() { yieldNow(Yield::Spin); }

void sleepNs(unsigned ns) {
  (void)ns;  // the scheduler backs off by itself once every fiber waits
  yieldNow(Yield::Spin);
}

uint64_t clockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void barrier(int id, int n) {
  BlockRun* b = tBlock;
  switchPoint();
  arriveAndWait(b->bars[id], n, id, [] {});
}

void warpSync(unsigned mask) {
  BlockRun* b = tBlock;
  WarpState& w = b->warps[tFiber->thread.tid / kWarpLanes];
  arriveAndWait(w.bar, std::popcount(mask), 100 + tFiber->thread.tid / kWarpLanes, [] {});
}

uint64_t warpShfl(unsigned mask, uint64_t v, int srcLane) {
  BlockRun* b = tBlock;
  const int lane = tFiber->thread.tid % kWarpLanes;
  WarpState& w = b->warps[tFiber->thread.tid / kWarpLanes];
  const int buf = static_cast<int>(w.bar.gen & 1);
  w.vals[buf][lane] = v;
  arriveAndWait(w.bar, std::popcount(mask), 100 + tFiber->thread.tid / kWarpLanes, [] {});
  return w.vals[buf][srcLane & (kWarpLanes - 1)];
}

unsigned warpBallot(unsigned mask, bool p) {
  BlockRun* b = tBlock;
  const int lane = tFiber->thread.tid % kWarpLanes;
  WarpState& w = b->warps[tFiber->thread.tid / kWarpLanes];
  const int buf = static_cast<int>(w.bar.gen & 1);
  // The lanes of a warp are fibers of one OS thread: each adds its bit, the lane completing the barrier
  // publishes the word for this generation and clears the sum for the next.
  if (p) w.ballotSum |= 1u << lane;
  arriveAndWait(w.bar, std::popcount(mask), 100 + tFiber->thread.tid / kWarpLanes, [&w, buf] {
    w.ballot[buf] = w.ballotSum;
    w.ballotSum = 0;
  });
  return w.ballot[buf] & mask;
}

void warpAccess128(unsigned mask, void* p, uint64_t* words, bool store) {
  BlockRun* b = tBlock;
  switchPoint();
  const int lane = tFiber->thread.tid % kWarpLanes;
  WarpState& w = b->warps[tFiber->thread.tid / kWarpLanes];
  w.ptrs[lane] = p;
  w.words[lane] = words;
  arriveAndWait(w.bar, std::popcount(mask), 100 + tFiber->thread.tid / kWarpLanes, [&] {
    // The lane completing the barrier performs every lane's access at once (one warp instruction).
    if (store) {
      for (int l = 0; l < kWarpLanes; ++l) {
        if (!(mask >> l & 1u)) continue;
        auto* q = static_cast<uint64_t*>(w.ptrs[l]);
        __atomic_store_n(&q[0], w.words[l][0], __ATOMIC_RELEASE);
        __atomic_store_n(&q[1], w.words[l][1], __ATOMIC_RELEASE);
      }
    } else {
      for (int l = kWarpLanes - 1; l >= 0; --l) {
        if (!(mask >> l & 1u)) continue;
        const auto* q = static_cast<const uint64_t*>(w.ptrs[l]);
        w.words[l][1] = __atomic_load_n(&q[1], __ATOMIC_ACQUIRE);
        w.words[l][0] = __atomic_load_n(&q[0], __ATOMIC_ACQUIRE);
      }
    }
  });
}

bool launch(const LaunchParams& p, void (*entry)(const void*), const void* arg, std::string* error) {
  if (p.grid < 1 || p.block < kWarpLanes || p.block % kWarpLanes != 0 || p.block > kMaxBlockThreads) {
    *error = fmt::format("bad launch shape: grid {} block {} (block must be a multiple of {} up to {})", p.grid,
                         p.block, kWarpLanes, kMaxBlockThreads);
    return false;
  }
  std::vector<std::unique_ptr<BlockRun>> blocks;
  for (int i = 0; i < p.grid; ++i) {
    auto b = std::make_unique<BlockRun>();
    b->block.bid = i;
    b->block.nblocks = p.grid;
    b->block.nthreads = p.block;
    // Each block its own stream of switch decisions, reproducible from the seed.
    b->rng = p.seed ? (p.seed * 0x9e3779b97f4a7c15ull) ^ (uint64_t(i + 1) * 0xbf58476d1ce4e5b9ull) : 0;
    if (p.seed && b->rng == 0) b->rng = 1;
    blocks.push_back(std::move(b));
  }
  // Block 0 runs on the calling thread; the others each get an OS thread (they spin on each other).
  std::vector<std::thread> threads;
  for (int i = 1; i < p.grid; ++i)
    threads.emplace_back([&, i] { runBlock(*blocks[i], p, entry, arg); });
  runBlock(*blocks[0], p, entry, arg);
  for (std::thread& t : threads) t.join();
  for (const auto& b : blocks) {
    if (b->error.empty()) continue;
    *error = fmt::format("{} (launch {}x{}, TUTTI_SIM_SEED={})", b->error, p.grid, p.block, p.seed);
    return false;
  }
  return true;
}

}  // namespace tutti::simt::emu
