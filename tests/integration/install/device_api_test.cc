// The host functions of NCCL's device API (nccl_device.h) that Tutti exports for binary compatibility: the
// teams answer from the communicator, the rest fail with ncclInvalidUsage and a message, never crash.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

// As nccl_device/core.h, ll_a2a.h and lsa_barrier.h declare them (the types a test needs, by value).
extern "C" {
struct ncclTeam {
  int nRanks, rank, stride;
};
struct ncclDevComm;
struct ncclDevCommRequirements;
struct ncclDevResourceRequirements;
ncclResult_t ncclDevCommCreate(ncclComm_t, const ncclDevCommRequirements*, ncclDevComm*);
ncclResult_t ncclDevCommDestroy(ncclComm_t, const ncclDevComm*);
ncclTeam ncclTeamWorld(ncclComm_t);
ncclTeam ncclTeamLsa(ncclComm_t);
ncclTeam ncclTeamRail(ncclComm_t);
int ncclTeamRankToWorld(ncclComm_t, ncclTeam, int);
int ncclTeamRankToLsa(ncclComm_t, ncclTeam, int);
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam, int, void*, ncclDevResourceRequirements*);
void ncclResetDebugInitInternal(void);
// NCCL 2.29+: communicator properties, window pointers.
struct ncclCommProperties {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank, nRanks, cudaDev, nvmlDev;
  bool deviceApiSupport, multimemSupport;
  int ginType, nLsaTeams;
  bool hostRmaSupport;
  int railedGinType;
};
ncclResult_t ncclCommQueryProperties(ncclComm_t, ncclCommProperties*);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void**);
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t, size_t, int, void**);
}

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
    // No load/store peers through the device API: the LSA team is the rank alone, the rail team the world.
    ncclTeam lsa = ncclTeamLsa(comms_[r]);
    EXPECT_EQ(lsa.nRanks, 1);
    EXPECT_EQ(lsa.rank, 0);
    ncclTeam rail = ncclTeamRail(comms_[r]);
    EXPECT_EQ(rail.nRanks, kRanks);
    EXPECT_EQ(rail.rank, r);
    for (int peer = 0; peer < kRanks; ++peer) EXPECT_EQ(ncclTeamRankToWorld(comms_[r], world, peer), peer);
    EXPECT_EQ(ncclTeamRankToWorld(comms_[r], rail, (r + 1) % kRanks), (r + 1) % kRanks);
    EXPECT_EQ(ncclTeamRankToLsa(comms_[r], lsa, 0), 0);
  }
  ncclTeam none = ncclTeamWorld(nullptr);
  EXPECT_EQ(none.nRanks, 0);
}

TEST_F(DeviceApi, DeviceCommunicatorsAreRefusedWithAMessage) {
  ncclDevComm* devComm = nullptr;
  EXPECT_EQ(ncclDevCommCreate(comms_[0], nullptr, devComm), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comms_[0])).find("not supported"), std::string::npos)
      << ncclGetLastError(comms_[0]);
  EXPECT_EQ(ncclDevCommDestroy(comms_[0], nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(ncclTeamLsa(comms_[0]), 1, nullptr, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclDevCommCreate(nullptr, nullptr, nullptr), ncclInvalidArgument);
}

TEST_F(DeviceApi, PropertiesDescribeTheCommunicatorUpToTheCallersSize) {
  for (int r = 0; r < kRanks; ++r) {
    ncclCommProperties p{};  // as NCCL_COMM_PROPERTIES_INITIALIZER sets it
    p.size = sizeof p;
    p.magic = NCCL_API_MAGIC;
    p.version = NCCL_VERSION_CODE;
    p.ginType = p.railedGinType = 99;
    p.deviceApiSupport = p.hostRmaSupport = true;
    ASSERT_EQ(ncclCommQueryProperties(comms_[r], &p), ncclSuccess) << ncclGetLastError(comms_[r]);
    EXPECT_EQ(p.rank, r);
    EXPECT_EQ(p.nRanks, kRanks);
    EXPECT_FALSE(p.deviceApiSupport);
    EXPECT_FALSE(p.multimemSupport);
    EXPECT_TRUE(p.hostRmaSupport);  // the host backend has ncclPutSignal / ncclSignal / ncclWaitSignal
    EXPECT_EQ(p.ginType, 0);
    EXPECT_EQ(p.railedGinType, 0);
    EXPECT_EQ(p.nLsaTeams, kRanks);
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
    ASSERT_EQ(ncclGetLsaDevicePointer(wins[r], 8, 0, &lsa), ncclSuccess);
    EXPECT_EQ(lsa, bufs[r].data() + 8);
    void* ptr = nullptr;
    EXPECT_EQ(ncclGetPeerDevicePointer(wins[r], 4096, 0, &ptr), ncclInvalidArgument);  // past the end
    EXPECT_EQ(ncclGetPeerDevicePointer(wins[r], 0, kRanks, &ptr), ncclInvalidArgument);
    EXPECT_EQ(ncclGetLsaDevicePointer(wins[r], 0, 1, &ptr), ncclInvalidArgument);  // LSA teams of one rank
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
