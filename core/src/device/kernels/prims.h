// Device primitives: the interface ring.h and tree.h drive (send, recv, copySend, recvCopySend,
// recvReduceSend, recvReduceCopy, recvReduceCopySend, sendFromOutput, localCopy), run by every thread of a
// block together. Each call is cut into steps of at most one FIFO slot, exactly as the host backend cuts
// it, and the FIFOs, step counters and line formats are the host backend's (device/common/protocols.h), so
// proxies and transports see the same traffic from both.
//
// One step, every protocol:
//   1. wait threads (thread i for receive peer i, thread 8 + j for send peer j) wait for their counter:
//      tail for data (Simple, proxied or empty LL/LL128 slots), head for a free slot;
//   2. every thread moves its share of the data (reduceCopy over the slots for Simple; for LL every thread
//      polls its own 16-byte pair of lines, for LL128 each group of 8 lanes polls one 128-byte line);
//   3. after a barrier, a fence, then thread j publishes the sizes and tail of send peer j, and thread 8 + i
//      the head of receive peer i (release stores).
// The protocol is a run-time branch per step (not a template parameter): it keeps the kernel matrix to one
// instance per (datatype, op) while costing one branch per slot.
#pragma once

#include "device/common/protocols.h"
#include "device/kernels/dev_work.h"
#include "device/kernels/reduce_copy.h"
#include "device/simt/simt.h"

namespace tutti::dev {

// Per-block state in shared memory: the first reason a thread stopped, and the work item running.
struct BlockShared {
  int32_t stop;
  DevStatus status;
};

// What every wait of a block needs.
struct WaitEnv {
  const uint32_t* abortWord;
  uint64_t timeoutNs;
  uint64_t warnNs;
  DevSlowWait* slow;  // this work item's record (when warnNs)
  BlockShared* sh;
  int32_t work;
};

TUTTI_DEVICE bool stopped(const WaitEnv& env) { return *static_cast<volatile int32_t*>(&env.sh->stop) != 0; }

TUTTI_DEVICE void recordStop(const WaitEnv& env, StopReason why, int peer, bool sending, uint64_t step,
                             int64_t detail = 0, int64_t detail2 = 0, int64_t want = 0) {
  if (stopped(env)) return;
  DevStatus& s = env.sh->status;
  s.reason = why;
  s.work = env.work;
  s.peer = peer;
  s.sending = sending ? 1 : 0;
  s.step = step;
  s.detail = detail;
  s.detail2 = detail2;
  s.want = want;
  *static_cast<volatile int32_t*>(&env.sh->stop) = 1;
}

// Paces one wait: call after a poll that found nothing; false once the wait must end (the reason recorded).
// Checks abort, the other end's closed flag and the timeout every 64 polls (they cost loads across the bus).
class Poller {
 public:
  TUTTI_DEVICE bool keepWaiting(const WaitEnv& env, const DevConn& c, bool sending, uint64_t step) {
    simt::spinPause();
    if ((++polls_ & 63) != 0) return true;
    if (stopped(env)) return false;
    if (simt::loadAcquire32(env.abortWord) != 0) {
      recordStop(env, StopReason::Aborted, c.peer, sending, step);
      return false;
    }
    const uint32_t closed = simt::loadAcquire32(sending ? &c.ctrl->receiverClosed : &c.ctrl->senderClosed);
    if (closed != 0) {
      recordStop(env, StopReason::PeerClosed, c.peer, sending, step, closed);
      return false;
    }
    if (env.timeoutNs || env.warnNs) {
      const uint64_t now = simt::clockNs();
      if (start_ == 0) {
        start_ = now;
      } else if (env.timeoutNs && now - start_ > env.timeoutNs) {
        recordStop(env, StopReason::TimedOut, c.peer, sending, step);
        return false;
      } else if (env.warnNs && !warned_ && now - start_ > env.warnNs) {
        warned_ = true;
        reportSlow(env, c, sending, step, now - start_);
      }
    }
    return true;
  }
  // Whether the last keepWaiting made the slow checks (every 64th poll): the moment for other rare checks.
  TUTTI_DEVICE bool slowTick() const { return (polls_ & 63) == 0; }

