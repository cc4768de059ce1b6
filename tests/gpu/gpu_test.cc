// The collectives on a GPU (`device: cuda`): CUDA memory (cudaMalloc, cudaMallocManaged, ncclMemAlloc),
// user streams, CUDA graphs, 1-4 ranks on one GPU as threads. With TUTTI_GPU_CHECK_SIM=1 the same steps run
// on the sim backend (its device memory, host streams and capture), so they are known to work before a GPU
// is at hand. Without either, each test skips and says why.
#include <nccl.h>
#include <nccl_device.h>
#include <tutti.h>

#include <cuda_runtime.h>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

bool simMode() {
  const char* v = std::getenv("TUTTI_GPU_CHECK_SIM");
  return v && std::strcmp(v, "1") == 0;
}

// Why the tests cannot run here ("" when they can).
std::string unavailable() {
  if (simMode()) return "";
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no usable GPU: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  if (n == 0) return "no usable GPU: the driver reports no CUDA device";
  return "";
}

#define SKIP_WITHOUT_DEVICE()                                              \
  do {                                                                     \
    const std::string why = unavailable();                                 \
    if (!why.empty()) GTEST_SKIP() << why << " (TUTTI_GPU_CHECK_SIM=1 runs these steps on the sim backend)"; \
  } while (0)

// Memory, copies and streams of the backend under test.
enum class Mem { Device, Managed, NcclMemAlloc };

struct Backend {
  bool sim = simMode();
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  ~Backend() {
    for (void* p : staging_) cudaFreeHost(p);
  }
  // Pinned host buffers of `bytes` for up to `threads` rank threads, made now (before the ranks start: a
  // cudaMallocHost then would wait for peers' kernels). A thread's copies then go through the first it takes:
  // a copy from or to pageable memory can wait for the device while other ranks' kernels spin for this one
  // (README: several ranks in one process). Without it, copies are plain cudaMemcpy calls.
  void stage(int threads, size_t bytes) {
    if (sim) return;
    for (int i = 0; i < threads; ++i) {
      void* p = nullptr;
      ASSERT_EQ(cudaMallocHost(&p, bytes), cudaSuccess);
      staging_.push_back(p);
    }
    stagingBytes_ = bytes;
  }
  void* alloc(size_t bytes, Mem kind) {
    void* p = nullptr;
    if (kind == Mem::NcclMemAlloc || sim) {
      EXPECT_EQ(ncclMemAlloc(&p, bytes), ncclSuccess) << ncclGetLastError(nullptr);
    } else if (kind == Mem::Managed) {
      EXPECT_EQ(cudaMallocManaged(&p, bytes), cudaSuccess);
    } else {
      EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    }
    return p;
  }
  void free(void* p, Mem kind) {
    if (kind == Mem::NcclMemAlloc || sim) ncclMemFree(p);
    else cudaFree(p);
  }
  // Done when it returns: cudaMemcpy from pageable memory may return before the copy reaches the device (it
  // runs on the legacy stream, which the tests' non-blocking streams do not wait for), so wait for it.
  void toDevice(void* dst, const void* src, size_t bytes) {
    if (sim) {
      std::memcpy(dst, src, bytes);
      return;
    }
    if (staged(dst, src, bytes, /*toDevice=*/true)) return;
    ASSERT_EQ(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  }
  void toHost(void* dst, const void* src, size_t bytes) {
    if (sim) {
      std::memcpy(dst, src, bytes);
      return;
    }
    if (staged(dst, src, bytes, /*toDevice=*/false)) return;
    ASSERT_EQ(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), cudaSuccess);
  }
  cudaStream_t stream() {
    cudaStream_t s = nullptr;
    if (sim) EXPECT_EQ(tuttiStreamCreate(&s), ncclSuccess);
    else EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    return s;
  }
  ncclResult_t sync(cudaStream_t s) {
    if (sim) return tuttiStreamSynchronize(s);
    return cudaStreamSynchronize(s) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
  }
  void destroy(cudaStream_t s) {
    if (sim) tuttiStreamDestroy(s);
    else cudaStreamDestroy(s);
  }

 private:
  // A copy through the calling thread's pinned buffer, piece by piece; false (nothing copied) without one.
  bool staged(void* dst, const void* src, size_t bytes, bool toDevice) {
    char* pinned = ownStaging();
    if (!pinned) return false;
    for (size_t at = 0; at < bytes; at += stagingBytes_) {
      const size_t n = std::min(stagingBytes_, bytes - at);
      char* to = static_cast<char*>(dst) + at;
      const char* from = static_cast<const char*>(src) + at;
      if (toDevice) std::memcpy(pinned, from, n);
      EXPECT_EQ(cudaMemcpy(toDevice ? to : pinned, toDevice ? pinned : from, n, cudaMemcpyDefault), cudaSuccess);
      if (!toDevice) std::memcpy(to, pinned, n);
    }
    return true;
  }
  // The calling thread's staging buffer (taken at its first copy), or null when none is left.
  char* ownStaging() {
    std::lock_guard<std::mutex> lock(stagingMutex_);
    const auto me = std::this_thread::get_id();
    for (size_t i = 0; i < owners_.size(); ++i)
      if (owners_[i] == me) return static_cast<char*>(staging_[i]);
    if (owners_.size() == staging_.size()) return nullptr;
    owners_.push_back(me);
    return static_cast<char*>(staging_[owners_.size() - 1]);
  }
  std::vector<void*> staging_;
  size_t stagingBytes_ = 0;
  std::mutex stagingMutex_;
  std::vector<std::thread::id> owners_;
};

