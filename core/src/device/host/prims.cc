#include "device/host/prims.h"

#include "device/common/protocols.h"
#include "device/host/reduce_copy.h"
#include "proxy/proxy.h"
#include "util/check.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace tutti::host {
namespace {

// Per-thread staging for LL: lines are not contiguous data, so reductions work on unpacked copies.
struct LLStaging {
  std::vector<char> recv[kMaxPrimsPeers], send;
};
// The thread's staging, made on first use. The pointer is trivially initialized and initial-exec (as the
// emulator's), so a use is one load from the thread pointer, where a thread_local LLStaging's first-use guard
// costs a __tls_get_addr call per access; the owner frees it when the thread ends.
[[gnu::tls_model("initial-exec")]] thread_local LLStaging* tStaging = nullptr;
thread_local std::unique_ptr<LLStaging> tStagingOwner;
LLStaging& staging() {
  if (!tStaging) [[unlikely]] {
    tStagingOwner = std::make_unique<LLStaging>();
    tStaging = tStagingOwner.get();
  }
  return *tStaging;
}

// Where slot `slot` of a proxied receive connection lands (TUTTI_CONN_PROXIED): in the SIMPLE buffer,
// spaced by the largest slot of any protocol.
const char* proxiedSlot(const tuttiConnector_t& conn, int slot) {
  size_t stride = 0;
  for (size_t bytes : conn.buffSizes) stride = std::max(stride, bytes / TUTTI_STEPS);
  return static_cast<const char*>(conn.buffs[TUTTI_PROTO_SIMPLE]) + slot * stride;
}

// Names for messages; a value no sender writes (a corrupt or foreign slot) shows as its number.
std::string protoText(int proto) {
  switch (proto) {
    case TUTTI_PROTO_LL: return "LL";
    case TUTTI_PROTO_LL128: return "LL128";
    case TUTTI_PROTO_SIMPLE: return "Simple";
    default: return std::to_string(proto);
  }
}

// LL lines of `bytes` from src into a slot for `step`: the data lines, then the header (bytes, header flag), whose
// release store publishes every data line before it to a reader that polls it.
void writeLLLines(char* slot, const char* src, size_t bytes, uint64_t step) {
  const uint32_t flag = llFlag(step);
  const size_t nLines = divUp(bytes, kLLDataPerLine);
  auto* out = reinterpret_cast<uint64_t*>(slot);
  const size_t full = bytes / kLLDataPerLine;
  for (size_t i = 0; i < full; ++i) {
    uint32_t d;
    std::memcpy(&d, src + i * kLLDataPerLine, kLLDataPerLine);  // fixed size: one load, not a byte loop
    std::atomic_ref<uint64_t>(out[i]).store(llLine(d, flag), std::memory_order_relaxed);
  }
  if (full < nLines) {
    uint32_t d = 0;
    std::memcpy(&d, src + full * kLLDataPerLine, bytes - full * kLLDataPerLine);
    std::atomic_ref<uint64_t>(out[full]).store(llLine(d, flag), std::memory_order_relaxed);
  }
  std::atomic_ref<uint64_t>(out[nLines]).store(llLine(static_cast<uint32_t>(bytes), llHeaderFlag(step)),
                                               std::memory_order_release);
}

// The data of an LL slot whose header showed, into dst: full lines with a fixed-size copy (one 4-byte store each; a
// variable size would copy byte by byte), then the partial last line. False if a line's flag is not `flag` (the
// flags are OR-ed up and checked once).
bool readLLLines(const uint64_t* words, char* dst, size_t bytes, uint32_t flag) {
  auto load = [&](size_t i) { return std::atomic_ref<const uint64_t>(words[i]).load(std::memory_order_acquire); };
  const size_t full = bytes / kLLDataPerLine;
  uint32_t bad = 0;
  for (size_t i = 0; i < full; ++i) {
    const uint64_t word = load(i);
    bad |= static_cast<uint32_t>(word >> 32) ^ flag;
    const uint32_t d = static_cast<uint32_t>(word);
    std::memcpy(dst + i * kLLDataPerLine, &d, kLLDataPerLine);
  }
  if (full * kLLDataPerLine < bytes) {
    const uint64_t word = load(full);
    bad |= static_cast<uint32_t>(word >> 32) ^ flag;
    const uint32_t d = static_cast<uint32_t>(word);
    std::memcpy(dst + full * kLLDataPerLine, &d, bytes - full * kLLDataPerLine);
  }
  return bad == 0;
}

// A lane's packet (llLaneBytes): the data, then its header word in the lane's last 8 bytes, whose release store
// publishes the data to a reader that polls it.
void writeLanePacket(char* lane, size_t laneBytes, const char* src, size_t bytes, uint64_t step) {
  std::memcpy(lane, src, bytes);
  std::atomic_ref<uint64_t>(reinterpret_cast<uint64_t*>(lane)[laneHeaderWord(laneBytes)])
      .store(llLine(static_cast<uint32_t>(bytes), llHeaderFlag(step)), std::memory_order_release);
}
// A lane's header word (acquire: the data before it is visible once it matches).
uint64_t laneHeader(const char* lane, size_t laneBytes) {
  return std::atomic_ref<const uint64_t>(reinterpret_cast<const uint64_t*>(lane)[laneHeaderWord(laneBytes)])
      .load(std::memory_order_acquire);
}

// The bits of HostConn::llDataWords for the LL buffer's words from `at`, `n` of them: fn(bitmap word, mask) for each
// bitmap word they touch, in order, until fn returns false. Returns whether fn never did.
template <typename Fn>
bool llWordMasks(const HostConn& rc, const char* at, size_t n, Fn&& fn) {
  size_t w = static_cast<size_t>(at - static_cast<const char*>(rc.conn.buffs[TUTTI_PROTO_LL])) / 8;
  for (const size_t end = w + n; w < end;) {
    const size_t bit = w % 64, take = std::min<size_t>(64 - bit, end - w);
    if (!fn(w / 64, (take == 64 ? ~uint64_t{0} : (uint64_t{1} << take) - 1) << bit)) return false;
    w += take;
  }
  return true;
}
// Receive end of a direct LL connection (HostConn::llDataWords): whether the words from `at`, `n` of them, hold
// no packet data. Such a word holds zero, a header or an LL line, and never matches another step's header or line.
// A word that may hold packet data can look like any header or line: the step is then believed only once tail covers
// it, tail read before the word.
bool llHeaderTrusted(const HostConn& rc, const char* at, size_t n) {
  return rc.llDataWords.empty() ||
         llWordMasks(rc, at, n, [&](size_t i, uint64_t mask) { return (rc.llDataWords[i] & mask) == 0; });
}
// The words from `at`, `n` of them, now hold packet data (`data`) or not. A lane of the size read before finds its
// words marked already and writes nothing.
void llMarkWords(HostConn* rc, const char* at, size_t n, bool data) {
  if (rc->llDataWords.empty()) {
    if (!data) return;
    rc->llDataWords.assign(divUp(rc->conn.buffSizes[TUTTI_PROTO_LL] / 8, size_t{64}), 0);
  }
  std::vector<uint64_t>& bits = rc->llDataWords;
  llWordMasks(*rc, at, n, [&](size_t i, uint64_t mask) {
    if (data && (bits[i] & mask) != mask) bits[i] |= mask;
    else if (!data && (bits[i] & mask) != 0) bits[i] &= ~mask;
    return true;
  });
}
// The words where step rc->step's header (a lane) or lines up to its header (a slot) go.
size_t llStepWords(size_t lane, size_t bytes) { return lane ? 1 : divUp(bytes, kLLDataPerLine) + 1; }
const char* llStepFirstWord(const char* lines, size_t lane) { return lane ? lines + laneHeaderWord(lane) * 8 : lines; }
// After step rc->step, written at `lines`, was read whole: a packet's data words, its header word, or a slot's lines.
// `trusted`: those words held no packet data before (llHeaderTrusted), as they do not now.
void llStepRead(HostConn* rc, const char* lines, size_t lane, size_t bytes, bool trusted) {
  if (lane) llMarkWords(rc, lines, divUp(bytes, size_t{8}), true);
  if (!trusted) llMarkWords(rc, llStepFirstWord(lines, lane), llStepWords(lane, bytes), false);
}

// Where step `step` of a direct connection's LL buffer starts: its lane (laneBytes, llLaneBytes) or its slot (0).
char* llStepLines(const HostConn& c, uint64_t step, size_t laneBytes) {
  const tuttiConnector_t& conn = c.conn;
  char* base = static_cast<char*>(conn.buffs[TUTTI_PROTO_LL]);
  if (laneBytes) return base + (step % llDepth(c, laneBytes)) * laneBytes;
  return base + (step % TUTTI_STEPS) * (conn.buffSizes[TUTTI_PROTO_LL] / TUTTI_STEPS);
}

}  // namespace

