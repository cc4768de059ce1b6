// Diagnostics of calls that do not match across ranks:
// - TUTTI_CHECK_CALLS=1: before any data moves, every launch compares each collective's signature (opCount,
//   function, count, datatype, op, root, algorithm/protocol/channels) along the edges of a binary tree over
//   the ranks (if every edge agrees, all agree), then the root's verdict travels back down: every rank fails
//   a mismatched launch with ncclInvalidUsage and the same text naming both ranks' calls. Each rank sends
//   and receives at most 3 small messages per launch. Sends and receives are compared pairwise with each
//   peer of the group (one message per peer and direction).
// - A collective that times out tells every peer which opCount it is stuck in and names the ranks whose
//   note is missing or older (they did not arrive).
// - TUTTI_WAIT_WARN: a wait that lasts that long logs one WARN per operation (the wait itself goes on).
#pragma once

#include <tutti/common.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

struct ncclComm;

namespace tutti {

namespace host {
struct CommLaunch;
}

// Per-communicator state (a member of ncclComm), set at init from the parameters.
struct CommCallCheck {
  bool checkCalls = false;           // TUTTI_CHECK_CALLS
  int64_t waitWarnNs = 0;            // TUTTI_WAIT_WARN in nanoseconds; 0: off
  std::atomic<uint64_t> warnedOp{0};  // key of the last operation a slow wait was reported for (one WARN each)
  // The stuck-note exchange runs once per communicator; every failing channel reports its result.
  std::mutex stuckMutex;
  bool stuckDone = false;
  std::string stuckText;
};

// Reads TUTTI_CHECK_CALLS and TUTTI_WAIT_WARN into comm->calls (at init).
void callCheckInit(ncclComm* comm);

// TUTTI_CHECK_CALLS: checks the launches of one group whose communicators enabled it, concurrently when
// there are several (one thread may drive several ranks). Collective over each communicator's ranks, like
// the launch itself. On a mismatch returns ncclInvalidUsage on every rank concerned and cancels the
// communicator's operations (its peers fail promptly too).
ncclResult_t callCheckLaunches(host::CommLaunch* launches, size_t n);

// OpLabel::whoArrived for a collective of `comm` stuck at `opCount`: tells every peer, collects their notes
// for a short grace period, and returns " ranks 2,3 did not arrive at opCount 7 (ranks 0,1 did)" (empty
// when nothing could be learned). Runs the exchange once per communicator; later callers get its text.
std::string callCheckWhoArrived(void* comm, uint64_t opCount);

}  // namespace tutti
