// Data path of net-socket: isend / irecv / test over one control socket (size rendezvous and small
// payloads) and nSocks data sockets driven by helper threads (large payloads cut into chunks).
//
// Ordering contract: both ends process a comm's messages in post order, and cut a message into the same
// chunks (the sender's chunk size travels in the header) assigned to the same sockets (nextSock advances
// identically), so each data socket carries the same sequence of chunks on both ends.
#include "connect.h"
#include "options.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

namespace tutti::netsock {

namespace {

char gHostMr;  // every host registration returns this: registration is a no-op for sockets

void wake(Worker& w) {
  uint64_t one = 1;
  ssize_t n;
  do {
    n = ::write(w.wakeFd, &one, sizeof one);
  } while (n < 0 && errno == EINTR);
}

// Helper thread: progresses the head chunk of each socket it owns; sleeps in poll when nothing moves.
void workerLoop(Comm* comm, Worker* w) {
  std::vector<pollfd> pfds;
  std::vector<Task*> heads(w->sockIdx.size(), nullptr);
  bool failed = false;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(w->mu);
      if (w->stop) return;
      for (size_t j = 0; j < heads.size(); j++) heads[j] = w->queues[j].empty() ? nullptr : w->queues[j].front();
    }
    pfds.clear();
    bool progressed = false;
    for (size_t j = 0; j < heads.size() && !failed; j++) {
      Task* t = heads[j];
      if (t == nullptr) continue;
      int fd = comm->dataFds[w->sockIdx[j]];
      ncclResult_t code = ncclSuccess;
      size_t before = t->offset;
      Io io = progressIo(fd, comm->isSend, t->data, t->size, &t->offset, &code);
      progressed = progressed || t->offset != before;
      if (io == Io::Error) {
        failComm(comm, code);
        failed = true;  // stop moving data; wait for close
      } else if (io == Io::Done) {
        Request* req = t->req;
        {
          std::lock_guard<std::mutex> lock(w->mu);
          w->queues[j].pop_front();
        }
        // Last touch of the task: once the count drops, test() may recycle the request.
        req->pendingTasks.fetch_sub(1, std::memory_order_acq_rel);
      } else {
        pfds.push_back({fd, static_cast<short>(comm->isSend ? POLLOUT : POLLIN), 0});
      }
    }
    if (progressed) continue;
    pfds.push_back({w->wakeFd, POLLIN, 0});
    // The timeout only bounds a lost wake-up; progress is driven by readiness and the eventfd.
    if (::poll(pfds.data(), pfds.size(), 1000) > 0 && (pfds.back().revents & POLLIN)) {
      uint64_t v;
      (void)!::read(w->wakeFd, &v, sizeof v);
    }
  }
}

ncclResult_t startWorkers(Comm* comm) {
  for (int t = 0; t < comm->nThreads; t++) {
    auto w = std::make_unique<Worker>();
    w->wakeFd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->wakeFd < 0) {
      SOCK_WARN("NET/Socket : eventfd failed: %s", std::strerror(errno));
      return ncclSystemError;
    }
    for (int s = t; s < static_cast<int>(comm->dataFds.size()); s += comm->nThreads) w->sockIdx.push_back(s);
    w->queues.resize(w->sockIdx.size());
    comm->workers.push_back(std::move(w));
  }
  // Threads start only once every worker exists: a failure above leaves nothing running.
  for (auto& w : comm->workers) w->thread = std::thread(workerLoop, comm, w.get());
  return ncclSuccess;
}

// Cuts r's payload into chunks and queues them on the helper threads (header already exchanged).
ncclResult_t dispatchChunks(Comm* comm, Request* r) {
  size_t chunk = r->hdr.chunkBytes;
  size_t n = chunkCount(r->size, chunk);  // overflow-safe: a peer's chunkBytes may be near 2^64
  if (comm->workers.empty()) {
    if (ncclResult_t rc = startWorkers(comm); rc != ncclSuccess) return failComm(comm, rc);
    comm->chunked.store(true, std::memory_order_release);
  }
  r->pendingTasks.store(static_cast<int>(n), std::memory_order_relaxed);
  for (size_t i = 0; i < n; i++) {
    Task& t = r->tasks[i];
    t.data = r->data + i * chunk;
    t.size = std::min(chunk, r->size - i * chunk);
    t.offset = 0;
    t.req = r;
    int s = comm->nextSock;
    comm->nextSock = (comm->nextSock + 1) % static_cast<int>(comm->dataFds.size());
    Worker& w = *comm->workers[s % comm->nThreads];
    {
      std::lock_guard<std::mutex> lock(w.mu);
      w.queues[s / comm->nThreads].push_back(&t);
    }
    wake(w);
  }
  return ncclSuccess;
}