HostPrims::HostPrims(HostConn* const* recvs, int nRecv, HostConn* const* sends, int nSend, const void* input,
                     void* output, size_t eltSize, const ResolvedRedOp& op, const WaitContext& wait,
                     const OpLabel& label, int proto)
    : input_(static_cast<const char*>(input)), output_(static_cast<char*>(output)), eltSize_(eltSize),
      proto_(proto), op_(op), wait_(wait), label_(label) {
  nRecv_ = std::min(nRecv, kMaxPrimsPeers);
  nSend_ = std::min(nSend, kMaxPrimsPeers);
  for (int i = 0; i < nRecv_; ++i) recvs_[i] = recvs[i];
  for (int i = 0; i < nSend_; ++i) sends_[i] = sends[i];
  for (int i = 0; i < nRecv_ + nSend_; ++i)
    if (ProxyTask* t = (i < nRecv_ ? recvs_[i] : sends_[i - nRecv_])->proxyTask) drive_[nDrive_++] = t;
  // Every connection of a communicator has the same slot geometry (buffer size / NCCL_STEPS).
  const HostConn* c = nSend_ ? sends_[0] : nRecv_ ? recvs_[0] : nullptr;
  slotData_ = c ? slotDataBytes(c->conn, proto_) : 0;
  slotData_ -= slotData_ % eltSize_;
  if (proto_ != TUTTI_PROTO_SIMPLE) {
    for (int i = 0; i < nRecv_; ++i)
      if (staging().recv[i].size() < slotData_) staging().recv[i].resize(slotData_);
    if (staging().send.size() < slotData_) staging().send.resize(slotData_);
  }
}

HostPrims::~HostPrims() {
  for (int i = 0; i < nSend_; ++i)
    if (sends_[i]->proxyTask) proxyRelease(sends_[i]->proxyTask);
}

