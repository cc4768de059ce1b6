// Connections for the primitives stress tests, built in the test the way the transports build them:
//   P2p:      the receiver's FIFO in this process, both ends see the same addresses (plugins/p2p).
//   ShmTwice: one shared segment mapped at two addresses, one per end, futex words shared (plugins/shm
//             between two processes). TSan cannot relate the two views; the byte checks do the work there.
//   Proxied:  the sender writes its own FIFO; a wire thread (forwardSteps) moves each whole slot into the
//             receiver's landing area and publishes tail, as core/src/proxy/net_transport.cc does.
// Plus the random operation plans and data patterns every test shares.
#pragma once

#include "device/host/prims.h"

#include <tutti/transport.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace tutti::stress {

enum class Transport { P2p, ShmTwice, Proxied };
const char* transportName(Transport t);
const char* protoName(int proto);

// The communicator's geometry at the defaults of NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE and NCCL_BUFFSIZE
// (indexed by TUTTI_PROTO_*).
inline constexpr size_t kGeometry[TUTTI_NUM_PROTOCOLS] = {262144, 4915200, 4194304};

// Zeroed memory of one connection end: a control page, then one page-aligned region per protocol (as
// plugins/shm lays out its segment). Mapped once, or twice at two different addresses.
class FifoMemory {
 public:
  // Returns null and sets *err when the memory cannot be had.
  static std::unique_ptr<FifoMemory> create(const size_t regionBytes[TUTTI_NUM_PROTOCOLS], bool twice,
                                            std::string* err);
  ~FifoMemory();
  FifoMemory(const FifoMemory&) = delete;
  FifoMemory& operator=(const FifoMemory&) = delete;

  // view 0: the sender's mapping, view 1: the receiver's (the same address unless mapped twice).
  tuttiConnCtrl_t* ctrl(int view) const { return reinterpret_cast<tuttiConnCtrl_t*>(views_[view]); }
  char* region(int view, int proto) const;

 private:
  FifoMemory() = default;
  char* views_[2] = {};
  size_t bytes_ = 0;
  size_t offset_[TUTTI_NUM_PROTOCOLS] = {};
  size_t regionBytes_[TUTTI_NUM_PROTOCOLS] = {};
};

// One connection and its two ends as HostPrims sees them.
struct Link {
  Transport kind = Transport::P2p;
  std::unique_ptr<FifoMemory> recvMem;  // the receiver's FIFO (proxied: its landing area)
  std::unique_ptr<FifoMemory> sendMem;  // proxied only: the sender's own FIFO, read by the wire thread
  host::HostConn send, recv;
};
std::unique_ptr<Link> makeLink(Transport kind, int sendRank, int recvRank, std::string* err);

// The wire thread of a proxied link: forwards `steps` steps (sender FIFO -> receiver landing slot, sizes in
// wire bytes, protocol -1, then receiver tail and sender head). Returns "" or what went wrong.
std::string forwardSteps(Link* link, uint64_t steps, const host::WaitContext& wait);

// One operation of a plan: every thread of a test walks the same list.
struct PlannedOp {
  size_t bytes = 0;
  uint64_t seed = 0;     // data pattern of this operation (different every operation)
  int spinCount = 0;     // polls before sleeping, for both ends
  int pauseUs = 0;       // a thread whose turn it is (pauser) sleeps this long before the operation
  int pauser = -1;       // which thread pauses (index into the test's threads; -1: none)
  bool copyOut = false;  // tree middle: recvReduceCopySend (true) or recvReduceSend
  // The sender starts only once the receiver is about to receive (and polls long): the reader is then
  // polling the line flags while the lines are being written, the moment a line read too early would
  // be caught by the data check on memory TSan cannot follow (the twice-mapped segment).
  bool rendezvous = false;
};
// `nOps` operations with sizes around the protocol's line and slot boundaries: 0, 1, odd, k lines +- 1, a
// full slot +- 1, several slots, random small. `bigEvery`: roughly one operation in that many spans a slot
// or more (kept rare for the large-slot protocols so the run stays short under TSan).
std::vector<PlannedOp> makePlan(int proto, size_t slotData, int nOps, int nThreads, uint64_t seed, int bigEvery);
// `nOps` rendezvous operations of one or two lines (1 byte, a line -1/0/+1, two lines): the reader polls
// the very line being written, where a writer-order bug has the widest window.
std::vector<PlannedOp> makeLinePlan(int proto, int nOps, uint64_t seed);
// `nOps` operations of 1 to 56 bytes in runs of 20 to 400 of one lane size (LL lanes of 16, 32 or 64 bytes,
// host/prims.h llLaneBytes), no rendezvous and few pauses: the sender runs ahead, so several packets of one cache
// line are in flight at once, written by one end while the other reads the packets beside them.
std::vector<PlannedOp> makeTinyPlan(int nOps, uint64_t seed);
size_t maxBytes(const std::vector<PlannedOp>& plan);
// Steps one connection makes for the whole plan (as HostPrims slices each call).
uint64_t planSteps(const std::vector<PlannedOp>& plan, size_t slotData);

// Deterministic bytes of operation `seed` for thread `who`: a stale or torn line shows as a mismatch.
void fillPattern(uint64_t seed, int who, char* out, size_t bytes);

// Runs each body on its own thread; the first to fail raises `abort` so the others stop waiting. Returns
// every failure, one per line ("" when all succeeded).
std::string runThreads(const std::vector<std::function<std::string()>>& bodies, std::atomic<bool>* abort);

// First byte where `got` differs from `want`, described; "" when equal.
std::string compareBytes(const char* what, const char* got, const char* want, size_t bytes);

// Wait settings of the stress runs: short spins so the futex sleep paths run too, a deadline so a lost
// wake-up fails the test instead of hanging it.
host::WaitContext stressWait(int spinCount, const std::atomic<bool>* abort);

}  // namespace tutti::stress
