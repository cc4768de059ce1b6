// Primitives of the host backend: each step moves up to one FIFO slot through a connection.
// The sender waits for a free slot (head + NCCL_STEPS > step), writes it, records its size and publishes
// tail; the receiver waits for the slot's data, consumes it and publishes head (release/acquire).
//   Simple: data in place in the slot; the receiver waits for tail.
//   LL:     data in 8-byte lines carrying their own flag (device/common/protocols.h); the receiver polls the
//           flags (one cache line per 4 bytes arrives with its flag), and sleeps on tail only after spinning.
//           On a proxied (network) connection the slot arrives whole in the Simple buffer and tail says so.
#pragma once

#include "device/common/protocols.h"
#include "device/common/reduce_ops.h"
#include "device/common/work.h"
#include "device/host/wait.h"

#include <tutti/transport.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

namespace tutti::host {

// One end of a connection as the primitives use it. `step` persists across operations: both ends count
// the same steps because every operation is sliced identically on both ranks.
struct HostConn {
  tuttiConnector_t conn{};
  uint64_t step = 0;
  uint64_t headSeen = 0;  // send end: the receiver's head as last read (it only grows), saves re-reading it
  // Send end: the lane size (llLaneBytes) of the last step sent, 0 for a slot (any protocol). Steps of one geometry
  // share the FIFO; one of another waits until the receiver has consumed every step before it.
  size_t laneBytes = 0;
  // Bytes of lanes the steps of one lane size cycle through (llDepth), the same at both ends; 0: up to kMaxLanes.
  size_t laneRegion = 0;
  // Send end: the slots the last Simple step cycled through (HostPrims::useSlotRing); a step of another ring waits,
  // as one of another lane size does, until the receiver has consumed every step before it.
  uint32_t slotRing = TUTTI_STEPS;
  // Receive end of a direct LL connection: one bit per 8-byte word of the LL buffer, set while the word may hold
  // packet data (what a lane's packet copies as it is), clear while it holds zero, a header or an LL line
  // (llHeaderTrusted). Empty until the first LL step: the buffer starts zeroed.
  std::vector<uint64_t> llDataWords;
  int peer = -1;
  const std::atomic<uint8_t>* peerGone = nullptr;  // another process on this host: its lifeline (WaitContext)
  // A network end the rank drives itself (proxy.h, proxyProgressInline); null for ends the proxy thread alone
  // moves (intra-node transports, device backends, one-sided service connections).
  ProxyTask* proxyTask = nullptr;
  // A driven network end whose plugin takes host pointers (TUTTI_NET_ZERO_COPY_MIN_BYTES): Simple steps of at
  // least `userBufferMinBytes` may move straight between the user's buffers and the wire (netSendFrom /
  // netRecvInto); 0: never. `netEnd` is the transport's resource of the end, `sendFromUser` its netSendFrom.
  void* netEnd = nullptr;
  size_t userBufferMinBytes = 0;
  void (*sendFromUser)(void* netEnd, uint64_t step, const void* data) = nullptr;
};

// LL lanes: a small LL step (llSendSmall / llRecvSmall) takes a lane of the LL buffer rather than one of its
// NCCL_STEPS slots: room for a packet, step s in lane s mod lanes (llDepth: buffer / lane, at most
// kMaxLanes). A sender may then run as many steps ahead of its receiver as there are lanes (256, not 8): tiny
// calls issued back to back are read in long runs by a receiver that shares its core (ranks outnumbering cores)
// rather than one per hand-over. Both ends derive the lane from the step's size. 0: the buffer holds no more lanes
// than slots, the step takes a slot (LL lines).
// A lane holds a packet, not LL lines: the data as it is from the lane's start, and in the lane's last 8 bytes one
// header word llLine(bytes, llHeaderFlag(step)) stored with release after the data. Both ends are host threads of one
// node (a lane is never proxied), so the release / acquire pair on the header orders the data without a flag per 4
// bytes: half the cache lines of LL, one copy each way (2 ranks, AlltoAll of 512 B: 1.20 -> 0.40 us per call).
// The header's place depends on the lane size alone, never on the packet's: a packet's data never reaches a header
// word of its own lane size. Data a packet of another lane size left there can look like any header (the last bytes
// of an older header with a data byte over its lowest looked like the next header of that lane, one time in 256): the
// receiver keeps track of the words packets' data covered (HostConn::llDataWords) and believes a header in one of
// them only once tail covers its step (llHeaderTrusted).
// Lanes are 16 B (packets of up to 8 B of data), 32 B (up to 24 B) or whole 64-byte lines: a receiver behind its
// sender then takes one miss on a line the other core wrote for every four (two) steps, where a line per step cost a
// miss each (2 processes over shm, 2 cores, Broadcast, the median of five interleaved runs of 1000 calls, us, a line
// per step -> 16 B or 32 B lanes: 2 ranks 8 B 0.21 -> 0.13, 16 B 0.23 -> 0.18; 4 ranks 8 B 0.48 -> 0.36, 16 B 0.48 ->
// 0.41; AllReduce, AllGather, ReduceScatter and AlltoAll of 8-32 B, where each end waits for the other every call,
// within the runs' spread). A packet never crosses a line.
inline size_t laneHeaderWord(size_t laneBytes) { return laneBytes / 8 - 1; }
inline size_t llLaneBytes(const tuttiConnector_t& conn, size_t bytes) {
  const size_t packet = (divUp(bytes, size_t{8}) + 1) * 8;
  const size_t lane = packet <= 16 ? 16 : packet <= 32 ? 32 : divUp(packet, size_t{64}) * 64;
  return conn.buffSizes[TUTTI_PROTO_LL] / lane > TUTTI_STEPS ? lane : 0;
}
// Steps in flight a sender may have: the lanes of that size, at most kMaxLanes, or the slots. The lanes a
// connection cycles through stay in the cores' caches: the whole 256 KiB buffer of 64-byte lanes (4096) went
// through it once per 4096 calls, and a line the sender wrote again had most likely left its cache; 256 lanes stay
// (2 processes over shm, 2 cores whose cache line round trip took 0.5 us, medians of three interleaved runs of
// 1000 calls, us, the whole buffer -> 256 lanes: AllReduce 8 B 0.70 -> 0.36, AlltoAll 256 B 1.28 -> 0.50,
// AllGather 1 KiB 1.30 -> 0.66; 8 processes, Broadcast 8 B 1.37 -> 1.03; 16 lanes 3.29, 64 lanes 1.21).
// Where every rank has a core, a connection's laneRegion bounds them by bytes as well: lanes of 256 B to 4 KiB
// cycled through nearly the whole buffer too (1 KiB: 240 lanes).
inline constexpr uint64_t kMaxLanes = 256;
inline constexpr uint64_t kMinRegionLanes = 16;
inline uint64_t llDepth(const HostConn& c, size_t laneBytes) {
  if (!laneBytes) return TUTTI_STEPS;
  uint64_t lanes = std::min<uint64_t>(c.conn.buffSizes[TUTTI_PROTO_LL] / laneBytes, kMaxLanes);
  if (c.laneRegion) lanes = std::min(lanes, std::max<uint64_t>(c.laneRegion / laneBytes, kMinRegionLanes));
  return lanes;
}

// Whether a Simple step of `bytes` on `c` may be received straight into the user's output, or sent from the
// user's buffer. The primitives and the step counter ask the same question, so both ends of the announcement
// (what the proxy posts) and the consumption (where the rank finds the data) agree.
inline bool userBufferStep(const HostConn* c, int proto, size_t bytes) {
  return c && c->userBufferMinBytes && proto == TUTTI_PROTO_SIMPLE && bytes >= c->userBufferMinBytes;
}

// Describes the running operation for error messages ("rank 3 AllReduce opCount 7 channel 1").
struct OpLabel {
  int rank = -1;
  const char* opName = "";
  uint64_t opCount = 0;
  int channel = 0;
  std::atomic<int>* failure = nullptr;  // the communicator's first failureRecord (wait.h), -1 while none
  // Asks `peer` why it closed a network connection (its failureRecord, or -1 if it does not say in time).
  int (*askFailure)(void* ctx, int peer) = nullptr;
  void* askCtx = nullptr;
  // Collectives only: on a timeout, learns which ranks reached `opCount` (comm/callcheck.h); the text is
  // appended to the error. Null: the error names the peer waited for only.
  std::string (*whoArrived)(void* ctx, uint64_t opCount) = nullptr;
};

// Most connections one primitives object receives from or sends to in one step (a tree node's children).
inline constexpr int kMaxPrimsPeers = 3;

// TUTTI_WAIT_WARN reports one slow wait per operation of a communicator, whichever of its channels waits first
// (Send and Recv of one point-to-point group share an opCount; collectives count apart from them). True for the
// first slow wait of (opName, opCount); `warnedOp` is the communicator's record (null: always true).
bool firstSlowWarning(std::atomic<uint64_t>* warnedOp, const char* opName, uint64_t opCount);

class HostPrims {
 public:
  // recv / send may be null when the algorithm does not use that direction. `eltSize` is the size of an
  // element of the offsets (1 for byte-wise collectives).
  HostPrims(HostConn* recv, HostConn* send, const void* input, void* output, size_t eltSize,
            const ResolvedRedOp& op, const WaitContext& wait, const OpLabel& label, int proto = TUTTI_PROTO_SIMPLE)
      : HostPrims(&recv, recv ? 1 : 0, &send, send ? 1 : 0, input, output, eltSize, op, wait, label, proto) {}
  // Several peers per direction (trees): a receive step takes one slot from EVERY recv connection and
  // reduces them with the input in connection order (the same order on every call); a send step writes
  // the same data to EVERY send connection. At most kMaxPrimsPeers each; null entries are not allowed.
  HostPrims(HostConn* const* recvs, int nRecv, HostConn* const* sends, int nSend, const void* input, void* output,
            size_t eltSize, const ResolvedRedOp& op, const WaitContext& wait, const OpLabel& label,
            int proto = TUTTI_PROTO_SIMPLE);
  // Hands what its network sends still have in flight to the proxy thread (proxyRelease).
  ~HostPrims();
  HostPrims(const HostPrims&) = delete;
  HostPrims& operator=(const HostPrims&) = delete;