ncclResult_t HostPrims::waitFailed(WaitStatus st, const HostConn* c, bool sending, uint64_t step) const {
  const char* what = sending ? "a free slot towards" : "data from";
  switch (st) {
    case WaitStatus::Aborted:
      // A consequence, not a cause: the error that aborted the communicator was reported where it happened.
      TUTTI_INFO(NCCL_COLL | NCCL_P2P, "rank {}: {} (opCount {}, channel {}) aborted while waiting for {} rank {}",
                 label_.rank, label_.opName, label_.opCount, label_.channel, what, c->peer);
      return ncclRemoteError;
    case WaitStatus::TimedOut: {
      if (label_.failure) {
        int none = -1;
        label_.failure->compare_exchange_strong(none, failureRecord(c->peer, true));
      }
      const std::string arrived = label_.whoArrived ? label_.whoArrived(label_.askCtx, label_.opCount) : "";
      if (!arrived.empty())
        TUTTI_FAIL(ncclTimeout, "rank {}: {} (opCount {}, channel {}) timed out waiting for {} rank {} (step {}){}",
                   label_.rank, label_.opName, label_.opCount, label_.channel, what, c->peer, step, arrived);
      TUTTI_FAIL(ncclTimeout,
                 "rank {}: {} (opCount {}, channel {}) timed out waiting for {} rank {} (step {}): did rank {} "
                 "call the same operation?",
                 label_.rank, label_.opName, label_.opCount, label_.channel, what, c->peer, step, c->peer);
    }
    case WaitStatus::PeerClosed: {
      const tuttiConnCtrl_t* ctrl = c->conn.ctrl;
      const uint32_t closed = std::atomic_ref<const uint32_t>(sending ? ctrl->receiverClosed : ctrl->senderClosed)
                                  .load(std::memory_order_acquire);
      int failure = closedFailure(closed, c->peer);
      // A network peer cannot pass its reason through the connection: it sends it through the bootstrap.
      if (closed == 1 && (c->conn.flags & TUTTI_CONN_PROXIED) && label_.askFailure) {
        const int told = label_.askFailure(label_.askCtx, c->peer);
        if (told >= 0) failure = told;
      }
      const int cause = failureRank(failure);
      if (label_.failure) {
        int none = -1;
        label_.failure->compare_exchange_strong(none, failure);
      }
      if (failureTimedOut(failure)) {
        const std::string arrived = label_.whoArrived ? label_.whoArrived(label_.askCtx, label_.opCount) : "";
        TUTTI_FAIL(ncclTimeout, "rank {}: {} (opCount {}, channel {}): rank {} did not take part in time (rank {} "
                   "timed out waiting for it and closed its connection){}", label_.rank, label_.opName,
                   label_.opCount, label_.channel, cause, c->peer, arrived);
      }
      if (cause != c->peer)
        TUTTI_FAIL(ncclRemoteError, "rank {}: {} (opCount {}, channel {}): rank {} failed (rank {} gave up on it and "
                   "closed its connection)", label_.rank, label_.opName, label_.opCount, label_.channel, cause, c->peer);
      TUTTI_FAIL(ncclRemoteError, "rank {}: {} (opCount {}, channel {}): rank {} died or closed the connection",
                 label_.rank, label_.opName, label_.opCount, label_.channel, c->peer);
    }
    default:
      return ncclSuccess;
  }
}

WaitContext HostPrims::connWait(const HostConn* c, const SlowWait* slow) const {
  WaitContext w = wait_;
  w.shared = c->conn.shared != 0;
  w.peerGone = c->peerGone;
  w.drive = drive_;
  w.nDrive = nDrive_;
  w.netTask = c->proxyTask;
  if (w.longStepDriveSpinCount >= 0 && stepBytes_ >= kLongNetStepBytes)
    w.driveSpinCount = std::min(w.driveSpinCount >= 0 ? w.driveSpinCount : w.spinCount, w.longStepDriveSpinCount);
  if (w.warnNs > 0) {
    w.onSlow = &HostPrims::warnSlowWait;
    w.slowCtx = slow;
  }
  return w;
}

bool firstSlowWarning(std::atomic<uint64_t>* warnedOp, const char* opName, uint64_t opCount) {
  if (!warnedOp) return true;
  const uint64_t kind = std::strcmp(opName, "Send") == 0 ? 1 : std::strcmp(opName, "Recv") == 0 ? 2 : 0;
  const uint64_t key = (opCount << 2 | kind) + 1;
  uint64_t seen = warnedOp->load(std::memory_order_relaxed);
  do {
    if (seen == key) return false;
  } while (!warnedOp->compare_exchange_weak(seen, key, std::memory_order_relaxed));
  return true;
}

void HostPrims::warnSlowWait(const void* ctx, int64_t waitedNs) {
  const auto* s = static_cast<const SlowWait*>(ctx);
  const OpLabel& l = s->prims->label_;
  // One WARN per operation of the communicator, whichever of its channels waits first. Send and Recv of
  // one point-to-point group share an opCount, and collectives count apart from them.
  if (!firstSlowWarning(s->prims->wait_.warnedOp, l.opName, l.opCount)) return;
  TUTTI_WARN("rank {}: {} (opCount {}, channel {}) has waited {} s for {} rank {} (step {}); still waiting "
             "(TUTTI_WAIT_WARN; TUTTI_TIMEOUT turns long waits into errors)", l.rank, l.opName, l.opCount, l.channel,
             waitedNs / 1000000000, s->sending ? "a free slot towards" : "data from", s->conn->peer, s->conn->step);
}

bool HostPrims::sizeIs(const HostConn* c, size_t bytes) const {
  const tuttiConnCtrl_t* ctrl = c->conn.ctrl;
  const int slot = static_cast<int>(c->step % TUTTI_STEPS);
  return std::atomic_ref<const int64_t>(ctrl->sizes[slot]).load(std::memory_order_relaxed) ==
             static_cast<int64_t>(bytes) &&
         std::atomic_ref<const int32_t>(ctrl->protos[slot]).load(std::memory_order_relaxed) == proto_;
}

