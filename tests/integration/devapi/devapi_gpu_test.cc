// NCCL's device API on a GPU (`device: cuda`): the kernels of devapi_kernels.h, compiled by nvcc
// (devapi_kernels.cu), run on windows and device communicators made by the cuda backend, ranks as threads
// of one GPU. The same steps as test_devapi_sim, with device memory filled and read through copies. Without
// a usable GPU every test skips and says why.
#include <gtest/gtest.h>
#include <nccl.h>
#include <nccl_device.h>

#include "devapi_launch.h"

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string unavailable() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no usable GPU: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  if (n == 0) return "no usable GPU: the driver reports no CUDA device";
  return "";
}

#define SKIP_WITHOUT_GPU()                                                                         \
  do {                                                                                             \
    const std::string why = unavailable();                                                         \
    if (!why.empty()) GTEST_SKIP() << why << " (test_devapi_sim runs these kernels on the sim backend)"; \
  } while (0)

struct CudaBackend {
  CudaBackend() { setenv("TUTTI_DEVICE", "cuda", 1); }
  ~CudaBackend() { unsetenv("TUTTI_DEVICE"); }
};

#define DEV_OK(call)                                                                                    \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    if (r_ != ncclSuccess) return std::string(#call) + ": " + ncclGetLastError(nullptr);                \
  } while (0)