  ncclResult_t send(size_t in, size_t n) { return run(kSrcInput | kSend, in, 0, n, false); }
  ncclResult_t recv(size_t out, size_t n) { return run(kRecv | kDstOutput, 0, out, n, false); }
  ncclResult_t copySend(size_t in, size_t out, size_t n) {
    return run(kSrcInput | kDstOutput | kSend, in, out, n, false);
  }
  ncclResult_t recvCopySend(size_t out, size_t n) { return run(kRecv | kDstOutput | kSend, 0, out, n, false); }
  ncclResult_t recvReduceSend(size_t in, size_t n) { return run(kSrcInput | kRecv | kSend, in, 0, n, false); }
  ncclResult_t recvReduceCopy(size_t in, size_t out, size_t n) {
    return run(kSrcInput | kRecv | kDstOutput, in, out, n, true);
  }
  ncclResult_t recvReduceCopySend(size_t in, size_t out, size_t n) {
    return run(kSrcInput | kRecv | kDstOutput | kSend, in, out, n, true);
  }
  // Sends from the output buffer what an earlier step left there (a tree root broadcasting its result).
  ncclResult_t sendFromOutput(size_t out, size_t n) { return run(kSrcOutput | kSend, 0, out, n, false); }
  // No communication: output = postOp(preOp(input)) (one rank, or a self send/recv).
  ncclResult_t localCopy(size_t in, size_t out, size_t n);
  // output[out] = received + (fromOutput ? output[out] : preOp(input[in])), postOp when asked: adds a partial
  // sum to an accumulator (PAT ReduceScatter, pat.h).
  ncclResult_t recvReduceInto(bool fromOutput, size_t in, size_t out, size_t n, bool postOp) {
    return run(kRecv | kDstOutput | (fromOutput ? kSrcOutput : kSrcInput), in, out, n, postOp);
  }
  // The buffers later calls' offsets refer to (pat.h moves between the output and scratch memory).
  void setBuffers(const void* input, void* output) {
    input_ = static_cast<const char*>(input);
    output_ = static_cast<char*>(output);
  }