ncclResult_t HostPrims::checkSize(const HostConn* c, size_t bytes) const {
  const tuttiConnCtrl_t* ctrl = c->conn.ctrl;
  const int slot = static_cast<int>(c->step % TUTTI_STEPS);
  const int64_t got = std::atomic_ref<const int64_t>(ctrl->sizes[slot]).load(std::memory_order_relaxed);
  const int32_t proto = std::atomic_ref<const int32_t>(ctrl->protos[slot]).load(std::memory_order_relaxed);
  // A proxy records what arrived on the wire (LL / LL128 lines with their flags), protocol unknown.
  const bool proxied = (c->conn.flags & TUTTI_CONN_PROXIED) != 0;
  const size_t want = proxied ? lineWireBytes(proto_, bytes) : bytes;
  if (proxied && got != static_cast<int64_t>(want)) {
    TUTTI_FAIL(ncclInvalidUsage,
               "rank {}: {} (opCount {}, channel {}): rank {} sent a {}-byte slot where {} bytes ({} bytes of data, "
               "protocol {}) were expected (mismatched calls across ranks? TUTTI_CHECK_CALLS=1 names both calls)",
               label_.rank, label_.opName, label_.opCount, label_.channel, c->peer, got, want, bytes,
               protoText(proto_));
  }
  if (!proxied && (got != static_cast<int64_t>(want) || proto != proto_)) {
    TUTTI_FAIL(ncclInvalidUsage,
               "rank {}: {} (opCount {}, channel {}): rank {} sent {} bytes (protocol {}) where {} bytes (protocol {}) "
               "were expected (mismatched calls across ranks? TUTTI_CHECK_CALLS=1 names both calls)",
               label_.rank, label_.opName, label_.opCount, label_.channel, c->peer, got, protoText(proto), bytes,
               protoText(proto_));
  }
  return ncclSuccess;
}

// Waits (spin, then sleep) until the sender's tail covers rc's current step: the slot is complete.
ncclResult_t HostPrims::waitTail(const HostConn* rc) const {
  tuttiConnCtrl_t* ctrl = rc->conn.ctrl;
  const SlowWait slow{this, rc, false};
  const WaitContext w = connWait(rc, &slow);
  WaitStatus st = waitAtLeast(&ctrl->tail, &ctrl->tailWaiters, &ctrl->tailSeq, &ctrl->senderClosed, rc->step + 1, w);
  return st == WaitStatus::Ready ? ncclSuccess : waitFailed(st, rc, false, rc->step);
}

// Waits until the current receive slot of recvs_[peer] holds `bytes` of data and points *data at it
// (contiguous).
ncclResult_t HostPrims::waitRecv(int peer, size_t bytes, const char** data, const char* inPlace) {
  const HostConn* rc = recvs_[peer];
  const tuttiConnector_t& conn = rc->conn;
  const uint64_t step = rc->step;
  const int slot = static_cast<int>(step % TUTTI_STEPS);
  auto waitTail = [&] { return HostPrims::waitTail(rc); };
  if (proto_ == TUTTI_PROTO_SIMPLE) {
    TUTTI_CHECK(waitTail());
    TUTTI_CHECK(checkSize(rc, bytes));
    *data = inPlace                            ? inPlace
            : (conn.flags & TUTTI_CONN_PROXIED) ? proxiedSlot(conn, slot)
                : static_cast<const char*>(conn.buffs[TUTTI_PROTO_SIMPLE]) +
                      (step % ringOf(rc)) * (conn.buffSizes[TUTTI_PROTO_SIMPLE] / TUTTI_STEPS);
    return ncclSuccess;
  }
  if (proto_ == TUTTI_PROTO_LL) return waitRecvLL(peer, bytes, data);
  // LL128: a proxied slot arrives whole in the landing slot; a direct one is read line by line as the
  // flags appear.
  const bool proxied = (conn.flags & TUTTI_CONN_PROXIED) != 0;
  const char* lines = proxied ? proxiedSlot(conn, slot)
                              : static_cast<const char*>(conn.buffs[proto_]) + slot * (conn.buffSizes[proto_] / TUTTI_STEPS);
  const size_t nLines = divUp(bytes, kLL128DataPerLine);
  const uint64_t flag = ll128Flag(step);
  // The flag word of line i as the reader sees it (acquire: the line's 120 bytes are visible once it matches).
  auto lineFlag = [&](size_t i) {
    return std::atomic_ref<const uint64_t>(
               *reinterpret_cast<const uint64_t*>(lines + i * kLL128LineBytes + kLL128DataPerLine))
        .load(std::memory_order_acquire);
  };
  char* out = staging().recv[peer].data();
  // Once tail covers this step every line of it is visible: a line still missing then means the sender
  // wrote something else (another protocol or size: a mismatched call), never "wait longer".
  bool tailSeen = false;
  if (proxied || nLines == 0) {
    TUTTI_CHECK(waitTail());  // an empty step has no line to carry a flag: tail alone marks it
    tailSeen = true;
  } else if (nLines > 1) {
    // The sender writes lines in order, each flag with release: once the last one shows, every line of the
    // slot is visible. Polling only the last line keeps the two cores from bouncing each cache line.
    int spins = 0;
    SpinPacer pacer(wait_.spinCount);  // ranks outnumbering cores hand the core over early
    while (lineFlag(nLines - 1) != flag) {
      pacer.pause();
      if (++spins > wait_.spinCount) {
        TUTTI_CHECK(waitTail());
        tailSeen = true;
        break;
      }
    }
  }
  size_t i = 0;
  int spins = 0;
  SpinPacer pacer(wait_.spinCount);
  while (i < nLines) {
    if (lineFlag(i) == flag) {
      // A line is read only after its own flag showed: never a half-written line.
      // A full line with a fixed size (inlined vector moves rather than a call), the last one as it is.
      if (bytes - i * kLL128DataPerLine >= kLL128DataPerLine)
        std::memcpy(out + i * kLL128DataPerLine, lines + i * kLL128LineBytes, kLL128DataPerLine);
      else
        std::memcpy(out + i * kLL128DataPerLine, lines + i * kLL128LineBytes, bytes - i * kLL128DataPerLine);
      ++i;
      spins = 0;
      continue;
    }
    if (tailSeen) {
      TUTTI_CHECK(checkSize(rc, bytes));  // names the mismatch when sizes or protocols differ
      TUTTI_FAIL(ncclInternalError, "rank {}: {} (opCount {}, channel {}): LL128 slot from rank {} is incomplete "
                 "(line {} of {})", label_.rank, label_.opName, label_.opCount, label_.channel, rc->peer, i, nLines);
    }
    // The sender publishes tail once the slot is written: sleep on it after spinning, then finish reading.
    pacer.pause();
    if (++spins > wait_.spinCount) {
      TUTTI_CHECK(waitTail());
      tailSeen = true;
      spins = 0;
    }
  }
  // The size word is only promised before tail, not before the lines (a device sender stores it after them):
  // a size that does not match yet is judged once tail covers the step.
  if (!tailSeen && !sizeIs(rc, bytes)) TUTTI_CHECK(waitTail());
  TUTTI_CHECK(checkSize(rc, bytes));
  *data = out;
  return ncclSuccess;
}

