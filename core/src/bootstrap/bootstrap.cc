// Bootstrap: joining the rendezvous, the address ring, and the send side of peer messages. The receive
// side (one thread per bootstrap draining every incoming connection) is in mailbox.cc.
#include "bootstrap/bootstrap.h"

#include "bootstrap/ifaces.h"
#include "bootstrap/mailbox.h"
#include "bootstrap/wire.h"
#include "plugin/params.h"
#include "util/check.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

namespace tutti {

// Outgoing connection to one peer, opened on first send and kept. A failed send leaves the stream in an
// unknown state, so the connection is then marked broken and later sends fail fast.
struct Bootstrap::PeerSend {
  std::mutex mu;
  SocketAddress addr{};
  Socket sock;
  bool broken = false;
};

namespace {

// Slack on top of the rendezvous timeout while waiting for the root's verdict: the root's clock starts
// at the first arrival, which may be a little after this rank started waiting.
constexpr int64_t kRootReplyGraceMs = 5000;

int64_t timeoutMs() { return std::max<int64_t>(1, paramInt("TUTTI_BOOTSTRAP_TIMEOUT")) * 1000; }

int64_t userDeadline() {
  int64_t t = paramInt("TUTTI_TIMEOUT");
  return t > 0 ? nowMs() + t * 1000 : kNoDeadline;
}

}  // namespace

Bootstrap::Bootstrap(int rank, int nRanks, uint64_t magic) : rank_(rank), nRanks_(nRanks), magic_(magic) {
  // Made here, not in join(), so an abort() that comes before or during join() is never lost.
  abortFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

Bootstrap::~Bootstrap() {
  mailbox_.reset();  // joins the receiver before the fds it may poll go away
  peers_.clear();
  if (abortFd_ >= 0) ::close(abortFd_);
}

void Bootstrap::abort() {
  if (aborted_.exchange(true, std::memory_order_acq_rel)) return;
  uint64_t one = 1;
  // The eventfd stays readable from now on: every poll() in a send or connect returns at once.
  if (abortFd_ >= 0 && ::write(abortFd_, &one, sizeof(one)) != sizeof(one))
    TUTTI_WARN("bootstrap: abort could not signal its eventfd: {}", std::strerror(errno));
  std::lock_guard<std::mutex> lock(mailboxMu_);
  if (mailbox_) mailbox_->wake();
}

ncclResult_t Bootstrap::open(const void* id128, int rank, int nRanks, std::unique_ptr<Bootstrap>* out) {
  if (id128 == nullptr || out == nullptr) TUTTI_FAIL(ncclInvalidArgument, "bootstrap: NULL unique id or output");
  if (nRanks < 1 || nRanks > wire::kMaxRanks)
    TUTTI_FAIL(ncclInvalidArgument, "bootstrap: nRanks {} is out of range (1..{})", nRanks, wire::kMaxRanks);
  if (rank < 0 || rank >= nRanks)
    TUTTI_FAIL(ncclInvalidArgument, "bootstrap: rank {} is out of range for nRanks {}", rank, nRanks);
  wire::UniqueId id;
  if (!wire::decodeId(id128, &id))
    TUTTI_FAIL(ncclInvalidArgument, "bootstrap: the unique id is not one made by ncclGetUniqueId");
  if ((id.flags & wire::kIdRootAtRank0) && rank == 0) TUTTI_CHECK(bootstrapCreateRoot(id128));

  std::unique_ptr<Bootstrap> b(new Bootstrap(rank, nRanks, id.magic));
  TUTTI_SYSCHECK(b->abortFd_, "eventfd()");
  *out = std::move(b);
  return ncclSuccess;
}

ncclResult_t Bootstrap::create(const void* id128, int rank, int nRanks, std::unique_ptr<Bootstrap>* out) {
  std::unique_ptr<Bootstrap> b;
  TUTTI_CHECK(open(id128, rank, nRanks, &b));
  TUTTI_CHECK(b->join(id128));
  *out = std::move(b);
  return ncclSuccess;
}

ncclResult_t Bootstrap::join(const void* id128) {
  if (joined_) TUTTI_FAIL(ncclInternalError, "bootstrap: rank {} joined twice", rank_);
  joined_ = true;
  if (aborted()) TUTTI_FAIL(ncclInternalError, "bootstrap: rank {} was aborted before it joined", rank_);
  return join(id128, timeoutMs());
}

ncclResult_t Bootstrap::join(const void* id128, int64_t tMs) {
  wire::UniqueId id;
  wire::decodeId(id128, &id);
  const int64_t start = nowMs();

  peers_.reserve(nRanks_);
  for (int r = 0; r < nRanks_; ++r) peers_.push_back(std::make_unique<PeerSend>());

  // Listen on the bootstrap interface, in the root's address family so the root can call back.
  std::vector<IfaceAddr> ifaces;
  TUTTI_CHECK(findBootstrapIfaces(&ifaces, 16));
  const IfaceAddr* iface = &ifaces[0];
  for (const auto& i : ifaces)
    if (i.addr.sa.sa_family == id.root.sa.sa_family) {
      iface = &i;
      break;
    }
  Socket listen;
  SocketAddress self;
  TUTTI_CHECK(socketListen(iface->addr, &listen, &self));
  peers_[rank_]->addr = self;
  {
    std::lock_guard<std::mutex> lock(mailboxMu_);  // abort() may run on another thread now
    mailbox_ = std::make_unique<BootstrapMailbox>(magic_, nRanks_, std::move(listen), &aborted_);
  }
  TUTTI_CHECK(mailbox_->start());

  // Hello to the root: retried until the timeout, since the root (rank 0 with NCCL_COMM_ID) may not be
  // listening yet.
  {
    Socket root;
    ncclResult_t r = socketConnect(id.root, start + tMs, abortFd_, &root);
    if (r == ncclTimeout)
      TUTTI_FAIL(ncclTimeout, "bootstrap: rank {} cannot reach the root at {} within {} s", rank_,
                 toString(id.root), tMs / 1000.0);
    TUTTI_CHECK(r);
    wire::RootHello hello{};
    hello.magic = magic_;
    hello.rank = static_cast<uint32_t>(rank_);
    hello.nRanks = static_cast<uint32_t>(nRanks_);
    hello.listen = self;
    TUTTI_CHECK(socketSendAll(root.fd(), &hello, sizeof(hello), start + tMs, abortFd_, "bootstrap hello to root"));
  }

  std::vector<char> msg;
  ncclResult_t r = mailbox_->take(-1, wire::kRootReply, 0, &msg, nowMs() + tMs + kRootReplyGraceMs,
                                  "bootstrap: waiting for the root");
  if (r == ncclTimeout)
    TUTTI_FAIL(ncclTimeout, "bootstrap: rank {} got no reply from the root at {} within {} s (did the process "
               "that created the unique id exit?)", rank_, toString(id.root), tMs / 1000.0);
  TUTTI_CHECK(r);
  wire::DecodedRootReply reply;
  if (std::string bad = wire::decodeRootReply(msg.data(), msg.size(), &reply); !bad.empty())
    TUTTI_FAIL(ncclRemoteError, "{}", bad);
  if (reply.result != ncclSuccess)
    TUTTI_FAIL(reply.result, "{}", reply.text.empty() ? "bootstrap: the root refused this rank" : reply.text);
  int next = (rank_ + 1) % nRanks_;
  peers_[next]->addr = reply.next;

  // Ring allgather of listen addresses: each rank ends with the full table in O(n) bytes per rank.
  std::vector<SocketAddress> table(nRanks_);
  table[rank_] = self;
  TUTTI_CHECK(ringAllGather(wire::kAddrRing, table.data(), sizeof(SocketAddress), nowMs() + tMs));
  for (int p = 0; p < nRanks_; ++p) {
    int f = table[p].sa.sa_family;
    if (f != AF_INET && f != AF_INET6)
      TUTTI_FAIL(ncclRemoteError, "bootstrap: received a malformed address for rank {}", p);
    if (p != rank_) peers_[p]->addr = table[p];
  }
  TUTTI_INFO(NCCL_INIT | NCCL_BOOTSTRAP, "bootstrap: rank {}/{} joined at {} in {} ms", rank_, nRanks_,
             toString(self), nowMs() - start);
  return ncclSuccess;
}

ncclResult_t Bootstrap::sendKind(int peer, uint32_t kind, int tag, const void* data, size_t bytes,
                                 int64_t deadlineMs) {
  if (aborted()) TUTTI_FAIL(ncclInternalError, "bootstrap send to rank {}: bootstrap aborted", peer);
  if (peer == rank_) {
    std::vector<char> copy(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
    mailbox_->deliver(peer, kind, tag, std::move(copy));
    return ncclSuccess;
  }
  PeerSend& p = *peers_[peer];
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.broken) TUTTI_FAIL(ncclRemoteError, "bootstrap send to rank {}: the connection failed earlier", peer);
  if (!p.sock.valid()) {
    // The peer's listen socket has been up since before it joined, so this only waits on a backlog.
    Socket s;
    TUTTI_CHECK(socketConnect(p.addr, std::min(deadlineMs, nowMs() + timeoutMs()), abortFd_, &s));
    wire::MsgHeader hello{magic_, static_cast<uint32_t>(rank_), wire::kHello, 0, 0, 0};
    TUTTI_CHECK(socketSendAll(s.fd(), &hello, sizeof(hello), deadlineMs, abortFd_, "bootstrap connection hello"));
    p.sock = std::move(s);
  }
  wire::MsgHeader hdr{magic_, static_cast<uint32_t>(rank_), kind, tag, 0, bytes};
  ncclResult_t r = socketSendAll(p.sock.fd(), &hdr, sizeof(hdr), deadlineMs, abortFd_, "bootstrap send");
  if (r == ncclSuccess && bytes > 0)
    r = socketSendAll(p.sock.fd(), data, bytes, deadlineMs, abortFd_, "bootstrap send");
  if (r != ncclSuccess) {
    p.broken = true;
    TUTTI_FAIL(r, "bootstrap: rank {} failed sending {} bytes to rank {} (tag {})", rank_, bytes, peer, tag);
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::recvKind(int peer, uint32_t kind, int tag, void* data, size_t bytes, int64_t deadlineMs) {
  std::vector<char> msg;
  TUTTI_CHECK(mailbox_->take(peer, kind, tag, &msg, deadlineMs, "bootstrap recv"));
  if (msg.size() != bytes)
    TUTTI_FAIL(ncclInvalidUsage, "bootstrap: rank {} expected {} bytes from rank {} (tag {}), the message has {}",
               rank_, bytes, peer, tag, msg.size());
  if (bytes > 0) std::memcpy(data, msg.data(), bytes);
  return ncclSuccess;
}

// Step s sends the slot received in step s-1 to the successor; n-1 steps. Sends never wait on the
// successor's application (its mailbox drains), so send-then-recv cannot deadlock around the ring.
ncclResult_t Bootstrap::ringAllGather(uint32_t kind, void* data, size_t bytesPerRank, int64_t deadlineMs) {
  char* base = static_cast<char*>(data);
  int next = (rank_ + 1) % nRanks_, prev = (rank_ + nRanks_ - 1) % nRanks_;
  for (int s = 0; s < nRanks_ - 1; ++s) {
    int sendSlot = (rank_ - s + nRanks_) % nRanks_;
    int recvSlot = (rank_ - s - 1 + nRanks_) % nRanks_;
    TUTTI_CHECK(sendKind(next, kind, s, base + sendSlot * bytesPerRank, bytesPerRank, deadlineMs));
    TUTTI_CHECK(recvKind(prev, kind, s, base + recvSlot * bytesPerRank, bytesPerRank, deadlineMs));
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::allGather(void* data, size_t bytesPerRank) {
  if (data == nullptr && bytesPerRank > 0) TUTTI_FAIL(ncclInvalidArgument, "bootstrap allGather: data is NULL");
  if (nRanks_ > 1 && bytesPerRank > wire::kMaxMessageBytes)
    TUTTI_FAIL(ncclInvalidArgument, "bootstrap allGather: {} bytes per rank exceeds the limit", bytesPerRank);
  return ringAllGather(wire::kAllGather, data, bytesPerRank, userDeadline());
}

// Dissemination barrier: ceil(log2 n) rounds; in round k each rank signals rank+2^k and waits for
// rank-2^k. Messages of successive barriers are told apart by FIFO order per (peer, round).
ncclResult_t Bootstrap::barrier() {
  int64_t deadline = userDeadline();
  for (int d = 1, round = 0; d < nRanks_; d <<= 1, ++round) {
    TUTTI_CHECK(sendKind((rank_ + d) % nRanks_, wire::kBarrier, round, nullptr, 0, deadline));
    TUTTI_CHECK(recvKind((rank_ - d % nRanks_ + nRanks_) % nRanks_, wire::kBarrier, round, nullptr, 0, deadline));
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::send(int peer, int tag, const void* data, size_t bytes) {
  if (peer < 0 || peer >= nRanks_)
    TUTTI_FAIL(ncclInvalidArgument, "bootstrap send: peer {} is out of range for nRanks {}", peer, nRanks_);
  if (data == nullptr && bytes > 0) TUTTI_FAIL(ncclInvalidArgument, "bootstrap send: data is NULL");
  if (bytes > wire::kMaxMessageBytes)
    TUTTI_FAIL(ncclInvalidArgument, "bootstrap send: {} bytes exceeds the {} byte limit", bytes,
               wire::kMaxMessageBytes);
  return sendKind(peer, wire::kUser, tag, data, bytes, kNoDeadline);
}

ncclResult_t Bootstrap::recvWithin(int peer, int tag, void* data, size_t bytes, int64_t timeoutMs) {
  if (peer < 0 || peer >= nRanks_ || (data == nullptr && bytes > 0)) return ncclInvalidArgument;
  std::vector<char> msg;
  const int64_t deadline = nowMs() + timeoutMs;
  if (ncclResult_t r = mailbox_->poll(peer, wire::kUser, tag, &msg, deadline); r != ncclSuccess) return r;
  if (msg.size() != bytes) return ncclInvalidUsage;
  if (bytes > 0) std::memcpy(data, msg.data(), bytes);
  return ncclSuccess;
}

ncclResult_t Bootstrap::recv(int peer, int tag, void* data, size_t bytes) {
  if (peer < 0 || peer >= nRanks_)
    TUTTI_FAIL(ncclInvalidArgument, "bootstrap recv: peer {} is out of range for nRanks {}", peer, nRanks_);
  if (data == nullptr && bytes > 0) TUTTI_FAIL(ncclInvalidArgument, "bootstrap recv: data is NULL");
  return recvKind(peer, wire::kUser, tag, data, bytes, userDeadline());
}

const std::atomic<uint8_t>* Bootstrap::peerGoneFlag(int peer) const {
  return mailbox_ ? mailbox_->goneFlag(peer) : nullptr;
}

}  // namespace tutti
