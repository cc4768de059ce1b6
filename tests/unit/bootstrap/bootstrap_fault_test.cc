// Bootstrap failure handling: missing ranks, hostile or broken connections to the root, abort, peers
// that leave, an unreachable root. Timeouts are set short through TUTTI_BOOTSTRAP_TIMEOUT.
#include "bootstrap_test_util.h"

#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "util/check.h"

#include <arpa/inet.h>
#include <dirent.h>

#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>

namespace tutti {
namespace {

using test::Id;
using test::newId;
using test::runRanks;

// Sets TUTTI_BOOTSTRAP_TIMEOUT for one test.
class ShortTimeout : public ::testing::Test {
 protected:
  void SetUp() override { setenv("TUTTI_BOOTSTRAP_TIMEOUT", "2", 1); }
  void TearDown() override { unsetenv("TUTTI_BOOTSTRAP_TIMEOUT"); }
};

// Creates ranks except `skip`, recording each create() result, its duration and the error text.
struct Outcome {
  std::vector<ncclResult_t> res;
  std::vector<std::string> text;
  std::vector<int64_t> ms;
};
Outcome createAll(const Id& id, int n, const std::vector<int>& skip) {
  Outcome o{std::vector<ncclResult_t>(n, ncclSuccess), std::vector<std::string>(n), std::vector<int64_t>(n)};
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r) {
    if (std::find(skip.begin(), skip.end(), r) != skip.end()) continue;
    t.emplace_back([&, r] {
      int64_t start = nowMs();
      std::unique_ptr<Bootstrap> b;
      o.res[r] = Bootstrap::create(id.data(), r, n, &b);
      o.ms[r] = nowMs() - start;
    });
  }
  for (auto& x : t) x.join();
  // ncclGetLastError's text is process-wide: read it once the failing threads are done.
  for (int r = 0; r < n; ++r)
    if (o.res[r] != ncclSuccess) o.text[r] = lastErrorText();
  return o;
}

TEST_F(ShortTimeout, MissingRanksFailEveryRankWithTheirNames) {
  Id id = newId();
  Outcome o = createAll(id, 6, {3, 5});
  for (int r : {0, 1, 2, 4}) {
    EXPECT_EQ(o.res[r], ncclTimeout) << "rank " << r;
    // Every failing rank reports the same text, so the process-wide last error names the missing ranks.
    EXPECT_NE(o.text[r].find("ranks 3,5 of 6 did not join within 2 s"), std::string::npos) << o.text[r];
    EXPECT_GE(o.ms[r], 1500) << "rank " << r;
    EXPECT_LT(o.ms[r], 6000) << "rank " << r;
  }
  EXPECT_TRUE(test::rootThreadsGone());
}

// Opens a raw TCP connection to the root of `id`.
Socket rawToRoot(const Id& id) {
  wire::UniqueId u;
  EXPECT_TRUE(wire::decodeId(id.data(), &u));
  Socket s;
  EXPECT_EQ(socketConnect(u.root, nowMs() + 2000, -1, &s), ncclSuccess);
  return s;
}

TEST_F(ShortTimeout, RootRejectsWrongMagicGarbageAndTruncatedHellos) {
  Id id = newId();
  wire::UniqueId u;
  ASSERT_TRUE(wire::decodeId(id.data(), &u));
  // A well-formed hello with the wrong magic, claiming rank 0.
  Socket wrongMagic = rawToRoot(id);
  wire::RootHello h{};
  h.magic = u.magic ^ 1;
  h.rank = 0;
  h.nRanks = 3;
  h.listen = u.root;
  ASSERT_EQ(socketSendAll(wrongMagic.fd(), &h, sizeof(h), nowMs() + 1000, -1, "test"), ncclSuccess);
  // Garbage that claims a huge nRanks, sent whole.
  Socket garbage = rawToRoot(id);
  std::vector<unsigned char> junk(sizeof(wire::RootHello));
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<unsigned char>(0xff - i);
  ASSERT_EQ(socketSendAll(garbage.fd(), junk.data(), junk.size(), nowMs() + 1000, -1, "test"), ncclSuccess);
  // A truncated hello that is then closed, and one that stays open without finishing.
  {
    Socket truncated = rawToRoot(id);
    ASSERT_EQ(socketSendAll(truncated.fd(), &h, 10, nowMs() + 1000, -1, "test"), ncclSuccess);
  }
  Socket stalled = rawToRoot(id);
  ASSERT_EQ(socketSendAll(stalled.fd(), "xyz", 3, nowMs() + 1000, -1, "test"), ncclSuccess);

  auto res = runRanks(id, 3, [](int rank, Bootstrap& b) {
    int v[3] = {};
    v[rank] = rank + 1;
    ASSERT_EQ(b.allGather(v, sizeof(int)), ncclSuccess);
    EXPECT_EQ(v[0] + v[1] + v[2], 6);
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
  EXPECT_TRUE(test::rootThreadsGone());
}

TEST_F(ShortTimeout, InconsistentNRanksIsRejectedQuickly) {
  Id id = newId();
  std::unique_ptr<Bootstrap> b0, b1;
  auto first = std::async(std::launch::async, [&] { return Bootstrap::create(id.data(), 0, 2, &b0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int64_t start = nowMs();
  EXPECT_EQ(Bootstrap::create(id.data(), 1, 3, &b1), ncclInvalidUsage);
  EXPECT_LT(nowMs() - start, 1500);
  EXPECT_EQ(first.get(), ncclTimeout);  // rank 1 of 2 never joined
  EXPECT_TRUE(test::rootThreadsGone());
}

TEST_F(ShortTimeout, UnreachableRootTimesOut) {
  Socket probe;
  SocketAddress lo{}, bound{};
  lo.sin.sin_family = AF_INET;
  lo.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(socketListen(lo, &probe, &bound), ncclSuccess);
  probe.reset();  // nothing listens there any more
  setenv("NCCL_COMM_ID", toString(bound).c_str(), 1);
  Id id = newId();
  unsetenv("NCCL_COMM_ID");
  std::unique_ptr<Bootstrap> b;
  int64_t start = nowMs();
  EXPECT_EQ(Bootstrap::create(id.data(), 1, 2, &b), ncclTimeout);  // rank 0 (the root) never comes
  EXPECT_GE(nowMs() - start, 1500);
  EXPECT_NE(std::string(lastErrorText()).find("cannot reach the root"), std::string::npos) << lastErrorText();
}

TEST(BootstrapAbort, AbortUnblocksRecvAndLaterCalls) {
  Id id = newId();
  std::promise<void> rank0Done;
  auto done = rank0Done.get_future().share();
  auto res = runRanks(id, 2, [&](int rank, Bootstrap& b) {
    if (rank == 1) {
      done.wait();  // keep rank 1's connections open: a closed peer would fail the recv for another reason
      return;
    }
    std::thread aborter([&b] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      b.abort();
    });
    int v;
    int64_t start = nowMs();
    EXPECT_EQ(b.recv(1, 0, &v, sizeof(v)), ncclInternalError);
    EXPECT_LT(nowMs() - start, 3000);
    aborter.join();
    EXPECT_TRUE(b.aborted());
    EXPECT_EQ(b.send(1, 0, &v, sizeof(v)), ncclInternalError);
    EXPECT_EQ(b.barrier(), ncclInternalError);
    b.abort();  // idempotent
    rank0Done.set_value();
  });
  EXPECT_EQ(res[0], ncclSuccess);
  EXPECT_EQ(res[1], ncclSuccess);
}

TEST(BootstrapPeer, RecvFromAPeerThatLeftFailsInsteadOfHanging) {
  Id id = newId();
  std::promise<void> sent;
  auto sentF = sent.get_future().share();
  auto res = runRanks(id, 2, [&](int rank, Bootstrap& b) {
    int v = 7;
    if (rank == 1) {
      ASSERT_EQ(b.send(0, 1, &v, sizeof(v)), ncclSuccess);
      sent.set_value();
      return;  // destroys rank 1's bootstrap, closing its connections
    }
    sentF.wait();
    int w = 0;
    EXPECT_EQ(b.recv(1, 1, &w, sizeof(w)), ncclSuccess);  // queued before the peer left
    EXPECT_EQ(w, 7);
    EXPECT_EQ(b.recv(1, 1, &w, sizeof(w)), ncclRemoteError);
  });
  EXPECT_EQ(res[0], ncclSuccess);
  EXPECT_EQ(res[1], ncclSuccess);
}

int openFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (readdir(d)) ++n;
  closedir(d);
  return n;
}

TEST_F(ShortTimeout, NoSocketOrThreadOutlivesItsCommunicator) {
  ASSERT_TRUE(test::rootThreadsGone());
  // Warm up lazily created process state (logging, resolver) before counting.
  runRanks(newId(), 2, [](int, Bootstrap& b) { EXPECT_EQ(b.barrier(), ncclSuccess); });
  ASSERT_TRUE(test::rootThreadsGone());
  int before = openFds();
  ASSERT_GT(before, 0);
  for (int i = 0; i < 3; ++i) {
    auto res = runRanks(newId(), 5, [](int rank, Bootstrap& b) {
      int v = rank;
      ASSERT_EQ(b.send((rank + 2) % 5, 0, &v, sizeof(v)), ncclSuccess);
      ASSERT_EQ(b.recv((rank + 3) % 5, 0, &v, sizeof(v)), ncclSuccess);
      EXPECT_EQ(v, (rank + 3) % 5);
      ASSERT_EQ(b.barrier(), ncclSuccess);
    });
    for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess);
  }
  createAll(newId(), 3, {2});  // a timed-out root, too
  EXPECT_TRUE(test::rootThreadsGone());
  EXPECT_EQ(openFds(), before);
}

}  // namespace
}  // namespace tutti