// A remainder of at least this many bytes is read straight into its buffer, nothing more.
constexpr size_t kRxDirectBytes = 16 * 1024;
// Read-ahead of a receiving comm's control socket: a read that needs only a few bytes (a header, a short rest of a
// payload) takes up to this many bytes of what follows into rxBuf, so one recv serves a header and a payload of up
// to kRxDirectBytes (and more small messages behind them). Payload bytes taken ahead are copied once more on their
// way out of rxBuf: a larger read-ahead would copy the start of every large payload (2 ranks over loopback,
// sendrecv 64 KiB to 512 KiB, 64 KiB of read-ahead -> this: 5-10% less time per call, equal below).
constexpr size_t kRxBufBytes = kRxDirectBytes + sizeof(MsgHeader);

// The two directions of a peer pair are two TCP connections (a send comm and a receive comm), so the data of one
// never carries the ACKs of the other, and Linux acknowledges every segment a receiver reads on a connection it
// sees as one-way: a second packet per message through the whole stack of both hosts (over loopback, both on the
// sending and the receiving core). In delayed-ACK mode (TCP_QUICKACK off) the kernel acknowledges every second
// full segment, when a read finds two short segments, when the window opens, or when its delayed-ACK timer runs out
// (40 ms or more; a sender left waiting for an ACK re-sends its last segment once as a loss probe, which is
// acknowledged at once). The mode ends each time that timer fires (and when the kernel enters quick-ACK mode
// itself, as for a retransmitted segment or data beyond the window), so a receiving comm re-enters it after reads
// that took data: after every read of a long payload (`bulk`), and after short reads (headers, small messages) at
// most once per kAckRearmNs. A setsockopt per short read was 5 system calls per call on 8 ranks broadcasting 8 B
// over loopback; at most 1 ms of quick ACKs after the timer fires (it runs 40 ms or more) is 2.5% of the time at
// worst. TCP_NODELAY on the sending
// side means no send waits for an ACK; a bulk flow is acknowledged every second segment in either mode. Measured on
// 2 cores over loopback, 2 processes, 16 KiB AllGather: 2.0 -> 1.5 segments per message, about 20 -> 12-15 us per
// call.
constexpr int64_t kAckRearmNs = 1000 * 1000;

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// `now`: the steady clock of a short read (bulk reads pass 0).
void keepAcksDelayed(Comm* comm, bool bulk, int64_t now) {
  if (!comm->delayAcks) return;
  if (!bulk) {
    if (comm->ackArmedNs != 0 && now - comm->ackArmedNs < kAckRearmNs) return;
    comm->ackArmedNs = now;
  }
  int zero = 0;
  (void)setsockopt(comm->ctrlFd, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof zero);
}

// When this process last sent, as its receiving comms see it. A send sets gSentSince (a load, and a store only when
// it was clear: polling threads do not take the line from one another, and no send reads the clock); a receiving
// comm that asks clears it and dates the send gLastSendNs = now, at most once per kSendLookNs.
std::atomic<bool> gSentSince{false};
std::atomic<int64_t> gLastSendNs{0};
constexpr int64_t kSendLookNs = 25 * 1000;
// A process that had no send for this long receives a one-way flow: its reads of long payloads acknowledge at once.
constexpr int64_t kOneWayNs = 1000 * 1000;
// A process that had no send for this long asks its sockets whether data waits before reading them (recvCtrl).
constexpr int64_t kPollFirstNs = 200 * 1000;

// Records a send posted or in progress.
void noteSend() {
  if (!gSentSince.load(std::memory_order_relaxed)) gSentSince.store(true, std::memory_order_relaxed);
}

// Nanoseconds since this process last sent, up to `now` (steady clock ns). A send after the last look is found by
// the next look at least kSendLookNs after it, so an answer of kSendLookNs or more is never too long: no send
// happened in that time.
int64_t nsSinceSend(int64_t now) {
  const int64_t last = gLastSendNs.load(std::memory_order_relaxed);
  if (now - last >= kSendLookNs && gSentSince.load(std::memory_order_relaxed)) {
    gSentSince.store(false, std::memory_order_relaxed);
    gLastSendNs.store(now, std::memory_order_relaxed);
    return 0;
  }
  return now - last;
}

