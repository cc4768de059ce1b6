// net-socket through the ncclNet_v12_t table (and the v6 / v9 tables): devices, connection setup over
// loopback, message sizes, many outstanding requests, and the option variants (in child processes).
#include "net_socket_fixture.h"
#include "options.h"

#include <tutti/net_wait.h>

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>

namespace nstest {
namespace {

TEST(NetSocketLoad, ExportsEveryAbiVersion) {
  for (const char* s : {"ncclNetPlugin_v12", "ncclNetPlugin_v11", "ncclNetPlugin_v10", "ncclNetPlugin_v9",
                        "ncclNetPlugin_v8", "ncclNetPlugin_v7", "ncclNetPlugin_v6"}) {
    EXPECT_NE(symbol<void>(s), nullptr) << s;
  }
  ASSERT_NE(net(), nullptr);
  EXPECT_STREQ(net()->name, "Socket");
}

TEST_F(NetSocket, DevicesAndProperties) {
  int ndev = 0;
  ASSERT_EQ(n->devices(&ndev), ncclSuccess);
  ASSERT_EQ(ndev, 1);  // NCCL_SOCKET_IFNAME=lo
  ncclNetProperties_v12_t p;
  ASSERT_EQ(n->getProperties(0, &p), ncclSuccess);
  EXPECT_STREQ(p.name, "lo");
  EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(p.regIsGlobal, 0);
  EXPECT_EQ(p.speed, 10000);  // lo has no readable speed
  EXPECT_EQ(p.latency, 0.0f);
  EXPECT_EQ(p.port, 0);
  EXPECT_GT(p.maxComms, 0);
  EXPECT_EQ(p.maxRecvs, 1);
  EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_EQ(p.vProps.ndevs, 1);
  EXPECT_EQ(p.vProps.devs[0], 0);
  EXPECT_EQ(p.maxP2pBytes, static_cast<size_t>(NCCL_MAX_NET_SIZE_BYTES));
  EXPECT_EQ(p.maxCollBytes, static_cast<size_t>(MAX_COLLNET_SIZE));
  EXPECT_EQ(p.railId, NCCL_NET_ID_UNDEF);
  EXPECT_NE(n->getProperties(1, &p), ncclSuccess);
  EXPECT_NE(n->getProperties(-1, &p), ncclSuccess);
}

TEST_F(NetSocket, ConnectAndAcceptFromTwoThreads) {
  listen();
  std::atomic<ncclResult_t> acceptResult{ncclInProgress};
  std::thread acceptor([&] {
    auto deadline = Clock::now() + std::chrono::seconds(10);
    ncclResult_t r = ncclSuccess;
    while (recvComm == nullptr && r == ncclSuccess && Clock::now() < deadline) r = n->accept(listenComm, &recvComm, nullptr);
    acceptResult = recvComm ? r : ncclInProgress;
  });
  auto deadline = Clock::now() + std::chrono::seconds(10);
  ncclResult_t r = ncclSuccess;
  while (sendComm == nullptr && r == ncclSuccess && Clock::now() < deadline) r = n->connect(ctx, 0, handle, &sendComm, nullptr);
  acceptor.join();
  ASSERT_EQ(r, ncclSuccess);
  ASSERT_EQ(acceptResult.load(), ncclSuccess);
  ASSERT_NE(sendComm, nullptr);
  ASSERT_NE(recvComm, nullptr);
  // The scratch part of the handle is cleared once the connection is up.
  uint64_t id;
  std::memcpy(&id, handle + offsetof(tutti::netsock::Handle, connectId), sizeof id);
  EXPECT_EQ(id, 0u);
  std::vector<char> src(1000), dst(1000, 0);
  fillPattern(src, 1);
  int got = -1;
  ASSERT_EQ(transfer(src.data(), src.size(), dst.data(), dst.size(), &got), ncclSuccess);
  EXPECT_EQ(got, 1000);
  EXPECT_EQ(src, dst);
}

class NetSocketSizes : public NetSocket, public ::testing::WithParamInterface<size_t> {};

TEST_P(NetSocketSizes, DataArrivesIntact) {
  connectPair();
  size_t size = GetParam();
  std::vector<char> src(size);
  fillPattern(src, static_cast<unsigned>(size));
  // The receive buffer is larger than the message: the reported size is the sender's, the tail untouched.
  std::vector<char> dst(size + 100, 0x5a);
  int got = -1;
  ASSERT_EQ(transfer(src.data(), size, dst.data(), dst.size(), &got), ncclSuccess);
  EXPECT_EQ(static_cast<size_t>(got), size);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
  for (size_t i = size; i < dst.size(); i++) ASSERT_EQ(dst[i], 0x5a) << "byte " << i << " past the message";
}

INSTANTIATE_TEST_SUITE_P(Sizes, NetSocketSizes,
                         ::testing::Values(size_t{0}, size_t{1}, size_t{7}, size_t{128}, size_t{129},
                                           size_t{64 * 1024 + 3}, size_t{8 * 1024 * 1024 + 1}));

TEST_F(NetSocket, ManyOutstandingRequestsInOrder) {
  connectPair();
  constexpr int kN = NCCL_NET_MAX_REQUESTS;
  const size_t sizes[] = {0, 5, 300, 70000, 200000, 1 << 20};
  std::vector<std::vector<char>> src(kN), dst(kN);
  std::vector<void*> sreq(kN), rreq(kN);
  for (int i = 0; i < kN; i++) {
    size_t s = sizes[i % 6];
    src[i].resize(s);
    fillPattern(src[i], i);
    dst[i].assign(s, 0);
    ASSERT_EQ(n->isend(sendComm, src[i].data(), s, 0, nullptr, nullptr, &sreq[i]), ncclSuccess);
    ASSERT_NE(sreq[i], nullptr);
  }
  // One more than NCCL_NET_MAX_REQUESTS is refused without harming the comm.
  void* extra = nullptr;
  char byte = 0;
  EXPECT_NE(n->isend(sendComm, &byte, 1, 0, nullptr, nullptr, &extra), ncclSuccess);
  EXPECT_TRUE(warned("requests outstanding"));
  for (int i = 0; i < kN; i++) {
    void* d = dst[i].data();
    size_t s = dst[i].size();
    int tag = 0;
    ASSERT_EQ(n->irecv(recvComm, 1, &d, &s, &tag, nullptr, nullptr, &rreq[i]), ncclSuccess);
  }
  // Test the newest receives first: completion must not depend on the polling order. Unfinished sends are
  // tested alongside, as a core does: without helper threads (the default) only test() moves their data.
  std::vector<int> sdone(kN, 0);
  auto pollSends = [&]() -> ncclResult_t {
    for (int j = 0; j < kN; j++)
      if (!sdone[j])
        if (ncclResult_t r = n->test(sreq[j], &sdone[j], nullptr); r != ncclSuccess) return r;
    return ncclSuccess;
  };
  for (int i = kN - 1; i >= 0; i--) {
    int got = -1, rdone = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!rdone && Clock::now() < deadline) {
      ASSERT_EQ(n->test(rreq[i], &rdone, &got), ncclSuccess) << "recv " << i;
      ASSERT_EQ(pollSends(), ncclSuccess);
    }
    ASSERT_TRUE(rdone) << "recv " << i << " did not complete";
    EXPECT_EQ(static_cast<size_t>(got), src[i].size());
  }
  for (int j = 0; j < kN; j++) {
    if (!sdone[j]) {
      ASSERT_EQ(waitRequest(n->test, sreq[j]), ncclSuccess) << "send " << j;
    }
  }
  for (int i = 0; i < kN; i++) EXPECT_EQ(src[i], dst[i]) << "message " << i;
  // Slots are reusable after completion.
  std::vector<char> a(10, 3), b(10, 0);
  int got = -1;
  ASSERT_EQ(transfer(a.data(), a.size(), b.data(), b.size(), &got), ncclSuccess);
  EXPECT_EQ(a, b);
}

TEST_F(NetSocket, BackToBackMessagesKeepOrder) {
  connectPair();
  for (int round = 0; round < 50; round++) {
    size_t size = (round % 5 == 0) ? 300000 + round : 17 * round;
    std::vector<char> src(size), dst(size, 0);
    fillPattern(src, round);
    int got = -1;
    ASSERT_EQ(transfer(src.data(), size, dst.data(), size, &got), ncclSuccess) << "round " << round;
    ASSERT_EQ(src, dst) << "round " << round;
  }
}

// The receiver reads its control socket ahead (one recv takes a small message's header and payload, and
// whatever follows): messages already queued back to back must still come out one per receive, each with its
// own size, into receives posted larger than the message; those of 17000 and 30000 bytes are read partly from what
// was read ahead (about 16 KiB) and their rest straight into their buffers by a read that also takes what follows,
// 40000 and 65535 partly ahead and the rest by a read of just that rest; a chunked one still takes the data sockets.
TEST_F(NetSocket, ReadAheadKeepsMessageBoundaries) {
  connectPair();
  const size_t sizes[] = {5, 0, 17000, 3, 65535, 1, 200000, 8, 40000, 2, 30000, 7};
  constexpr int kN = sizeof sizes / sizeof sizes[0];
  std::vector<std::vector<char>> src(kN), dst(kN);
  std::vector<void*> sreq(kN), rreq(kN);
  std::vector<int> sdone(kN, 0);
  for (int i = 0; i < kN; i++) {
    src[i].resize(sizes[i]);
    fillPattern(src[i], 40 + i);
    dst[i].assign(sizes[i] + 100, 0);
    ASSERT_EQ(n->isend(sendComm, src[i].data(), sizes[i], 0, nullptr, nullptr, &sreq[i]), ncclSuccess);
  }
  // Let the sends reach the socket before any receive is posted, so the first recv finds several messages.
  for (int round = 0; round < 100; round++) {
    for (int j = 0; j < kN; j++) {
      if (!sdone[j]) {
        ASSERT_EQ(n->test(sreq[j], &sdone[j], nullptr), ncclSuccess);
      }
    }
  }
  for (int i = 0; i < kN; i++) {
    void* d = dst[i].data();
    size_t cap = dst[i].size();
    int tag = 0;
    ASSERT_EQ(n->irecv(recvComm, 1, &d, &cap, &tag, nullptr, nullptr, &rreq[i]), ncclSuccess);
  }
  for (int i = 0; i < kN; i++) {
    int got = -1, rdone = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!rdone && Clock::now() < deadline) {
      ASSERT_EQ(n->test(rreq[i], &rdone, &got), ncclSuccess) << "recv " << i;
      for (int j = 0; j < kN; j++) {
        if (!sdone[j]) {
          ASSERT_EQ(n->test(sreq[j], &sdone[j], nullptr), ncclSuccess);
        }
      }
    }
    ASSERT_TRUE(rdone) << "recv " << i << " did not complete";
    EXPECT_EQ(static_cast<size_t>(got), sizes[i]) << "message " << i;
    EXPECT_TRUE(std::equal(src[i].begin(), src[i].end(), dst[i].begin())) << "message " << i;
    EXPECT_TRUE(std::all_of(dst[i].begin() + sizes[i], dst[i].end(), [](char c) { return c == 0; }))
        << "message " << i << " wrote past its size";
  }
  for (int j = 0; j < kN; j++) {
    if (!sdone[j]) {
      ASSERT_EQ(waitRequest(n->test, sreq[j]), ncclSuccess) << "send " << j;
    }
  }
}

