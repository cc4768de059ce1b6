#include "bootstrap/mailbox.h"

#include "bootstrap/wire.h"
#include "util/check.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <list>
#include <new>

namespace tutti {

// One incoming connection: the peer is unknown until its kHello header arrived.
struct BootstrapMailbox::Conn {
  Socket sock;
  SocketAddress from{};
  int peer = -2;  // -2 unknown, -1 root, else rank
  wire::MsgHeader hdr{};
  size_t hdrGot = 0;
  bool inPayload = false;
  std::vector<char> payload;
  size_t payGot = 0;
};

namespace {
// Bytes read from one connection before the others get a turn.
constexpr size_t kReadBudget = 4 << 20;
constexpr size_t kExtraConnections = 64;

const char* peerName(int peer) { return peer == -1 ? "root" : "rank"; }
}  // namespace

BootstrapMailbox::BootstrapMailbox(uint64_t magic, int nRanks, Socket listen, const std::atomic<bool>* aborted)
    : magic_(magic), nRanks_(nRanks), listen_(std::move(listen)), aborted_(aborted),
      gone_(new std::atomic<uint8_t>[static_cast<size_t>(nRanks)]()) {}

ncclResult_t BootstrapMailbox::start() {
  stopFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  TUTTI_SYSCHECK(stopFd_, "eventfd()");
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::exception& e) {
    TUTTI_FAIL(ncclSystemError, "bootstrap: cannot start the receiver thread: {}", e.what());
  }
  return ncclSuccess;
}

BootstrapMailbox::~BootstrapMailbox() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    if (::write(stopFd_, &one, sizeof(one)) != sizeof(one))
      TUTTI_WARN("bootstrap: cannot stop the receiver thread: {}", std::strerror(errno));
    thread_.join();
  }
  if (stopFd_ >= 0) ::close(stopFd_);
}

void BootstrapMailbox::wake() {
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

void BootstrapMailbox::deliver(int peer, uint32_t kind, int tag, std::vector<char> payload) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_[Key{peer, kind, tag}].push_back(std::move(payload));
  cv_.notify_all();
}

void BootstrapMailbox::markClosed(int peer, std::string why) {
  if (peer < 0) return;  // the root closes after its reply; nothing waits on that
  std::lock_guard<std::mutex> lock(mu_);
  closed_.emplace(peer, std::move(why));
  if (peer < nRanks_) gone_[peer].store(1, std::memory_order_release);
  cv_.notify_all();
}

ncclResult_t BootstrapMailbox::take(int peer, uint32_t kind, int tag, std::vector<char>* payload,
                                    int64_t deadlineMs, const char* what) {
  std::unique_lock<std::mutex> lock(mu_);
  Key key{peer, kind, tag};
  for (;;) {
    auto it = queue_.find(key);
    if (it != queue_.end()) {
      *payload = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) queue_.erase(it);
      return ncclSuccess;
    }
    if (aborted_->load(std::memory_order_acquire)) TUTTI_FAIL(ncclInternalError, "{}: bootstrap aborted", what);
    if (auto c = closed_.find(peer); c != closed_.end())
      TUTTI_FAIL(ncclRemoteError, "{}: connection from rank {} ended ({})", what, peer, c->second);
    if (!fatal_.empty()) TUTTI_FAIL(ncclSystemError, "{}: {}", what, fatal_);
    if (deadlineMs == kNoDeadline) {
      cv_.wait(lock);
    } else {
      int64_t left = deadlineMs - nowMs();
      if (left <= 0) TUTTI_FAIL(ncclTimeout, "{}: no message from {} {} within the timeout", what, peerName(peer), peer);
      cv_.wait_for(lock, std::chrono::milliseconds(left));
    }
  }
}

ncclResult_t BootstrapMailbox::poll(int peer, uint32_t kind, int tag, std::vector<char>* payload, int64_t deadlineMs) {
  std::unique_lock<std::mutex> lock(mu_);
  Key key{peer, kind, tag};
  while (true) {
    auto it = queue_.find(key);
    if (it != queue_.end()) {
      *payload = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) queue_.erase(it);
      return ncclSuccess;
    }
    if (aborted_->load(std::memory_order_acquire) || closed_.count(peer) || !fatal_.empty()) return ncclRemoteError;
    const int64_t left = deadlineMs - nowMs();
    if (left <= 0) return ncclTimeout;
    cv_.wait_for(lock, std::chrono::milliseconds(left));
  }
}

