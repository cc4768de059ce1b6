// Per-call cost of the driver calls a Tutti launch makes on one stream pair (host time, us a call).
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
__global__ void empty() {}
static double now() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  cudaStream_t user, internal;
  cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&internal, cudaStreamNonBlocking);
  cudaEvent_t a, b, c;
  cudaEventCreateWithFlags(&a, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&b, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&c, cudaEventDisableTiming);
  const int n = 2000;
  empty<<<1, 512, 0, internal>>>();
  cudaDeviceSynchronize();
  double t0 = now();
  for (int i = 0; i < n; ++i) empty<<<1, 512, 0, internal>>>();
  cudaStreamSynchronize(internal);
  double t1 = now();
  for (int i = 0; i < n; ++i) cudaEventRecord(a, user);
  double t2 = now();
  for (int i = 0; i < n; ++i) cudaStreamWaitEvent(internal, a, 0);
  double t3 = now();
  for (int i = 0; i < n; ++i) cudaEventQuery(b);
  cudaDeviceSynchronize();
  double t4 = now();
  for (int i = 0; i < n; ++i) {  // a whole launch's calls: fan-in, kernel, end event, fan-out
    cudaEventRecord(a, user);
    cudaStreamWaitEvent(internal, a, 0);
    empty<<<16, 512, 0, internal>>>();
    cudaEventRecord(b, internal);
    cudaEventRecord(c, internal);
    cudaStreamWaitEvent(user, c, 0);
  }
  cudaStreamSynchronize(user);
  double t5 = now();
  for (int i = 0; i < n; ++i) empty<<<16, 512, 0, user>>>();
  cudaStreamSynchronize(user);
  double t6 = now();
  printf("empty kernel launch (1 block): %.2f us\nevent record: %.2f us\nstream wait event: %.2f us\nevent query: %.2f us\n"
         "fan-in + kernel (16 blocks) + 2 records + fan-out: %.2f us\nkernel (16 blocks) on the user stream alone: %.2f us\n",
         (t1 - t0) / n, (t2 - t1) / n, (t3 - t2) / n, (t4 - t3) / n, (t5 - t4) / n, (t6 - t5) / n);
  printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
}