struct Env {
  explicit Env(const char* device) { setenv("TUTTI_DEVICE", device, 1); }
  ~Env() { unsetenv("TUTTI_DEVICE"); }
};

std::vector<ncclComm_t> initComms(int n) {
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devs(n, 0);  // every rank on GPU 0
  EXPECT_EQ(ncclCommInitAll(comms.data(), n, devs.data()), ncclSuccess) << ncclGetLastError(nullptr);
  return comms;
}

// Every collective on `nRanks` ranks of one GPU, one thread per rank, on user streams; results against host
// references.
void runMatrix(int nRanks, Mem mem) {
  Env env(simMode() ? "sim" : "cuda");
  Backend b;
  std::vector<ncclComm_t> comms = initComms(nRanks);
  ASSERT_EQ(static_cast<int>(comms.size()), nRanks);
  constexpr size_t kCount = 3 * 1024 + 7;
  std::vector<std::string> failures(nRanks);
  // Allocated before any rank runs, freed after all are done (cudaMalloc and cudaFree may wait for the device).
  std::vector<float*> ins(nRanks), outs(nRanks);
  for (int r = 0; r < nRanks; ++r) {
    ins[r] = static_cast<float*>(b.alloc(kCount * nRanks * sizeof(float), mem));
    outs[r] = static_cast<float*>(b.alloc(kCount * nRanks * sizeof(float), mem));
  }
  // Streams and pinned copy buffers too: a rank thread makes no CUDA call that may wait for the device.
  std::vector<cudaStream_t> streams(nRanks);
  for (cudaStream_t& st : streams) st = b.stream();
  b.stage(nRanks, kCount * nRanks * sizeof(float));
  std::vector<std::thread> threads;
  for (int r = 0; r < nRanks; ++r) {
    threads.emplace_back([&, r] {
      if (!b.sim) cudaSetDevice(0);
      const size_t total = kCount * nRanks;
      float* in = ins[r];
      float* out = outs[r];
      cudaStream_t s = streams[r];
      std::vector<float> hin(total), hout(total);
      auto value = [](int rank, size_t i) { return float((rank + 1) * (i % 17)); };
      auto check = [&](const char* what, size_t n, const std::function<float(size_t)>& want) {
        b.toHost(hout.data(), out, n * sizeof(float));
        for (size_t i = 0; i < n; ++i)
          if (hout[i] != want(i)) {
            failures[r] += std::string(what) + ": element " + std::to_string(i) + " is " + std::to_string(hout[i]) +
                           ", want " + std::to_string(want(i)) + "; ";
            return;
          }
      };
      // Each operation starts from an output of sentinels (so a check cannot pass on an earlier result) and
      // must leave the communicator without an asynchronous error (a kernel that stopped early).
      const std::vector<float> sentinel(total, -1.0f);
      auto clearOut = [&] { b.toDevice(out, sentinel.data(), total * sizeof(float)); };
      auto run = [&](const char* what, ncclResult_t res) {
        ncclResult_t async = ncclSuccess;
        if (res != ncclSuccess || b.sync(s) != ncclSuccess || ncclCommGetAsyncError(comms[r], &async) != ncclSuccess ||
            async != ncclSuccess)
          failures[r] += std::string(what) + " failed: " + ncclGetLastError(comms[r]) + "; ";
      };
      for (size_t i = 0; i < total; ++i) hin[i] = value(r, i);
      b.toDevice(in, hin.data(), total * sizeof(float));
      const float rankSum = float(nRanks * (nRanks + 1) / 2);
      clearOut();
      run("AllReduce", ncclAllReduce(in, out, kCount, ncclFloat32, ncclSum, comms[r], s));
      check("AllReduce", kCount, [&](size_t i) { return rankSum * float(i % 17); });
      clearOut();
      run("AllGather", ncclAllGather(in, out, kCount, ncclFloat32, comms[r], s));
      check("AllGather", total, [&](size_t i) { return value(int(i / kCount), i % kCount); });
      clearOut();
      run("ReduceScatter", ncclReduceScatter(in, out, kCount, ncclFloat32, ncclSum, comms[r], s));
      check("ReduceScatter", kCount, [&](size_t i) { return rankSum * float((r * kCount + i) % 17); });
      clearOut();
      run("Broadcast", ncclBroadcast(in, out, kCount, ncclFloat32, nRanks - 1, comms[r], s));
      check("Broadcast", kCount, [&](size_t i) { return value(nRanks - 1, i); });
      // Send to the next rank, receive from the previous one.
      clearOut();
      ncclGroupStart();
      ncclSend(in, kCount, ncclFloat32, (r + 1) % nRanks, comms[r], s);
      ncclRecv(out, kCount, ncclFloat32, (r + nRanks - 1) % nRanks, comms[r], s);
      run("SendRecv", ncclGroupEnd());
      check("SendRecv", kCount, [&](size_t i) { return value((r + nRanks - 1) % nRanks, i); });
    });
  }
  for (auto& t : threads) t.join();
  for (cudaStream_t st : streams) b.destroy(st);
  for (int r = 0; r < nRanks; ++r) EXPECT_TRUE(failures[r].empty()) << "rank " << r << ": " << failures[r];
  for (int r = 0; r < nRanks; ++r) {
    b.free(ins[r], mem);
    b.free(outs[r], mem);
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

class GpuRanks : public ::testing::TestWithParam<int> {};

TEST_P(GpuRanks, CollectivesOnDeviceMemory) {
  SKIP_WITHOUT_DEVICE();
  runMatrix(GetParam(), Mem::Device);
}

TEST_P(GpuRanks, CollectivesOnNcclMemAlloc) {
  SKIP_WITHOUT_DEVICE();
  runMatrix(GetParam(), Mem::NcclMemAlloc);
}

TEST(Gpu, CollectivesOnManagedMemory) {
  SKIP_WITHOUT_DEVICE();
  runMatrix(2, Mem::Managed);
}

INSTANTIATE_TEST_SUITE_P(OneGpu, GpuRanks, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// Deterministic reductions on the device (tuttiCommSetDeterministic): AllReduce, ReduceScatter and Reduce of
// wide-range float, bfloat16 and half data (and a float PreMulSum with another scalar on each rank), one-shot
// and exchanged sizes, every element's bits against the host reference tuttiDeterministicReduce: the same bits
// on CPU and GPU.
uint32_t detMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return uint32_t((x ^ (x >> 31)) >> 8);
}

// Bits of element i of rank r's input: a random sign and mantissa, an exponent within a range the type holds.
template <typename Bits>
Bits detInput(int r, size_t i, ncclDataType_t type) {
  const uint32_t h = detMix((uint64_t(r) << 40) ^ i);
  if (type == ncclFloat32) {
    const uint32_t exp = 127 - 20 + (h >> 24) % 41;  // 2^-20 .. 2^20
    return Bits((h & 0x807fffffu) | (exp << 23));
  }
  if (type == ncclBfloat16) {
    const uint32_t exp = 127 - 8 + (h >> 24) % 17;
    return Bits(((h >> 16) & 0x807f) | (exp << 7));
  }
  const uint32_t exp = 15 - 4 + (h >> 24) % 9;  // half
  return Bits(((h >> 16) & 0x83ff) | (exp << 10));
}

// premul: a ncclRedOpCreatePreMulSum op (float32) with another scalar on each rank, in place of `op`.
template <typename Bits>
void runDeterministic(int nRanks, ncclDataType_t type, ncclRedOp_t op, bool premul = false) {
  Env env(simMode() ? "sim" : "cuda");
  Backend b;
  std::vector<ncclComm_t> comms = initComms(nRanks);
  ASSERT_EQ(static_cast<int>(comms.size()), nRanks);
  std::vector<std::string> failures(nRanks);
  // Buffers for the largest count, allocated before any rank runs and freed after all are done: cudaMalloc and
  // cudaFree may wait for the device, kernels of ranks that are ahead (and wait for this one) included.
  const std::vector<size_t> counts{1, 1001, 300007};  // one-shot, one-shot, exchange
  std::vector<Bits*> ins(nRanks), outs(nRanks);
  for (int r = 0; r < nRanks; ++r) {
    ins[r] = static_cast<Bits*>(b.alloc(counts.back() * nRanks * sizeof(Bits), Mem::Device));
    outs[r] = static_cast<Bits*>(b.alloc(counts.back() * nRanks * sizeof(Bits), Mem::Device));
  }
  // Streams and pinned copy buffers too: a rank thread makes no CUDA call that may wait for the device.
  std::vector<cudaStream_t> streams(nRanks);
  for (cudaStream_t& st : streams) st = b.stream();
  b.stage(nRanks, counts.back() * nRanks * sizeof(Bits));
  std::vector<std::thread> threads;
  for (int r = 0; r < nRanks; ++r) {
    threads.emplace_back([&, r] {
      if (!b.sim) cudaSetDevice(0);
      if (tuttiCommSetDeterministic(comms[r], 1) != ncclSuccess) {
        failures[r] = "tuttiCommSetDeterministic failed";
        return;
      }
      cudaStream_t s = streams[r];
      std::vector<float> scalars(nRanks);
      for (int k = 0; k < nRanks; ++k) scalars[k] = 0.5f + 0.25f * float(k);
      ncclRedOp_t callOp = op;
      if (premul &&
          ncclRedOpCreatePreMulSum(&callOp, &scalars[r], ncclFloat32, ncclScalarHostImmediate, comms[r]) != ncclSuccess) {
        failures[r] = "ncclRedOpCreatePreMulSum failed";
        return;
      }
      for (size_t count : counts) {
        const size_t total = count * nRanks;
        Bits* in = ins[r];
        Bits* out = outs[r];
        std::vector<std::vector<Bits>> all(nRanks, std::vector<Bits>(total));
        for (int k = 0; k < nRanks; ++k)
          for (size_t i = 0; i < total; ++i) all[k][i] = detInput<Bits>(k, i, type);
        b.toDevice(in, all[r].data(), total * sizeof(Bits));
        std::vector<Bits> want(total), got(total);
        std::vector<const void*> ins(nRanks);
        for (int k = 0; k < nRanks; ++k) ins[k] = all[k].data();
        tuttiDeterministicReduce(ins.data(), nRanks, want.data(), total, type, op, premul ? scalars.data() : nullptr);
        auto check = [&](const char* what, size_t n, size_t from) {
          b.toHost(got.data(), out, n * sizeof(Bits));
          for (size_t i = 0; i < n; ++i)
            if (got[i] != want[from + i]) {
              failures[r] += std::string(what) + " count " + std::to_string(count) + ": element " +
                             std::to_string(i) + " differs from the host reference; ";
              return;
            }
        };
        auto run = [&](const char* what, ncclResult_t res) {
          if (res != ncclSuccess || b.sync(s) != ncclSuccess)
            failures[r] += std::string(what) + " failed: " + ncclGetLastError(comms[r]) + "; ";
        };
        run("AllReduce", ncclAllReduce(in, out, count, type, callOp, comms[r], s));
        check("AllReduce", count, 0);
        run("ReduceScatter", ncclReduceScatter(in, out, count, type, callOp, comms[r], s));
        check("ReduceScatter", count, size_t(r) * count);
        run("Reduce", ncclReduce(in, out, count, type, callOp, nRanks - 1, comms[r], s));
        if (r == nRanks - 1) check("Reduce", count, 0);
      }
      if (premul) ncclRedOpDestroy(callOp, comms[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (cudaStream_t st : streams) b.destroy(st);
  for (int r = 0; r < nRanks; ++r) EXPECT_TRUE(failures[r].empty()) << "rank " << r << ": " << failures[r];
  for (int r = 0; r < nRanks; ++r) {
    b.free(ins[r], Mem::Device);
    b.free(outs[r], Mem::Device);
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

TEST_P(GpuRanks, DeterministicReductionsHaveTheHostBits) {
  SKIP_WITHOUT_DEVICE();
  runDeterministic<uint32_t>(GetParam(), ncclFloat32, ncclSum);
  runDeterministic<uint16_t>(GetParam(), ncclBfloat16, ncclSum);
  runDeterministic<uint16_t>(GetParam(), ncclFloat16, ncclAvg);
  runDeterministic<uint32_t>(GetParam(), ncclFloat32, ncclProd);
  runDeterministic<uint32_t>(GetParam(), ncclFloat32, ncclSum, /*premul=*/true);
}

// A send to and receive from the rank itself is a device copy in stream order: it sees the output of the
// collective queued before it on the same stream, and, captured, it copies again at each replay.
TEST(Gpu, SelfSendRecvFollowsStreamOrderAndReplays) {
  SKIP_WITHOUT_DEVICE();
  Env env(simMode() ? "sim" : "cuda");
  Backend b;
  constexpr size_t kCount = 64 * 1024 + 3;
  constexpr size_t kBytes = kCount * sizeof(float);
  std::vector<ncclComm_t> comms = initComms(1);
  ASSERT_EQ(comms.size(), 1u);
  auto* in = static_cast<float*>(b.alloc(kBytes, Mem::Device));
  auto* mid = static_cast<float*>(b.alloc(kBytes, Mem::Device));
  auto* out = static_cast<float*>(b.alloc(kBytes, Mem::Device));
  cudaStream_t s = b.stream();
  std::vector<float> h(kCount), got(kCount);
  auto selfSendRecv = [&](const float* from, float* to) {
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclSend(from, kCount, ncclFloat32, 0, comms[0], s), ncclSuccess);
    EXPECT_EQ(ncclRecv(to, kCount, ncclFloat32, 0, comms[0], s), ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comms[0]);
  };
  // Stream order: the copy reads `mid` after the AllReduce wrote it (no synchronization in between).
  for (size_t i = 0; i < kCount; ++i) h[i] = float(i % 251);
  b.toDevice(in, h.data(), kBytes);
  ASSERT_EQ(ncclAllReduce(in, mid, kCount, ncclFloat32, ncclSum, comms[0], s), ncclSuccess);
  selfSendRecv(mid, out);
  ASSERT_EQ(b.sync(s), ncclSuccess) << ncclGetLastError(comms[0]);
  b.toHost(got.data(), out, kBytes);
  for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(got[i], h[i]) << "element " << i;
  // Captured once, replayed with new inputs.
  tuttiGraph_t simGraph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (b.sim) ASSERT_EQ(tuttiStreamBeginCapture(s), ncclSuccess);
  else ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  selfSendRecv(in, out);
  if (b.sim) {
    ASSERT_EQ(tuttiStreamEndCapture(s, &simGraph), ncclSuccess);
  } else {
    cudaGraph_t g = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    cudaGraphDestroy(g);
  }
  for (int it = 0; it < 3; ++it) {
    for (size_t i = 0; i < kCount; ++i) h[i] = float(it * 1000 + i % 97);
    b.toDevice(in, h.data(), kBytes);
    if (b.sim) ASSERT_EQ(tuttiGraphLaunch(simGraph, s), ncclSuccess);
    else ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(b.sync(s), ncclSuccess);
    b.toHost(got.data(), out, kBytes);
    for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(got[i], h[i]) << "replay " << it << ", element " << i;
  }
  if (b.sim) tuttiGraphDestroy(simGraph);
  else cudaGraphExecDestroy(exec);
  b.destroy(s);
  for (float* p : {in, mid, out}) b.free(p, Mem::Device);
  ncclCommDestroy(comms[0]);
}

// Hundreds of operations queued without a synchronization in between, ranks as threads of one process: every
// rank's work goes through the same driver queue, so one rank far ahead must not fill it while another waits
// to launch the kernel the first one's kernels wait for (TUTTI_LAUNCH_DEPTH bounds what one rank queues).
TEST(Gpu, ManyQueuedOperationsProgress) {
  SKIP_WITHOUT_DEVICE();
  Env env(simMode() ? "sim" : "cuda");
  Backend b;
  constexpr int kRanks = 2, kOps = 600;
  constexpr size_t kCount = 2;
  std::vector<ncclComm_t> comms = initComms(kRanks);
  ASSERT_EQ(static_cast<int>(comms.size()), kRanks);
  std::vector<std::string> failures(kRanks);
  std::vector<cudaStream_t> streams(kRanks);
  for (cudaStream_t& st : streams) st = b.stream();
  b.stage(kRanks, 4096);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      if (!b.sim) cudaSetDevice(0);
      auto* in = static_cast<float*>(b.alloc(kCount * sizeof(float), Mem::Device));
      auto* out = static_cast<float*>(b.alloc(kCount * sizeof(float), Mem::Device));
      const float v[kCount] = {float(r + 1), float(10 * (r + 1))};
      b.toDevice(in, v, sizeof v);
      cudaStream_t s = streams[r];
      for (int i = 0; i < kOps && failures[r].empty(); ++i)
        if (ncclAllReduce(in, out, kCount, ncclFloat32, ncclSum, comms[r], s) != ncclSuccess)
          failures[r] = "AllReduce " + std::to_string(i) + ": " + ncclGetLastError(comms[r]);
      ncclResult_t async = ncclSuccess;
      if (b.sync(s) != ncclSuccess || ncclCommGetAsyncError(comms[r], &async) != ncclSuccess || async != ncclSuccess)
        failures[r] += std::string("failed: ") + ncclGetLastError(comms[r]);
      float got[kCount] = {};
      b.toHost(got, out, sizeof got);
      if (failures[r].empty() && (got[0] != 3.0f || got[1] != 30.0f))
        failures[r] = "result " + std::to_string(got[0]) + ", " + std::to_string(got[1]) + ", want 3, 30";
      b.free(in, Mem::Device);
      b.free(out, Mem::Device);
    });
  }
  for (auto& t : threads) t.join();
  for (cudaStream_t st : streams) b.destroy(st);
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(failures[r].empty()) << "rank " << r << ": " << failures[r];
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

// A captured AllReduce replayed several times with new inputs.
TEST(Gpu, CapturedAllReduceReplays) {
  SKIP_WITHOUT_DEVICE();
  Env env(simMode() ? "sim" : "cuda");
  Backend b;
  constexpr int kRanks = 2;
  constexpr size_t kCount = 4096;
  std::vector<ncclComm_t> comms = initComms(kRanks);
  ASSERT_EQ(static_cast<int>(comms.size()), kRanks);
  std::vector<float*> in(kRanks), out(kRanks);
  std::vector<cudaStream_t> s(kRanks);
  std::vector<cudaGraphExec_t> exec(kRanks);
  std::vector<tuttiGraph_t> simGraph(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    in[r] = static_cast<float*>(b.alloc(kCount * sizeof(float), Mem::Device));
    out[r] = static_cast<float*>(b.alloc(kCount * sizeof(float), Mem::Device));
    s[r] = b.stream();
  }
  for (int r = 0; r < kRanks; ++r) {
    if (b.sim) ASSERT_EQ(tuttiStreamBeginCapture(s[r]), ncclSuccess);
    else ASSERT_EQ(cudaStreamBeginCapture(s[r], cudaStreamCaptureModeRelaxed), cudaSuccess);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclAllReduce(in[r], out[r], kCount, ncclFloat32, ncclSum, comms[r], s[r]), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    if (b.sim) {
      ASSERT_EQ(tuttiStreamEndCapture(s[r], &simGraph[r]), ncclSuccess);
    } else {
      cudaGraph_t g = nullptr;
      ASSERT_EQ(cudaStreamEndCapture(s[r], &g), cudaSuccess);
      ASSERT_EQ(cudaGraphInstantiate(&exec[r], g, 0), cudaSuccess);
      cudaGraphDestroy(g);
    }
  }
  std::vector<float> h(kCount);
  for (int it = 0; it < 3; ++it) {
    for (int r = 0; r < kRanks; ++r) {
      for (size_t i = 0; i < kCount; ++i) h[i] = float((r + 1) * (it + 1));
      b.toDevice(in[r], h.data(), kCount * sizeof(float));
    }
    for (int r = 0; r < kRanks; ++r) {
      if (b.sim) ASSERT_EQ(tuttiGraphLaunch(simGraph[r], s[r]), ncclSuccess);
      else ASSERT_EQ(cudaGraphLaunch(exec[r], s[r]), cudaSuccess);
    }
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(b.sync(s[r]), ncclSuccess);
    for (int r = 0; r < kRanks; ++r) {
      b.toHost(h.data(), out[r], kCount * sizeof(float));
      for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(h[i], float(3 * (it + 1))) << "launch " << it << " rank " << r;
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    if (b.sim) tuttiGraphDestroy(simGraph[r]);
    else cudaGraphExecDestroy(exec[r]);
    b.destroy(s[r]);
    b.free(in[r], Mem::Device);
    b.free(out[r], Mem::Device);
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

// Byte i of what `rank` puts in round `round`.
uint8_t putPattern(int rank, int round, size_t i) {
  return static_cast<uint8_t>((rank * 131 + round * 17 + i * 7 + (i >> 8)) & 0xff);
}

// One-sided operations on the device, written as NCCL's examples are: every rank registers a window
// (ncclMemAlloc + ncclCommWindowRegister), puts a block into the next rank's window with a signal
// (ncclPutSignal) and waits for the previous rank's signal (ncclWaitSignal), all on its own stream; every
// byte is checked. One thread drives every rank (each call only queues work). Uncaptured: kRounds rounds,
// each into its own part of the window. Captured: the put and the wait captured once per rank and replayed
// with new data; each replay's wait consumes a new signal.
void putSignalRing(int nRanks, bool captured) {
  Env env(simMode() ? "sim" : "cuda");
  Backend b;
  constexpr int kRounds = 3;
  constexpr size_t kBytes = 256 * 1024 + 5;
  std::vector<ncclComm_t> comms = initComms(nRanks);
  ASSERT_EQ(static_cast<int>(comms.size()), nRanks);
  std::vector<uint8_t*> send(nRanks), window(nRanks);
  std::vector<ncclWindow_t> win(nRanks);
  std::vector<cudaStream_t> s(nRanks);
  const std::vector<uint8_t> sentinel(kRounds * kBytes, 0xee);
  for (int r = 0; r < nRanks; ++r) {
    send[r] = static_cast<uint8_t*>(b.alloc(kBytes, Mem::NcclMemAlloc));
    window[r] = static_cast<uint8_t*>(b.alloc(kRounds * kBytes, Mem::NcclMemAlloc));
    b.toDevice(window[r], sentinel.data(), sentinel.size());
    s[r] = b.stream();
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < nRanks; ++r)
    ASSERT_EQ(ncclCommWindowRegister(comms[r], window[r], kRounds * kBytes, &win[r], NCCL_WIN_COLL_SYMMETRIC),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  ASSERT_EQ(ncclCommQueryProperties(comms[0], &props), ncclSuccess);
  EXPECT_TRUE(props.hostRmaSupport);
  EXPECT_TRUE(props.deviceApiSupport);
  auto queue = [&](int r, size_t offset) {
    const int next = (r + 1) % nRanks, prev = (r + nRanks - 1) % nRanks;
    ASSERT_EQ(ncclPutSignal(send[r], kBytes, ncclUint8, next, win[r], offset, 0, 0, 0, comms[r], s[r]), ncclSuccess)
        << ncclGetLastError(comms[r]);
    ncclWaitSignalDesc_t d{1, prev, 0, 0};
    ASSERT_EQ(ncclWaitSignal(1, &d, comms[r], s[r]), ncclSuccess) << ncclGetLastError(comms[r]);
  };
  std::vector<uint8_t> h(kBytes);
  auto fill = [&](int round) {
    for (int r = 0; r < nRanks; ++r) {
      for (size_t i = 0; i < kBytes; ++i) h[i] = putPattern(r, round, i);
      b.toDevice(send[r], h.data(), kBytes);
    }
  };
  auto check = [&](int round, size_t offset) {
    for (int r = 0; r < nRanks; ++r) {
      ASSERT_EQ(b.sync(s[r]), ncclSuccess) << "rank " << r << ": " << ncclGetLastError(comms[r]);
      ncclResult_t async = ncclSuccess;
      ASSERT_EQ(ncclCommGetAsyncError(comms[r], &async), ncclSuccess);
      ASSERT_EQ(async, ncclSuccess) << "rank " << r << ": " << ncclGetLastError(comms[r]);
    }
    for (int r = 0; r < nRanks; ++r) {
      const int prev = (r + nRanks - 1) % nRanks;
      b.toHost(h.data(), window[r] + offset, kBytes);
      for (size_t i = 0; i < kBytes; ++i)
        ASSERT_EQ(h[i], putPattern(prev, round, i)) << "round " << round << ", rank " << r << ", byte " << i;
    }
  };
  if (!captured) {
    for (int round = 0; round < kRounds; ++round) {
      fill(round);
      for (int r = 0; r < nRanks; ++r) queue(r, round * kBytes);
      check(round, round * kBytes);
    }
  } else {
    std::vector<tuttiGraph_t> simGraph(nRanks);
    std::vector<cudaGraphExec_t> exec(nRanks);
    for (int r = 0; r < nRanks; ++r) {
      if (b.sim) ASSERT_EQ(tuttiStreamBeginCapture(s[r]), ncclSuccess);
      else ASSERT_EQ(cudaStreamBeginCapture(s[r], cudaStreamCaptureModeRelaxed), cudaSuccess);
      queue(r, kBytes);
      if (b.sim) {
        ASSERT_EQ(tuttiStreamEndCapture(s[r], &simGraph[r]), ncclSuccess);
      } else {
        cudaGraph_t g = nullptr;
        ASSERT_EQ(cudaStreamEndCapture(s[r], &g), cudaSuccess);
        ASSERT_EQ(cudaGraphInstantiate(&exec[r], g, 0), cudaSuccess);
        cudaGraphDestroy(g);
      }
    }
    for (int replay = 0; replay < kRounds; ++replay) {
      fill(replay);
      for (int r = 0; r < nRanks; ++r) {
        if (b.sim) ASSERT_EQ(tuttiGraphLaunch(simGraph[r], s[r]), ncclSuccess);
        else ASSERT_EQ(cudaGraphLaunch(exec[r], s[r]), cudaSuccess);
      }
      check(replay, kBytes);
    }
    for (int r = 0; r < nRanks; ++r) {
      if (b.sim) tuttiGraphDestroy(simGraph[r]);
      else cudaGraphExecDestroy(exec[r]);
    }
  }
  for (int r = 0; r < nRanks; ++r) {
    EXPECT_EQ(ncclCommWindowDeregister(comms[r], win[r]), ncclSuccess);
    b.destroy(s[r]);
    b.free(send[r], Mem::NcclMemAlloc);
    b.free(window[r], Mem::NcclMemAlloc);
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

TEST_P(GpuRanks, PutSignalRingOnStreams) {
  SKIP_WITHOUT_DEVICE();
  putSignalRing(GetParam(), /*captured=*/false);
}

TEST(Gpu, CapturedPutSignalWaitReplays) {
  SKIP_WITHOUT_DEVICE();
  putSignalRing(3, /*captured=*/true);
}

// Collectives on symmetric windows (the kernel reads and writes the peers' buffers): AllReduce, AllGather and
// ReduceScatter on every rank's stream, then an AllReduce captured once and replayed with new inputs (the
// barrier counts live in device memory, so every replay stays in step).
TEST_P(GpuRanks, SymmetricCollectivesOnStreamsAndReplays) {
  SKIP_WITHOUT_DEVICE();
  const int n = GetParam();
  Env env(simMode() ? "sim" : "cuda");
  Backend b;
  constexpr size_t kCount = 100003;  // per rank for AllGather / ReduceScatter
  const size_t bytes = kCount * sizeof(int32_t) * static_cast<size_t>(n);
  std::vector<ncclComm_t> comms = initComms(n);
  ASSERT_EQ(static_cast<int>(comms.size()), n);
  std::vector<int32_t*> in(n), out(n);
  std::vector<ncclWindow_t> win(n);
  std::vector<cudaStream_t> s(n);
  for (int r = 0; r < n; ++r) {
    in[r] = static_cast<int32_t*>(b.alloc(2 * bytes, Mem::NcclMemAlloc));
    out[r] = in[r] + bytes / sizeof(int32_t);
    s[r] = b.stream();
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclCommWindowRegister(comms[r], in[r], 2 * bytes, &win[r], NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  const size_t total = kCount * static_cast<size_t>(n);
  std::vector<int32_t> h(total);
  auto fill = [&](int round) {
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < total; ++i) h[i] = static_cast<int32_t>(r * 1000 + i % 997 + round);
      b.toDevice(in[r], h.data(), bytes);
    }
  };
  auto finish = [&] {
    for (int r = 0; r < n; ++r) ASSERT_EQ(b.sync(s[r]), ncclSuccess) << "rank " << r << ": " << ncclGetLastError(comms[r]);
  };
  const int32_t rankSum = static_cast<int32_t>(1000 * n * (n - 1) / 2);
  auto expectSum = [&](size_t count, size_t first, int round, const char* what) {
    for (int r = 0; r < n; ++r) {
      b.toHost(h.data(), out[r], count * sizeof(int32_t));
      for (size_t i = 0; i < count; ++i) {
        const size_t at = (first == SIZE_MAX ? static_cast<size_t>(r) * count : first) + i;
        ASSERT_EQ(h[i], rankSum + n * static_cast<int32_t>(at % 997 + round)) << what << " rank " << r << " element " << i;
      }
    }
  };
  fill(0);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllReduce(in[r], out[r], total, ncclInt32, ncclSum, comms[r], s[r]), ncclSuccess) << ncclGetLastError(comms[r]);
  finish();
  expectSum(total, 0, 0, "AllReduce");
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclReduceScatter(in[r], out[r], kCount, ncclInt32, ncclSum, comms[r], s[r]), ncclSuccess);
  finish();
  expectSum(kCount, SIZE_MAX, 0, "ReduceScatter");
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllGather(in[r], out[r], kCount, ncclInt32, comms[r], s[r]), ncclSuccess);
  finish();
  for (int r = 0; r < n; ++r) {
    b.toHost(h.data(), out[r], bytes);
    for (size_t i = 0; i < total; ++i)
      ASSERT_EQ(h[i], static_cast<int32_t>((i / kCount) * 1000 + (i % kCount) % 997)) << "AllGather rank " << r << " element " << i;
  }
  // Captured once, replayed three times.
  std::vector<tuttiGraph_t> simGraph(n);
  std::vector<cudaGraphExec_t> exec(n);
  for (int r = 0; r < n; ++r) {
    if (b.sim) ASSERT_EQ(tuttiStreamBeginCapture(s[r]), ncclSuccess);
    else ASSERT_EQ(cudaStreamBeginCapture(s[r], cudaStreamCaptureModeRelaxed), cudaSuccess);
    ASSERT_EQ(ncclAllReduce(in[r], out[r], total, ncclInt32, ncclSum, comms[r], s[r]), ncclSuccess);
    if (b.sim) {
      ASSERT_EQ(tuttiStreamEndCapture(s[r], &simGraph[r]), ncclSuccess);
    } else {
      cudaGraph_t g = nullptr;
      ASSERT_EQ(cudaStreamEndCapture(s[r], &g), cudaSuccess);
      ASSERT_EQ(cudaGraphInstantiate(&exec[r], g, 0), cudaSuccess);
      cudaGraphDestroy(g);
    }
  }
  for (int replay = 1; replay <= 3; ++replay) {
    fill(replay);
    for (int r = 0; r < n; ++r) {
      if (b.sim) ASSERT_EQ(tuttiGraphLaunch(simGraph[r], s[r]), ncclSuccess);
      else ASSERT_EQ(cudaGraphLaunch(exec[r], s[r]), cudaSuccess);
    }
    finish();
    expectSum(total, 0, replay, "replayed AllReduce");
  }
  for (int r = 0; r < n; ++r) {
    if (b.sim) tuttiGraphDestroy(simGraph[r]);
    else cudaGraphExecDestroy(exec[r]);
    EXPECT_EQ(ncclCommWindowDeregister(comms[r], win[r]), ncclSuccess);
    b.destroy(s[r]);
    b.free(in[r], Mem::NcclMemAlloc);
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

// A wait for a signal that never comes ends with ncclTimeout under TUTTI_TIMEOUT, naming the rank and the
// peer, and poisons the communicator as a failed kernel does.
TEST(Gpu, AWaitThatCannotFinishTimesOut) {
  SKIP_WITHOUT_DEVICE();
  Env env(simMode() ? "sim" : "cuda");
  setenv("TUTTI_TIMEOUT", "1", 1);
  Backend b;
  std::vector<ncclComm_t> comms = initComms(2);
  unsetenv("TUTTI_TIMEOUT");
  ASSERT_EQ(comms.size(), 2u);
  std::vector<void*> buf(2);
  std::vector<ncclWindow_t> win(2);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    buf[r] = b.alloc(4096, Mem::NcclMemAlloc);
    ASSERT_EQ(ncclCommWindowRegister(comms[r], buf[r], 4096, &win[r], 0), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  cudaStream_t s = b.stream();
  ncclWaitSignalDesc_t d{2, 1, 0, 0};
  ASSERT_EQ(ncclSignal(0, 0, 0, 0, comms[1], nullptr), ncclSuccess);  // one of the two signals awaited
  ASSERT_EQ(ncclWaitSignal(1, &d, comms[0], s), ncclSuccess);
  b.sync(s);
  ncclResult_t async = ncclSuccess;
  for (int i = 0; i < 100 && async == ncclSuccess; ++i) {
    ASSERT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
    if (async == ncclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(async, ncclTimeout);
  const std::string why = ncclGetLastError(comms[0]);
  EXPECT_NE(why.find("rank 0"), std::string::npos) << why;
  EXPECT_NE(why.find("from rank 1"), std::string::npos) << why;
  EXPECT_NE(why.find("1 arrived"), std::string::npos) << why;
  b.destroy(s);
  for (int r = 0; r < 2; ++r) {
    ncclCommWindowDeregister(comms[r], win[r]);
    b.free(buf[r], Mem::NcclMemAlloc);
  }
  for (ncclComm_t c : comms) ncclCommAbort(c);
}

// Ranks as processes on one GPU (the shm transport between them, its FIFOs registered with CUDA). Each rank is a
// fresh copy of this program (main below runs it when TUTTI_GPU_TEST_RANK_PROCESS names a rank): a child that
// is only forked inherits the CUDA state an earlier test made in the parent, and CUDA refuses it.
int runRankProcess(int rank, int nRanks, int idPipe) {
  ncclUniqueId id;
  if (read(idPipe, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) return 10;
  setenv("TUTTI_DEVICE", simMode() ? "sim" : "cuda", 1);
  Backend b;
  if (!b.sim && cudaSetDevice(0) != cudaSuccess) return 11;
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, nRanks, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: init failed: %s\n", rank, ncclGetLastError(nullptr));
    return 12;
  }
  constexpr size_t kCount = 100000;
  auto* buf = static_cast<int32_t*>(b.alloc(kCount * sizeof(int32_t), Mem::Device));
  std::vector<int32_t> h(kCount);
  for (size_t i = 0; i < kCount; ++i) h[i] = int32_t(rank * 1000 + i % 1000);
  b.toDevice(buf, h.data(), kCount * sizeof(int32_t));
  cudaStream_t s = b.stream();
  if (ncclAllReduce(buf, buf, kCount, ncclInt32, ncclSum, comm, s) != ncclSuccess || b.sync(s) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: AllReduce failed: %s\n", rank, ncclGetLastError(comm));
    return 13;
  }
  b.toHost(h.data(), buf, kCount * sizeof(int32_t));
  const int32_t ranks = int32_t(nRanks * (nRanks - 1) / 2);
  for (size_t i = 0; i < kCount; ++i)
    if (h[i] != ranks * 1000 + int32_t(nRanks) * int32_t(i % 1000)) {
      std::fprintf(stderr, "rank %d: element %zu is %d\n", rank, i, h[i]);
      return 14;
    }
  b.destroy(s);
  b.free(buf, Mem::Device);
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 15;
}

TEST(GpuProcesses, AllReduceAcrossProcessesOnOneGpu) {
  if (!simMode()) SKIP_WITHOUT_DEVICE();
  for (int nRanks : {2, 3}) {
    std::vector<int> pipes(2 * nRanks);
    std::vector<pid_t> pids(nRanks);
    for (int r = 0; r < nRanks; ++r) ASSERT_EQ(pipe(&pipes[2 * r]), 0);
    // The id (and the bootstrap root behind it) from this process, which outlives the ranks.
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    for (int r = 0; r < nRanks; ++r) ASSERT_EQ(write(pipes[2 * r + 1], &id, sizeof id), static_cast<ssize_t>(sizeof id));
    for (int r = 0; r < nRanks; ++r) {
      pids[r] = fork();
      ASSERT_GE(pids[r], 0);
      if (pids[r] == 0) {
        const std::string spec = std::to_string(r) + " " + std::to_string(nRanks) + " " + std::to_string(pipes[2 * r]);
        setenv("TUTTI_GPU_TEST_RANK_PROCESS", spec.c_str(), 1);
        execl("/proc/self/exe", "test_gpu", static_cast<char*>(nullptr));
        _exit(16);  // exec failed
      }
    }
    for (int r = 0; r < nRanks; ++r) {
      int status = 0;
      ASSERT_EQ(waitpid(pids[r], &status, 0), pids[r]);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << nRanks << " processes: rank " << r << " ended with status " << status;
    }
    for (int fd : pipes) close(fd);
  }
}

// Pageable host memory cannot be reached by the GPU's kernels: a cuda communicator refuses it by name.
TEST(Gpu, HostBuffersAreRefusedWithAMessage) {
  if (simMode()) GTEST_SKIP() << "the sim backend's device memory is host memory";
  SKIP_WITHOUT_DEVICE();
  Env env("cuda");
  std::vector<ncclComm_t> comms = initComms(1);
  ASSERT_EQ(comms.size(), 1u);
  std::vector<float> host(16);
  EXPECT_EQ(ncclAllReduce(host.data(), host.data(), 16, ncclFloat32, ncclSum, comms[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("GPU can reach"), std::string::npos);
  ncclCommDestroy(comms[0]);
}

}  // namespace

// The tests, or one rank of AllReduceAcrossProcessesOnOneGpu ("rank nRanks fd" in TUTTI_GPU_TEST_RANK_PROCESS).
int main(int argc, char** argv) {
  if (const char* spec = std::getenv("TUTTI_GPU_TEST_RANK_PROCESS")) {
    int rank = -1, nRanks = 0, fd = -1;
    if (std::sscanf(spec, "%d %d %d", &rank, &nRanks, &fd) != 3 || rank < 0 || rank >= nRanks || fd < 0) return 17;
    return runRankProcess(rank, nRanks, fd);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