  // The fused deterministic exchange (det_exchange.h), one-shot collectives: a Simple receive step of `bytes` on
  // connection 0, left in its slot (*data points there) until recvRelease hands the slot back. `landing`: the
  // caller registered the step with netRecvInto, the data arrives there instead.
  ncclResult_t recvPeek(size_t bytes, const char** data, const char* landing = nullptr) {
    return waitRecv(0, bytes, data, landing);
  }
  void recvRelease();
  // Whether the step recvPeek would wait for is complete (Simple), without waiting.
  bool recvReady() const;

  // Zero copy on network ends (HostConn::userBufferMinBytes). recv: receive and recvCopySend steps read their
  // data in the output, where the proxy received it; the caller registered those steps with netRecvInto
  // (HostStepCounter::recordUserBuffers) before announcing them. send: a step whose data already sits in the
  // user's buffers (the output, or the input without a pre-op) is sent from there; the operation then ends
  // with waitSent(). The caller enables either only where no later step of the operation writes what an
  // earlier step reads (ring collectives, point-to-point without overlapping buffers).
  void useUserBuffers(bool recv, bool send) {
    userRecv_ = recv;
    userSend_ = send;
  }
  // Waits until every step sent from a user buffer has left (its isend completed): the buffer is the
  // caller's again. No-op when none was; `all`: waits for every step posted on the send connections.
  ncclResult_t waitSent(bool all = false);
  bool sentFromUser() const {
    for (int i = 0; i < nSend_; ++i)
      if (sentFromUser_[i]) return true;
    return false;
  }