void HostPrims::ll128Write(char* slot, const char* src, size_t bytes, uint64_t step) {
  const uint64_t flag = ll128Flag(step);
  const size_t nLines = divUp(bytes, kLL128DataPerLine);
  for (size_t i = 0; i < nLines; ++i) {
    char* line = slot + i * kLL128LineBytes;
    if (bytes - i * kLL128DataPerLine >= kLL128DataPerLine)
      std::memcpy(line, src + i * kLL128DataPerLine, kLL128DataPerLine);  // fixed size: inlined moves
    else
      std::memcpy(line, src + i * kLL128DataPerLine, bytes - i * kLL128DataPerLine);
    // Release: a reader that sees this flag sees the 120 bytes before it (host stores; on the GPU the
    // same guarantee needs the transport's LL128 capability).
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(line + kLL128DataPerLine))
        .store(flag, std::memory_order_release);
  }
}

// LL: a reader polls the header line that follows the data lines it expects; once its flag shows, the
// header's release store made every data line visible, and the header carries the byte count. Each data
// line is still checked against its own flag. A lane (useLanes) holds a packet: its header word is polled alike and
// the data is read where it lies.
ncclResult_t HostPrims::waitRecvLL(int peer, size_t bytes, const char** data) {
  HostConn* rc = recvs_[peer];
  const tuttiConnector_t& conn = rc->conn;
  const uint64_t step = rc->step;
  const int slot = static_cast<int>(step % TUTTI_STEPS);
  const bool proxied = (conn.flags & TUTTI_CONN_PROXIED) != 0;
  const auto* words =
      reinterpret_cast<const uint64_t*>(proxied ? proxiedSlot(conn, slot) : llStepLines(*rc, step, laneBytes_));
  auto load = [&](size_t i) { return std::atomic_ref<const uint64_t>(words[i]).load(std::memory_order_acquire); };
  const uint32_t flag = llFlag(step);
  const uint32_t headerFlag = llHeaderFlag(step);
  const size_t nLines = divUp(bytes, kLLDataPerLine);
  auto waitTail = [&] { return HostPrims::waitTail(rc); };
  // Once tail covers this step every line of it is visible: a header still missing then means the sender
  // wrote something else (another size or protocol: a mismatched call), never "wait longer".
  bool tailSeen = false;
  const bool trusted = proxied || llHeaderTrusted(*rc, llStepFirstWord(reinterpret_cast<const char*>(words), laneBytes_),
                                                  llStepWords(laneBytes_, bytes));
  if (proxied) {
    TUTTI_CHECK(waitTail());
    TUTTI_CHECK(checkSize(rc, bytes));  // the proxy recorded the wire bytes
    tailSeen = true;
  } else if (!trusted) {
    TUTTI_CHECK(waitTail());  // the word may hold older data that looks like this step's header
    tailSeen = true;
  }
  const bool packet = laneBytes_ && !proxied;  // a lane's packet (llLaneBytes): its header in the lane's last word
  const size_t headerWord = packet ? laneHeaderWord(laneBytes_) : nLines;
  uint64_t header = 0;
  SpinPacer pacer(wait_.spinCount);
  for (int spins = 0;;) {
    header = load(headerWord);
    if (static_cast<uint32_t>(header >> 32) == headerFlag || tailSeen) break;
    pacer.pause();
    if (++spins > wait_.spinCount) {  // the sender publishes tail too: sleep on it
      TUTTI_CHECK(waitTail());
      tailSeen = true;
    }
  }
  if (static_cast<uint32_t>(header >> 32) != headerFlag || static_cast<uint32_t>(header) != bytes) {
    // The sizes the sender recorded are visible once tail covers the step: they name the mismatch.
    if (!tailSeen) TUTTI_CHECK(waitTail());
    if (packet) TUTTI_CHECK(packetMismatch(rc, bytes, header));
    TUTTI_CHECK(checkSize(rc, bytes));
    if (static_cast<uint32_t>(header >> 32) != headerFlag)
      TUTTI_FAIL(ncclInternalError, "rank {}: {} (opCount {}, channel {}): LL slot from rank {} has no header",
                 label_.rank, label_.opName, label_.opCount, label_.channel, rc->peer);
    TUTTI_FAIL(ncclInvalidUsage,
               "rank {}: {} (opCount {}, channel {}): rank {} sent {} bytes (protocol LL) where {} bytes (protocol LL) "
               "were expected (mismatched calls across ranks?)",
               label_.rank, label_.opName, label_.opCount, label_.channel, rc->peer, static_cast<uint32_t>(header),
               bytes);
  }
  if (packet) {  // read in place: the lane is the sender's again only once this step is released
    llStepRead(rc, reinterpret_cast<const char*>(words), laneBytes_, bytes, trusted);
    *data = reinterpret_cast<const char*>(words);
    return ncclSuccess;
  }
  char* out = staging().recv[peer].data();
  if (!readLLLines(words, out, bytes, flag)) {
    size_t i = 0;
    while (i < nLines && static_cast<uint32_t>(load(i) >> 32) == flag) ++i;
    TUTTI_FAIL(ncclInternalError, "rank {}: {} (opCount {}, channel {}): LL slot from rank {} is incomplete "
               "(line {} of {})", label_.rank, label_.opName, label_.opCount, label_.channel, rc->peer, i, nLines);
  }
  if (!proxied) llStepRead(rc, reinterpret_cast<const char*>(words), 0, bytes, trusted);
  *data = out;
  return ncclSuccess;
}