// Threads of this process (helper threads show up here once started).
int threadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// With helper threads (the fixture's one thread, two sockets): messages up to one chunk (64 KiB, the default
// NCCL_SOCKET_INLINE) stay on the control socket in the caller's thread; only larger ones start the helper
// threads (one per comm). The listener's choice travels in the handle.
TEST_F(NetSocket, HelperThreadsOnlyForMessagesAboveOneChunk) {
  if (std::getenv("NCCL_SOCKET_INLINE")) GTEST_SKIP() << "NCCL_SOCKET_INLINE is set in the environment";
  if (std::string(std::getenv("NCCL_SOCKET_NTHREADS")) != "1" || std::string(std::getenv("NCCL_NSOCKS_PERTHREAD")) != "2")
    GTEST_SKIP() << "NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD are set in the environment";
  listen();
  tutti::netsock::Handle h;
  std::memcpy(&h, handle, sizeof h);
  EXPECT_EQ(h.nThreads, 1u);
  EXPECT_EQ(h.nSocks, 2u);
  ASSERT_TRUE(establish([&](void** s) { return n->connect(ctx, 0, handle, s, nullptr); },
                        [&](void** r) { return n->accept(listenComm, r, nullptr); }, &sendComm, &recvComm));
  // ThreadSanitizer starts a thread of its own at the process's first thread creation; create one first so
  // that the count below sees only the plugin's.
  std::thread([] {}).join();
  const int before = threadCount();
  // Sizes around the header boundary and the largest inline message, which may need several sendmsg calls.
  for (size_t size : {size_t{0}, size_t{1}, size_t{23}, size_t{24}, size_t{4097}, size_t{65536}}) {
    std::vector<char> src(size), dst(size + 7, 0);
    fillPattern(src, static_cast<unsigned>(size));
    int got = -1;
    ASSERT_EQ(transfer(src.data(), size, dst.data(), dst.size(), &got), ncclSuccess) << size;
    EXPECT_EQ(static_cast<size_t>(got), size);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << size;
  }
  EXPECT_EQ(threadCount(), before) << "a message of at most 64 KiB started helper threads";
  std::vector<char> src(65537), dst(65537, 0);
  fillPattern(src, 7);
  ASSERT_EQ(transfer(src.data(), src.size(), dst.data(), dst.size(), nullptr), ncclSuccess);
  EXPECT_EQ(src, dst);
  EXPECT_EQ(threadCount(), before + 2) << "a chunked message should start one helper thread per comm";
}