#define CUDA_OK(call)                                                                                   \
  do {                                                                                                  \
    cudaError_t e_ = (call);                                                                            \
    if (e_ != cudaSuccess) return std::string(#call) + ": " + cudaGetErrorString(e_);                   \
  } while (0)

float sendValue(int rank, size_t i, int it) { return static_cast<float>(rank * 1000 + static_cast<int>(i % 997) + it); }

std::vector<std::string> onRanks(int n, const std::function<std::string(ncclComm_t, int)>& body) {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      if (cudaSetDevice(0) != cudaSuccess) {
        errors[r] = "cudaSetDevice(0) failed";
        return;
      }
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

constexpr size_t kCount = 3000;

// A rank's host buffers, pinned: a copy between pageable memory and the device waits on the host for the
// stream, kernels included, and can hold up other threads' launches meanwhile, kernels that wait for this
// rank's among them. Allocated before the ranks start and freed after they end (cudaMallocHost and cudaFreeHost
// may wait for the device).
struct PinnedBufs {
  float* in = nullptr;
  float* out = nullptr;
  int* errors = nullptr;  // 64
};

// One rank: windows and a device communicator, then three rounds of the LSA AllReduce, the GIN AlltoAll,
// the LL all-to-all and the GIN barrier kernels, every element checked.
std::string runRank(ncclComm_t comm, int rank, int n, const PinnedBufs& h) {
  constexpr int kGrid = 2, kBlock = 64;
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  DEV_OK(ncclCommQueryProperties(comm, &props));
  if (!props.deviceApiSupport) return "deviceApiSupport is false on the cuda backend";
  if (ncclTeamLsa(comm).nRanks != n) return "the LSA team is not every rank of this host";
  const size_t bytes = n * kCount * sizeof(float);
  void *send = nullptr, *recv = nullptr;
  DEV_OK(ncclMemAlloc(&send, bytes));
  DEV_OK(ncclMemAlloc(&recv, bytes));
  ncclWindow_t sendwin = nullptr, recvwin = nullptr;
  DEV_OK(ncclCommWindowRegister(comm, send, bytes, &sendwin, NCCL_WIN_COLL_SYMMETRIC));
  DEV_OK(ncclCommWindowRegister(comm, recv, bytes, &recvwin, NCCL_WIN_COLL_SYMMETRIC));
  void* auxBuf = nullptr;
  DEV_OK(ncclMemAlloc(&auxBuf, 4096));
  CUDA_OK(cudaMemset(auxBuf, 0, 4096));
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
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* in = h.in;
  float* out = h.out;
  std::string error;
  for (int it = 0; it < 3 && error.empty(); ++it) {
    for (size_t i = 0; i < kCount; ++i) in[i] = sendValue(rank, i, it);
    CUDA_OK(cudaMemcpyAsync(send, in, kCount * sizeof(float), cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaStreamSynchronize(s));
    // Every rank's input is in place before any kernel reads it: the kernel's first barrier orders that.
    KernelArgs args{sendwin, recvwin, kCount, it, devComm};
    CUDA_OK(launchAllReduceLsa(args, kGrid, kBlock, s));
    CUDA_OK(cudaMemcpyAsync(out, recv, kCount * sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    for (size_t i = 0; i < kCount && error.empty(); ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += sendValue(r, i, it);
      if (out[i] != want)
        error = "iteration " + std::to_string(it) + ": AllReduce element " + std::to_string(i) + " is " +
                std::to_string(out[i]) + ", expected " + std::to_string(want);
    }
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < kCount; ++i) in[p * kCount + i] = sendValue(rank, i, it) + 0.5f * p;
    CUDA_OK(cudaMemcpyAsync(send, in, bytes, cudaMemcpyHostToDevice, s));
    CUDA_OK(launchAlltoAllGin(args, kGrid, kBlock, s));
    CUDA_OK(cudaMemcpyAsync(out, recv, bytes, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    for (int src = 0; src < n && error.empty(); ++src)
      for (size_t i = 0; i < kCount && error.empty(); ++i)
        if (out[src * kCount + i] != sendValue(src, i, it) + 0.5f * rank)
          error = "iteration " + std::to_string(it) + ": AlltoAll element " + std::to_string(i) + " from rank " +
                  std::to_string(src) + " is " + std::to_string(out[src * kCount + i]);
    // LL all-to-all epochs and a GIN barrier round; both count wrong values into aux.
    const LlArgs ll{devComm, llHandle, ginBar, aux, it};
    CUDA_OK(launchLlAlltoAll(ll, kGrid, kBlock, s));
    CUDA_OK(launchGinBarrierRound(ll, kGrid, kBlock, s));
    int* errors = h.errors;
    CUDA_OK(cudaMemcpyAsync(errors, auxBuf, 64 * sizeof(int), cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    for (int b = 0; b < 64 && error.empty(); ++b)
      if (errors[b] != 0)
        error = "iteration " + std::to_string(it) + ": " + std::to_string(errors[b]) +
                (b == 63 ? " wrong values after the GIN barrier" : " wrong LL all-to-all values in block " +
                 std::to_string(b));
    // Before the next iteration overwrites send and recv, every rank is done reading them (host signals,
    // device waits on the stream).
    for (int p = 0; p < n; ++p) DEV_OK(ncclSignal(p, 0, 0, 0, comm, s));
    for (int p = 0; p < n; ++p) {
      ncclWaitSignalDesc_t d{1, p, 0, 0};
      DEV_OK(ncclWaitSignal(1, &d, comm, s));
    }
    CUDA_OK(cudaStreamSynchronize(s));
    ncclResult_t async = ncclSuccess;
    DEV_OK(ncclCommGetAsyncError(comm, &async));
    if (async != ncclSuccess) return std::string("asynchronous error: ") + ncclGetLastError(comm);
  }
  CUDA_OK(cudaStreamDestroy(s));
  DEV_OK(ncclDevCommDestroy(comm, &devComm));
  DEV_OK(ncclCommWindowDeregister(comm, aux));
  DEV_OK(ncclMemFree(auxBuf));
  DEV_OK(ncclCommWindowDeregister(comm, sendwin));
  DEV_OK(ncclCommWindowDeregister(comm, recvwin));
  DEV_OK(ncclMemFree(send));
  DEV_OK(ncclMemFree(recv));
  return error;
}

class DeviceApiGpu : public ::testing::TestWithParam<int> {};

TEST_P(DeviceApiGpu, LsaAllReduceAndGinAlltoAllKernels) {
  SKIP_WITHOUT_GPU();
  CudaBackend backend;
  const int n = GetParam();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(loadDevapiKernels(), cudaSuccess);
  std::vector<PinnedBufs> bufs(n);
  for (PinnedBufs& b : bufs) {
    ASSERT_EQ(cudaMallocHost(&b.in, n * kCount * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMallocHost(&b.out, n * kCount * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMallocHost(&b.errors, 64 * sizeof(int)), cudaSuccess);
  }
  for (auto& f : onRanks(n, [n, &bufs](ncclComm_t comm, int rank) { return runRank(comm, rank, n, bufs[rank]); }))
    ADD_FAILURE() << f;
  for (PinnedBufs& b : bufs)
    for (void* p : {static_cast<void*>(b.in), static_cast<void*>(b.out), static_cast<void*>(b.errors)}) cudaFreeHost(p);
}

INSTANTIATE_TEST_SUITE_P(OneGpu, DeviceApiGpu, ::testing::Values(1, 2, 4));

// A device-side barrier that cannot complete: with a time limit every thread gets ncclTimeout; without
// one, revoking the communicator ends it (the abort word is in pinned memory the GPU polls).
TEST(DeviceApiGpuFailures, TimeoutAndRevokeEndABarrierThatCannotComplete) {
  SKIP_WITHOUT_GPU();
  CudaBackend backend;
  constexpr int kRanks = 2, kThreads = 64;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(loadDevapiKernels(), cudaSuccess);
  ncclComm_t comms[kRanks] = {};
  int devs[kRanks] = {0, 0};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  ncclDevComm dev[kRanks] = {};
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(ncclDevCommCreate(comms[r], &reqs, &dev[r]), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  int* results = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&results), kThreads * sizeof(int), cudaHostAllocMapped), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  // Rank 0 alone enters barrier 0, with a limit of about 20 ms of GPU cycles.
  std::fill_n(results, kThreads, -1);
  ASSERT_EQ(launchBarrierWithTimeout(TimeoutArgs{dev[0], 40ull * 1000 * 1000, results}, kThreads, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(results[t], ncclTimeout) << "thread " << t;
  // Without a limit: still waiting after 100 ms, done once rank 0's communicator is revoked.
  std::fill_n(results, kThreads, -1);
  ASSERT_EQ(launchBarrierWithTimeout(TimeoutArgs{dev[0], 0, results}, kThreads, s), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady) << "the kernel should still wait for rank 1";
  ASSERT_EQ(ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(results[t], 1) << "thread " << t << " did not leave the barrier";
  cudaStreamDestroy(s);
  cudaFreeHost(results);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ncclDevCommDestroy(comms[r], &dev[r]), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

}  // namespace
