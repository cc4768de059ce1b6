// Bootstrap collectives and point-to-point messages with ranks as threads.
#include "bootstrap_test_util.h"

#include "bootstrap/socket.h"
#include "util/check.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <cstring>
#include <numeric>

namespace tutti {
namespace {

using test::Id;
using test::newId;
using test::runRanks;

class BootstrapN : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapN, AllGatherBarrierAndTaggedMessages) {
  const int n = GetParam();
  Id id = newId();
  auto res = runRanks(id, n, [n](int rank, Bootstrap& b) {
    // allGather: odd slot size so slots are unaligned; each rank writes a rank-specific pattern.
    constexpr size_t kSlot = 13;
    std::vector<unsigned char> buf(n * kSlot, 0xee);
    for (size_t i = 0; i < kSlot; ++i) buf[rank * kSlot + i] = static_cast<unsigned char>(rank * 31 + i);
    ASSERT_EQ(b.allGather(buf.data(), kSlot), ncclSuccess);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < kSlot; ++i) ASSERT_EQ(buf[r * kSlot + i], static_cast<unsigned char>(r * 31 + i));

    // A second allGather with a different size right after the first must not mix their messages.
    std::vector<int64_t> big(n * 4096);
    for (int i = 0; i < 4096; ++i) big[rank * 4096 + i] = int64_t(rank) << 32 | i;
    ASSERT_EQ(b.allGather(big.data(), 4096 * sizeof(int64_t)), ncclSuccess);
    for (int r = 0; r < n; ++r) ASSERT_EQ(big[r * 4096 + 4095], int64_t(r) << 32 | 4095);

    ASSERT_EQ(b.barrier(), ncclSuccess);
    ASSERT_EQ(b.barrier(), ncclSuccess);

    // Tagged messages to the successor, received in the reverse tag order.
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    for (int tag = 0; tag < 4; ++tag) {
      std::vector<int> msg(tag * 100 + 1, rank * 1000 + tag);
      ASSERT_EQ(b.send(next, tag, msg.data(), msg.size() * sizeof(int)), ncclSuccess);
    }
    for (int tag = 3; tag >= 0; --tag) {
      std::vector<int> msg(tag * 100 + 1, -1);
      ASSERT_EQ(b.recv(prev, tag, msg.data(), msg.size() * sizeof(int)), ncclSuccess);
      for (int v : msg) ASSERT_EQ(v, prev * 1000 + tag);
    }
    // Same tag twice: FIFO. Zero-byte messages are legal.
    int a = 1, c = 2;
    ASSERT_EQ(b.send(next, 7, &a, sizeof(a)), ncclSuccess);
    ASSERT_EQ(b.send(next, 7, &c, sizeof(c)), ncclSuccess);
    ASSERT_EQ(b.send(next, 8, nullptr, 0), ncclSuccess);
    int x = 0, y = 0;
    ASSERT_EQ(b.recv(prev, 8, nullptr, 0), ncclSuccess);
    ASSERT_EQ(b.recv(prev, 7, &x, sizeof(x)), ncclSuccess);
    ASSERT_EQ(b.recv(prev, 7, &y, sizeof(y)), ncclSuccess);
    EXPECT_EQ(x, 1);
    EXPECT_EQ(y, 2);
    ASSERT_EQ(b.barrier(), ncclSuccess);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
  EXPECT_TRUE(test::rootThreadsGone());
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapN, ::testing::Values(1, 2, 3, 5, 8, 16));

TEST(Bootstrap, LargeMessagesBothWaysDoNotDeadlock) {
  // Both ranks send 32 MiB before either receives: far beyond socket buffers.
  Id id = newId();
  auto res = runRanks(id, 2, [](int rank, Bootstrap& b) {
    const size_t count = 8 << 20;
    std::vector<uint32_t> out(count), in(count);
    std::iota(out.begin(), out.end(), uint32_t(rank) * 7);
    ASSERT_EQ(b.send(1 - rank, 0, out.data(), count * 4), ncclSuccess);
    ASSERT_EQ(b.recv(1 - rank, 0, in.data(), count * 4), ncclSuccess);
    EXPECT_EQ(in[0], uint32_t(1 - rank) * 7);
    EXPECT_EQ(in[count - 1], uint32_t(1 - rank) * 7 + count - 1);
  });
  EXPECT_EQ(res[0], ncclSuccess);
  EXPECT_EQ(res[1], ncclSuccess);
}

TEST(Bootstrap, SendToSelfAndBadArguments) {
  Id id = newId();
  auto res = runRanks(id, 2, [](int rank, Bootstrap& b) {
    int v = 42 + rank, w = 0;
    EXPECT_EQ(b.send(rank, 3, &v, sizeof(v)), ncclSuccess);
    EXPECT_EQ(b.recv(rank, 3, &w, sizeof(w)), ncclSuccess);
    EXPECT_EQ(w, 42 + rank);
    EXPECT_EQ(b.send(2, 0, &v, sizeof(v)), ncclInvalidArgument);
    EXPECT_EQ(b.recv(-1, 0, &v, sizeof(v)), ncclInvalidArgument);
    EXPECT_EQ(b.send(1 - rank, 0, nullptr, 4), ncclInvalidArgument);
    // Size mismatch between send and recv is reported, not truncated.
    int64_t big = 5;
    EXPECT_EQ(b.send(1 - rank, 9, &big, sizeof(big)), ncclSuccess);
    EXPECT_EQ(b.recv(1 - rank, 9, &w, sizeof(w)), ncclInvalidUsage);
  });
  EXPECT_EQ(res[0], ncclSuccess);
  EXPECT_EQ(res[1], ncclSuccess);
  // The last error of either rank (the text is process-wide, so read after both are done).
  EXPECT_NE(std::strstr(lastErrorText(), "expected 4 bytes"), nullptr) << lastErrorText();
}

TEST(Bootstrap, CreateRejectsBadArguments) {
  Id id = newId();
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::create(id.data(), 3, 3, &b), ncclInvalidArgument);
  EXPECT_EQ(Bootstrap::create(id.data(), 0, 0, &b), ncclInvalidArgument);
  EXPECT_EQ(Bootstrap::create(nullptr, 0, 1, &b), ncclInvalidArgument);
  Id garbage{};
  std::memset(garbage.data(), 0x5a, garbage.size());
  EXPECT_EQ(Bootstrap::create(garbage.data(), 0, 1, &b), ncclInvalidArgument);
  EXPECT_EQ(b, nullptr);
  // The id is still usable after the rejected calls.
  EXPECT_EQ(runRanks(id, 1, [](int, Bootstrap& b) { EXPECT_EQ(b.barrier(), ncclSuccess); })[0], ncclSuccess);
}

TEST(Bootstrap, SeveralCommunicatorsAtOnce) {
  constexpr int kComms = 4;
  std::vector<std::thread> comms;
  std::vector<std::vector<ncclResult_t>> res(kComms);
  for (int c = 0; c < kComms; ++c) {
    comms.emplace_back([&res, c] {
      const int n = 2 + c;
      Id id = newId();
      res[c] = runRanks(id, n, [c, n](int rank, Bootstrap& b) {
        std::vector<int> v(n, -1);
        v[rank] = c * 100 + rank;
        ASSERT_EQ(b.allGather(v.data(), sizeof(int)), ncclSuccess);
        for (int r = 0; r < n; ++r) EXPECT_EQ(v[r], c * 100 + r);
        ASSERT_EQ(b.barrier(), ncclSuccess);
      });
    });
  }
  for (auto& t : comms) t.join();
  for (int c = 0; c < kComms; ++c)
    for (ncclResult_t r : res[c]) EXPECT_EQ(r, ncclSuccess) << "communicator " << c;
}

TEST(Bootstrap, CommIdFixedPort) {
  // Find a free port, then let rank 0 run the root there.
  Socket probe;
  SocketAddress any{}, bound{};
  any.sin.sin_family = AF_INET;
  any.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(socketListen(any, &probe, &bound), ncclSuccess);
  probe.reset();
  std::string commId = toString(bound);
  setenv("NCCL_COMM_ID", commId.c_str(), 1);
  ASSERT_TRUE(test::rootThreadsGone());
  Id id1 = newId(), id2 = newId();
  unsetenv("NCCL_COMM_ID");
  EXPECT_EQ(id1, id2) << "the id must be a function of NCCL_COMM_ID alone";
  EXPECT_EQ(bootstrapRootThreadsRunning(), 0) << "with NCCL_COMM_ID, rank 0 runs the root, not GetUniqueId";
  // Rank 0 starts last, so the others retry their connection to a root that is not there yet.
  std::vector<ncclResult_t> res(4, ncclInternalError);
  std::vector<std::thread> t;
  for (int r = 3; r >= 0; --r) {
    t.emplace_back([&, r] {
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::unique_ptr<Bootstrap> b;
      res[r] = Bootstrap::create(id1.data(), r, 4, &b);
      if (res[r] == ncclSuccess) {
        std::vector<int> v(4);
        v[r] = r + 10;
        EXPECT_EQ(b->allGather(v.data(), sizeof(int)), ncclSuccess);
        EXPECT_EQ(v, (std::vector<int>{10, 11, 12, 13}));
      }
    });
  }
  for (auto& x : t) x.join();
  for (int r = 0; r < 4; ++r) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
}

}  // namespace
}  // namespace tutti
