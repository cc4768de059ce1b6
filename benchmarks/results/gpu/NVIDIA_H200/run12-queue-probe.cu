// The probe of run12-experiments.log, part 2 (not Tutti): n host threads, one stream each (one GPU, one process);
// each op is a barrier kernel that all n must join. Built and run as:
//   nvcc -O2 -arch=sm_90 -o queue-probe run12-queue-probe.cu && ./queue-probe N MODE 6   (MODE: K, H, E, EH, EHM, M)
// Variants: host functions around each kernel (H), fan-in/out events with a second stream (E),
// a synchronous cudaMemcpy from pinned memory before each op (M).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <atomic>
#include <chrono>
#include <cuda_runtime.h>

__global__ void barrier(int* arrive, int target, unsigned long long timeoutNs, int* timedOut) {
  if (threadIdx.x != 0) return;
  atomicAdd(arrive, 1);
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (atomicAdd(arrive, 0) < target) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > timeoutNs) { atomicAdd(timedOut, 1); return; }
  }
}
static void CUDART_CB nop(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)

int main(int argc, char** argv) {
  int n = atoi(argv[1]); const char* mode = argv[2]; int ops = argc > 3 ? atoi(argv[3]) : 10;
  bool H = strchr(mode, 'H'), E = strchr(mode, 'E'), M = strchr(mode, 'M');
  CK(cudaSetDevice(0));
  int *arrive, *timedOut;
  CK(cudaMalloc(&arrive, 4)); CK(cudaMalloc(&timedOut, 4));
  CK(cudaMemset(arrive, 0, 4)); CK(cudaMemset(timedOut, 0, 4));
  std::vector<cudaStream_t> user(n), internal(n);
  std::vector<cudaEvent_t> fan(n), done(n);
  std::vector<void*> pinned(n); void* dev; CK(cudaMalloc(&dev, 1 << 20));
  for (int r = 0; r < n; ++r) {
    CK(cudaStreamCreateWithFlags(&user[r], cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&internal[r], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&fan[r], cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&done[r], cudaEventDisableTiming));
    CK(cudaMallocHost(&pinned[r], 1 << 20));
  }
  std::atomic<int> calls{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) th.emplace_back([&, r] {
    CK(cudaSetDevice(0));
    for (int k = 1; k <= ops; ++k) {
      if (M) CK(cudaMemcpy(dev, pinned[r], 4096, cudaMemcpyHostToDevice));
      cudaStream_t s = E ? internal[r] : user[r];
      if (E) { CK(cudaEventRecord(fan[r], user[r])); CK(cudaStreamWaitEvent(s, fan[r], 0)); }
      if (H) CK(cudaLaunchHostFunc(s, nop, &calls));
      barrier<<<1, 32, 0, s>>>(arrive, k * n, 500000000ull, timedOut);
      CK(cudaGetLastError());
      if (H) { CK(cudaLaunchHostFunc(s, nop, &calls)); CK(cudaLaunchHostFunc(s, nop, &calls)); }
      if (E) { CK(cudaEventRecord(done[r], s)); CK(cudaStreamWaitEvent(user[r], done[r], 0)); }
      CK(cudaStreamSynchronize(user[r]));
    }
  });
  for (auto& t : th) t.join();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  int to = 0; CK(cudaMemcpy(&to, timedOut, 4, cudaMemcpyDeviceToHost));
  printf("n=%d mode=%-4s ops=%d conns=%s: %s (%d kernels timed out), %.1f ms, host funcs run %d\n", n, mode, ops,
         getenv("CUDA_DEVICE_MAX_CONNECTIONS") ? getenv("CUDA_DEVICE_MAX_CONNECTIONS") : "default",
         to ? "STALLED" : "ok", to, ms, calls.load());
  return to ? 1 : 0;
}