 private:
  // The first thread of the work item to find its wait slow fills the item's record for the host to report.
  TUTTI_DEVICE static void reportSlow(const WaitEnv& env, const DevConn& c, bool sending, uint64_t step,
                                      uint64_t waited) {
    if (simt::atomicAdd32(&env.slow->claimed, 1) != 0) return;
    env.slow->peer = c.peer;
    env.slow->sending = sending ? 1 : 0;
    env.slow->step = step;
    env.slow->waitedNs = waited;
    simt::storeRelease32(&env.slow->ready, 1);
  }

  uint32_t polls_ = 0;
  bool warned_ = false;
  uint64_t start_ = 0;
};

// Whether the slot of `step` on receive connection `c` holds what this rank expects: called once tail
// covers the step. Records a Mismatch when it does not.
TUTTI_DEVICE bool checkSlotSize(const WaitEnv& env, const DevConn& c, uint64_t step, int proto, size_t bytes) {
  const int slot = static_cast<int>(step % TUTTI_STEPS);
  const int64_t got = static_cast<int64_t>(simt::loadVolatile(reinterpret_cast<const uint64_t*>(&c.ctrl->sizes[slot])));
  const int32_t gotProto = static_cast<int32_t>(
      simt::loadAcquire32(reinterpret_cast<const uint32_t*>(&c.ctrl->protos[slot])));
  const bool proxied = (c.flags & TUTTI_CONN_PROXIED) != 0;
  const int64_t want = static_cast<int64_t>(proxied ? lineWireBytes(proto, bytes) : bytes);
  if (got == want && (proxied || gotProto == proto)) return true;
  recordStop(env, StopReason::Mismatch, c.peer, false, step, got, proxied ? -1 : gotProto, static_cast<int64_t>(bytes));
  return false;
}

// Waits until the receive slot of `step` is published (tail), then checks its size.
TUTTI_DEVICE void waitTail(const WaitEnv& env, const DevConn& c, uint64_t step, int proto, size_t bytes) {
  Poller poll;
  while (simt::loadAcquire(&c.ctrl->tail) < step + 1)
    if (!poll.keepWaiting(env, c, false, step)) return;
  checkSlotSize(env, c, step, proto, bytes);
}

// Waits until the send slot of `step` is free (the receiver consumed step - NCCL_STEPS).
TUTTI_DEVICE void waitHead(const WaitEnv& env, const DevConn& c, uint64_t step) {
  if (step + 1 <= TUTTI_STEPS) return;
  Poller poll;
  while (simt::loadAcquire(&c.ctrl->head) < step + 1 - TUTTI_STEPS)
    if (!poll.keepWaiting(env, c, true, step)) return;
}

// Slot `step` of a connection in protocol `proto`: where the sender writes, or where the receiver reads
// (a proxied receive reads the landing area).
TUTTI_DEVICE char* slotOf(const DevConn& c, int proto, uint64_t step, bool receiving) {
  const int slot = static_cast<int>(step % TUTTI_STEPS);
  if (receiving && (c.flags & TUTTI_CONN_PROXIED)) return c.landing + slot * c.landingStride;
  return c.buffs[proto] + slot * c.slotBytes[proto];
}

template <typename T, typename Op>
class DevPrims {
 public:
  // recvs / sends: the connections of each direction (null entries are skipped), as the block's shared
  // copies; their step counts are read now and stored back by finish().
  TUTTI_DEVICE DevPrims(const DevConn* const* recvs, int nRecv, const DevConn* const* sends, int nSend,
                        const void* input, void* output, const Op& op, int proto, const WaitEnv& env)
      : input_(static_cast<const char*>(input)), output_(static_cast<char*>(output)), op_(op), proto_(proto),
        env_(env) {
    for (int i = 0; i < nRecv && nRecv_ < kMaxPrimsConns; ++i)
      if (recvs[i]) {
        recv_[nRecv_] = recvs[i];
        recvStep_[nRecv_++] = *recvs[i]->step;
      }
    for (int i = 0; i < nSend && nSend_ < kMaxPrimsConns; ++i)
      if (sends[i]) {
        send_[nSend_] = sends[i];
        sendStep_[nSend_++] = *sends[i]->step;
      }
    const DevConn* any = nSend_ ? send_[0] : nRecv_ ? recv_[0] : nullptr;
    size_t data = 0;
    if (any) {
      const size_t slot = any->slotBytes[proto];
      data = proto == TUTTI_PROTO_LL ? llSlotData(slot) : proto == TUTTI_PROTO_LL128 ? ll128SlotData(slot) : slot;
    }
    slotElems_ = data / sizeof(T);
  }