  // LL: the steps of this object take lanes of `laneBytes` (llLaneBytes; one step each, a packet) instead of slots.
  void useLanes(size_t laneBytes) { laneBytes_ = laneBytes; }
  // Simple steps on direct (not proxied) connections cycle through the first `slots` (1 to NCCL_STEPS) of the
  // NCCL_STEPS slots, at most that many in flight: fewer slots written and read again while still in cache where
  // many connections are busy at once (the deterministic exchange's n - 1 per rank). Both ends of a connection
  // must take the same ring for the same steps: the objects of one operation on both ranks.
  void useSlotRing(uint32_t slots) { slotRing_ = std::clamp<uint32_t>(slots, 1, TUTTI_STEPS); }

  // Slot capacity in elements.
  size_t slotElems() const { return slotData_ / eltSize_; }
  // Data bytes a slot of protocol `proto` carries, for connections of this geometry.
  static size_t slotDataBytes(const tuttiConnector_t& conn, int proto) {
    const size_t slotBytes = conn.buffSizes[proto] / TUTTI_STEPS;
    if (proto == TUTTI_PROTO_LL) return llSlotData(slotBytes);
    if (proto == TUTTI_PROTO_LL128) return ll128SlotData(slotBytes);
    return slotBytes;
  }

 private:
  enum : unsigned { kSrcInput = 1, kRecv = 2, kDstOutput = 4, kSend = 8, kSrcOutput = 16 };
  ncclResult_t run(unsigned mode, size_t in, size_t out, size_t n, bool postOp);
  ncclResult_t waitFailed(WaitStatus st, const HostConn* c, bool sending, uint64_t step) const;
  ncclResult_t waitTail(const HostConn* rc) const;
  // inPlace: the step was received straight into the user's buffer there (zero copy), Simple only.
  ncclResult_t waitRecv(int peer, size_t bytes, const char** data, const char* inPlace = nullptr);
  ncclResult_t waitRecvLL(int peer, size_t bytes, const char** data);
  ncclResult_t waitSend(int peer, char** slot);
  ncclResult_t checkSize(const HostConn* c, size_t bytes) const;
  ncclResult_t packetMismatch(const HostConn* rc, size_t bytes, uint64_t header) const;
  // Whether the current slot of direct (not proxied) connection c says `bytes` in this protocol, as read now.
  bool sizeIs(const HostConn* c, size_t bytes) const;
  // WaitContext::onSlow of this object's waits: one WARN per operation (TUTTI_WAIT_WARN).
  struct SlowWait {
    const HostPrims* prims;
    const HostConn* conn;
    bool sending;
  };
  static void warnSlowWait(const void* slowWait, int64_t waitedNs);
  WaitContext connWait(const HostConn* c, const SlowWait* slow) const;
  void llWrite(char* slot, const char* src, size_t bytes, uint64_t step);
  void ll128Write(char* slot, const char* src, size_t bytes, uint64_t step);

