// Waiting on a connection's step counters: spin briefly, then sleep on a futex, so many ranks on few
// cores still progress. The counters live in a tuttiConnCtrl_t (sdk/include/tutti/transport.h), which may
// be shared between processes (`shared`: non-private futexes).
#pragma once

#include <tutti/transport.h>

#include <atomic>
#include <cstdint>

namespace tutti::host {

// What a wait needs besides the counter: how long to spin, when to give up, and what stops it.
struct WaitContext {
  int spinCount = 2000;                      // polls before sleeping
  int64_t timeoutNs = 0;                     // 0: wait forever (abort still ends it)
  const std::atomic<bool>* abortFlag = nullptr;
  bool shared = false;                       // futex words in inter-process memory
  int peerPid = 0;                           // >0: the other end's process on this host, checked while asleep
};

enum class WaitStatus { Ready, Aborted, TimedOut, PeerClosed };

// Waits until *counter >= target (acquire). `waiters`/`seq` are the counter's futex pair; `closed` is the
// other end's closed flag (checked while sleeping).
WaitStatus waitAtLeast(uint64_t* counter, uint32_t* waiters, uint32_t* seq, const uint32_t* closed,
                       uint64_t target, const WaitContext& ctx);

// Stores value (release) and wakes sleepers, if any. Cheap when nobody sleeps.
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