// Reads that took data in this process, on any receiving comm. A sending comm that sees the count unchanged over
// kHoldAfterSends of its sends belongs to a one-way flow (a Broadcast's root, a pipeline's first stage).
std::atomic<uint64_t> gReads{0};
void noteRead() {  // any change tells: two threads' increments may count as one
  gReads.store(gReads.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
constexpr uint32_t kHoldAfterSends = 16;
// Largest message a one-way sender lets its socket hold.
constexpr size_t kHoldMaxBytes = 16384;

// A one-way flow of small messages lets the sending socket hold them (TCP_NODELAY off: Nagle's algorithm keeps a
// short segment while an earlier one is unacknowledged). With TCP_NODELAY every send is a segment, and over loopback
// its delivery runs on the sender's core inside the send: the sender, which no receive paces, pays the whole trip
// per message. Held, a send only appends to the segment in waiting, which leaves, with every message added
// meanwhile, when the receiver acknowledges: the header's kMsgHeld tells the receiver to do so whenever its socket
// runs dry (forceAck), so a held message waits at most for the receiver's next look at an empty socket. Any read
// in the process, a larger message, or a chunked one, turns holding off (TCP_NODELAY on, which sends what is held).
// 2-core VM over loopback, Broadcast, medians of three interleaved runs of 1000 calls, us, TCP_NODELAY -> held: 2
// processes 8 B 6.50 -> 3.25, 512 B 6.79 -> 3.41, 2 KiB 7.16 -> 3.64, 8 KiB 8.68 -> 4.70; 4 processes 8 B 8.73 ->
// 6.94, 64 B 10.67 -> 6.96, 4 KiB 18.71 -> 11.25; 8 processes 8 B 26.3 -> 17.4, 4 KiB 30.0 -> 27.8. 16 KiB held
// (medians of five interleaved sweeps of 500 calls): 2 processes 7.66 -> 6.06, 4 processes 21.95 -> 22.83, 8 within
// their spread; Reduce (whose leaves hold) 2 processes 8.25 -> 7.53. Past 16 KiB held messages lost (4 processes,
// 32 KiB 31.8 -> 40.6). Without the receiver's forced ACK each held message waited for the kernel's delayed-ACK timer:
// 2 processes, 8 B, 21 us a call.
void holdSmall(Comm* comm, Request* r) {
  bool hold = false;
  if (comm->holdAllowed && (r->hdr.flags & kMsgInline) && r->size <= kHoldMaxBytes) {
    const uint64_t reads = gReads.load(std::memory_order_relaxed);
    if (reads != comm->readsSeen) {
      comm->readsSeen = reads;
      comm->sendsUnheard = 0;
    } else if (comm->sendsUnheard < kHoldAfterSends) {
      ++comm->sendsUnheard;
    }
    hold = comm->sendsUnheard >= kHoldAfterSends;
  } else {
    comm->sendsUnheard = 0;
  }
  if (hold != comm->holding) {
    const int noDelay = hold ? 0 : 1;
    if (setsockopt(comm->ctrlFd, IPPROTO_TCP, TCP_NODELAY, &noDelay, sizeof noDelay) == 0) comm->holding = hold;
  }
  if (comm->holding) r->hdr.flags |= kMsgHeld;
}

// A receiving comm whose sender holds (kMsgHeld), on finding its socket empty after a read took data: the ACK the
// kernel keeps back in delayed-ACK mode goes now, and the mode stays (TCP_QUICKACK 2: an even value re-enters it).
void forceAck(Comm* comm) {
  if (!comm->peerHolds || !comm->unacked) return;
  comm->unacked = false;
  int mode = comm->delayAcks ? 2 : 1;  // without delayed ACKs (TUTTI_NET_SOCKET_DELAYED_ACK=0): the kernel's mode
  (void)setsockopt(comm->ctrlFd, IPPROTO_TCP, TCP_QUICKACK, &mode, sizeof mode);
}

// After a read of a long payload. Where this process sends too (an AllGather, a ring), delayed ACKs spare a packet
// through both stacks per segment, and the sender's TCP_NODELAY keeps its flow going. A process that only receives
// (a Broadcast's leaf) has the core to spare, while its sender paces its flow by the ACKs it gets: there quick ACKs
// (TCP_QUICKACK on, which also sends the one held back). 2 processes over loopback, 2 cores, Broadcast, medians of
// five interleaved runs, us, delayed -> quick: 1 MiB 198 -> 143, 4 MiB 683 -> 557, 16 MiB 3496 -> 3349; AllGather
// unchanged (1 MiB 165 and 157), where quick ACKs at both ends made its 1 MiB calls twice as slow. 4 and 8 ranks: even
// within the noise.
void ackBulkRead(Comm* comm) {
  if (!comm->delayAcks) return;
  if (nsSinceSend(steadyNs()) < kOneWayNs) return keepAcksDelayed(comm, true, 0);
  int one = 1;
  (void)setsockopt(comm->ctrlFd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
}

// Receives bytes [*offset, size) of buf from the control socket of a receiving comm: from what an earlier read took
// ahead first, then from the socket: a long remainder straight into buf; a short one with one recvmsg that puts the
// remainder into buf and whatever has arrived behind it into rxBuf.
Io recvCtrl(Comm* comm, void* buf, size_t size, size_t* offset, ncclResult_t* code) {
  char* p = static_cast<char*>(buf);
  while (*offset < size) {
    if (comm->rxBegin < comm->rxEnd) {
      const size_t n = std::min(size - *offset, comm->rxEnd - comm->rxBegin);
      std::memcpy(p + *offset, comm->rxBuf.get() + comm->rxBegin, n);
      comm->rxBegin += n;
      *offset += n;
      continue;
    }
    const size_t rem = size - *offset;
    if (rem >= kRxDirectBytes) {
      const size_t before = *offset;
      const Io io = progressIo(comm->ctrlFd, false, buf, size, offset, code);
      if (*offset != before) {
        noteRead();
        comm->unacked = true;
        ackBulkRead(comm);
      }
      if (io == Io::Again) forceAck(comm);
      return io;
    }
    if (!comm->rxBuf) comm->rxBuf = std::make_unique<char[]>(kRxBufBytes);
    // A one-way flow whose last read found nothing: ask whether data waits first. recvmsg takes the socket's lock
    // even when it finds nothing, and while it holds it the sender's segments cannot be queued on the socket: its
    // core spins on the lock or leaves them to the backlog, which this reader then processes. poll reads the
    // socket's state without the lock. In a ping-pong the poll would be one system call more between a message's
    // arrival and its read (AllReduce of 8 B, 2 processes, polling before every read: 10.5 -> 11.8 us a call), so
    // only a process that sends nothing does it. 2 processes over loopback, Broadcast of 8 B, 5000 calls, five
    // interleaved runs: 6.87-7.01 -> 6.07-6.51 us a call; AllReduce unchanged.
    if (comm->oneWay && comm->drained) {
      pollfd pfd{comm->ctrlFd, POLLIN, 0};
      if (::poll(&pfd, 1, 0) == 0) {  // ready, the end, or an error: recvmsg tells which
        forceAck(comm);
        return Io::Again;
      }
    }
    iovec iov[2] = {{p + *offset, rem}, {comm->rxBuf.get(), kRxBufBytes}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    const ssize_t n = ::recvmsg(comm->ctrlFd, &msg, MSG_DONTWAIT);
    if (n > 0) {
      const int64_t now = steadyNs();
      comm->oneWay = nsSinceSend(now) >= kPollFirstNs;
      comm->drained = false;
      comm->unacked = true;
      noteRead();
      keepAcksDelayed(comm, false, now);
      const size_t mine = std::min(static_cast<size_t>(n), rem);
      *offset += mine;
      comm->rxBegin = 0;
      comm->rxEnd = static_cast<size_t>(n) - mine;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      comm->drained = true;
      forceAck(comm);
      return Io::Again;
    }
    const int err = n == 0 ? 0 : errno;
    if (n == 0) {
      SOCK_WARN("NET/Socket : peer closed the connection (%zu of %zu bytes received)", *offset, size);
    } else {
      SOCK_WARN("NET/Socket : recv failed: %s", std::strerror(err));
    }
    *code = n == 0 || err == ECONNRESET || err == ETIMEDOUT || err == EHOSTUNREACH ? ncclRemoteError : ncclSystemError;
    return Io::Error;
  }
  return Io::Done;
}

// Fills the header of a send: small messages (or comms without data sockets) go inline.
void prepareHeader(Comm* comm, Request* r) {
  r->hdr.marker = kMsgMarker;
  r->hdr.size = r->size;
  bool inl = comm->dataFds.empty() || r->size <= comm->inlineBytes;
  r->hdr.flags = inl ? kMsgInline : 0;
  size_t nSocks = comm->dataFds.empty() ? 1 : comm->dataFds.size();
  r->hdr.chunkBytes = inl ? 0 : std::max(comm->minChunkBytes, (r->size + nSocks - 1) / nSocks);
  holdSmall(comm, r);
}

// Checks a received header against the posted receive; returns a reason or nullptr.
const char* headerProblem(const Comm* comm, const Request* r) {
  return msgHeaderProblem(r->hdr, comm->dataFds.size());
}

// Advances the control-socket phase of queued requests, oldest first, as far as it goes without blocking.
ncclResult_t progressCtrl(Comm* comm) {
  while (!comm->ctrlQueue.empty()) {
    Request* r = comm->ctrlQueue.front();
    ncclResult_t code = ncclSuccess;
    if (comm->isSend && (r->hdr.flags & kMsgInline)) {
      // Header and payload leave in one sendmsg: one syscall and, with TCP_NODELAY, one segment for
      // small messages instead of two.
      Io io = progressIo2(comm->ctrlFd, &r->hdr, sizeof r->hdr, r->data, r->size, &r->hdrOffset, &code);
      if (io == Io::Error) return failComm(comm, code);
      if (io == Io::Again) return ncclSuccess;
      r->pendingTasks.store(0, std::memory_order_relaxed);
      r->state = ReqState::Data;
      comm->ctrlQueue.pop_front();
      continue;
    }
    if (r->hdrOffset < sizeof r->hdr) {
      Io io = comm->isSend ? progressIo(comm->ctrlFd, true, &r->hdr, sizeof r->hdr, &r->hdrOffset, &code)
                           : recvCtrl(comm, &r->hdr, sizeof r->hdr, &r->hdrOffset, &code);
      if (io == Io::Error) return failComm(comm, code);
      if (io == Io::Again) return ncclSuccess;
      if (!comm->isSend) {
        if (const char* why = headerProblem(comm, r)) {
          SOCK_WARN("NET/Socket : receive: %s", why);
          return failComm(comm, ncclRemoteError);
        }
        comm->peerHolds = (r->hdr.flags & kMsgHeld) != 0;
        if (r->hdr.size > r->size) {
          SOCK_WARN("NET/Socket : message truncated: the peer sends %llu bytes, the receive posted %llu. Check "
                    "that both ranks run the same operations with the same sizes and settings.",
                    static_cast<unsigned long long>(r->hdr.size), static_cast<unsigned long long>(r->size));
          return failComm(comm, ncclInvalidUsage);
        }
        r->size = r->hdr.size;
      }
    }
    if (r->hdr.flags & kMsgInline) {
      Io io = comm->isSend ? progressIo(comm->ctrlFd, true, r->data, r->size, &r->inlineOffset, &code)
                           : recvCtrl(comm, r->data, r->size, &r->inlineOffset, &code);
      if (io == Io::Error) return failComm(comm, code);
      if (io == Io::Again) return ncclSuccess;
      r->pendingTasks.store(0, std::memory_order_relaxed);
    } else if (ncclResult_t rc = dispatchChunks(comm, r); rc != ncclSuccess) {
      return rc;
    }
    r->state = ReqState::Data;
    comm->ctrlQueue.pop_front();
  }
  return ncclSuccess;
}

ncclResult_t postRequest(Comm* comm, char* data, size_t size, void** request) {
  if (ncclResult_t e = static_cast<ncclResult_t>(comm->error.load()); e != ncclSuccess) return e;
  Request* r = nullptr;
  for (Request& c : comm->requests) {
    if (c.state == ReqState::Free) {
      r = &c;
      break;
    }
  }
  if (r == nullptr) {
    SOCK_WARN("NET/Socket : more than %d requests outstanding on one comm", NCCL_NET_MAX_REQUESTS);
    return ncclInternalError;
  }
  r->comm = comm;
  r->data = data;
  r->size = size;
  r->hdr = MsgHeader{};
  r->hdrOffset = 0;
  r->inlineOffset = 0;
  r->pendingTasks.store(0, std::memory_order_relaxed);
  if (comm->isSend) {
    prepareHeader(comm, r);
    noteSend();
  }
  r->state = ReqState::Ctrl;
  comm->ctrlQueue.push_back(r);
  *request = r;
  // Start moving right away; a failure is kept in the comm and reported by test().
  (void)progressCtrl(comm);
  return ncclSuccess;
}

}  // namespace

ncclResult_t failComm(Comm* comm, ncclResult_t code) {
  int expected = ncclSuccess;
  comm->error.compare_exchange_strong(expected, code);
  return static_cast<ncclResult_t>(comm->error.load());
}

Comm* newComm(bool isSend, int dev, int ctrlFd, std::vector<int> dataFds, int nThreads) {
  auto* c = new Comm;
  c->isSend = isSend;
  c->dev = dev;
  c->ctrlFd = ctrlFd;
  c->dataFds = std::move(dataFds);
  c->nThreads = c->dataFds.empty() ? 0 : nThreads;
  c->inlineBytes = options().inlineBytes;
  c->delayAcks = !isSend && options().delayedAck;
  c->holdAllowed = isSend && options().holdSmall;
  keepAcksDelayed(c, true, 0);
  c->minChunkBytes = options().minChunkBytes;
  return c;
}

ncclResult_t closeComm(Comm* comm) {
  if (comm == nullptr) return ncclSuccess;
  for (auto& w : comm->workers) {
    {
      std::lock_guard<std::mutex> lock(w->mu);
      w->stop = true;
    }
    wake(*w);
  }
  // A worker may be blocked in send()/recv() on a peer that is itself closing and no longer reading:
  // shutting the sockets down first makes those calls return, so closing never waits on the peer.
  if (comm->ctrlFd >= 0) ::shutdown(comm->ctrlFd, SHUT_RDWR);
  for (int fd : comm->dataFds) ::shutdown(fd, SHUT_RDWR);
  for (auto& w : comm->workers) {
    if (w->thread.joinable()) w->thread.join();
    ::close(w->wakeFd);
  }
  if (comm->ctrlFd >= 0) ::close(comm->ctrlFd);
  for (int fd : comm->dataFds) ::close(fd);
  delete comm;
  return ncclSuccess;
}

ncclResult_t netCloseSend(void* sendComm) { return closeComm(static_cast<Comm*>(sendComm)); }
ncclResult_t netCloseRecv(void* recvComm) { return closeComm(static_cast<Comm*>(recvComm)); }

ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  (void)data;
  (void)size;
  if (comm == nullptr || mhandle == nullptr) {
    SOCK_WARN("NET/Socket : regMr: NULL comm or mhandle");
    return ncclInvalidArgument;
  }
  if (type != NCCL_PTR_HOST) {
    SOCK_WARN("NET/Socket : regMr: memory type %d is not supported (host memory only)", type);
    return ncclInternalError;
  }
  *mhandle = &gHostMr;
  return ncclSuccess;
}

ncclResult_t netDeregMr(void* comm, void* mhandle) {
  (void)comm;
  (void)mhandle;
  return ncclSuccess;
}

ncclResult_t netIsend(void* sendComm, void* data, size_t size, void** request) {
  auto* comm = static_cast<Comm*>(sendComm);
  if (comm == nullptr || request == nullptr || !comm->isSend || (data == nullptr && size > 0)) {
    SOCK_WARN("NET/Socket : isend: bad arguments (comm %p, data %p, size %zu)", sendComm, data, size);
    return ncclInvalidArgument;
  }
  *request = nullptr;
  return postRequest(comm, static_cast<char*>(data), size, request);
}

ncclResult_t netIrecv(void* recvComm, int n, void** data, size_t* sizes, void** request) {
  auto* comm = static_cast<Comm*>(recvComm);
  if (comm == nullptr || request == nullptr || comm->isSend || data == nullptr || sizes == nullptr) {
    SOCK_WARN("NET/Socket : irecv: bad arguments (comm %p)", recvComm);
    return ncclInvalidArgument;
  }
  if (n != 1) {
    SOCK_WARN("NET/Socket : irecv of %d buffers; this device supports one (maxRecvs = 1)", n);
    return ncclInvalidArgument;
  }
  if (data[0] == nullptr && sizes[0] > 0) {
    SOCK_WARN("NET/Socket : irecv: NULL buffer of %zu bytes", sizes[0]);
    return ncclInvalidArgument;
  }
  *request = nullptr;
  return postRequest(comm, static_cast<char*>(data[0]), sizes[0], request);
}

ncclResult_t netIflush(void*, int, void**, int*, void**, void** request) {
  // Host memory only: nothing to make visible. A NULL request means "already complete".
  if (request) *request = nullptr;
  return ncclSuccess;
}

ncclResult_t netTest(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  if (r == nullptr || done == nullptr) {
    SOCK_WARN("NET/Socket : test: NULL request or done");
    return ncclInvalidArgument;
  }
  *done = 0;
  if (r->state == ReqState::Free || r->comm == nullptr) {
    SOCK_WARN("NET/Socket : test on a request that is not outstanding (already completed?)");
    return ncclInternalError;
  }
  Comm* comm = r->comm;
  if (ncclResult_t e = static_cast<ncclResult_t>(comm->error.load()); e != ncclSuccess) return e;
  if (ncclResult_t e = progressCtrl(comm); e != ncclSuccess) return e;
  if (comm->isSend) noteSend();
  if (r->state == ReqState::Data && r->pendingTasks.load(std::memory_order_acquire) == 0) {
    if (sizes) sizes[0] = static_cast<int>(std::min<size_t>(r->size, INT_MAX));
    r->state = ReqState::Free;
    *done = 1;
    return ncclSuccess;
  }
  if (ncclResult_t e = static_cast<ncclResult_t>(comm->error.load()); e != ncclSuccess) return e;
  // A dead receiver shows as an EOF on the control socket; peeking costs a syscall, so only every few
  // polls of an unfinished send (a send into full buffers of a vanished peer is what this catches).
  if (comm->isSend && (++comm->pollsSincePeerCheck & 63) == 0 && peerGone(comm->ctrlFd)) {
    SOCK_WARN("NET/Socket : the receiving peer closed the connection");
    return failComm(comm, ncclRemoteError);
  }
  return ncclSuccess;
}

// A thread that has just tested the comms' requests sleeps until one of their control sockets can move data: a
// receiving comm's has bytes (or the end of the connection) to read, a sending comm's room to write. Reads only
// what never changes after the comm is made (its socket, its direction) and atomics, so it runs beside a test() on
// another thread. Data that a test() read ahead into rxBuf belongs to requests not posted yet (a posted one would
// have taken it), so the socket alone tells whether a posted request can move. Comms whose payloads go on helper
// threads (data sockets) complete without their control socket: not waited on here (-1).
ncclResult_t netWaitComms(void* const* comms, int nComms, int timeoutUs, int* ready) {
  if (ready == nullptr || nComms < 0 || (nComms > 0 && comms == nullptr) || timeoutUs < 0) {
    SOCK_WARN("NET/Socket : waitComms: bad arguments (%d comms, timeout %d us)", nComms, timeoutUs);
    return ncclInvalidArgument;
  }
  *ready = -1;
  constexpr int kMaxFds = 64;
  if (nComms == 0 || nComms > kMaxFds) return ncclSuccess;
  pollfd fds[kMaxFds];
  for (int i = 0; i < nComms; i++) {
    const Comm* c = static_cast<const Comm*>(comms[i]);
    if (c == nullptr) {
      SOCK_WARN("NET/Socket : waitComms: NULL comm");
      return ncclInvalidArgument;
    }
    if (c->chunked.load(std::memory_order_acquire)) return ncclSuccess;
    if (c->error.load(std::memory_order_relaxed) != ncclSuccess) {  // test() reports it at once
      *ready = 1;
      return ncclSuccess;
    }
    fds[i] = {c->ctrlFd, static_cast<short>(c->isSend ? POLLOUT : POLLIN), 0};
  }
  const timespec ts{timeoutUs / 1000000, static_cast<long>(timeoutUs % 1000000) * 1000};
  const int n = ::ppoll(fds, static_cast<nfds_t>(nComms), &ts, nullptr);
  if (n < 0 && errno != EINTR) {
    SOCK_WARN("NET/Socket : waitComms: poll failed: %s", std::strerror(errno));
    return ncclSystemError;
  }
  *ready = n == 0 ? 0 : 1;  // interrupted: a spurious wake-up
  return ncclSuccess;
}

}  // namespace tutti::netsock