// The blocking wait (tuttiNetWait_v1): a receive comm with a posted receive and nothing on the wire times out
// (ready 0); once the peer sends, the wait ends (ready 1) and test() completes the receive; a send comm with room
// ends at once; a comm whose data moved on helper threads is declined (-1); the end of the connection ends it;
// bad arguments are errors, not crashes.
TEST_F(NetSocket, WaitCommsSleepsUntilDataOrRoom) {
  const auto* wait = symbol<tuttiNetWait_v1_t>(TUTTI_NET_WAIT_SYMBOL);
  ASSERT_NE(wait, nullptr);
  ASSERT_NE(wait->waitComms, nullptr);
  connectPair();
  char dst[64] = {};
  void* d = dst;
  size_t cap = sizeof dst;
  int tag = 0, done = 0, got = -1, ready = 7;
  void* rreq = nullptr;
  ASSERT_EQ(n->irecv(recvComm, 1, &d, &cap, &tag, nullptr, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(n->test(rreq, &done, &got), ncclSuccess);
  ASSERT_EQ(done, 0);
  void* const rc[] = {recvComm};
  ASSERT_EQ(wait->waitComms(rc, 1, 20000, &ready), ncclSuccess);
  EXPECT_EQ(ready, 0) << "nothing was sent";
  // The peer sends from another thread a while later; the wait (10 s at most) ends when the bytes arrive.
  const char msg[] = "hello";
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    void* sreq = nullptr;
    if (n->isend(sendComm, const_cast<char*>(msg), sizeof msg, 0, nullptr, nullptr, &sreq) == ncclSuccess)
      (void)waitRequest(n->test, sreq);
  });
  ready = 7;
  ASSERT_EQ(wait->waitComms(rc, 1, 10 * 1000 * 1000, &ready), ncclSuccess);
  sender.join();
  EXPECT_EQ(ready, 1);
  ASSERT_EQ(n->test(rreq, &done, &got), ncclSuccess);
  EXPECT_EQ(done, 1) << "the wait ended before the data could be read";
  EXPECT_EQ(got, static_cast<int>(sizeof msg));
  EXPECT_STREQ(dst, msg);
  void* const sc[] = {sendComm};
  ready = 7;
  ASSERT_EQ(wait->waitComms(sc, 1, 10 * 1000 * 1000, &ready), ncclSuccess);
  EXPECT_EQ(ready, 1) << "a send comm with room to write";
  // Bad arguments.
  EXPECT_EQ(wait->waitComms(rc, 1, 1000, nullptr), ncclInvalidArgument);
  EXPECT_EQ(wait->waitComms(nullptr, 1, 1000, &ready), ncclInvalidArgument);
  EXPECT_EQ(wait->waitComms(rc, -1, 1000, &ready), ncclInvalidArgument);
  EXPECT_EQ(wait->waitComms(rc, 1, -5, &ready), ncclInvalidArgument);
  void* const none[] = {nullptr};
  EXPECT_EQ(wait->waitComms(none, 1, 1000, &ready), ncclInvalidArgument);
  // Past one chunk (64 KiB) the data goes on the helper threads' sockets: declined.
  std::vector<char> big(200000), bigDst(200000);
  fillPattern(big, 3);
  ASSERT_EQ(transfer(big.data(), big.size(), bigDst.data(), bigDst.size(), nullptr), ncclSuccess);
  ASSERT_EQ(big, bigDst);
  ready = 7;
  ASSERT_EQ(wait->waitComms(rc, 1, 1000, &ready), ncclSuccess);
  EXPECT_EQ(ready, -1);
}

