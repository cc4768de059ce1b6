// The host functions of NCCL's device API (nccl_device.h), through Tutti's own nccl_device.h compiled as
// host code: teams, properties and window pointers answer from the communicator; device communicators
// need the sim backend (tests/integration/sim, DeviceApiSim), so on the host backend they are refused with
// a message; what Tutti lacks (GIN queues, LL all-to-all) is refused too, never a crash.
#include <gtest/gtest.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" void ncclResetDebugInitInternal(void);  // exported by NCCL's library, declared by no header

namespace {

class DeviceApi : public ::testing::Test {
 protected:
  static constexpr int kRanks = 3;
  void SetUp() override { ASSERT_EQ(ncclCommInitAll(comms_, kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr); }
  void TearDown() override {
    for (ncclComm_t c : comms_) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  }
  ncclComm_t comms_[kRanks] = {};
};

TEST_F(DeviceApi, TeamsDescribeTheCommunicator) {
  for (int r = 0; r < kRanks; ++r) {
    ncclTeam world = ncclTeamWorld(comms_[r]);
    EXPECT_EQ(world.nRanks, kRanks);
    EXPECT_EQ(world.rank, r);
    EXPECT_EQ(world.stride, 1);
    // Ranks of one host reach each other by load/store: the LSA team is the world, the rail team this rank.
    ncclTeam lsa = ncclTeamLsa(comms_[r]);
    EXPECT_EQ(lsa.nRanks, kRanks);
    EXPECT_EQ(lsa.rank, r);
    ncclTeam rail = ncclTeamRail(comms_[r]);
    EXPECT_EQ(rail.nRanks, 1);
    EXPECT_EQ(rail.rank, 0);
    for (int peer = 0; peer < kRanks; ++peer) {
      EXPECT_EQ(ncclTeamRankToWorld(comms_[r], world, peer), peer);
      EXPECT_EQ(ncclTeamRankToWorld(comms_[r], lsa, peer), peer);
      EXPECT_EQ(ncclTeamRankToLsa(comms_[r], lsa, peer), peer);
    }
    EXPECT_EQ(ncclTeamRankToWorld(comms_[r], rail, 0), r);
    // Team arithmetic (inline, host and device).
    EXPECT_EQ(ncclTeamRankToTeam(lsa, world, (r + 1) % kRanks), (r + 1) % kRanks);
    EXPECT_FALSE(ncclTeamRankIsMember(rail, world, (r + 1) % kRanks));
    ncclTeam inner = ncclTeamInnerFactor(world, 1), outer = ncclTeamOuterFactor(world, 1);
    EXPECT_EQ(inner.nRanks, 1);
    EXPECT_EQ(outer.nRanks, kRanks);
    EXPECT_EQ(outer.rank, r);
  }
  ncclTeam none = ncclTeamWorld(nullptr);
  EXPECT_EQ(none.nRanks, 0);
}

TEST_F(DeviceApi, DeviceCommunicatorsNeedTheSimBackend) {
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 2;
  ncclDevComm devComm{};
  EXPECT_EQ(ncclDevCommCreate(comms_[0], &reqs, &devComm), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comms_[0])).find("TUTTI_DEVICE=sim"), std::string::npos)
      << ncclGetLastError(comms_[0]);
  EXPECT_EQ(ncclDevCommCreate(comms_[0], nullptr, &devComm), ncclInvalidArgument);
  ncclDevCommRequirements noInit{};
  EXPECT_EQ(ncclDevCommCreate(comms_[0], &noInit, &devComm), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comms_[0])).find("NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER"), std::string::npos);
  EXPECT_EQ(ncclDevCommDestroy(comms_[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclDevCommDestroy(comms_[0], &devComm), ncclInvalidArgument) << "never created";
  EXPECT_EQ(ncclDevCommCreate(nullptr, &reqs, &devComm), ncclInvalidArgument);
}

TEST(DeviceApiNoComm, LsaBarrierRequirementSizesItsBuffer) {
  ncclLsaBarrierHandle_t handle{7, 0};
  ncclDevResourceRequirements_t req;
  ASSERT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam_t{4, 1, 1}, 3, &handle, &req), ncclSuccess);
  EXPECT_EQ(req.bufferSize, 3u * (4 + 1) * sizeof(uint32_t));  // an arrival word per rank and an epoch, per barrier
  EXPECT_EQ(req.outBufferHandle, &handle.bufHandle);
  EXPECT_EQ(handle.nBarriers, 3);
  EXPECT_EQ(req.next, nullptr);
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam_t{4, 1, 1}, 1, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam_t{0, 0, 1}, 1, &handle, &req), ncclInvalidArgument);
  // LL all-to-all: per block a header line and two banks of slots, 16 bytes each.
  ncclLLA2AHandle_t a2a;
  ASSERT_EQ(ncclLLA2ACreateRequirement(3, 8, &a2a, &req), ncclSuccess);
  EXPECT_EQ(req.bufferSize, 3u * (1 + 2 * 8) * 16);
  EXPECT_EQ(req.outBufferHandle, &a2a.bufHandle);
  EXPECT_EQ(a2a.nSlots, 8);
  EXPECT_EQ(ncclLLA2ACalcSlots(5, 12), 10) << "two 8-byte lines per 12-byte element";
  EXPECT_EQ(ncclLLA2ACreateRequirement(1, -1, &a2a, &req), ncclInvalidArgument);
}