  TUTTI_DEVICE ncclResult_t send(size_t in, size_t n) { return run(kSrcInput | kSend, in, 0, n, false); }
  TUTTI_DEVICE ncclResult_t recv(size_t out, size_t n) { return run(kRecv | kDstOutput, 0, out, n, false); }
  TUTTI_DEVICE ncclResult_t copySend(size_t in, size_t out, size_t n) {
    return run(kSrcInput | kDstOutput | kSend, in, out, n, false);
  }
  TUTTI_DEVICE ncclResult_t recvCopySend(size_t out, size_t n) { return run(kRecv | kDstOutput | kSend, 0, out, n, false); }
  TUTTI_DEVICE ncclResult_t recvReduceSend(size_t in, size_t n) { return run(kSrcInput | kRecv | kSend, in, 0, n, false); }
  TUTTI_DEVICE ncclResult_t recvReduceCopy(size_t in, size_t out, size_t n) {
    return run(kSrcInput | kRecv | kDstOutput, in, out, n, true);
  }
  TUTTI_DEVICE ncclResult_t recvReduceCopySend(size_t in, size_t out, size_t n) {
    return run(kSrcInput | kRecv | kDstOutput | kSend, in, out, n, true);
  }
  TUTTI_DEVICE ncclResult_t sendFromOutput(size_t out, size_t n) { return run(kSrcOutput | kSend, 0, out, n, false); }
  TUTTI_DEVICE ncclResult_t localCopy(size_t in, size_t out, size_t n) {
    const void* src = input_ + in * sizeof(T);
    void* dst = output_ + out * sizeof(T);
    reduceCopy<T, Op>(op_, 1, &src, 1, &dst, n, true, true);
    simt::syncBlock();
    return ncclSuccess;
  }

  // output[out] = received + (fromOutput ? output[out] : preOp(input[in])), postOp when asked (pat.h).
  TUTTI_DEVICE ncclResult_t recvReduceInto(bool fromOutput, size_t in, size_t out, size_t n, bool postOp) {
    return run(kRecv | kDstOutput | (fromOutput ? kSrcOutput : kSrcInput), in, out, n, postOp);
  }
  // The buffers later calls' offsets refer to (pat.h moves between the output and scratch memory).
  TUTTI_DEVICE void setBuffers(const void* input, void* output) {
    input_ = static_cast<const char*>(input);
    output_ = static_cast<char*>(output);
  }

  // Stores the step counts back for the next operation on these connections (after a barrier).
  TUTTI_DEVICE void finish() {
    simt::syncBlock();
    if (simt::tid() == 0) {
      for (int i = 0; i < nRecv_; ++i) *recv_[i]->step = recvStep_[i];
      for (int j = 0; j < nSend_; ++j) *send_[j]->step = sendStep_[j];
    }
  }

 private:
  enum : unsigned { kSrcInput = 1, kRecv = 2, kDstOutput = 4, kSend = 8, kSrcOutput = 16 };
  static constexpr int kSendWaiter = 8;  // threads 8.. wait on and publish send peers; 0.. receive peers

  TUTTI_DEVICE_NOINLINE ncclResult_t run(unsigned mode, size_t in, size_t out, size_t n, bool postOp) {
    const int nR = (mode & kRecv) ? nRecv_ : 0;
    const int nS = (mode & kSend) ? nSend_ : 0;
    size_t done = 0;
    do {  // a zero-element call still makes one (empty) step on each connection it uses
      const size_t elems = minSize(slotElems_, n - done);
      const size_t bytes = elems * sizeof(T);
      const char* inPtr = input_ + (in + done) * sizeof(T);
      char* outPtr = output_ + (out + done) * sizeof(T);
      if (!waitStep(nR, nS, bytes)) return ncclRemoteError;
      if (proto_ == TUTTI_PROTO_SIMPLE) simpleData(mode, nR, nS, inPtr, outPtr, elems, postOp);
      else if (proto_ == TUTTI_PROTO_LL) llData(mode, nR, nS, inPtr, outPtr, bytes, postOp);
      else ll128Data(mode, nR, nS, inPtr, outPtr, bytes, postOp);
      simt::syncBlock();
      if (stopped(env_)) return ncclRemoteError;
      publish(nR, nS, bytes);
      for (int i = 0; i < nR; ++i) ++recvStep_[i];
      for (int j = 0; j < nS; ++j) ++sendStep_[j];
      done += elems;
    } while (done < n);
    return ncclSuccess;
  }