// The end of the connection ends a wait on the receiving side: what test() then reports is the failure.
TEST_F(NetSocket, WaitCommsEndsWhenThePeerCloses) {
  const auto* wait = symbol<tuttiNetWait_v1_t>(TUTTI_NET_WAIT_SYMBOL);
  ASSERT_NE(wait, nullptr);
  connectPair();
  char dst[16];
  void* d = dst;
  size_t cap = sizeof dst;
  int tag = 0, done = 0, ready = 7;
  void* rreq = nullptr;
  ASSERT_EQ(n->irecv(recvComm, 1, &d, &cap, &tag, nullptr, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(n->test(rreq, &done, nullptr), ncclSuccess);
  ASSERT_EQ(n->closeSend(sendComm), ncclSuccess);
  sendComm = nullptr;
  void* const rc[] = {recvComm};
  ASSERT_EQ(wait->waitComms(rc, 1, 10 * 1000 * 1000, &ready), ncclSuccess);
  EXPECT_EQ(ready, 1);
  EXPECT_NE(n->test(rreq, &done, nullptr), ncclSuccess);
  EXPECT_EQ(done, 0);
}

TEST_F(NetSocket, RegMrAndFlush) {
  connectPair();
  char buf[64];
  void* mh = nullptr;
  EXPECT_EQ(n->regMr(sendComm, buf, sizeof buf, NCCL_PTR_HOST, &mh), ncclSuccess);
  EXPECT_NE(mh, nullptr);
  EXPECT_EQ(n->deregMr(sendComm, mh), ncclSuccess);
  void* mh2 = nullptr;
  EXPECT_EQ(n->regMr(recvComm, buf, sizeof buf, NCCL_PTR_CUDA, &mh2), ncclInternalError);
  EXPECT_TRUE(warned("not supported"));
  void* data = buf;
  int size = 64;
  void* req = reinterpret_cast<void*>(1);
  EXPECT_EQ(n->iflush(recvComm, 1, &data, &size, &mh, &req), ncclSuccess);
  EXPECT_EQ(req, nullptr);  // nothing to flush: complete at once
  EXPECT_EQ(n->regMrDmaBuf, nullptr);
}

// ---- older ABIs through their own struct layouts.

TEST(NetSocketAbi, V6SendRecv) {
  const auto* v6 = symbol<ncclNet_v6_t>("ncclNetPlugin_v6");
  ASSERT_NE(v6, nullptr);
  ASSERT_EQ(v6->init(testLogger), ncclSuccess);
  int ndev = 0;
  ASSERT_EQ(v6->devices(&ndev), ncclSuccess);
  ASSERT_GE(ndev, 1);
  ncclNetProperties_v6_t p;
  std::memset(&p, 0xff, sizeof p);
  ASSERT_EQ(v6->getProperties(0, &p), ncclSuccess);
  EXPECT_STREQ(p.name, "lo");
  EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(p.speed, 10000);
  EXPECT_EQ(p.maxRecvs, 1);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  ASSERT_EQ(v6->listen(0, handle, &lc), ncclSuccess);
  void *sc = nullptr, *rc = nullptr;
  ASSERT_TRUE(establish([&](void** s) { return v6->connect(0, handle, s); },
                        [&](void** r) { return v6->accept(lc, r); }, &sc, &rc));
  std::vector<char> src(100000), dst(100000, 0);
  fillPattern(src, 6);
  void *sreq = nullptr, *rreq = nullptr;
  void* d = dst.data();
  int rsize = static_cast<int>(dst.size());
  int tag = 0;
  ASSERT_EQ(v6->isend(sc, src.data(), static_cast<int>(src.size()), 0, nullptr, &sreq), ncclSuccess);
  ASSERT_EQ(v6->irecv(rc, 1, &d, &rsize, &tag, nullptr, &rreq), ncclSuccess);
  int got = -1;
  EXPECT_EQ(waitBoth(v6->test, sreq, rreq, &got), ncclSuccess);
  EXPECT_EQ(got, 100000);
  EXPECT_EQ(src, dst);
  void* sreq2 = nullptr;
  EXPECT_EQ(v6->isend(sc, src.data(), -1, 0, nullptr, &sreq2), ncclInvalidArgument);
  EXPECT_EQ(v6->closeSend(sc), ncclSuccess);
  EXPECT_EQ(v6->closeRecv(rc), ncclSuccess);
  EXPECT_EQ(v6->closeListen(lc), ncclSuccess);
}

TEST(NetSocketAbi, V9SendRecv) {
  const auto* v9 = symbol<ncclNet_v9_t>("ncclNetPlugin_v9");
  ASSERT_NE(v9, nullptr);
  ASSERT_EQ(v9->init(testLogger), ncclSuccess);
  ncclNetProperties_v9_t p;
  std::memset(&p, 0xff, sizeof p);
  ASSERT_EQ(v9->getProperties(0, &p), ncclSuccess);
  EXPECT_STREQ(p.name, "lo");
  EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_EQ(p.vProps.ndevs, 1);
  EXPECT_EQ(p.maxP2pBytes, static_cast<size_t>(NCCL_MAX_NET_SIZE_BYTES));
  EXPECT_EQ(p.maxCollBytes, static_cast<size_t>(MAX_COLLNET_SIZE));
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  ASSERT_EQ(v9->listen(0, handle, &lc), ncclSuccess);
  void *sc = nullptr, *rc = nullptr;
  ASSERT_TRUE(establish([&](void** s) { return v9->connect(0, handle, s, nullptr); },
                        [&](void** r) { return v9->accept(lc, r, nullptr); }, &sc, &rc));
  std::vector<char> src(3 << 20), dst(3 << 20, 0);
  fillPattern(src, 9);
  void *sreq = nullptr, *rreq = nullptr;
  void* d = dst.data();
  size_t rsize = dst.size();
  int tag = 0;
  ASSERT_EQ(v9->isend(sc, src.data(), src.size(), 0, nullptr, &sreq), ncclSuccess);
  ASSERT_EQ(v9->irecv(rc, 1, &d, &rsize, &tag, nullptr, &rreq), ncclSuccess);
  int got = -1;
  EXPECT_EQ(waitBoth(v9->test, sreq, rreq, &got), ncclSuccess);
  EXPECT_EQ(got, 3 << 20);
  EXPECT_EQ(src, dst);
  EXPECT_EQ(v9->closeRecv(rc), ncclSuccess);
  EXPECT_EQ(v9->closeSend(sc), ncclSuccess);
  EXPECT_EQ(v9->closeListen(lc), ncclSuccess);
}

// ---- options: each variant runs in a re-executed child process so that init reads a fresh environment
// (a forked child would inherit this process's already initialised plugin).
class NetSocketOptions : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// A socket option (`level`, `option`) of each of this process's connections whose local port (`accepted`: the
// connections it accepted on `port`) or remote port (the connections it made to `port`) is `port`, in fd order.
std::vector<int> connectionOptions(uint16_t port, bool accepted, int level, int option) {
  std::vector<int> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    sockaddr_storage self{}, peer{};
    socklen_t selfLen = sizeof self, peerLen = sizeof peer;
    if (e->d_name[0] == '.' || fd == dirfd(d) || getsockname(fd, reinterpret_cast<sockaddr*>(&self), &selfLen) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peerLen) != 0)  // the listener has no peer
      continue;
    const sockaddr_storage& end = accepted ? self : peer;
    const uint16_t p = end.ss_family == AF_INET    ? reinterpret_cast<const sockaddr_in*>(&end)->sin_port
                       : end.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&end)->sin6_port
                                                   : 0;
    int value = -1;
    socklen_t len = sizeof value;
    if (p == port && getsockopt(fd, level, option, &value, &len) == 0) out.push_back(value);
  }
  closedir(d);
  return out;
}

// A TCP option (IPPROTO_TCP level) of those connections (the last one found); -1 when there is none.
int connectionOption(uint16_t port, bool accepted, int option) {
  const std::vector<int> values = connectionOptions(port, accepted, IPPROTO_TCP, option);
  return values.empty() ? -1 : values.back();
}

