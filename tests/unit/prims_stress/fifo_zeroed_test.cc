// The LL and LL128 readers take a line as ready when its flag equals step + 1, and flags start again at 1
// on every new connection: a receive FIFO that still holds an earlier connection's lines would hand the
// new receiver complete-looking stale lines. So every transport must give a receiving end zeroed LL and
// LL128 buffers, on the first connection of a process and on the tenth alike (heap memory is recycled).
// Loads each intra-node transport plugin, opens and frees receiving ends repeatedly, dirtying the buffers
// in between, and checks every new end's LL / LL128 buffers read as zero.
#include <tutti/transport.h>

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kGeometry[TUTTI_NUM_PROTOCOLS] = {262144, 4915200, 4194304};  // NCCL's default sizes
constexpr int kRounds = 6;

void quietLogger(ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

size_t nonZeroBytes(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) count += b[i] != 0;
  return count;
}

// Opens and frees kRounds receiving ends of transport `name`, checking each starts zeroed.
void checkReceiveEndsZeroed(const char* name) {
  const std::string path = std::string(TUTTI_TEST_LIB_DIR) + "/libtutti-transport-" + name + ".so";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  const auto* t = static_cast<const tuttiTransport_v1_t*>(dlsym(lib, TUTTI_TRANSPORT_SYMBOL));
  ASSERT_NE(t, nullptr) << path << " has no " << TUTTI_TRANSPORT_SYMBOL;
  void* ctx = nullptr;
  ASSERT_EQ(t->init(quietLogger, &ctx), ncclSuccess);
  tuttiPeerInfo_t self{}, peer{};
  self.rank = 0;
  peer.rank = 1;
  self.pid = peer.pid = static_cast<int>(getpid());
  tuttiConnectRequest_t req{};
  req.peer = 1;
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) req.buffSizes[p] = kGeometry[p];
  for (int round = 0; round < kRounds; ++round) {
    std::vector<char> info(TUTTI_CONNECT_INFO_BYTES);
    void* res = nullptr;
    ASSERT_EQ(t->recvSetup(ctx, &req, &self, &peer, info.data(), &res), ncclSuccess);
    tuttiConnector_t conn{};
    ASSERT_EQ(t->recvConnect(res, info.data(), &conn), ncclSuccess);
    for (int p : {TUTTI_PROTO_LL, TUTTI_PROTO_LL128}) {
      ASSERT_NE(conn.buffs[p], nullptr);
      EXPECT_EQ(nonZeroBytes(conn.buffs[p], kGeometry[p]), 0u)
          << name << " round " << round << ": protocol " << p << " buffer is not zeroed";
      // Leave lines behind as a finished connection does (flags of early steps included).
      std::memset(conn.buffs[p], 0x01, kGeometry[p]);
    }
    EXPECT_EQ(nonZeroBytes(conn.ctrl, sizeof(tuttiConnCtrl_t)), 0u) << name << " round " << round;
    std::memset(conn.ctrl, 0x01, sizeof(tuttiConnCtrl_t));
    ASSERT_EQ(t->free(res), ncclSuccess);
  }
  if (t->finalize) t->finalize(ctx);
  dlclose(lib);
}

TEST(FifoZeroed, ShmReceiveEndsStartZeroed) { checkReceiveEndsZeroed("shm"); }

// p2p buffers come from the heap: from the third connection of a process on, glibc recycles chunks that
// held an earlier connection's LL lines, so recvSetup must clear them.
TEST(FifoZeroed, P2pReceiveEndsStartZeroed) { checkReceiveEndsZeroed("p2p"); }

}  // namespace
