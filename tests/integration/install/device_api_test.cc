// The host functions of NCCL's device API (nccl_device.h) that Tutti exports for binary compatibility: the
// teams answer from the communicator, the rest fail with ncclInvalidUsage and a message, never crash.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <string>

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