// TCP_QUICKACK of the connections this process accepted on `port` (the receiving ends of its comms): 1 where the
// kernel acknowledges every segment at once, 0 in delayed-ACK mode.
int acceptedQuickAck(uint16_t port) { return connectionOption(port, true, TCP_QUICKACK); }

// TCP_NODELAY of the connections this process made to `port` (the control sockets of its sending comms without data
// sockets): 0 where the socket holds short segments behind an unacknowledged one (Nagle), 1 where each send leaves at
// once.
int connectedNoDelay(uint16_t port) { return connectionOption(port, false, TCP_NODELAY); }

// In a child: the plugin loaded (the caller set the environment before this first load), initialised, and listening
// on device 0. Exits 2 or 3 on failure.
struct ChildListener {
  const ncclNet_v12_t* n = nullptr;
  void* ctx = nullptr;
  void* lc = nullptr;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  tutti::netsock::Handle h{};
  uint16_t port() const { return h.addr.sa.sa_family == AF_INET ? h.addr.sin.sin_port : h.addr.sin6.sin6_port; }
};
ChildListener childListen() {
  ChildListener l;
  l.n = net();
  if (l.n == nullptr || l.n->init(&l.ctx, 1, nullptr, testLogger, nullptr) != ncclSuccess) std::exit(2);
  if (l.n->listen(l.ctx, 0, l.handle, &l.lc) != ncclSuccess) std::exit(3);
  std::memcpy(&l.h, l.handle, sizeof l.h);
  return l;
}

// In the child: init, connect a pair, move `size` bytes and check them. Exit code 0 on success. With
// wantThreads >= 0 the listener's handle must carry that many helper threads and wantSocks data sockets, and
// the transfer must start no thread where wantThreads is 0. With wantQuickAck >= 0 the receiving end's control
// socket (the only accepted connection where there are no data sockets) must show that TCP_QUICKACK after a
// transfer: 1 after every one of five, or 0 after at least one (the kernel leaves delayed-ACK mode when its timer
// fires, and the plugin re-enters it on its next read, so a check that a scheduler delay puts late may see 1).
void childTransfer(size_t size, int wantThreads = -1, int wantSocks = -1, int wantQuickAck = -1) {
  ChildListener l = childListen();
  const ncclNet_v12_t* n = l.n;
  void *&ctx = l.ctx, *&lc = l.lc, *sc = nullptr, *rc = nullptr;
  char* handle = l.handle;
  const tutti::netsock::Handle& h = l.h;
  if (wantThreads >= 0 && (h.nThreads != static_cast<uint32_t>(wantThreads) ||
                           h.nSocks != static_cast<uint32_t>(wantSocks)))
    std::exit(9);
  std::thread([] {}).join();  // a sanitizer's own thread, if any, exists from here on
  // A joined thread can still be listed in /proc/self/task for a moment (its tid is cleared before the kernel
  // releases the task: about 1 in 13 checks right after a join, here): count once the listing has settled.
  int threadsBefore = threadCount();
  for (int i = 0; i < 200; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const int now = threadCount();
    if (now == threadsBefore) break;
    threadsBefore = now;
  }
  if (!establish([&](void** s) { return n->connect(ctx, 0, handle, s, nullptr); },
                 [&](void** r) { return n->accept(lc, r, nullptr); }, &sc, &rc))
    std::exit(4);
  std::vector<char> src(size), dst(size, 0);
  fillPattern(src, 3);
  void *sreq = nullptr, *rreq = nullptr;
  void* d = dst.data();
  int tag = 0;
  if (n->isend(sc, src.data(), size, 0, nullptr, nullptr, &sreq) != ncclSuccess) std::exit(5);
  if (n->irecv(rc, 1, &d, &size, &tag, nullptr, nullptr, &rreq) != ncclSuccess) std::exit(6);
  if (waitBoth(n->test, sreq, rreq, nullptr) != ncclSuccess) std::exit(7);
  if (src != dst) std::exit(8);
  if (wantThreads == 0 && threadCount() > threadsBefore) std::exit(10);
  if (wantQuickAck >= 0) {
    const uint16_t port = l.port();
    bool seen = false;
    for (int i = 0; i < 5 && !seen; i++) {
      const int quick = acceptedQuickAck(port);
      if (quick < 0) std::exit(11);
      if (quick != wantQuickAck && wantQuickAck == 1) std::exit(12);
      seen = quick == wantQuickAck && wantQuickAck == 0;
      if (n->isend(sc, src.data(), size, 0, nullptr, nullptr, &sreq) != ncclSuccess ||
          n->irecv(rc, 1, &d, &size, &tag, nullptr, nullptr, &rreq) != ncclSuccess ||
          waitBoth(n->test, sreq, rreq, nullptr) != ncclSuccess)
        std::exit(7);
    }
    if (wantQuickAck == 0 && !seen) std::exit(13);
  }
  n->closeSend(sc);
  n->closeRecv(rc);
  n->closeListen(lc);
  n->finalize(ctx);
  std::exit(0);
}

// NCCL's choices per NIC vendor: parallel streams only for the cloud NICs that need them.
TEST(NetSocketDefaults, HelperThreadsPerNicVendor) {
  int nt = -1, ns = -1;
  tutti::netsock::nicSocketDefaults("0x1d0f\n", &nt, &ns);  // AWS ENA, as read from sysfs
  EXPECT_EQ(nt, 2);
  EXPECT_EQ(ns, 8);
  tutti::netsock::nicSocketDefaults("0x1ae0", &nt, &ns);  // Google gVNIC
  EXPECT_EQ(nt, 4);
  EXPECT_EQ(ns, 1);
  for (const char* other : std::initializer_list<const char*>{"0x8086", "0x15b3", "", "0x1d0", nullptr}) {
    tutti::netsock::nicSocketDefaults(other, &nt, &ns);
    EXPECT_EQ(nt, 0) << (other ? other : "NULL");
    EXPECT_EQ(ns, 1) << (other ? other : "NULL");
  }
}