  HostConn* recvs_[kMaxPrimsPeers] = {};
  HostConn* sends_[kMaxPrimsPeers] = {};
  int nRecv_ = 0, nSend_ = 0;
  ProxyTask* drive_[2 * kMaxPrimsPeers] = {};  // the proxyTasks of recvs_ and sends_ (WaitContext::drive)
  int nDrive_ = 0;
  const char* input_;
  char* output_;
  size_t eltSize_;
  int proto_;
  size_t slotData_;  // data bytes per slot (a multiple of eltSize_)
  size_t stepBytes_ = 0;  // data bytes of the step run() moves now (how long its network waits spin: connWait)
  const ResolvedRedOp& op_;
  WaitContext wait_;
  OpLabel label_;
  bool userRecv_ = false, userSend_ = false;
  size_t laneBytes_ = 0;  // useLanes
  uint32_t slotRing_ = TUTTI_STEPS;  // useSlotRing
  // The slots a Simple step on connection c cycles through: slotRing_ on a direct one, NCCL_STEPS on a proxied one
  // (its proxy lands steps in step % NCCL_STEPS) and in the other protocols.
  uint32_t ringOf(const HostConn* c) const {
    return proto_ == TUTTI_PROTO_SIMPLE && !(c->conn.flags & TUTTI_CONN_PROXIED) ? slotRing_ : TUTTI_STEPS;
  }
  bool sentFromUser_[kMaxPrimsPeers] = {};  // a step left from a user buffer: waitSent waits for it
};

// Same interface as HostPrims, moving nothing: counts the steps an algorithm will make on EACH of the
// object's receive connections, so a proxy can post exactly the receives an operation needs.
class HostStepCounter {
 public:
  explicit HostStepCounter(size_t slotElems) : slotElems_(slotElems ? slotElems : 1) {}
  HostStepCounter(const HostConn* conn, int proto, size_t eltSize)
      : HostStepCounter(conn ? HostPrims::slotDataBytes(conn->conn, proto) / eltSize : 1) {}
  ncclResult_t send(size_t, size_t n) { return count(n, false, true); }
  ncclResult_t recv(size_t out, size_t n) { return countInto(out, n, false); }
  ncclResult_t copySend(size_t, size_t, size_t n) { return count(n, false, true); }
  ncclResult_t sendFromOutput(size_t, size_t n) { return count(n, false, true); }
  ncclResult_t recvCopySend(size_t out, size_t n) { return countInto(out, n, true); }
  ncclResult_t recvReduceSend(size_t, size_t n) { return count(n, true, true); }
  ncclResult_t recvReduceCopy(size_t, size_t, size_t n) { return count(n, true, false); }
  ncclResult_t recvReduceCopySend(size_t, size_t, size_t n) { return count(n, true, true); }
  ncclResult_t localCopy(size_t, size_t, size_t) { return ncclSuccess; }
  ncclResult_t recvReduceInto(bool, size_t, size_t, size_t n, bool) { return count(n, true, false); }
  void setBuffers(const void*, void*) {}
  // Records every step that HostPrims with useUserBuffers(true, ...) receives straight into `output` (on
  // `conn`, a ring or point-to-point receive end): the step's index from this counter's start, its address
  // and its bytes.
  struct UserStep {
    uint64_t step;
    char* ptr;
    size_t bytes;
  };
  void recordUserBuffers(const HostConn* conn, int proto, void* output, size_t eltSize, std::vector<UserStep>* out) {
    userConn_ = conn;
    userProto_ = proto;
    userOutput_ = static_cast<char*>(output);
    userElt_ = eltSize;
    userSteps_ = out;
  }
  uint64_t recvSteps() const { return steps_; }
  uint64_t sendSteps() const { return sendSteps_; }  // on EACH send connection (profiler ProxyOps)