  // Phase 1: the wait threads. LL / LL128 data is polled line by line later, except on proxied connections
  // (the slot lands whole, tail says when) and for empty slots (no line carries a flag).
  TUTTI_DEVICE bool waitStep(int nR, int nS, size_t bytes) {
    const int t = simt::tid();
    if (t < nR) {
      const DevConn& c = *recv_[t];
      if (proto_ == TUTTI_PROTO_SIMPLE || bytes == 0 || (c.flags & TUTTI_CONN_PROXIED))
        waitTail(env_, c, recvStep_[t], proto_, bytes);
    } else if (t >= kSendWaiter && t < kSendWaiter + nS) {
      waitHead(env_, *send_[t - kSendWaiter], sendStep_[t - kSendWaiter]);
    }
    simt::syncBlock();
    return !stopped(env_);
  }

  // Phase 3: publish what the step wrote and consumed.
  TUTTI_DEVICE void publish(int nR, int nS, size_t bytes) {
    const int t = simt::tid();
    if (t < nS) {
      const DevConn& c = *send_[t];
      const uint64_t step = sendStep_[t];
      const int slot = static_cast<int>(step % TUTTI_STEPS);
      simt::fenceSystem();  // the block's slot writes become visible before the flag and counters
      if (proto_ == TUTTI_PROTO_LL) {
        auto* lines = reinterpret_cast<uint64_t*>(slotOf(c, proto_, step, false));
        simt::storeRelease(&lines[divUp(bytes, kLLDataPerLine)],
                           llLine(static_cast<uint32_t>(bytes), llHeaderFlag(step)));
      }
      simt::storeRelaxed(reinterpret_cast<uint64_t*>(&c.ctrl->sizes[slot]), bytes);
      simt::storeRelaxed32(reinterpret_cast<uint32_t*>(&c.ctrl->protos[slot]), static_cast<uint32_t>(proto_));
      simt::storeRelease(&c.ctrl->tail, step + 1);
    } else if (t >= kSendWaiter && t < kSendWaiter + nR) {
      simt::storeRelease(&recv_[t - kSendWaiter]->ctrl->head, recvStep_[t - kSendWaiter] + 1);
    }
  }

  TUTTI_DEVICE_NOINLINE void simpleData(unsigned mode, int nR, int nS, const char* in, char* out, size_t elems, bool postOp) {
    const void* srcs[kMaxSrcs];
    void* dsts[kMaxDsts];
    int nSrcs = 0, nDsts = 0;
    if (mode & kSrcInput) srcs[nSrcs++] = in;
    if (mode & kSrcOutput) srcs[nSrcs++] = out;
    for (int i = 0; i < nR; ++i) srcs[nSrcs++] = slotOf(*recv_[i], proto_, recvStep_[i], true);
    if (mode & kDstOutput) dsts[nDsts++] = out;
    for (int j = 0; j < nS; ++j) dsts[nDsts++] = slotOf(*send_[j], proto_, sendStep_[j], false);
    reduceCopy<T, Op>(op_, nSrcs, srcs, nDsts, dsts, elems, (mode & kSrcInput) != 0, postOp);
  }

  // Reduces `bytes` (whole elements) of up to kMaxSrcs 16-byte buffers into res.
  TUTTI_DEVICE void combine(const char (*vals)[16], int nVals, bool pre, bool postOp, size_t bytes, char* res) {
    const size_t ne = bytes / sizeof(T);
    for (size_t e = 0; e < ne; ++e) {
      T acc, x;
      memcpy(&acc, vals[0] + e * sizeof(T), sizeof(T));
      if constexpr (Op::kHasPreOp) {
        if (pre) acc = op_.preOp(acc);
      }
      for (int v = 1; v < nVals; ++v) {
        memcpy(&x, vals[v] + e * sizeof(T), sizeof(T));
        acc = op_.reduce(acc, x);
      }
      if constexpr (Op::kHasPostOp) {
        if (postOp) acc = op_.postOp(acc);
      }
      memcpy(res + e * sizeof(T), &acc, sizeof(T));
    }
  }