// Reads what is available. Headers are validated before any field is used: magic, sender identity,
// kind, and size caps; a violation drops the connection (and fails waits on that peer).
bool BootstrapMailbox::progress(Conn& c) {
  size_t budget = kReadBudget;
  while (budget > 0) {
    if (!c.inPayload) {
      char* dst = reinterpret_cast<char*>(&c.hdr);
      ssize_t n = socketTryRecv(c.sock.fd(), dst + c.hdrGot, sizeof(c.hdr) - c.hdrGot);
      if (n == -1) return true;
      if (n == 0 && c.hdrGot == 0) {
        markClosed(c.peer, "peer closed the connection");
        return false;
      }
      if (n <= 0) {
        TUTTI_WARN("bootstrap: connection from {} ended inside a message header", toString(c.from));
        markClosed(c.peer, "truncated message header");
        return false;
      }
      c.hdrGot += static_cast<size_t>(n);
      budget -= std::min<size_t>(budget, static_cast<size_t>(n));
      if (c.hdrGot < sizeof(c.hdr)) continue;
      const wire::MsgHeader& h = c.hdr;
      int helloPeer = c.peer;
      std::string bad = wire::checkMsgHeader(h, magic_, nRanks_, c.peer, &helloPeer);
      if (bad.empty()) c.peer = helloPeer;
      if (!bad.empty()) {
        TUTTI_WARN("bootstrap: dropping connection from {}: {}", toString(c.from), bad);
        markClosed(c.peer, bad);
        return false;
      }
      c.hdrGot = 0;
      if (h.kind == wire::kHello) continue;
      try {
        c.payload.resize(h.bytes);
      } catch (const std::bad_alloc&) {
        TUTTI_WARN("bootstrap: cannot allocate {} bytes for a message from {} {}", h.bytes, peerName(c.peer), c.peer);
        markClosed(c.peer, "out of memory for a message");
        return false;
      }
      c.payGot = 0;
      c.inPayload = true;
    }
    if (c.payGot < c.payload.size()) {
      ssize_t n = socketTryRecv(c.sock.fd(), c.payload.data() + c.payGot,
                                std::min(c.payload.size() - c.payGot, budget));
      if (n == -1) return true;
      if (n <= 0) {
        TUTTI_WARN("bootstrap: connection from {} {} ended inside a message ({} of {} bytes)", peerName(c.peer),
                   c.peer, c.payGot, c.payload.size());
        markClosed(c.peer, "truncated message");
        return false;
      }
      c.payGot += static_cast<size_t>(n);
      budget -= static_cast<size_t>(n);
      if (c.payGot < c.payload.size()) continue;
    }
    c.inPayload = false;
    deliver(c.peer, c.hdr.kind, c.hdr.tag, std::move(c.payload));
    c.payload = {};
  }
  return true;
}

void BootstrapMailbox::run() {
  std::list<Conn> conns;
  std::vector<pollfd> fds;
  std::vector<Conn*> order;
  for (;;) {
    fds.clear();
    order.clear();
    fds.push_back({stopFd_, POLLIN, 0});
    fds.push_back({listen_.fd(), POLLIN, 0});
    for (auto& c : conns) {
      fds.push_back({c.sock.fd(), POLLIN, 0});
      order.push_back(&c);
    }
    int n = ::poll(fds.data(), fds.size(), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::lock_guard<std::mutex> lock(mu_);
      fatal_ = fmt::format("bootstrap receiver: poll() failed: {}", std::strerror(errno));
      TUTTI_WARN("{}", fatal_);
      cv_.notify_all();
      return;
    }
    if (fds[0].revents) return;
    std::vector<const Conn*> dead;
    for (size_t i = 0; i < order.size(); ++i)
      if (fds[i + 2].revents && !progress(*order[i])) dead.push_back(order[i]);
    conns.remove_if([&](const Conn& c) { return std::find(dead.begin(), dead.end(), &c) != dead.end(); });
    if (fds[1].revents) {
      for (;;) {
        Conn c;
        if (socketAccept(listen_.fd(), &c.sock, &c.from) != ncclSuccess || !c.sock.valid()) break;
        // Legitimate senders hold one connection each (plus the root's, briefly); more is a stray or
        // hostile client, refused so it cannot exhaust file descriptors.
        if (conns.size() >= size_t(nRanks_) + kExtraConnections) {
          TUTTI_WARN("bootstrap: refusing connection from {}: {} connections already open", toString(c.from),
                     conns.size());
          continue;
        }
        conns.push_back(std::move(c));
      }
    }
  }
}

}  // namespace tutti