 private:
  ncclResult_t count(size_t n, bool recv, bool send) {
    const uint64_t steps = n == 0 ? 1 : (n + slotElems_ - 1) / slotElems_;  // as HostPrims slices a call
    if (recv) steps_ += steps;
    if (send) sendSteps_ += steps;
    return ncclSuccess;
  }
  // A receive into the output (recv, recvCopySend): the steps zero copy takes are recorded.
  ncclResult_t countInto(size_t out, size_t n, bool send) {
    if (userSteps_) {
      for (size_t done = 0, k = 0; done < n; done += slotElems_, ++k) {
        const size_t bytes = std::min(slotElems_, n - done) * userElt_;
        if (userBufferStep(userConn_, userProto_, bytes))
          userSteps_->push_back({steps_ + k, userOutput_ + (out + done) * userElt_, bytes});
      }
    }
    return count(n, true, send);
  }
  size_t slotElems_;
  uint64_t steps_ = 0, sendSteps_ = 0;
  const HostConn* userConn_ = nullptr;
  int userProto_ = 0;
  char* userOutput_ = nullptr;
  size_t userElt_ = 1;
  std::vector<UserStep>* userSteps_ = nullptr;
};

// Announces `steps` more expected receive steps on `conn` (see tuttiConnCtrl_t::recvWanted).
void announceRecvSteps(HostConn* conn, uint64_t steps);

// One LL step of a small message (at most the slot's LL data) on a direct connection, without a HostPrims: the
// messages of a one-shot call of a few bytes (oneshot.cc), where building the primitives costs more than the step.
// Lines, header and size records are HostPrims' own, so the other end may use either. A step that is not ready at
// once (no free slot; no data after the spin) or holds something else (a mismatched call) is handed to a HostPrims,
// which sleeps, times out and names errors as every step does. No announcement: only proxies read it.
// llSmallConn: whether c is such a connection (neither driven nor proxied, with an LL buffer).
inline bool llSmallConn(const HostConn* c) {
  return c->conn.ctrl && c->conn.buffs[TUTTI_PROTO_LL] && !c->proxyTask && !c->netEnd &&
         !(c->conn.flags & TUTTI_CONN_PROXIED);
}
// Writes src's bytes as the connection's next step.
ncclResult_t llSendSmall(HostConn* sc, const void* src, size_t bytes, const WaitContext& wait, const OpLabel& label);
// Reads the connection's next step into dst and hands the slot back.
ncclResult_t llRecvSmall(HostConn* rc, void* dst, size_t bytes, const WaitContext& wait, const OpLabel& label);

}  // namespace tutti::host