  // Polls one LL line of receive connection `c` until its flag is `flag`; false when the wait ended.
  TUTTI_DEVICE bool pollLLLine(const DevConn& c, const uint64_t* line, uint32_t flag, uint64_t step, size_t bytes,
                               uint32_t* data) {
    Poller poll;
    bool published = false;  // tail covered the step before the last load
    for (;;) {
      const uint64_t v = simt::loadVolatile(line);
      if (static_cast<uint32_t>(v >> 32) == flag) {
        *data = static_cast<uint32_t>(v);
        return true;
      }
      if (published) return slotIncomplete(c, step, bytes);
      if (!poll.keepWaiting(env_, c, false, step)) return false;
      published = poll.slowTick() && tailCovers(c, step);
    }
  }

  // Whether the sender published `step` (tail). A line read after this returned true must show its flag:
  // the sender stores tail (release) after every line of the slot.
  TUTTI_DEVICE bool tailCovers(const DevConn& c, uint64_t step) { return simt::loadAcquire(&c.ctrl->tail) >= step + 1; }

  // A line flag still missing after tail covered its step: the sender wrote something else (another size or
  // protocol: a Mismatch) or a line was lost (Incomplete). Always false (the wait ends).
  TUTTI_DEVICE bool slotIncomplete(const DevConn& c, uint64_t step, size_t bytes) {
    if (checkSlotSize(env_, c, step, proto_, bytes)) recordStop(env_, StopReason::Incomplete, c.peer, false, step);
    return false;
  }

  // LL: every thread owns 8 data bytes of the slot at a time, i.e. a pair of 8-byte lines (NCCL's 16-byte
  // LL line). Elements never straddle a pair (element sizes divide 8).
  TUTTI_DEVICE_NOINLINE void llData(unsigned mode, int nR, int nS, const char* in, char* out, size_t bytes, bool postOp) {
    const int nt = simt::nthreads();
    const size_t units = divUp(bytes, 8);
    const uint64_t* rlines[kMaxPrimsConns];
    uint64_t* slines[kMaxPrimsConns];
    for (int i = 0; i < nR; ++i) rlines[i] = reinterpret_cast<const uint64_t*>(slotOf(*recv_[i], proto_, recvStep_[i], true));
    for (int j = 0; j < nS; ++j) slines[j] = reinterpret_cast<uint64_t*>(slotOf(*send_[j], proto_, sendStep_[j], false));
    for (size_t u = simt::tid(); u < units; u += nt) {
      const size_t ub = minSize(8, bytes - 8 * u);
      char vals[kMaxSrcs][16];
      int nVals = 0;
      if (mode & kSrcInput) memcpy(vals[nVals++], in + 8 * u, ub);
      if (mode & kSrcOutput) memcpy(vals[nVals++], out + 8 * u, ub);
      for (int i = 0; i < nR; ++i) {
        uint32_t d[2] = {0, 0};
        const uint32_t flag = llFlag(recvStep_[i]);
        if (!pollLLLine(*recv_[i], rlines[i] + 2 * u, flag, recvStep_[i], bytes, &d[0])) return;
        if (ub > 4 && !pollLLLine(*recv_[i], rlines[i] + 2 * u + 1, flag, recvStep_[i], bytes, &d[1])) return;
        memcpy(vals[nVals++], d, 8);
      }
      char res[16];
      combine(vals, nVals, (mode & kSrcInput) != 0, postOp, ub, res);
      if (mode & kDstOutput) memcpy(out + 8 * u, res, ub);
      uint32_t d[2] = {0, 0};
      memcpy(d, res, ub);
      for (int j = 0; j < nS; ++j) {
        const uint32_t flag = llFlag(sendStep_[j]);
        simt::storeRelaxed(slines[j] + 2 * u, llLine(d[0], flag));
        if (ub > 4) simt::storeRelaxed(slines[j] + 2 * u + 1, llLine(d[1], flag));
      }
    }
    // The header after the data lines carries the size the sender wrote: a longer slot than this rank
    // expects would otherwise pass unnoticed (every line it reads has its flag).
    const int t = simt::tid();
    if (t < nR && bytes > 0) {
      uint32_t sent = 0;
      const uint64_t step = recvStep_[t];
      if (pollLLLine(*recv_[t], rlines[t] + divUp(bytes, kLLDataPerLine), llHeaderFlag(step), step, bytes, &sent) &&
          sent != bytes)
        recordStop(env_, StopReason::Mismatch, recv_[t]->peer, false, step, sent, TUTTI_PROTO_LL,
                   static_cast<int64_t>(bytes));
    }
  }

