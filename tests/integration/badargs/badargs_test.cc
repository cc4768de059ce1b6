// Bad arguments at every public entry point: each returns NCCL's error code, leaves a message for
// ncclGetLastError, does not crash, and leaves the communicator usable.
#include "harness.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace tutti::itest {
namespace {

constexpr cudaStream_t kStream{};

// Expects `call` to return `code` with a non-empty ncclGetLastError(comm).
#define EXPECT_NCCL_ERROR(code, comm, call)                                                           \
  do {                                                                                                \
    const ncclResult_t res_ = (call);                                                                 \
    EXPECT_EQ(res_, (code)) << #call << " returned " << resultName(res_);                             \
    const char* msg_ = ncclGetLastError(comm);                                                        \
    EXPECT_TRUE(msg_ != nullptr && msg_[0] != '\0') << #call << ": ncclGetLastError gave no message"; \
  } while (0)

// One rank is enough for argument checks (they fail before any peer is contacted); two ranks from
// ncclCommInitAll let root/peer range checks see a real range.
class BadArgs : public testing::Test {
 protected:
  void SetUp() override {
    comms_ = std::make_unique<CommSet>(2, InitMode::kInitAll);
    ASSERT_TRUE(comms_->ok()) << comms_->error();
    comm_ = comms_->comm(0);
  }
  // After the bad calls the communicator still works: a grouped all-reduce over both ranks.
  void TearDown() override {
    if (!comms_ || !comms_->ok() || HasFatalFailure()) return;
    int32_t in[2] = {3, 4}, out[2] = {0, 0};
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(ncclAllReduce(&in[r], &out[r], 1, ncclInt32, ncclSum, comms_->comm(r), kStream), ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_EQ(out[0], 7);
    EXPECT_EQ(out[1], 7);
  }

  std::unique_ptr<CommSet> comms_;
  ncclComm_t comm_ = nullptr;
  std::vector<float> a_ = std::vector<float>(64, 1.0f);
  std::vector<float> b_ = std::vector<float>(64, 0.0f);
};

TEST_F(BadArgs, NullComm) {
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr,
                    ncclAllReduce(a_.data(), b_.data(), 4, ncclFloat, ncclSum, nullptr, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr,
                    ncclBroadcast(a_.data(), b_.data(), 4, ncclFloat, 0, nullptr, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclBcast(b_.data(), 4, ncclFloat, 0, nullptr, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr,
                    ncclReduce(a_.data(), b_.data(), 4, ncclFloat, ncclSum, 0, nullptr, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr,
                    ncclAllGather(a_.data(), b_.data(), 4, ncclFloat, nullptr, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr,
                    ncclReduceScatter(a_.data(), b_.data(), 4, ncclFloat, ncclSum, nullptr, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr,
                    ncclAlltoAll(a_.data(), b_.data(), 4, ncclFloat, nullptr, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr,
                    ncclGather(a_.data(), b_.data(), 4, ncclFloat, 0, nullptr, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr,
                    ncclScatter(a_.data(), b_.data(), 4, ncclFloat, 0, nullptr, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclSend(a_.data(), 4, ncclFloat, 0, nullptr, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclRecv(b_.data(), 4, ncclFloat, 0, nullptr, kStream));
  int n = 0;
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommCount(nullptr, &n));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommUserRank(nullptr, &n));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommCuDevice(nullptr, &n));
  ncclResult_t async = ncclSuccess;
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommGetAsyncError(nullptr, &async));
  ncclComm_t child = nullptr;
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommSplit(nullptr, 0, 0, &child, nullptr));
  ncclRedOp_t op;
  float scalar = 2.0f;
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr,
                    ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, nullptr));
  // Destroying NULL is a no-op in NCCL, not an error.
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);
}

TEST_F(BadArgs, NullBuffersWithCount) {
  float* x = a_.data();
  float* y = b_.data();
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclAllReduce(nullptr, y, 4, ncclFloat, ncclSum, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclAllReduce(x, nullptr, 4, ncclFloat, ncclSum, comm_, kStream));
  // Rank 0 is the root here, so it needs both buffers.
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclBroadcast(nullptr, y, 4, ncclFloat, 0, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclBroadcast(x, nullptr, 4, ncclFloat, 0, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclBcast(nullptr, 4, ncclFloat, 0, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclReduce(nullptr, y, 4, ncclFloat, ncclSum, 0, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclReduce(x, nullptr, 4, ncclFloat, ncclSum, 0, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclAllGather(nullptr, y, 4, ncclFloat, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclAllGather(x, nullptr, 4, ncclFloat, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclReduceScatter(nullptr, y, 4, ncclFloat, ncclSum, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclReduceScatter(x, nullptr, 4, ncclFloat, ncclSum, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclAlltoAll(nullptr, y, 4, ncclFloat, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclAlltoAll(x, nullptr, 4, ncclFloat, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclGather(nullptr, y, 4, ncclFloat, 0, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclGather(x, nullptr, 4, ncclFloat, 0, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclScatter(nullptr, y, 4, ncclFloat, 0, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclScatter(x, nullptr, 4, ncclFloat, 0, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclSend(nullptr, 4, ncclFloat, 1, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclRecv(nullptr, 4, ncclFloat, 1, comm_, kStream));
}

TEST_F(BadArgs, DatatypeOutOfRange) {
  for (int bad : {-1, static_cast<int>(ncclNumTypes), 255}) {
    const auto t = static_cast<ncclDataType_t>(bad);
    SCOPED_TRACE("datatype " + std::to_string(bad));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                      ncclAllReduce(a_.data(), b_.data(), 4, t, ncclSum, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                      ncclBroadcast(a_.data(), b_.data(), 4, t, 0, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                      ncclReduce(a_.data(), b_.data(), 4, t, ncclSum, 0, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclAllGather(a_.data(), b_.data(), 4, t, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                      ncclReduceScatter(a_.data(), b_.data(), 4, t, ncclSum, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclAlltoAll(a_.data(), b_.data(), 4, t, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclSend(a_.data(), 4, t, 1, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclRecv(b_.data(), 4, t, 1, comm_, kStream));
    ncclRedOp_t op;
    float scalar = 2.0f;
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                      ncclRedOpCreatePreMulSum(&op, &scalar, t, ncclScalarHostImmediate, comm_));
  }
}

TEST_F(BadArgs, OpOutOfRangeOrDestroyed) {
  // ncclNumOps and above are user ops: unknown to this communicator until created.
  for (int bad :
       {-1, static_cast<int>(ncclNumOps), static_cast<int>(ncclNumOps) + 7, static_cast<int>(ncclMaxRedOp)}) {
    const auto op = static_cast<ncclRedOp_t>(bad);
    SCOPED_TRACE("op " + std::to_string(bad));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                      ncclAllReduce(a_.data(), b_.data(), 4, ncclFloat, op, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                      ncclReduce(a_.data(), b_.data(), 4, ncclFloat, op, 0, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                      ncclReduceScatter(a_.data(), b_.data(), 4, ncclFloat, op, comm_, kStream));
  }
  ncclRedOp_t op;
  float scalar = 2.0f;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, comm_), ncclSuccess);
  ASSERT_EQ(ncclRedOpDestroy(op, comm_), ncclSuccess);
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclAllReduce(a_.data(), b_.data(), 4, ncclFloat, op, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclRedOpDestroy(op, comm_));       // twice
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclRedOpDestroy(ncclSum, comm_));  // built-in
  // A user op belongs to the communicator that created it.
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, comm_), ncclSuccess);
  ncclComm_t other = comms_->comm(1);
  EXPECT_NCCL_ERROR(ncclInvalidArgument, other, ncclRedOpDestroy(op, other));
  EXPECT_EQ(ncclRedOpDestroy(op, comm_), ncclSuccess);
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclRedOpCreatePreMulSum(nullptr, &scalar, ncclFloat, ncclScalarHostImmediate, comm_));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclRedOpCreatePreMulSum(&op, nullptr, ncclFloat, ncclScalarHostImmediate, comm_));
  EXPECT_NCCL_ERROR(
      ncclInvalidArgument, comm_,
      ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, static_cast<ncclScalarResidence_t>(9), comm_));
}

TEST_F(BadArgs, RootOutOfRange) {
  for (int root : {-1, 2, 1000}) {
    SCOPED_TRACE("root " + std::to_string(root));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                      ncclBroadcast(a_.data(), b_.data(), 4, ncclFloat, root, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclBcast(b_.data(), 4, ncclFloat, root, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                      ncclReduce(a_.data(), b_.data(), 4, ncclFloat, ncclSum, root, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                      ncclGather(a_.data(), b_.data(), 4, ncclFloat, root, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                      ncclScatter(a_.data(), b_.data(), 4, ncclFloat, root, comm_, kStream));
  }
}

TEST_F(BadArgs, PeerOutOfRange) {
  for (int peer : {-1, 2, 1000}) {
    SCOPED_TRACE("peer " + std::to_string(peer));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclSend(a_.data(), 4, ncclFloat, peer, comm_, kStream));
    EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclRecv(b_.data(), 4, ncclFloat, peer, comm_, kStream));
  }
}

// count * sizeof(type) (or count * nranks) that does not fit in size_t must be refused, not wrapped
// into a small transfer.
TEST_F(BadArgs, CountOverflow) {
  const size_t huge = SIZE_MAX / 2 + 1;  // * 4 bytes wraps
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclAllReduce(a_.data(), b_.data(), huge, ncclFloat, ncclSum, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclBroadcast(a_.data(), b_.data(), huge, ncclFloat, 0, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclReduce(a_.data(), b_.data(), huge, ncclFloat, ncclSum, 0, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclSend(a_.data(), huge, ncclFloat, 1, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclRecv(b_.data(), huge, ncclFloat, 1, comm_, kStream));
  // Fits one rank's share in bytes (1 byte elements) but not nranks of them.
  const size_t half = SIZE_MAX / 2 + 1;
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclAllGather(a_.data(), b_.data(), half, ncclInt8, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclReduceScatter(a_.data(), b_.data(), half, ncclInt8, ncclSum, comm_, kStream));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_,
                    ncclAlltoAll(a_.data(), b_.data(), half, ncclInt8, comm_, kStream));
}

TEST_F(BadArgs, NullOutputPointers) {
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclCommCount(comm_, nullptr));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclCommUserRank(comm_, nullptr));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclCommCuDevice(comm_, nullptr));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclCommGetAsyncError(comm_, nullptr));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclGetVersion(nullptr));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclGetUniqueId(nullptr));
}

TEST_F(BadArgs, GroupEndWithoutStart) { EXPECT_NCCL_ERROR(ncclInvalidUsage, nullptr, ncclGroupEnd()); }

TEST_F(BadArgs, SplitWithBadConfig) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;  // as if not initialised with NCCL_CONFIG_INITIALIZER
  ncclComm_t child = reinterpret_cast<ncclComm_t>(&config);
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclCommSplit(comm_, 0, 0, &child, &config));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, comm_, ncclCommSplit(comm_, 0, 0, nullptr, nullptr));
}

// Init-time checks need no communicator (and must fail before waiting for peers that never come).
TEST(BadInit, RankAndSizeRange) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommInitRank(&comm, 2, id, 2));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommInitRank(&comm, 2, id, -1));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommInitRank(&comm, 0, id, 0));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommInitRank(&comm, -3, id, 0));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommInitRank(nullptr, 1, id, 0));
  EXPECT_EQ(comm, nullptr) << "outputs are set only on success";
  ncclComm_t comms[2] = {nullptr, nullptr};
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommInitAll(comms, 0, nullptr));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommInitAll(comms, -1, nullptr));
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommInitAll(nullptr, 2, nullptr));
}

TEST(BadInit, ConfigNotInitialised) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config;
  std::memset(&config, 0, sizeof(config));
  config.size = sizeof(config);  // right size, but no magic
  ncclComm_t comm = nullptr;
  EXPECT_NCCL_ERROR(ncclInvalidArgument, nullptr, ncclCommInitRankConfig(&comm, 1, id, 0, &config));
  EXPECT_EQ(comm, nullptr);
  // A correctly initialised config works (one rank, no peers to wait for).
  ncclConfig_t good = NCCL_CONFIG_INITIALIZER;
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &good), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(ErrorStrings, EveryResultCode) {
  for (int r = ncclSuccess; r <= ncclNumResults + 1; ++r) {
    const char* s = ncclGetErrorString(static_cast<ncclResult_t>(r));
    ASSERT_NE(s, nullptr) << "result " << r;
    EXPECT_GT(std::strlen(s), 0u) << "result " << r;
  }
  EXPECT_STRNE(ncclGetErrorString(ncclSuccess), ncclGetErrorString(ncclInvalidArgument));
  EXPECT_STRNE(ncclGetErrorString(ncclInvalidArgument), ncclGetErrorString(ncclInvalidUsage));
  EXPECT_NE(ncclGetErrorString(static_cast<ncclResult_t>(-1)), nullptr);
}

}  // namespace
}  // namespace tutti::itest