// A lane whose header, once tail covered the step, was not the one expected. A header of this step carries the size
// the sender wrote. Without one, the step's size record names what the sender sent while it is still this step's: a
// sender runs up to a lane size's depth ahead, and records sizes in NCCL_STEPS places.
ncclResult_t HostPrims::packetMismatch(const HostConn* rc, size_t bytes, uint64_t header) const {
  if (static_cast<uint32_t>(header >> 32) == llHeaderFlag(rc->step))
    TUTTI_FAIL(ncclInvalidUsage,
               "rank {}: {} (opCount {}, channel {}): rank {} sent {} bytes (protocol LL) where {} bytes (protocol LL) "
               "were expected (mismatched calls across ranks? TUTTI_CHECK_CALLS=1 names both calls)",
               label_.rank, label_.opName, label_.opCount, label_.channel, rc->peer, static_cast<uint32_t>(header),
               bytes);
  const tuttiConnCtrl_t* ctrl = rc->conn.ctrl;
  const int slot = static_cast<int>(rc->step % TUTTI_STEPS);
  const int64_t got = std::atomic_ref<const int64_t>(ctrl->sizes[slot]).load(std::memory_order_acquire);
  const int32_t proto = std::atomic_ref<const int32_t>(ctrl->protos[slot]).load(std::memory_order_acquire);
  // The sender records step + NCCL_STEPS only once tail covers step + NCCL_STEPS - 1.
  if (std::atomic_ref<const uint64_t>(ctrl->tail).load(std::memory_order_acquire) < rc->step + TUTTI_STEPS) {
    if (got == static_cast<int64_t>(bytes) && proto == TUTTI_PROTO_LL)
      TUTTI_FAIL(ncclInternalError, "rank {}: {} (opCount {}, channel {}): LL lane from rank {} has no header",
                 label_.rank, label_.opName, label_.opCount, label_.channel, rc->peer);
    TUTTI_FAIL(ncclInvalidUsage,
               "rank {}: {} (opCount {}, channel {}): rank {} sent {} bytes (protocol {}) where {} bytes (protocol LL) "
               "were expected (mismatched calls across ranks? TUTTI_CHECK_CALLS=1 names both calls)",
               label_.rank, label_.opName, label_.opCount, label_.channel, rc->peer, got, protoText(proto), bytes);
  }
  TUTTI_FAIL(ncclInvalidUsage,
             "rank {}: {} (opCount {}, channel {}): rank {} sent no LL packet of {} bytes for this step (a packet of "
             "another size, or another protocol: mismatched calls across ranks? TUTTI_CHECK_CALLS=1 names both calls)",
             label_.rank, label_.opName, label_.opCount, label_.channel, rc->peer, bytes);
}

void HostPrims::llWrite(char* slot, const char* src, size_t bytes, uint64_t step) {
  if (laneBytes_) writeLanePacket(slot, laneBytes_, src, bytes, step);
  else writeLLLines(slot, src, bytes, step);
}

// Waits until the current send slot of sends_[peer] is free (the receiver released it) and points *slot
// at it in the protocol's buffer.
ncclResult_t HostPrims::waitSend(int peer, char** slot) {
  HostConn* sc = sends_[peer];
  tuttiConnCtrl_t* ctrl = sc->conn.ctrl;
  const uint64_t step = sc->step;
  // The slot is free once head passed step - NCCL_STEPS (a lane: step - lanes; a slot ring: step - its slots). A
  // head read earlier often already says so: reading it again would pull the receiver's cache line across cores on
  // every step. A step after steps of another geometry (lanes of another size, slots, another slot ring) waits until
  // every earlier step was consumed: the lanes and slots overlap, and so do the size records of steps 8 apart.
  const size_t lane = proto_ == TUTTI_PROTO_LL ? laneBytes_ : 0;
  const uint32_t ring = ringOf(sc);
  const uint64_t depth = lane ? llDepth(*sc, lane) : ring;
  const uint64_t free =
      sc->laneBytes != lane || sc->slotRing != ring ? step : step + 1 > depth ? step + 1 - depth : 0;
  if (sc->headSeen < free) {
    const SlowWait slow{this, sc, true};
    const WaitContext w = connWait(sc, &slow);
    WaitStatus st =
        waitAtLeast(&ctrl->head, &ctrl->headWaiters, &ctrl->headSeq, &ctrl->receiverClosed, free, w);
    if (st != WaitStatus::Ready) return waitFailed(st, sc, true, step);
    sc->headSeen = std::atomic_ref<uint64_t>(ctrl->head).load(std::memory_order_acquire);
  }
  sc->laneBytes = lane;
  sc->slotRing = ring;
  *slot = lane ? llStepLines(*sc, step, lane)
               : static_cast<char*>(sc->conn.buffs[proto_]) + (step % ring) * (sc->conn.buffSizes[proto_] / TUTTI_STEPS);
  return ncclSuccess;
}