TEST_F(DeviceApi, PropertiesDescribeTheCommunicatorUpToTheCallersSize) {
  for (int r = 0; r < kRanks; ++r) {
    ncclCommProperties p{};  // as NCCL_COMM_PROPERTIES_INITIALIZER sets it
    p.size = sizeof p;
    p.magic = NCCL_API_MAGIC;
    p.version = NCCL_VERSION_CODE;
    p.ginType = p.railedGinType = static_cast<ncclGinType_t>(99);
    p.deviceApiSupport = p.hostRmaSupport = true;
    ASSERT_EQ(ncclCommQueryProperties(comms_[r], &p), ncclSuccess) << ncclGetLastError(comms_[r]);
    EXPECT_EQ(p.rank, r);
    EXPECT_EQ(p.nRanks, kRanks);
    EXPECT_FALSE(p.deviceApiSupport);  // the host backend runs no kernels (the sim backend says true)
    EXPECT_FALSE(p.multimemSupport);
    EXPECT_TRUE(p.hostRmaSupport);  // the host backend has ncclPutSignal / ncclSignal / ncclWaitSignal
    EXPECT_EQ(p.ginType, 0);
    EXPECT_EQ(p.railedGinType, 0);
    EXPECT_EQ(p.nLsaTeams, 1);  // one host
  }
  // A caller built against a 2.29.3 header: its struct ends after multimemSupport and the rest is not its.
  ncclCommProperties old{};
  old.size = offsetof(ncclCommProperties, ginType);
  old.magic = NCCL_API_MAGIC;
  old.version = NCCL_VERSION(2, 29, 3);
  old.nLsaTeams = -7;
  ASSERT_EQ(ncclCommQueryProperties(comms_[1], &old), ncclSuccess);
  EXPECT_EQ(old.rank, 1);
  EXPECT_EQ(old.nLsaTeams, -7) << "a field past the caller's size was written";

  ncclCommProperties bad{};
  bad.size = sizeof bad;
  EXPECT_EQ(ncclCommQueryProperties(comms_[0], &bad), ncclInvalidUsage) << "no NCCL_COMM_PROPERTIES_INITIALIZER";
  EXPECT_EQ(ncclCommQueryProperties(comms_[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommQueryProperties(nullptr, &bad), ncclInvalidArgument);
}

TEST(DeviceApiNoComm, WindowPointersOfNoWindowAreRefusedWithAMessage) {
  void* ptr = nullptr;
  EXPECT_EQ(ncclGetPeerDevicePointer(nullptr, 0, 0, &ptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("not a window"), std::string::npos);
  EXPECT_EQ(ncclGetLsaDevicePointer(nullptr, 0, 0, &ptr), ncclInvalidArgument);
  EXPECT_EQ(ptr, nullptr);
}

TEST_F(DeviceApi, WindowPointersArePeersBuffersAsMappedHere) {
  std::vector<std::vector<char>> bufs(kRanks, std::vector<char>(4096));
  ncclWindow_t wins[kRanks] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclCommWindowRegister(comms_[r], bufs[r].data(), 4096, &wins[r], 0), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    for (int p = 0; p < kRanks; ++p) {
      void* ptr = nullptr;
      ASSERT_EQ(ncclGetPeerDevicePointer(wins[r], 100, p, &ptr), ncclSuccess) << ncclGetLastError(nullptr);
      EXPECT_EQ(ptr, bufs[p].data() + 100);  // ranks of one process: the peer's own address
    }
    void* lsa = nullptr;
    ASSERT_EQ(ncclGetLsaDevicePointer(wins[r], 8, (r + 1) % kRanks, &lsa), ncclSuccess);
    EXPECT_EQ(lsa, bufs[(r + 1) % kRanks].data() + 8);  // LSA rank = world rank: one host
    void* ptr = nullptr;
    EXPECT_EQ(ncclGetPeerDevicePointer(wins[r], 4096, 0, &ptr), ncclInvalidArgument);  // past the end
    EXPECT_EQ(ncclGetPeerDevicePointer(wins[r], 0, kRanks, &ptr), ncclInvalidArgument);
    EXPECT_EQ(ncclGetLsaDevicePointer(wins[r], 0, kRanks, &ptr), ncclInvalidArgument);  // past the LSA team
  }
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ncclCommWindowDeregister(comms_[r], wins[r]), ncclSuccess);
}

TEST(DeviceApiNoComm, LLA2ASlotsCountEightBytePayloadWords) {
  EXPECT_EQ(ncclLLA2ACalcSlots(10, 4), 10);
  EXPECT_EQ(ncclLLA2ACalcSlots(10, 8), 10);
  EXPECT_EQ(ncclLLA2ACalcSlots(10, 9), 20);
  EXPECT_EQ(ncclLLA2ACalcSlots(3, 32), 12);
  EXPECT_EQ(ncclLLA2ACalcSlots(-1, 8), 0);
}

// Whether an error (a refused ncclDevCommCreate) is logged as a warning right now.
bool errorIsLogged() {
  testing::internal::CaptureStderr();
  EXPECT_EQ(ncclDevCommCreate(nullptr, nullptr, nullptr), ncclInvalidArgument);
  return testing::internal::GetCapturedStderr().find("NCCL WARN") != std::string::npos;
}

TEST(DeviceApiNoComm, ResetDebugInitRereadsTheEnvironment) {
  unsetenv("NCCL_DEBUG");
  ncclResetDebugInitInternal();
  EXPECT_FALSE(errorIsLogged());
  setenv("NCCL_DEBUG", "WARN", 1);
  EXPECT_FALSE(errorIsLogged()) << "the settings are read once, until a reset";
  ncclResetDebugInitInternal();
  EXPECT_TRUE(errorIsLogged());
  unsetenv("NCCL_DEBUG");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  ncclResetDebugInit();
#pragma GCC diagnostic pop
  EXPECT_FALSE(errorIsLogged());
}

}  // namespace
