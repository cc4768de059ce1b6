// Kernels written against NCCL's device API (devapi_kernels.h), run on the sim backend: an AllReduce that reads every LSA peer's send window and writes the sum to every peer's receive
// window between LSA barriers, and an AlltoAll of GIN puts with signals between world barriers. Every
// element is checked, over several launches (barrier epochs and signal values carry over).
//
// The kernels are compiled by the host compiler for the CPU SIMT emulator (TUTTI_SIMT_EMULATOR); the same
// source is compiled with nvcc for sm_90 by devapi_kernels.cu where the build has CUDA.
#include <gtest/gtest.h>
#include <nccl.h>
#include <nccl_device.h>
#include <tutti.h>

#include "device/runtime.h"
#include "devapi_kernels.h"
#include "../common/forked_ranks.h"

#include <cstdio>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

// The emulator's kernel entry points.
void allReduceLsaKernel(const void* p) { allReduceLsa(*static_cast<const KernelArgs*>(p)); }
void alltoAllGinKernel(const void* p) { alltoAllGin(*static_cast<const KernelArgs*>(p)); }
void barrierWithTimeoutKernel(const void* p) { barrierWithTimeout(*static_cast<const TimeoutArgs*>(p)); }
void llAlltoAllKernel(const void* p) { llAlltoAll(*static_cast<const LlArgs*>(p)); }
void ginBarrierRoundKernel(const void* p) { ginBarrierRound(*static_cast<const LlArgs*>(p)); }

template <typename Args>
ncclResult_t launch(void (*kernel)(const void*), const Args& args, int grid, cudaStream_t s) {
  tutti::rt::KernelLaunch k;
  k.fn = reinterpret_cast<const void*>(kernel);
  k.grid = grid;
  k.block = 64;
  k.args = &args;
  k.argBytes = sizeof args;
  return tutti::rt::simRuntime()->launchKernel(k, s);
}

float sendValue(int rank, size_t i, int it) { return static_cast<float>(rank * 1000 + static_cast<int>(i % 997) + it); }

#define DEV_OK(call)                                                                                    \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    if (r_ != ncclSuccess) return std::string(#call) + ": " + ncclGetLastError(nullptr);                \
  } while (0)

std::vector<std::string> onRanks(int n, const std::function<std::string(ncclComm_t, int)>& body) {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess) {
        errors[r] = std::string("init: ") + ncclGetLastError(nullptr);
        return;
      }
      errors[r] = body(comm, r);
      if (ncclCommDestroy(comm) != ncclSuccess && errors[r].empty()) errors[r] = "destroy failed";
    });
  for (auto& t : threads) t.join();
  std::vector<std::string> failed;
  for (int r = 0; r < n; ++r)
    if (!errors[r].empty()) failed.push_back("rank " + std::to_string(r) + ": " + errors[r]);
  return failed;
}