ncclResult_t HostPrims::run(unsigned mode, size_t in, size_t out, size_t n, bool postOp) {
  if (proto_ == TUTTI_PROTO_LL128) {
    // The communicator offers LL128 only where every transport declared the guarantee; a connector that
    // breaks that promise is refused rather than risking torn lines.
    for (int i = 0; i < nRecv_ + nSend_; ++i) {
      const HostConn* c = i < nRecv_ ? recvs_[i] : sends_[i - nRecv_];
      if (!(c->conn.flags & (TUTTI_CONN_LL128_SAFE | TUTTI_CONN_PROXIED)))
        TUTTI_FAIL(ncclInvalidUsage, "rank {}: {} (opCount {}, channel {}): the connection with rank {} does not "
                   "guarantee LL128 ordering; exclude it with NCCL_PROTO=^LL128", label_.rank, label_.opName,
                   label_.opCount, label_.channel, c->peer);
    }
  }
  const size_t slotElems = slotData_ / eltSize_;
  const bool lines = proto_ != TUTTI_PROTO_SIMPLE;  // LL / LL128: staged, then written as lines
  const int nRecv = (mode & kRecv) ? nRecv_ : 0;
  const int nSend = (mode & kSend) ? nSend_ : 0;
  size_t done = 0;
  // A zero-element call still makes one (empty) step on each connection it uses.
  do {
    const size_t elems = minSize(slotElems, n - done);
    const size_t bytes = elems * eltSize_;
    stepBytes_ = bytes;
    const void* srcs[2 + kMaxPrimsPeers];
    void* dsts[2 + kMaxPrimsPeers];
    char* sendSlots[kMaxPrimsPeers];
    int nSrcs = 0, nDsts = 0;
    char* const outPtr = output_ + (out + done) * eltSize_;
    if (mode & kSrcInput) srcs[nSrcs++] = input_ + (in + done) * eltSize_;
    if (mode & kSrcOutput) srcs[nSrcs++] = outPtr;
    if (mode & kDstOutput) dsts[nDsts++] = outPtr;
    // Zero copy (useUserBuffers): a receive into the output finds its data there; a send of data that sits in
    // the user's buffers as it must go out leaves from them.
    const bool recvInPlace = userRecv_ && nRecv == 1 && (mode & kDstOutput) && !(mode & (kSrcInput | kSrcOutput)) &&
                             userBufferStep(recvs_[0], proto_, bytes);
    const char* sendFrom = nullptr;
    if (userSend_ && nSend == 1 && userBufferStep(sends_[0], proto_, bytes)) {
      if (mode & kDstOutput) sendFrom = outPtr;  // what the step writes to its output is what it sends
      else if (mode == (kSrcInput | kSend) && (op_.detPair || op_.kind != RedOpKind::PreMulSum))
        sendFrom = input_ + (in + done) * eltSize_;
    }
    for (int i = 0; i < nRecv; ++i) {
      const char* data = nullptr;
      TUTTI_CHECK(waitRecv(i, bytes, &data, recvInPlace ? outPtr : nullptr));
      srcs[nSrcs++] = data;
    }
    for (int i = 0; i < nSend; ++i) {
      TUTTI_CHECK(waitSend(i, &sendSlots[i]));
      if (!lines && !sendFrom) dsts[nDsts++] = sendSlots[i];
    }
    // LL / LL128: the data is staged once, then written as lines to every send slot.
    if (lines && nSend > 0) dsts[nDsts++] = staging().send.data();

    if (elems > 0) {
      // The rank's own input enters the reduction through the pre-op (premulsum scalar), unless it is
      // only being forwarded (no source from the input).
      hostReduceCopy(op_, nSrcs, srcs, nDsts, dsts, elems, (mode & kSrcInput) != 0, postOp);
    }

    for (int i = 0; i < nSend; ++i) {
      HostConn* sc = sends_[i];
      tuttiConnCtrl_t* ctrl = sc->conn.ctrl;
      const int slot = static_cast<int>(sc->step % TUTTI_STEPS);
      std::atomic_ref<int64_t>(ctrl->sizes[slot]).store(static_cast<int64_t>(bytes), std::memory_order_relaxed);
      std::atomic_ref<int32_t>(ctrl->protos[slot]).store(proto_, std::memory_order_relaxed);
      if (sendFrom) {
        sc->sendFromUser(sc->netEnd, sc->step, sendFrom);
        sentFromUser_[i] = true;
      }
      if (proto_ == TUTTI_PROTO_LL) llWrite(sendSlots[i], staging().send.data(), bytes, sc->step);
      if (proto_ == TUTTI_PROTO_LL128) ll128Write(sendSlots[i], staging().send.data(), bytes, sc->step);
      publish(&ctrl->tail, &ctrl->tailWaiters, &ctrl->tailSeq, ++sc->step, sc->conn.shared);
      // A network send leaves now, from this thread; a proxy thread that may be asleep is rung only for ends
      // the rank does not drive.
      if (sc->proxyTask) proxyProgressInline(sc->proxyTask);
      else if (sc->conn.flags & TUTTI_CONN_PROXIED) proxyRing();
    }
    for (int i = 0; i < nRecv; ++i) {
      HostConn* rc = recvs_[i];
      tuttiConnCtrl_t* ctrl = rc->conn.ctrl;
      publish(&ctrl->head, &ctrl->headWaiters, &ctrl->headSeq, ++rc->step, rc->conn.shared);
    }
    done += elems;
  } while (done < n);
  return ncclSuccess;
}

ncclResult_t HostPrims::waitSent(bool all) {
  for (int i = 0; i < nSend_; ++i) {
    if (!sentFromUser_[i] && !all) continue;
    HostConn* sc = sends_[i];
    tuttiConnCtrl_t* ctrl = sc->conn.ctrl;
    // A network send end's head counts the steps whose isend completed.
    const SlowWait slow{this, sc, true};
    const WaitContext w = connWait(sc, &slow);
    const WaitStatus st =
        waitAtLeast(&ctrl->head, &ctrl->headWaiters, &ctrl->headSeq, &ctrl->receiverClosed, sc->step, w);
    if (st != WaitStatus::Ready) return waitFailed(st, sc, true, sc->step);
    sentFromUser_[i] = false;
  }
  return ncclSuccess;
}

