// Waiting on a connection's step counters: spin briefly, then sleep on a futex, so many ranks on few
// cores still progress. The counters live in a tuttiConnCtrl_t (sdk/include/tutti/transport.h), which may
// be shared between processes (`shared`: non-private futexes).
#pragma once

#include <tutti/transport.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tutti {
class ProxyTask;
}

namespace tutti::host {

// What a wait needs besides the counter: how long to spin, when to give up, and what stops it.
struct WaitContext {
  int spinCount = 2000;                      // polls before sleeping
  // Polls before sleeping for a wait that drives network connections (drive below): each poll is then a system
  // call, which a rank whose cores are shared takes from the ranks it waits for. -1: spinCount.
  int driveSpinCount = -1;
  // The same for a wait on a step of kLongNetStepBytes or more (the caller applies it: HostPrims). -1: driveSpinCount.
  int longStepDriveSpinCount = -1;
  int64_t timeoutNs = 0;                     // 0: wait forever (abort still ends it)
  const std::atomic<bool>* abortFlag = nullptr;
  bool shared = false;                       // futex words in inter-process memory
  // Raised when the other end's process is gone (its bootstrap lifeline ended); checked while asleep. Null for
  // a peer in this process, or on the network (its connection closes by itself).
  const std::atomic<uint8_t>* peerGone = nullptr;
  // TUTTI_WAIT_WARN: once a wait has slept this long, onSlow(slowCtx, waitedNs) is called once (it logs); the
  // wait goes on. 0: never. `warnedOp` lets the caller report one wait per operation.
  int64_t warnNs = 0;
  std::atomic<uint64_t>* warnedOp = nullptr;
  void (*onSlow)(const void* slowCtx, int64_t waitedNs) = nullptr;
  const void* slowCtx = nullptr;
  // Network connections the waiting thread drives itself (proxy.h, proxyProgressInline): progressed on every
  // poll while it spins. Whatever the wait, a thread about to sleep hands such work to the proxy thread.
  ProxyTask* const* drive = nullptr;
  int nDrive = 0;
  // The network connection whose counter is waited on, when it is one: once the spins are over, the thread
  // sleeps in the net plugin on it and the drive tasks (proxyWaitNetwork) where it can, and on the futex otherwise.
  ProxyTask* netTask = nullptr;
};

// A network step this long keeps its waits for long enough that they sleep after WaitContext::longStepDriveSpinCount.
constexpr size_t kLongNetStepBytes = size_t{128} << 10;

enum class WaitStatus { Ready, Aborted, TimedOut, PeerClosed };

// Paces a polling loop: a pause after every poll and, every few polls, a yield of the core. How often
// depends on the spin budget, which says how scarce cores are (long while every local rank has a core,
// short when ranks outnumber cores; see commInitRank). With a long budget yields are rare system calls;
// with a short one the rank being waited for may be queued behind the poller on its core, so the core is
// handed over after a few polls (~0.1 us) rather than after ~1.5 us. waitAtLeast spins with one; custom
// polling loops (LL line flags) use one too so they give way as promptly.
class SpinPacer {
 public:
  explicit SpinPacer(int spinCount) : period_(std::clamp(spinCount / 128, 1, 128)), untilYield_(period_) {}
  // Call after a poll that found nothing. Returns true when it yielded the core (a good moment to check
  // abort and closed flags, since the yield may have lasted a whole time slice).
  bool pause() {
    cpuRelax();
    if (--untilYield_ > 0) return false;
    untilYield_ = period_;
    yieldCore();
    return true;
  }

  static void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

 private:
  static void yieldCore();
  int period_;
  int untilYield_;
};

// Waits until *counter >= target (acquire). `waiters`/`seq` are the counter's futex pair; `closed` is the
// other end's closed flag (checked while sleeping).
WaitStatus waitAtLeast(uint64_t* counter, uint32_t* waiters, uint32_t* seq, const uint32_t* closed,
                       uint64_t target, const WaitContext& ctx);

// Stores value (release) and wakes sleepers, if any. Cheap when nobody sleeps: no full fence, so a sleeper that
// announced itself while the store was on its way is not woken and wakes at the end of its first slice instead
// (waitAtLeast: 100 us, then doubling).
void publish(uint64_t* counter, uint32_t* waiters, uint32_t* seq, uint64_t value, bool shared);

// Why a communicator gave up, as recorded once (first failure wins) and passed to its peers through the
// closed flags: the rank to blame, and whether it was a timeout (the rank never came) or a failure.
inline constexpr int kFailureTimeoutBit = 1 << 24;
inline int failureRecord(int rank, bool timedOut) { return rank | (timedOut ? kFailureTimeoutBit : 0); }
inline int failureRank(int record) { return record & (kFailureTimeoutBit - 1); }
inline bool failureTimedOut(int record) { return (record & kFailureTimeoutBit) != 0; }

// Marks one end closed and wakes every sleeper on both counters. `failure` >= 0 is the failureRecord that
// made this end close (stored as failure + 2; 1 means closed with no known cause), so the other end can
// report the real culprit rather than the neighbour that gave up.
void closeEnd(tuttiConnCtrl_t* ctrl, bool senderSide, bool shared, int failure = -1);

// Decodes a closed flag into a failureRecord, blaming `peer` (the other end) when no cause was recorded.
inline int closedFailure(uint32_t closedValue, int peer) {
  return closedValue >= 2 ? static_cast<int>(closedValue) - 2 : failureRecord(peer, false);
}

}  // namespace tutti::host