// One rank's part: windows and a device communicator, then three rounds of both kernels, checked.
std::string runRank(ncclComm_t comm, int rank, int n) {
  constexpr int kGrid = 2;
  constexpr size_t kCount = 3000;  // elements per rank; n * kCount per AlltoAll buffer
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  DEV_OK(ncclCommQueryProperties(comm, &props));
  if (!props.deviceApiSupport) return "deviceApiSupport is false on the sim backend";
  if (ncclTeamLsa(comm).nRanks != n) return "the LSA team is not every rank of this host";
  const size_t bytes = n * kCount * sizeof(float);
  void *send = nullptr, *recv = nullptr;
  DEV_OK(ncclMemAlloc(&send, bytes));
  DEV_OK(ncclMemAlloc(&recv, bytes));
  ncclWindow_t sendwin = nullptr, recvwin = nullptr;
  DEV_OK(ncclCommWindowRegister(comm, send, bytes, &sendwin, NCCL_WIN_COLL_SYMMETRIC));
  DEV_OK(ncclCommWindowRegister(comm, recv, bytes, &recvwin, NCCL_WIN_COLL_SYMMETRIC));
  // LL all-to-all sessions and GIN barriers: a window for their results, and their requirements.
  void* auxBuf = nullptr;
  DEV_OK(ncclMemAlloc(&auxBuf, 4096));
  std::memset(auxBuf, 0, 4096);
  ncclWindow_t aux = nullptr;
  DEV_OK(ncclCommWindowRegister(comm, auxBuf, 4096, &aux, NCCL_WIN_COLL_SYMMETRIC));
  ncclLLA2AHandle llHandle{};
  ncclGinBarrierHandle ginBar{};
  ncclDevResourceRequirements llReq{}, barReq{};
  DEV_OK(ncclLLA2ACreateRequirement(kGrid, ncclLLA2ACalcSlots(n, sizeof(LlPair)), &llHandle, &llReq));
  DEV_OK(ncclGinBarrierCreateRequirement(comm, ncclTeamWorld(comm), 1, &ginBar, &barReq));
  llReq.next = &barReq;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = kGrid;
  reqs.barrierCount = kGrid;
  reqs.ginSignalCount = kGrid;
  reqs.worldGinBarrierCount = 1;
  reqs.resourceRequirementsList = &llReq;
  ncclDevComm devComm{};
  DEV_OK(ncclDevCommCreate(comm, &reqs, &devComm));
  if (devComm.rank != rank || devComm.nRanks != n || devComm.lsaSize != n || devComm.lsaRank != rank)
    return "the device communicator does not describe the rank";
  if (devComm.worldGinBarrier.nBarriers != 1 || llHandle.nSlots != 2 * n)
    return "the GIN barrier or LL all-to-all handle does not say what was asked";
  cudaStream_t s = nullptr;
  DEV_OK(tuttiStreamCreate(&s));
  auto* in = static_cast<float*>(send);
  auto* out = static_cast<float*>(recv);
  std::string error;
  for (int it = 0; it < 3 && error.empty(); ++it) {
    // AllReduce of the first kCount elements.
    for (size_t i = 0; i < kCount; ++i) in[i] = sendValue(rank, i, it);
    KernelArgs args{sendwin, recvwin, kCount, it, devComm};
    DEV_OK(launch(allReduceLsaKernel, args, kGrid, s));
    DEV_OK(tuttiStreamSynchronize(s));
    for (size_t i = 0; i < kCount && error.empty(); ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += sendValue(r, i, it);
      if (out[i] != want)
        error = "iteration " + std::to_string(it) + ": AllReduce element " + std::to_string(i) + " is " +
                std::to_string(out[i]) + ", expected " + std::to_string(want);
    }
    // Every rank has checked its result before anyone's next AllReduce writes into it: the AlltoAll's
    // barriers order that. AlltoAll: block p of the send buffer goes to peer p.
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < kCount; ++i) in[p * kCount + i] = sendValue(rank, i, it) + 0.5f * p;
    args = KernelArgs{sendwin, recvwin, kCount, it, devComm};
    DEV_OK(launch(alltoAllGinKernel, args, kGrid, s));
    DEV_OK(tuttiStreamSynchronize(s));
    for (int src = 0; src < n && error.empty(); ++src)
      for (size_t i = 0; i < kCount && error.empty(); ++i)
        if (out[src * kCount + i] != sendValue(src, i, it) + 0.5f * rank)
          error = "iteration " + std::to_string(it) + ": AlltoAll element " + std::to_string(i) + " from rank " +
                  std::to_string(src) + " is " + std::to_string(out[src * kCount + i]);
    // LL all-to-all epochs and a GIN barrier round; both count wrong values into aux.
    LlArgs ll{devComm, llHandle, ginBar, aux, it};
    DEV_OK(launch(llAlltoAllKernel, ll, kGrid, s));
    DEV_OK(launch(ginBarrierRoundKernel, ll, kGrid, s));
    DEV_OK(tuttiStreamSynchronize(s));
    for (int b = 0; b < 64 && error.empty(); ++b)
      if (static_cast<int*>(auxBuf)[b] != 0)
        error = "iteration " + std::to_string(it) + ": " + std::to_string(static_cast<int*>(auxBuf)[b]) +
                (b == 63 ? " wrong values after the GIN barrier" : " wrong LL all-to-all values in block " +
                 std::to_string(b));
    // Before the next iteration overwrites send and recv, every rank is done reading them.
    for (int p = 0; p < n; ++p) {
      DEV_OK(ncclSignal(p, 0, 0, 0, comm, nullptr));
    }
    for (int p = 0; p < n; ++p) {
      ncclWaitSignalDesc_t d{1, p, 0, 0};
      DEV_OK(ncclWaitSignal(1, &d, comm, nullptr));
    }
  }
  DEV_OK(tuttiStreamDestroy(s));
  DEV_OK(ncclDevCommDestroy(comm, &devComm));
  if (ncclDevCommDestroy(comm, &devComm) != ncclInvalidArgument) return "a second destroy was not refused";
  DEV_OK(ncclCommWindowDeregister(comm, aux));
  DEV_OK(ncclMemFree(auxBuf));
  DEV_OK(ncclCommWindowDeregister(comm, sendwin));
  DEV_OK(ncclCommWindowDeregister(comm, recvwin));
  DEV_OK(ncclMemFree(send));
  DEV_OK(ncclMemFree(recv));
  return error;
}