bool HostPrims::recvReady() const {
  const HostConn* rc = recvs_[0];
  if (rc->proxyTask) proxyProgressInline(rc->proxyTask);
  return std::atomic_ref<uint64_t>(rc->conn.ctrl->tail).load(std::memory_order_acquire) >= rc->step + 1;
}

void HostPrims::recvRelease() {
  HostConn* rc = recvs_[0];
  tuttiConnCtrl_t* ctrl = rc->conn.ctrl;
  publish(&ctrl->head, &ctrl->headWaiters, &ctrl->headSeq, ++rc->step, rc->conn.shared);
}

void announceRecvSteps(HostConn* conn, uint64_t steps) {
  if (!conn || !conn->conn.ctrl || !steps) return;
  std::atomic_ref<uint64_t>(conn->conn.ctrl->recvWanted).fetch_add(steps);
  // A driven end posts its receives now; the rank's waits poll it from there on.
  if (conn->proxyTask) proxyProgressInline(conn->proxyTask);
  else if (conn->conn.flags & TUTTI_CONN_PROXIED) proxyRing();
}

ncclResult_t llSendSmall(HostConn* sc, const void* src, size_t bytes, const WaitContext& wait, const OpLabel& label) {
  tuttiConnCtrl_t* ctrl = sc->conn.ctrl;
  const uint64_t step = sc->step;
  const size_t lane = llLaneBytes(sc->conn, bytes);
  // A free lane or slot as HostPrims::waitSend finds it: a head read earlier often says so already.
  const uint64_t depth = llDepth(*sc, lane);
  const uint64_t free =
      sc->laneBytes != lane || sc->slotRing != TUTTI_STEPS ? step : step + 1 > depth ? step + 1 - depth : 0;
  if (sc->headSeen < free) {
    sc->headSeen = std::atomic_ref<uint64_t>(ctrl->head).load(std::memory_order_acquire);
    if (sc->headSeen < free) {  // the receiver is behind: wait as every step does
      ResolvedRedOp copy{};
      resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copy);
      HostPrims prims(nullptr, sc, src, nullptr, 1, copy, wait, label, TUTTI_PROTO_LL);
      prims.useLanes(lane);
      return prims.send(0, bytes);
    }
  }
  sc->laneBytes = lane;
  sc->slotRing = TUTTI_STEPS;
  const int slot = static_cast<int>(step % TUTTI_STEPS);
  std::atomic_ref<int64_t>(ctrl->sizes[slot]).store(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  std::atomic_ref<int32_t>(ctrl->protos[slot]).store(TUTTI_PROTO_LL, std::memory_order_relaxed);
  char* lines = llStepLines(*sc, step, lane);
  if (lane) writeLanePacket(lines, lane, static_cast<const char*>(src), bytes, step);
  else writeLLLines(lines, static_cast<const char*>(src), bytes, step);
  publish(&ctrl->tail, &ctrl->tailWaiters, &ctrl->tailSeq, ++sc->step, sc->conn.shared);
  return ncclSuccess;
}

ncclResult_t llRecvSmall(HostConn* rc, void* dst, size_t bytes, const WaitContext& wait, const OpLabel& label) {
  const uint64_t step = rc->step;
  const size_t lane = llLaneBytes(rc->conn, bytes);
  const char* lines = llStepLines(*rc, step, lane);
  const uint32_t headerFlag = llHeaderFlag(step);
  // Words that may hold packet data count only once tail covers the step, read before them (llHeaderTrusted): until
  // then this end polls tail instead.
  const bool trusted = llHeaderTrusted(*rc, llStepFirstWord(lines, lane), llStepWords(lane, bytes));
  tuttiConnCtrl_t* ctrl = rc->conn.ctrl;
  SpinPacer pacer(wait.spinCount);
  for (int spins = 0;; ++spins) {
    if (trusted || std::atomic_ref<const uint64_t>(ctrl->tail).load(std::memory_order_acquire) > step) {
      // A lane: the packet's header; a slot (no lane fits): the LL header line after the data lines.
      const uint64_t header = lane ? laneHeader(lines, lane)
                                   : std::atomic_ref<const uint64_t>(reinterpret_cast<const uint64_t*>(
                                         lines)[divUp(bytes, kLLDataPerLine)]).load(std::memory_order_acquire);
      const bool mine = static_cast<uint32_t>(header >> 32) == headerFlag;
      if (mine && static_cast<uint32_t>(header) == bytes) {
        if (lane) std::memcpy(dst, lines, bytes);
        else if (!readLLLines(reinterpret_cast<const uint64_t*>(lines), static_cast<char*>(dst), bytes, llFlag(step)))
          break;  // a line not this step's
        llStepRead(rc, lines, lane, bytes, trusted);
        publish(&ctrl->head, &ctrl->headWaiters, &ctrl->headSeq, ++rc->step, rc->conn.shared);
        return ncclSuccess;
      }
      // Another size, or tail covers the step and its header is not there: HostPrims names what came.
      if (mine || !trusted) break;
    }
    if (spins >= wait.spinCount) break;  // sleep on tail, as HostPrims does after spinning
    pacer.pause();
  }
  ResolvedRedOp copy{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copy);
  WaitContext spun = wait;
  spun.spinCount = 0;  // this thread has spun already
  HostPrims prims(rc, nullptr, nullptr, dst, 1, copy, spun, label, TUTTI_PROTO_LL);
  prims.useLanes(lane);
  return prims.recv(0, bytes);
}

ncclResult_t HostPrims::localCopy(size_t in, size_t out, size_t n) {
  if (n == 0) return ncclSuccess;
  const void* src = input_ + in * eltSize_;
  void* dst = output_ + out * eltSize_;
  hostReduceCopy(op_, 1, &src, 1, &dst, n, true, true);
  return ncclSuccess;
}

}  // namespace tutti::host
