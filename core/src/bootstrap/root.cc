// The bootstrap root: collects one hello per rank, then tells each rank the listen address of its ring
// successor (O(n) bytes in total; ranks ring-allgather the full table themselves). One thread per
// communicator, detached; it owns every socket it opens and exits after one communicator or its timeout.
#include "bootstrap/bootstrap.h"
#include "bootstrap/ifaces.h"
#include "bootstrap/wire.h"
#include "plugin/params.h"
#include "util/check.h"

#include <poll.h>
#include <sys/random.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <thread>

namespace tutti {
namespace {

std::atomic<int> gRootThreads{0};

constexpr size_t kMaxPendingConnections = 1024;
// A rank's listen socket is up before it says hello, so a refused reply means that rank is gone.
constexpr int64_t kReplyConnectMs = 2000;

// A connection whose hello has not fully arrived yet; read without blocking so one slow or hostile
// client cannot stall the root.
struct Pending {
  Socket sock;
  SocketAddress from{};
  wire::RootHello hello{};
  size_t got = 0;
};

// "3,5" or "0-99,120" (at most ~40 ranges, then "...").
std::string formatRanks(const std::vector<int>& ranks) {
  std::string s;
  int ranges = 0;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (++ranges > 40) {
      s += ",...";
      break;
    }
    if (!s.empty()) s += ',';
    s += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return s;
}

// Connects to a rank's listen address and delivers one root reply. Failures are logged, not fatal:
// the other ranks still get their replies.
void sendReply(uint64_t magic, const SocketAddress& to, int rank, ncclResult_t result, const SocketAddress& next,
               const std::string& text) {
  Socket s;
  int64_t deadline = nowMs() + kReplyConnectMs;
  wire::RootReply reply{};
  reply.result = result;
  reply.textBytes = static_cast<uint32_t>(std::min<size_t>(text.size(), wire::kMaxReplyText));
  reply.next = next;
  wire::MsgHeader hdr[2] = {};
  hdr[0] = {magic, wire::kRootRank, wire::kHello, 0, 0, 0};
  hdr[1] = {magic, wire::kRootRank, wire::kRootReply, 0, 0, sizeof(reply) + reply.textBytes};
  std::string buf(reinterpret_cast<const char*>(hdr), sizeof(hdr));
  buf.append(reinterpret_cast<const char*>(&reply), sizeof(reply));
  buf.append(text, 0, reply.textBytes);
  ncclResult_t r = socketConnect(to, deadline, -1, &s);
  if (r == ncclSuccess) r = socketSendAll(s.fd(), buf.data(), buf.size(), deadline, -1, "bootstrap root reply");
  if (r != ncclSuccess) TUTTI_WARN("bootstrap root: could not reply to rank {} at {}", rank, toString(to));
}

struct RootState {
  uint64_t magic = 0;
  int64_t timeoutMs = 0;
  int nRanks = 0;  // from the first valid hello
  std::vector<SocketAddress> addrs;
  std::vector<bool> arrived;
  int nArrived = 0;
  int64_t firstArrivalMs = -1;
};

// Validates a complete hello and records the rank. Anything invalid is logged and dropped; a hello
// with the right magic but inconsistent fields gets an error reply so that rank fails fast.
void handleHello(RootState& st, const Pending& p) {
  const wire::RootHello& h = p.hello;
  std::string err;
  wire::HelloVerdict verdict = wire::checkRootHello(h, st.magic, uint32_t(st.nRanks), &err);
  if (verdict == wire::HelloVerdict::kDrop) {
    TUTTI_WARN("bootstrap root: rejected connection from {}: {}", toString(p.from), err);
    return;
  }
  SocketAddress none{};
  if (st.nRanks == 0) {
    st.nRanks = static_cast<int>(h.nRanks);
    st.addrs.assign(st.nRanks, none);
    st.arrived.assign(st.nRanks, false);
  }
  if (verdict == wire::HelloVerdict::kAccept && st.arrived[h.rank])
    err = fmt::format("bootstrap: rank {} joined twice (from {} and {})", h.rank, toString(st.addrs[h.rank]),
                      toString(h.listen));
  if (!err.empty()) {
    TUTTI_WARN("{}", err);
    sendReply(st.magic, h.listen, static_cast<int>(h.rank), ncclInvalidUsage, none, err);
    return;
  }
  st.arrived[h.rank] = true;
  st.addrs[h.rank] = h.listen;
  ++st.nArrived;
  if (st.firstArrivalMs < 0) st.firstArrivalMs = nowMs();
  TUTTI_TRACE(NCCL_BOOTSTRAP, "bootstrap root: rank {}/{} at {}", h.rank, st.nRanks, toString(h.listen));
}

// Reads what is available on a pending connection. Returns false when the connection is finished
// (complete hello handled, closed early, or failed) and should be dropped.
bool progressPending(RootState& st, Pending& p) {
  char* dst = reinterpret_cast<char*>(&p.hello);
  ssize_t n = socketTryRecv(p.sock.fd(), dst + p.got, sizeof(p.hello) - p.got);
  if (n == -1) return true;
  if (n <= 0) {
    TUTTI_WARN("bootstrap root: rejected connection from {}: closed after {} of {} hello bytes",
               toString(p.from), p.got, sizeof(p.hello));
    return false;
  }
  p.got += static_cast<size_t>(n);
  if (p.got < sizeof(p.hello)) return true;
  handleHello(st, p);
  return false;
}

void rootMain(uint64_t magic, Socket listen, int64_t timeoutMs) {
  RootState st;
  st.magic = magic;
  st.timeoutMs = timeoutMs;
  const int64_t startMs = nowMs();
  std::deque<Pending> pending;
  for (;;) {
    if (st.nRanks > 0 && st.nArrived == st.nRanks) break;
    int64_t deadline = (st.firstArrivalMs >= 0 ? st.firstArrivalMs : startMs) + timeoutMs;
    if (nowMs() >= deadline) break;
    std::vector<pollfd> fds;
    fds.push_back({listen.fd(), POLLIN, 0});
    for (auto& p : pending) fds.push_back({p.sock.fd(), POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), pollTimeout(deadline));
    if (n < 0 && errno != EINTR) {
      TUTTI_WARN("bootstrap root: poll() failed: {}", std::strerror(errno));
      break;
    }
    if (n <= 0) continue;
    // Serve the pending connections before accepting new ones (fds[i + 1] is pending[i]).
    size_t nPending = pending.size();
    std::deque<Pending> keep;
    for (size_t i = 0; i < nPending; ++i) {
      Pending& p = pending[i];
      if (fds[i + 1].revents == 0 || progressPending(st, p)) keep.push_back(std::move(p));
    }
    pending = std::move(keep);
    if (fds[0].revents) {
      for (;;) {
        Pending p;
        if (socketAccept(listen.fd(), &p.sock, &p.from) != ncclSuccess || !p.sock.valid()) break;
        if (pending.size() >= kMaxPendingConnections) {
          TUTTI_WARN("bootstrap root: more than {} unidentified connections; dropping the oldest",
                     kMaxPendingConnections);
          pending.pop_front();
        }
        pending.push_back(std::move(p));
      }
    }
  }
  pending.clear();
  listen.reset();  // refuse new connections from here on

  SocketAddress none{};
  if (st.nRanks > 0 && st.nArrived == st.nRanks) {
    for (int r = 0; r < st.nRanks; ++r)
      sendReply(magic, st.addrs[r], r, ncclSuccess, st.addrs[(r + 1) % st.nRanks], "");
    TUTTI_INFO(NCCL_INIT | NCCL_BOOTSTRAP, "bootstrap root: {} ranks joined in {} ms", st.nRanks,
               nowMs() - startMs);
  } else if (st.nArrived > 0) {
    std::vector<int> missing;
    for (int r = 0; r < st.nRanks; ++r)
      if (!st.arrived[r]) missing.push_back(r);
    std::string text = fmt::format("bootstrap: rank{} {} of {} did not join within {} s", missing.size() > 1 ? "s" : "",
                                   formatRanks(missing), st.nRanks, timeoutMs / 1000.0);
    TUTTI_WARN("{}", text);
    for (int r = 0; r < st.nRanks; ++r)
      if (st.arrived[r]) sendReply(magic, st.addrs[r], r, ncclTimeout, none, text);
  } else {
    TUTTI_INFO(NCCL_INIT | NCCL_BOOTSTRAP, "bootstrap root: no rank joined within {} s; exiting",
               timeoutMs / 1000.0);
  }
}

int64_t bootstrapTimeoutMs() { return std::max<int64_t>(1, paramInt("TUTTI_BOOTSTRAP_TIMEOUT")) * 1000; }

ncclResult_t startRoot(uint64_t magic, Socket listen) {
  int64_t timeoutMs = bootstrapTimeoutMs();
  gRootThreads.fetch_add(1);
  try {
    std::thread([magic, timeoutMs, l = std::move(listen)]() mutable {
      rootMain(magic, std::move(l), timeoutMs);
      gRootThreads.fetch_sub(1);
    }).detach();
  } catch (const std::exception& e) {
    gRootThreads.fetch_sub(1);
    TUTTI_FAIL(ncclSystemError, "bootstrap: cannot start the root thread: {}", e.what());
  }
  return ncclSuccess;
}

// FNV-1a over the address, so every process given the same NCCL_COMM_ID derives the same magic.
uint64_t magicFromAddress(const SocketAddress& a) {
  uint64_t h = 0xcbf29ce484222325ull;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(&a);
  for (size_t i = 0; i < addressLength(a); ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace

int bootstrapRootThreadsRunning() { return gRootThreads.load(); }

ncclResult_t bootstrapCreateRoot(const void* id128) {
  if (id128 == nullptr) TUTTI_FAIL(ncclInvalidArgument, "bootstrap: unique id is NULL");
  wire::UniqueId id;
  if (!wire::decodeId(id128, &id))
    TUTTI_FAIL(ncclInvalidArgument, "bootstrap: the unique id is not one made by ncclGetUniqueId");
  Socket listen;
  SocketAddress bound;
  TUTTI_CHECK(socketListen(id.root, &listen, &bound));
  TUTTI_INFO(NCCL_INIT | NCCL_BOOTSTRAP, "bootstrap: root listening on {}", toString(bound));
  return startRoot(id.magic, std::move(listen));
}

ncclResult_t bootstrapGetUniqueId(void* id128) {
  if (id128 == nullptr) TUTTI_FAIL(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  wire::UniqueId id{};
  id.version = wire::kIdVersion;
  std::string commId = paramString("NCCL_COMM_ID");
  Socket listen;
  if (!commId.empty()) {
    if (parseHostPort(commId, &id.root) != ncclSuccess)
      TUTTI_FAIL(ncclInvalidArgument, "NCCL_COMM_ID='{}' is not host:port", commId);
    id.magic = magicFromAddress(id.root);
    id.flags = wire::kIdRootAtRank0;
  } else {
    std::vector<IfaceAddr> ifaces;
    TUTTI_CHECK(findBootstrapIfaces(&ifaces, 1));
    TUTTI_CHECK(socketListen(ifaces[0].addr, &listen, &id.root));
    if (getrandom(&id.magic, sizeof(id.magic), 0) != sizeof(id.magic))
      TUTTI_FAIL(ncclSystemError, "getrandom() failed: {}", std::strerror(errno));
  }
  if (listen.valid()) TUTTI_CHECK(startRoot(id.magic, std::move(listen)));
  std::memset(id128, 0, wire::kUniqueIdBytes);
  std::memcpy(id128, &id, sizeof(id));
  return ncclSuccess;
}

}  // namespace tutti