// Unset, on an interface without a PCI device (lo): no helper threads and no data sockets; a large message
// travels on the control socket in the caller's thread. One variable set alone keeps the other's default.
TEST_F(NetSocketOptions, DefaultsOnLoopbackUseNoHelperThreads) {
  EXPECT_EXIT(
      {
        net();  // loads the plugin, which sets the test defaults; init reads the variables after that
        unsetenv("NCCL_SOCKET_INLINE");
        unsetenv("NCCL_SOCKET_NTHREADS");
        unsetenv("NCCL_NSOCKS_PERTHREAD");
        childTransfer(3 << 20, 0, 0);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        net();
        setenv("NCCL_SOCKET_NTHREADS", "3", 1);
        setenv("NCCL_NSOCKS_PERTHREAD", "-2", 1);  // NCCL's "detect", the same as unset
        childTransfer(3 << 20, 3, 3);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(NetSocketOptions, NoHelperThreadsSendsEverythingOnControlSocket) {
  EXPECT_EXIT(
      {
        setTestEnv();
        setenv("NCCL_SOCKET_NTHREADS", "0", 1);
        childTransfer(5 << 20);
      },
      ::testing::ExitedWithCode(0), "");
}

// The receiving end of a comm stays in delayed-ACK mode (one ACK for several segments rather than one per
// segment: the two directions of a pair are two connections, so no data carries the other's ACKs), unless
// TUTTI_NET_SOCKET_DELAYED_ACK=0.
TEST_F(NetSocketOptions, ReceiversDelayTheirAcksUnlessTurnedOff) {
  EXPECT_EXIT(
      {
        setTestEnv();
        setenv("NCCL_SOCKET_NTHREADS", "0", 1);
        unsetenv("TUTTI_NET_SOCKET_DELAYED_ACK");
        childTransfer(4096, -1, -1, 0);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setTestEnv();
        setenv("NCCL_SOCKET_NTHREADS", "0", 1);
        setenv("TUTTI_NET_SOCKET_DELAYED_ACK", "0", 1);
        childTransfer(4096, -1, -1, 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// After a long payload (more than the 16 KiB a read takes ahead), a receiving end whose process posted no send in the
// last millisecond (a one-way flow: a Broadcast's leaf) acknowledges at once (TCP_QUICKACK on); one whose process
// sends as well stays in delayed-ACK mode. Each state is looked for after up to five transfers of 64 KiB (the kernel
// and the reads of short rests may switch it for a moment, as in childTransfer).
void childOneWayAcks(bool senderElsewhere) {
  ChildListener l = childListen();
  const ncclNet_v12_t* n = l.n;
  void *&ctx = l.ctx, *&lc = l.lc, *sc = nullptr, *rc = nullptr;
  char* handle = l.handle;
  const uint16_t port = l.port();
  if (!establish([&](void** s) { return n->connect(ctx, 0, handle, s, nullptr); },
                 [&](void** r) { return n->accept(lc, r, nullptr); }, &sc, &rc))
    std::exit(4);
  size_t size = size_t{64} << 10;  // past the read-ahead, and short enough to move within the millisecond under TSan
  std::vector<char> src(size), dst(size, 0);
  fillPattern(src, 5);
  constexpr int kTransfers = 5;
  auto waitOne = [n](void* req) {  // NULL: nothing to wait for
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    for (int done = !req; !done;)
      if (n->test(req, &done, nullptr) != ncclSuccess || Clock::now() > deadline) return false;
    return true;
  };
  pid_t sender = -1;
  if (senderElsewhere) {
    // The sending end moves to another process: this one only receives.
    sender = fork();
    if (sender < 0) std::exit(5);
    if (sender == 0) {
      for (int i = 0; i < kTransfers; i++) {
        void* sreq = nullptr;
        if (n->isend(sc, src.data(), size, 0, nullptr, nullptr, &sreq) != ncclSuccess || !waitOne(sreq)) _exit(1);
      }
      _exit(0);
    }
  }
  const int want = senderElsewhere ? 1 : 0;
  bool seen = false;
  for (int i = 0; i < kTransfers; i++) {
    void *sreq = nullptr, *rreq = nullptr;
    void* d = dst.data();
    int tag = 0;
    size_t cap = size;
    if (!senderElsewhere && n->isend(sc, src.data(), size, 0, nullptr, nullptr, &sreq) != ncclSuccess) std::exit(6);
    if (n->irecv(rc, 1, &d, &cap, &tag, nullptr, nullptr, &rreq) != ncclSuccess) std::exit(7);
    if (sreq ? waitBoth(n->test, sreq, rreq, nullptr) != ncclSuccess : !waitOne(rreq)) std::exit(8);
    const int quick = acceptedQuickAck(port);  // at once: the kernel's delayed-ACK timer ends its mode
    if (quick < 0) std::exit(10);
    seen = seen || quick == want;
    if (src != dst) std::exit(9);
    std::fill(dst.begin(), dst.end(), 0);
  }
  if (senderElsewhere) {
    int status = 0;
    if (waitpid(sender, &status, 0) != sender || !WIFEXITED(status) || WEXITSTATUS(status) != 0) std::exit(11);
  }
  if (!seen) std::exit(12);
  std::exit(0);
}

TEST_F(NetSocketOptions, OneWayReceiversAckAtOnce) {
  for (bool senderElsewhere : {true, false}) {
    SCOPED_TRACE(senderElsewhere ? "sender in another process" : "sender in this process");
    EXPECT_EXIT(
        {
          setTestEnv();
          setenv("NCCL_SOCKET_NTHREADS", "0", 1);
          unsetenv("TUTTI_NET_SOCKET_DELAYED_ACK");
          childOneWayAcks(senderElsewhere);
        },
        ::testing::ExitedWithCode(0), "");
  }
}

// A receiving end in a process that sends nothing asks the socket whether data waits (poll) once a read found
// none, and reads only then. The messages must still all arrive, in order and intact, whether they come one at a
// time to a reader that drained the socket (the sender pauses between some) or several behind one another; and the
// sender's close must still end the next receive with an error, not leave the reader polling forever.
void childOneWaySmallMessages() {
  ChildListener l = childListen();
  const ncclNet_v12_t* n = l.n;
  void *&ctx = l.ctx, *&lc = l.lc, *rc = nullptr;
  char* handle = l.handle;
  const uint16_t port = l.port();
  constexpr int kMessages = 600;
  // Mostly short messages; every fifth one at or just under the largest a socket may hold (16 KiB), which a read
  // takes straight into its buffer rather than through the read-ahead; message 101 one byte over it, which sends at once.
  constexpr size_t kHoldMax = 16384;
  auto sizeOf = [](int i) {
    if (i == 101) return kHoldMax + 1;
    return i % 5 == 4 ? kHoldMax - static_cast<size_t>(i % 3) : static_cast<size_t>(1 + (i * 37) % 200);
  };
  auto byteOf = [](int i, size_t j) { return static_cast<char>(i * 31 + static_cast<int>(j) * 7 + 1); };
  // The sending end is made in another process (its sockets exist only there, so its exit closes the connection).
  const pid_t sender = fork();
  if (sender < 0) std::exit(5);
  if (sender == 0) {
    void* sc = nullptr;
    for (const auto deadline = Clock::now() + std::chrono::seconds(20); sc == nullptr;)
      if (n->connect(ctx, 0, handle, &sc, nullptr) != ncclSuccess || Clock::now() > deadline) _exit(1);
    std::vector<char> src(kHoldMax + 1);
    for (int i = 0; i < kMessages; i++) {
      const size_t size = sizeOf(i);
      for (size_t j = 0; j < size; j++) src[j] = byteOf(i, j);
      void* sreq = nullptr;
      if (n->isend(sc, src.data(), size, 0, nullptr, nullptr, &sreq) != ncclSuccess ||
          waitRequest(n->test, sreq) != ncclSuccess)
        _exit(2);
      // A process that only sends lets its socket hold small messages once a run of sends heard nothing back: the
      // reader must still get every one, the last ones of each run included (the pauses below leave them held
      // until the reader, finding its socket dry, acknowledges).
      if (i == 40 && connectedNoDelay(port) != 0) _exit(3);
      if (i == 101 && connectedNoDelay(port) != 1) _exit(4);
      // Runs of messages back to back, then a pause long enough for the reader to drain the socket and poll.
      if (i % 8 == 7) std::this_thread::sleep_for(std::chrono::microseconds(200 + (i % 5) * 300));
    }
    // The reader has drained the socket and polls it by the time the connection closes.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    n->closeSend(sc);
    _exit(0);
  }
  for (const auto deadline = Clock::now() + std::chrono::seconds(20); rc == nullptr;)
    if (n->accept(lc, &rc, nullptr) != ncclSuccess || Clock::now() > deadline) std::exit(6);
  std::vector<char> dst(kHoldMax + 1);
  auto receive = [&](int* got) {  // ncclSuccess with *got bytes, the error that ended the receive, or ncclInProgress
    void* rreq = nullptr;
    void* d = dst.data();
    size_t cap = dst.size();
    int tag = 0;
    if (ncclResult_t r = n->irecv(rc, 1, &d, &cap, &tag, nullptr, nullptr, &rreq); r != ncclSuccess) return r;
    return waitRequest(n->test, rreq, got);
  };
  for (int i = 0; i < kMessages; i++) {
    std::fill(dst.begin(), dst.end(), 0);
    int got = -1;
    if (receive(&got) != ncclSuccess) std::exit(7);
    if (got != static_cast<int>(sizeOf(i))) std::exit(8);
    for (size_t j = 0; j < sizeOf(i); j++)
      if (dst[j] != byteOf(i, j)) std::exit(9);
  }
  int got = -1;
  const ncclResult_t last = receive(&got);  // the peer closes while this waits: an error, neither data nor a timeout
  if (last == ncclSuccess) std::exit(11);
  if (last == ncclInProgress) std::exit(12);
  int status = 0;
  if (waitpid(sender, &status, 0) != sender || !WIFEXITED(status) || WEXITSTATUS(status) != 0) std::exit(10);
  n->closeRecv(rc);
  n->closeListen(lc);
  n->finalize(ctx);
  std::exit(0);
}

TEST_F(NetSocketOptions, OneWayReceiverPollsAndMissesNothing) {
  EXPECT_EXIT(
      {
        setTestEnv();
        setenv("NCCL_SOCKET_NTHREADS", "0", 1);
        childOneWaySmallMessages();
      },
      ::testing::ExitedWithCode(0), "");
}

// A process that receives as well as sends (an AllReduce's ranks, a ring) keeps TCP_NODELAY: a held message would
// wait for the peer's ACK where the peer waits for that message before it answers.
void childTwoWayKeepsNoDelay() {
  ChildListener l = childListen();
  const ncclNet_v12_t* n = l.n;
  void *&ctx = l.ctx, *&lc = l.lc, *sc = nullptr, *rc = nullptr;
  char* handle = l.handle;
  const uint16_t port = l.port();
  if (!establish([&](void** s) { return n->connect(ctx, 0, handle, s, nullptr); },
                 [&](void** r) { return n->accept(lc, r, nullptr); }, &sc, &rc))
    std::exit(4);
  std::vector<char> src(64), dst(64);
  for (int i = 0; i < 64; i++) {
    std::fill(src.begin(), src.end(), static_cast<char>(i + 1));
    void *sreq = nullptr, *rreq = nullptr;
    void* d = dst.data();
    int tag = 0;
    size_t cap = dst.size();
    if (n->isend(sc, src.data(), src.size(), 0, nullptr, nullptr, &sreq) != ncclSuccess) std::exit(5);
    if (n->irecv(rc, 1, &d, &cap, &tag, nullptr, nullptr, &rreq) != ncclSuccess) std::exit(6);
    if (waitBoth(n->test, sreq, rreq, nullptr) != ncclSuccess) std::exit(7);
    if (src != dst) std::exit(8);
  }
  if (connectedNoDelay(port) != 1) std::exit(9);
  n->closeSend(sc);
  n->closeRecv(rc);
  n->closeListen(lc);
  n->finalize(ctx);
  std::exit(0);
}

TEST_F(NetSocketOptions, TwoWayFlowKeepsNoDelay) {
  EXPECT_EXIT(
      {
        setTestEnv();
        setenv("NCCL_SOCKET_NTHREADS", "0", 1);
        childTwoWayKeepsNoDelay();
      },
      ::testing::ExitedWithCode(0), "");
}

// SO_SNDBUF of every connection this process made to `port` (the sockets of its sending comms), as getsockopt
// reports it.
std::vector<int> connectedSendBuffers(uint16_t port) { return connectionOptions(port, false, SOL_SOCKET, SO_SNDBUF); }

// The send buffer Linux gives a socket for SO_SNDBUF `bytes`: twice the value, capped at net.core.wmem_max first.
int kernelSendBuffer(int bytes) {
  long long cap = bytes;
  if (FILE* f = std::fopen("/proc/sys/net/core/wmem_max", "r")) {
    if (std::fscanf(f, "%lld", &cap) != 1) cap = bytes;
    std::fclose(f);
  }
  return 2 * static_cast<int>(std::min<long long>(bytes, cap));
}

// In the child: a pair over loopback (one helper thread, two data sockets: setTestEnv), 1 MiB moved; then every
// socket of the sending comm (control and data) must have a send buffer of `want` bytes, or, with want < 0, any
// size but the one set inside the host (the kernel's autotuning).
[[noreturn]] void childSendBuffers(int want) {
  ChildListener l = childListen();
  const ncclNet_v12_t* n = l.n;
  void *sc = nullptr, *rc = nullptr;
  if (!establish([&](void** s) { return n->connect(l.ctx, 0, l.handle, s, nullptr); },
                 [&](void** r) { return n->accept(l.lc, r, nullptr); }, &sc, &rc))
    std::exit(4);
  size_t size = size_t{1} << 20;
  std::vector<char> src(size), dst(size, 0);
  fillPattern(src, 11);
  void *sreq = nullptr, *rreq = nullptr, *d = dst.data();
  int tag = 0;
  if (n->isend(sc, src.data(), size, 0, nullptr, nullptr, &sreq) != ncclSuccess ||
      n->irecv(rc, 1, &d, &size, &tag, nullptr, nullptr, &rreq) != ncclSuccess ||
      waitBoth(n->test, sreq, rreq, nullptr) != ncclSuccess)
    std::exit(5);
  if (src != dst) std::exit(6);
  const std::vector<int> buffers = connectedSendBuffers(l.port());
  if (buffers.size() != 3) std::exit(7);
  for (int b : buffers)
    if (want >= 0 ? b != want : b == kernelSendBuffer(tutti::netsock::kSameHostSendBufBytes)) std::exit(8);
  n->closeSend(sc);
  n->closeRecv(rc);
  n->closeListen(l.lc);
  n->finalize(l.ctx);
  std::exit(0);
}

// A sending comm whose connection stays inside the host (loopback here) keeps a fixed send buffer of 768 KiB (SO_SNDBUF
// 384 KiB), on its control and data sockets alike; TUTTI_NET_SOCKET_SNDBUF sets another size, or 0 leaves the
// kernel's autotuning.
TEST_F(NetSocketOptions, SameHostSendersKeepAFixedSendBuffer) {
  EXPECT_EXIT(
      {
        setTestEnv();
        unsetenv("TUTTI_NET_SOCKET_SNDBUF");
        childSendBuffers(kernelSendBuffer(tutti::netsock::kSameHostSendBufBytes));
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setTestEnv();
        setenv("TUTTI_NET_SOCKET_SNDBUF", "100000", 1);
        childSendBuffers(kernelSendBuffer(100000));
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setTestEnv();
        setenv("TUTTI_NET_SOCKET_SNDBUF", "0", 1);
        childSendBuffers(-1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(NetSocketOptions, ManyThreadsAndSockets) {
  EXPECT_EXIT(
      {
        setTestEnv();
        setenv("NCCL_SOCKET_NTHREADS", "4", 1);
        setenv("NCCL_NSOCKS_PERTHREAD", "3", 1);
        setenv("NCCL_SOCKET_MIN_TASKSIZE", "4096", 1);
        childTransfer((7 << 20) + 13);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(NetSocketOptions, ExactInterfaceName) {
  EXPECT_EXIT(
      {
        setTestEnv();
        setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
        setenv("NCCL_SOCKET_FAMILY", "AF_INET", 1);
        childTransfer(1000);
      },
      ::testing::ExitedWithCode(0), "");
}

// Init result in a child with the given variable set (exit code = ncclResult_t).
[[noreturn]] void childInit(const char* name, const char* value) {
  const ncclNet_v12_t* n = net();  // loading sets the default test environment; override it afterwards
  if (n == nullptr) std::exit(100);
  setenv(name, value, 1);
  void* ctx = nullptr;
  std::exit(static_cast<int>(n->init(&ctx, 1, nullptr, testLogger, nullptr)));
}

TEST_F(NetSocketOptions, NoMatchingInterfaceFailsInit) {
  EXPECT_EXIT(childInit("NCCL_SOCKET_IFNAME", "=l"), ::testing::ExitedWithCode(ncclSystemError), "");
  EXPECT_EXIT(childInit("NCCL_SOCKET_IFNAME", "nosuchif0"), ::testing::ExitedWithCode(ncclSystemError), "");
}

TEST_F(NetSocketOptions, MalformedValuesFailInit) {
  EXPECT_EXIT(childInit("NCCL_SOCKET_NTHREADS", "many"), ::testing::ExitedWithCode(ncclInvalidUsage), "");
  EXPECT_EXIT(childInit("NCCL_SOCKET_NTHREADS", "17"), ::testing::ExitedWithCode(ncclInvalidUsage), "");
  EXPECT_EXIT(childInit("NCCL_SOCKET_NTHREADS", "-1"), ::testing::ExitedWithCode(ncclInvalidUsage), "");
  EXPECT_EXIT(childInit("NCCL_NSOCKS_PERTHREAD", "-3"), ::testing::ExitedWithCode(ncclInvalidUsage), "");
  EXPECT_EXIT(childInit("NCCL_SOCKET_FAMILY", "AF_UNIX"), ::testing::ExitedWithCode(ncclInvalidUsage), "");
  EXPECT_EXIT(childInit("TUTTI_NET_SOCKET_TIMEOUT_MS", "-5"), ::testing::ExitedWithCode(ncclInvalidUsage), "");
  EXPECT_EXIT(childInit("TUTTI_NET_SOCKET_DELAYED_ACK", "2"), ::testing::ExitedWithCode(ncclInvalidUsage), "");
  EXPECT_EXIT(childInit("TUTTI_NET_SOCKET_HOLD_SMALL", "yes"), ::testing::ExitedWithCode(ncclInvalidUsage), "");
  EXPECT_EXIT(childInit("TUTTI_NET_SOCKET_SNDBUF", "-2"), ::testing::ExitedWithCode(ncclInvalidUsage), "");
  EXPECT_EXIT(childInit("TUTTI_NET_SOCKET_SNDBUF", "1M"), ::testing::ExitedWithCode(ncclInvalidUsage), "");
}

}  // namespace
}  // namespace nstest