class DeviceApiSim : public ::testing::TestWithParam<int> {};

TEST_P(DeviceApiSim, LsaAllReduceAndGinAlltoAllKernels) {
  const int n = GetParam();
  auto failed = onRanks(n, [n](ncclComm_t comm, int rank) { return runRank(comm, rank, n); });
  for (auto& f : failed) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceApiSim, ::testing::Values(1, 2, 4));

// Ranks as processes: each rank's resource block and windows are mapped into the other processes.
TEST(DeviceApiSimProcesses, KernelsAcrossProcesses) {
  constexpr int n = 3;
  for (auto& f : tutti::itest::onForkedRanks(n, [](ncclComm_t comm, int rank) { return runRank(comm, rank, n); }))
    ADD_FAILURE() << f;
}

// One thread creates the device communicators of every rank inside a group (as nccl-tests does), and the
// caller's resource requirements get handles in every rank's block.
TEST(DeviceApiSimGroup, OneThreadCreatesEveryRanksDeviceCommunicator) {
  constexpr int n = 3;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess);
  std::vector<ncclDevComm> devComms(n);
  std::vector<ncclLsaBarrierHandle_t> handles(n);
  std::vector<ncclDevResourceRequirements_t> extra(n);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    ASSERT_EQ(ncclLsaBarrierCreateRequirement(ncclTeamLsa(comms[r]), 4, &handles[r], &extra[r]), ncclSuccess);
    reqs.resourceRequirementsList = &extra[r];
    reqs.lsaBarrierCount = 1;
    ASSERT_EQ(ncclDevCommCreate(comms[r], &reqs, &devComms[r]), ncclSuccess) << ncclGetLastError(nullptr);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(devComms[r].rank, r);
    EXPECT_EQ(handles[r].nBarriers, 4);
    EXPECT_EQ(handles[r].bufHandle, handles[0].bufHandle) << "the same layout on every rank";
    EXPECT_NE(handles[r].bufHandle, devComms[r].lsaBarrier.bufHandle);
    for (int p = 0; p < n; ++p) EXPECT_NE(devComms[r].resources[p], nullptr);
  }
  // Misuse: multimem, negative counts, a GIN barrier or LL all-to-all of impossible size, a team that is
  // not one.
  ncclDevCommRequirements bad = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  bad.lsaMultimem = true;
  ncclDevComm unused{};
  EXPECT_EQ(ncclDevCommCreate(comms[0], &bad, &unused), ncclInvalidUsage);
  bad = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  bad.worldGinBarrierCount = -1;
  EXPECT_EQ(ncclDevCommCreate(comms[0], &bad, &unused), ncclInvalidArgument);
  ncclGinBarrierHandle gb{};
  ncclLLA2AHandle ll{};
  ncclDevResourceRequirements req{};
  EXPECT_EQ(ncclGinBarrierCreateRequirement(comms[0], ncclTeamWorld(comms[0]), -1, &gb, &req), ncclInvalidArgument);
  EXPECT_EQ(ncclGinBarrierCreateRequirement(comms[0], ncclTeam{0, 0, 1}, 1, &gb, &req), ncclInvalidArgument);
  EXPECT_EQ(ncclGinBarrierCreateRequirement(comms[0], ncclTeamWorld(comms[0]), 1, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(ncclLLA2ACreateRequirement(-1, 4, &ll, &req), ncclInvalidArgument);
  EXPECT_EQ(ncclLLA2ACreateRequirement(2, 4, &ll, nullptr), ncclInvalidArgument);
  ASSERT_EQ(ncclLLA2ACreateRequirement(2, 4, &ll, &req), ncclSuccess);
  EXPECT_EQ(req.bufferSize, 2u * (1 + 2 * 4) * 16) << "a header line and two banks of slots per block";
  EXPECT_EQ(ll.nSlots, 4);
  for (int r = 0; r < n; ++r) EXPECT_EQ(ncclDevCommDestroy(comms[r], &devComms[r]), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// A device-side wait never hangs silently: with a time limit it returns ncclTimeout to every thread of the
// group; without one, revoking (or aborting) the communicator ends it.
class DeviceApiSimFailures : public ::testing::Test {
 protected:
  static constexpr int kRanks = 2, kThreads = 64;
  void SetUp() override {
    ASSERT_EQ(ncclCommInitAll(comms_, kRanks, nullptr), ncclSuccess);
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = 1;
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(ncclDevCommCreate(comms_[r], &reqs, &dev_[r]), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_EQ(tuttiStreamCreate(&stream_), ncclSuccess);
  }
  void TearDown() override {
    EXPECT_EQ(tuttiStreamDestroy(stream_), ncclSuccess);
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ncclDevCommDestroy(comms_[r], &dev_[r]), ncclSuccess);
    for (ncclComm_t c : comms_) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  }
  // Rank 0 alone enters barrier 0: rank 1 never comes.
  ncclResult_t launchAlone(uint64_t timeoutCycles) {
    TimeoutArgs args{dev_[0], timeoutCycles, results_};
    tutti::rt::KernelLaunch k;
    k.fn = reinterpret_cast<const void*>(barrierWithTimeoutKernel);
    k.grid = 1;
    k.block = kThreads;
    k.args = &args;
    k.argBytes = sizeof args;
    return tutti::rt::simRuntime()->launchKernel(k, stream_);
  }
  ncclComm_t comms_[kRanks] = {};
  ncclDevComm dev_[kRanks] = {};
  cudaStream_t stream_ = nullptr;
  int results_[kThreads] = {};
};

TEST_F(DeviceApiSimFailures, ABarrierWithATimeLimitReturnsTimeoutToEveryThread) {
  ASSERT_EQ(launchAlone(20 * 1000 * 1000), ncclSuccess);  // 20 ms (nanoseconds on the emulator)
  ASSERT_EQ(tuttiStreamSynchronize(stream_), ncclSuccess);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(results_[t], ncclTimeout) << "thread " << t;
}

TEST_F(DeviceApiSimFailures, RevokingTheCommunicatorEndsAWaitWithoutLimit) {
  ASSERT_EQ(launchAlone(0), ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(tuttiStreamQuery(stream_), ncclInProgress) << "the kernel should still wait for rank 1";
  ASSERT_EQ(ncclCommRevoke(comms_[0], NCCL_REVOKE_DEFAULT), ncclSuccess);
  ASSERT_EQ(tuttiStreamSynchronize(stream_), ncclSuccess);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(results_[t], 1) << "thread " << t << " did not leave the barrier";
}

}  // namespace
