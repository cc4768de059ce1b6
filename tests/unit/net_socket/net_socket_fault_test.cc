// net-socket under bad input and failures: malformed handles, strangers and truncated handshakes on the
// listening port, size mismatches, vanishing peers, and closing in every order.
#include "net_socket_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>

namespace nstest {
namespace {

using tutti::netsock::Handle;
using tutti::netsock::Hello;

// A raw TCP connection to the listener named by a handle (forging what a peer might send).
int rawConnect(const char* handle) {
  Handle h;
  std::memcpy(&h, handle, sizeof h);
  int fd = ::socket(h.addr.sa.sa_family, SOCK_STREAM, 0);
  socklen_t len = h.addr.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (fd >= 0 && ::connect(fd, &h.addr.sa, len) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Calls accept for a while; it must keep succeeding with no comm.
void expectNoComm(const ncclNet_v12_t* n, void* listenComm, int ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < deadline) {
    void* rc = nullptr;
    ASSERT_EQ(n->accept(listenComm, &rc, nullptr), ncclSuccess);
    ASSERT_EQ(rc, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST_F(NetSocket, GarbageHandleIsRejected) {
  char garbage[NCCL_NET_HANDLE_MAXSIZE];
  std::mt19937 gen(7);
  for (int trial = 0; trial < 20; trial++) {
    for (char& c : garbage) c = static_cast<char>(gen());
    void* sc = reinterpret_cast<void*>(1);
    EXPECT_EQ(n->connect(ctx, 0, garbage, &sc, nullptr), ncclInvalidArgument);
  }
  std::memset(garbage, 0, sizeof garbage);
  void* sc = nullptr;
  EXPECT_EQ(n->connect(ctx, 0, garbage, &sc, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(warned("handle"));
}

TEST_F(NetSocket, HandleWithBadFieldsOrStaleAttemptIsRejected) {
  listen();
  Handle h;
  std::memcpy(&h, handle, sizeof h);
  Handle bad = h;
  bad.nSocks = 1000;  // beyond any limit
  char buf[NCCL_NET_HANDLE_MAXSIZE] = {};
  std::memcpy(buf, &bad, sizeof bad);
  void* sc = nullptr;
  EXPECT_EQ(n->connect(ctx, 0, buf, &sc, nullptr), ncclInvalidArgument);
  bad = h;
  bad.connectId = 0x1234;  // names no attempt in progress
  std::memcpy(buf, &bad, sizeof bad);
  EXPECT_EQ(n->connect(ctx, 0, buf, &sc, nullptr), ncclInvalidArgument);
  EXPECT_EQ(n->connect(ctx, 5, handle, &sc, nullptr), ncclInvalidArgument);  // no such device
}

TEST_F(NetSocket, WrongMagicIsRejectedByAccept) {
  listen();
  Handle h;
  std::memcpy(&h, handle, sizeof h);
  h.magic ^= 0xdeadbeef;
  char forged[NCCL_NET_HANDLE_MAXSIZE] = {};
  std::memcpy(forged, &h, sizeof h);
  void* sc = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  ncclResult_t r = ncclSuccess;
  while (sc == nullptr && r == ncclSuccess && Clock::now() < deadline) {
    r = n->connect(ctx, 0, forged, &sc, nullptr);
    void* rc = nullptr;
    ASSERT_EQ(n->accept(listenComm, &rc, nullptr), ncclSuccess);
    ASSERT_EQ(rc, nullptr) << "a connection with the wrong magic was accepted";
  }
  expectNoComm(n, listenComm, 100);
  EXPECT_TRUE(warned("wrong magic"));
  if (r == ncclSuccess && sc != nullptr) {
    // The connector learns of the rejection on its first transfer instead of hanging.
    std::vector<char> big(4 << 20, 1);
    void* req = nullptr;
    ASSERT_EQ(n->isend(sc, big.data(), big.size(), 0, nullptr, nullptr, &req), ncclSuccess);
    ncclResult_t tr = waitRequest(n->test, req, nullptr, 5);
    EXPECT_TRUE(tr == ncclRemoteError || tr == ncclSystemError) << tr;
    EXPECT_EQ(n->closeSend(sc), ncclSuccess);  // before `big` goes out of scope
  }
  // The listener still serves a legitimate peer afterwards.
  ASSERT_TRUE(establish([&](void** s) { return n->connect(ctx, 0, handle, s, nullptr); },
                        [&](void** rc) { return n->accept(listenComm, rc, nullptr); }, &sendComm, &recvComm));
}

TEST_F(NetSocket, TruncatedAndGarbageHandshakesAreDropped) {
  listen();
  {
    int fd = rawConnect(handle);  // a few bytes, then gone
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "abc", 3), 3);
    ::close(fd);
  }
  {
    int fd = rawConnect(handle);  // a full-size hello of garbage
    ASSERT_GE(fd, 0);
    char junk[sizeof(Hello)];
    std::memset(junk, 0x41, sizeof junk);
    ASSERT_EQ(::write(fd, junk, sizeof junk), static_cast<ssize_t>(sizeof junk));
    expectNoComm(n, listenComm, 200);
    ::close(fd);
  }
  {
    Handle h;  // a valid hello whose socket index is out of range
    std::memcpy(&h, handle, sizeof h);
    Hello hl{};
    hl.marker = tutti::netsock::kHelloMarker;
    hl.version = tutti::netsock::kWireVersion;
    hl.magic = h.magic;
    hl.nonce = 99;
    hl.index = h.nSocks + 5;
    hl.nSocks = h.nSocks;
    hl.nThreads = h.nThreads;
    int fd = rawConnect(handle);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, &hl, sizeof hl), static_cast<ssize_t>(sizeof hl));
    expectNoComm(n, listenComm, 200);
    ::close(fd);
  }
  EXPECT_TRUE(warned("during the handshake"));
  EXPECT_TRUE(warned("not a net-socket hello"));
  EXPECT_TRUE(warned("index out of range"));
  // A stalled partial hello is dropped after TUTTI_NET_SOCKET_TIMEOUT_MS (3 s in these tests).
  int stalled = rawConnect(handle);
  ASSERT_GE(stalled, 0);
  ASSERT_EQ(::write(stalled, "TT", 2), 2);
  expectNoComm(n, listenComm, 3500);
  EXPECT_TRUE(warned("timed out"));
  ::close(stalled);
  ASSERT_TRUE(establish([&](void** s) { return n->connect(ctx, 0, handle, s, nullptr); },
                        [&](void** rc) { return n->accept(listenComm, rc, nullptr); }, &sendComm, &recvComm));
}

TEST_F(NetSocket, ConnectToClosedPortFailsAfterTimeout) {
  listen();
  char copy[NCCL_NET_HANDLE_MAXSIZE];
  std::memcpy(copy, handle, sizeof copy);
  ASSERT_EQ(n->closeListen(listenComm), ncclSuccess);
  listenComm = nullptr;
  void* sc = nullptr;
  auto start = Clock::now();
  ncclResult_t r = ncclSuccess;
  while (sc == nullptr && r == ncclSuccess && Clock::now() < start + std::chrono::seconds(10))
    r = n->connect(ctx, 0, copy, &sc, nullptr);
  EXPECT_EQ(r, ncclRemoteError);
  EXPECT_EQ(sc, nullptr);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(8));
}

TEST_F(NetSocket, ReceiveSmallerThanSendIsAnError) {
  connectPair();
  std::vector<char> src(100, 1), dst(50, 0);
  int got = -1;
  EXPECT_EQ(transfer(src.data(), src.size(), dst.data(), dst.size(), &got), ncclInvalidUsage);
  EXPECT_TRUE(warned("truncated"));
  // The comm is broken from now on: later calls report the error instead of reading garbage.
  void* req = nullptr;
  size_t sz = 100;
  void* d = dst.data();
  int tag = 0;
  EXPECT_EQ(n->irecv(recvComm, 1, &d, &sz, &tag, nullptr, nullptr, &req), ncclInvalidUsage);
  closeAll();
}

TEST_F(NetSocket, ChunkedReceiveSmallerThanSendIsAnError) {
  connectPair();
  std::vector<char> src(1 << 20, 1), dst(1 << 19, 0);
  int got = -1;
  EXPECT_EQ(transfer(src.data(), src.size(), dst.data(), dst.size(), &got), ncclInvalidUsage);
  closeAll();
}

TEST_F(NetSocket, BadRequestArguments) {
  connectPair();
  char a[8], b[8];
  void* data[2] = {a, b};
  size_t sizes[2] = {8, 8};
  int tags[2] = {0, 0};
  void* req = nullptr;
  EXPECT_EQ(n->irecv(recvComm, 2, data, sizes, tags, nullptr, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(n->irecv(recvComm, 0, data, sizes, tags, nullptr, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(n->isend(recvComm, a, 8, 0, nullptr, nullptr, &req), ncclInvalidArgument);  // wrong direction
  EXPECT_EQ(n->isend(sendComm, nullptr, 8, 0, nullptr, nullptr, &req), ncclInvalidArgument);
  int done = 0;
  EXPECT_EQ(n->test(nullptr, &done, nullptr), ncclInvalidArgument);
  // A request tested again after completion is reported, not dereferenced as live.
  ASSERT_EQ(n->isend(sendComm, a, 8, 0, nullptr, nullptr, &req), ncclSuccess);
  void* rreq = nullptr;
  void* d = b;
  size_t sz = 8;
  ASSERT_EQ(n->irecv(recvComm, 1, &d, &sz, tags, nullptr, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(waitRequest(n->test, req), ncclSuccess);
  ASSERT_EQ(waitRequest(n->test, rreq), ncclSuccess);
  EXPECT_EQ(n->test(req, &done, nullptr), ncclInternalError);
}

TEST_F(NetSocket, SenderVanishesWhileReceiving) {
  connectPair();
  std::vector<char> dst(1 << 20);
  void* d = dst.data();
  size_t sz = dst.size();
  int tag = 0;
  void* rreq = nullptr;
  ASSERT_EQ(n->irecv(recvComm, 1, &d, &sz, &tag, nullptr, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(n->closeSend(sendComm), ncclSuccess);
  sendComm = nullptr;
  auto start = Clock::now();
  EXPECT_EQ(waitRequest(n->test, rreq, nullptr, 5), ncclRemoteError);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  closeAll();
}

TEST_F(NetSocket, SenderVanishesMidMessage) {
  connectPair();
  // The receiver gets the header and part of a large message, then the sender disappears.
  std::vector<char> src(32 << 20, 2), dst(32 << 20);
  void *sreq = nullptr, *rreq = nullptr;
  ASSERT_EQ(n->isend(sendComm, src.data(), src.size(), 0, nullptr, nullptr, &sreq), ncclSuccess);
  void* d = dst.data();
  size_t sz = dst.size();
  int tag = 0;
  ASSERT_EQ(n->irecv(recvComm, 1, &d, &sz, &tag, nullptr, nullptr, &rreq), ncclSuccess);
  int done = 0;
  ASSERT_EQ(n->test(rreq, &done, nullptr), ncclSuccess);
  ASSERT_EQ(n->closeSend(sendComm), ncclSuccess);  // outstanding send: close must not hang
  sendComm = nullptr;
  ncclResult_t r = waitRequest(n->test, rreq, nullptr, 5);
  // The close may have raced the whole message into the socket buffers; otherwise it is an error.
  if (r == ncclSuccess) {
    EXPECT_EQ(src, dst);
  } else {
    EXPECT_EQ(r, ncclRemoteError);
  }
  closeAll();
}

TEST_F(NetSocket, ReceiverVanishesWhileSending) {
  connectPair();
  std::vector<char> src(16 << 20, 3);
  void* sreq = nullptr;
  ASSERT_EQ(n->isend(sendComm, src.data(), src.size(), 0, nullptr, nullptr, &sreq), ncclSuccess);
  ASSERT_EQ(n->closeRecv(recvComm), ncclSuccess);
  recvComm = nullptr;
  auto start = Clock::now();
  ncclResult_t r = waitRequest(n->test, sreq, nullptr, 5);
  EXPECT_TRUE(r == ncclRemoteError || r == ncclSystemError) << r;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  closeAll();
}

// Every close order, each with a message in flight before the closes.
class NetSocketCloseOrder : public NetSocket, public ::testing::WithParamInterface<int> {};

TEST_P(NetSocketCloseOrder, ClosesCleanly) {
  connectPair();
  std::vector<char> src(200000, 4), dst(200000);
  int got = -1;
  ASSERT_EQ(transfer(src.data(), src.size(), dst.data(), dst.size(), &got), ncclSuccess);
  void* objs[3] = {sendComm, recvComm, listenComm};
  ncclResult_t (*closers[3])(void*) = {n->closeSend, n->closeRecv, n->closeListen};
  int order[3] = {0, 1, 2};
  for (int i = 0; i < GetParam(); i++) std::next_permutation(order, order + 3);
  for (int k : order) EXPECT_EQ(closers[k](objs[k]), ncclSuccess);
  sendComm = recvComm = listenComm = nullptr;
}

INSTANTIATE_TEST_SUITE_P(AllOrders, NetSocketCloseOrder, ::testing::Range(0, 6));

TEST_F(NetSocket, CloseListenWithConnectionsInProgress) {
  listen();
  int fd = rawConnect(handle);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "T", 1), 1);
  expectNoComm(n, listenComm, 20);
  // A connect that has started but was never accepted.
  void* sc = nullptr;
  ASSERT_EQ(n->connect(ctx, 0, handle, &sc, nullptr), ncclSuccess);
  EXPECT_EQ(n->closeListen(listenComm), ncclSuccess);
  listenComm = nullptr;
  ::close(fd);
  EXPECT_EQ(n->closeSend(sc), ncclSuccess);  // NULL when the connect never completed
  EXPECT_EQ(n->closeSend(nullptr), ncclSuccess);
  EXPECT_EQ(n->closeRecv(nullptr), ncclSuccess);
  EXPECT_EQ(n->closeListen(nullptr), ncclSuccess);
}

}  // namespace
}  // namespace nstest