  // LL128: 8 lanes own one 128-byte line, 16 bytes each; lane 7 of the 8 holds 8 data bytes and the flag.
  // A warp reads and writes 4 lines with one 128-bit access per lane and retries its 4 lines together until
  // every flag shows, as NCCL's LL128 does.
  TUTTI_DEVICE_NOINLINE void ll128Data(unsigned mode, int nR, int nS, const char* in, char* out, size_t bytes, bool postOp) {
    const int lane = simt::lane(), sub = lane & 7;
    const int nwarps = simt::nthreads() / simt::kWarpSize;
    const size_t nLines = divUp(bytes, kLL128DataPerLine);
    const size_t linesPerWarp = simt::kWarpSize / 8;
    for (size_t base = simt::warp() * linesPerWarp; base < nLines; base += nwarps * linesPerWarp) {
      const size_t line = base + lane / 8;
      const unsigned mask = simt::ballot(simt::kFullMask, line < nLines);
      if (line >= nLines) continue;
      const size_t off = line * kLL128DataPerLine + sub * 16;
      const size_t ub = off < bytes ? minSize(sub < 7 ? 16 : 8, bytes - off) : 0;
      const size_t lineByte = line * kLL128LineBytes + sub * 16;
      char vals[kMaxSrcs][16];
      int nVals = 0;
      if (mode & kSrcInput) memcpy(vals[nVals++], in + off, ub);
      if (mode & kSrcOutput) memcpy(vals[nVals++], out + off, ub);
      for (int i = 0; i < nR; ++i) {
        const DevConn& c = *recv_[i];
        const auto* p = reinterpret_cast<const simt::U128*>(slotOf(c, proto_, recvStep_[i], true) + lineByte);
        const uint64_t flag = ll128Flag(recvStep_[i]);
        Poller poll;
        simt::U128 v;
        bool published = false;  // tail covered the step before the last load (the same answer on every lane)
        for (;;) {
          v = simt::warpLoad128(mask, p);
          if (!simt::any(mask, sub == 7 && v.hi != flag)) break;
          if (published) {
            if (lane == simt::firstLane(mask)) slotIncomplete(c, recvStep_[i], bytes);
            return;
          }
          const bool give = !poll.keepWaiting(env_, c, false, recvStep_[i]);
          if (simt::any(mask, give)) return;
          if (poll.slowTick()) published = simt::any(mask, lane == simt::firstLane(mask) && tailCovers(c, recvStep_[i]));
        }
        memcpy(vals[nVals++], &v, 16);
      }
      char res[16] = {};
      combine(vals, nVals, (mode & kSrcInput) != 0, postOp, ub, res);
      if (mode & kDstOutput) memcpy(out + off, res, ub);
      for (int j = 0; j < nS; ++j) {
        simt::U128 v;
        memcpy(&v, res, 16);
        if (sub == 7) v.hi = ll128Flag(sendStep_[j]);
        simt::warpStore128(mask, reinterpret_cast<simt::U128*>(slotOf(*send_[j], proto_, sendStep_[j], false) + lineByte), v);
      }
    }
  }

  static constexpr int kMaxPrimsConns = kTreeMaxArity;
  const DevConn* recv_[kMaxPrimsConns] = {};
  const DevConn* send_[kMaxPrimsConns] = {};
  uint64_t recvStep_[kMaxPrimsConns] = {};
  uint64_t sendStep_[kMaxPrimsConns] = {};
  int nRecv_ = 0, nSend_ = 0;
  const char* input_;
  char* output_;
  Op op_;
  int proto_;
  size_t slotElems_ = 0;
  WaitEnv env_;
};

}  // namespace tutti::dev
