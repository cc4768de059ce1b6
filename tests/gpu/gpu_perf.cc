// gpu_perf: the figures of scripts/gpu-check.sh, measured in one run on one GPU, ranks as threads.
//
//   - the GPU's own copy bandwidth: cudaMemcpyAsync device to device (the reference of the ratios);
//   - per-hop latency of LL, LL128 and Simple: an 8-byte ring AllReduce (NCCL_ALGO=Ring, NCCL_PROTO forced)
//     on 2 ranks takes 2 x (ranks - 1) hops, so time / 2 is one hop;
//   - bus bandwidth (nccl-tests' factors) of send/recv on 2 ranks and AllReduce on 2 and 4 ranks, Simple and
//     LL128, at the largest size, as a fraction of the copy bandwidth.
// Lines in nccl-tests' style go to stdout; `-o FILE` also writes a Markdown summary. With TUTTI_GPU_CHECK_SIM=1
// the same steps run on the sim backend at tiny sizes: they show the tool works, not figures.
#include <nccl.h>
#include <tutti.h>

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

bool gSim = false;

#define CHECK_CUDA(x)                                                                                 \
  do {                                                                                                \
    cudaError_t e_ = (x);                                                                             \
    if (e_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "gpu_perf: %s failed: %s (%s)\n", #x, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)
#define CHECK_NCCL(x)                                                                                     \
  do {                                                                                                    \
    ncclResult_t r_ = (x);                                                                                \
    if (r_ != ncclSuccess) {                                                                              \
      std::fprintf(stderr, "gpu_perf: %s failed: %s (%s)\n", #x, ncclGetErrorString(r_), ncclGetLastError(nullptr)); \
      std::exit(1);                                                                                       \
    }                                                                                                     \
  } while (0)

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void* devAlloc(size_t bytes) {
  void* p = nullptr;
  if (gSim) CHECK_NCCL(ncclMemAlloc(&p, bytes));
  else CHECK_CUDA(cudaMalloc(&p, bytes));
  return p;
}
void devFree(void* p) {
  if (gSim) ncclMemFree(p);
  else cudaFree(p);
}
cudaStream_t makeStream() {
  cudaStream_t s = nullptr;
  if (gSim) CHECK_NCCL(tuttiStreamCreate(&s));
  else CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}
void syncStream(cudaStream_t s) {
  if (gSim) CHECK_NCCL(tuttiStreamSynchronize(s));
  else CHECK_CUDA(cudaStreamSynchronize(s));
}
ncclResult_t streamSync(cudaStream_t s) {
  if (gSim) return tuttiStreamSynchronize(s);
  return cudaStreamSynchronize(s) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}
void destroyStream(cudaStream_t s) {
  if (gSim) tuttiStreamDestroy(s);
  else cudaStreamDestroy(s);
}

// Copy bandwidth of the GPU (bytes copied per second), device to device.
double copyBandwidth(size_t bytes, int iters) {
  if (gSim) return 0;
  void* a = devAlloc(bytes);
  void* b = devAlloc(bytes);
  cudaStream_t s = makeStream();
  CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
  syncStream(s);
  const double t0 = now();
  for (int i = 0; i < iters; ++i) CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
  syncStream(s);
  const double t = (now() - t0) / iters;
  destroyStream(s);
  devFree(a);
  devFree(b);
  return double(bytes) / t;
}

enum class Op { AllReduce, SendRecv };

// A call that failed inside a measurement: the row reports it and the run goes on with the next one.
#define TRY_NCCL(x)                                                                                      \
  do {                                                                                                   \
    ncclResult_t r_ = (x);                                                                               \
    if (r_ != ncclSuccess) {                                                                             \
      throw std::runtime_error(std::string(#x) + ": " + ncclGetErrorString(r_) + " (" +                  \
                               ncclGetLastError(nullptr) + ")");                                         \
    }                                                                                                    \
  } while (0)

// Seconds per operation of `op` on `nRanks` ranks (threads, one GPU) with `bytes` per rank, under the forced
// protocol (empty: the tuner's choice); -1 with *error set when a call failed (the communicators are aborted).
double timeOp(Op op, int nRanks, size_t bytes, const char* proto, int warmup, int iters, std::string* error) {
  if (proto && *proto) {
    setenv("NCCL_PROTO", proto, 1);
    setenv("NCCL_ALGO", "Ring", 1);
  } else {
    unsetenv("NCCL_PROTO");
    unsetenv("NCCL_ALGO");
  }
  std::vector<ncclComm_t> comms(nRanks);
  std::vector<int> devs(nRanks, 0);
  CHECK_NCCL(ncclCommInitAll(comms.data(), nRanks, devs.data()));
  std::vector<double> elapsed(nRanks);
  std::vector<std::string> errors(nRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nRanks; ++r) {
    threads.emplace_back([&, r] {
      if (!gSim) CHECK_CUDA(cudaSetDevice(0));
      void* in = devAlloc(bytes);
      void* out = devAlloc(bytes);
      cudaStream_t s = makeStream();
      const size_t count = bytes / sizeof(float);
      int done = 0;
      auto once = [&] {
        if (op == Op::AllReduce) {
          TRY_NCCL(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comms[r], s));
        } else {
          TRY_NCCL(ncclGroupStart());
          TRY_NCCL(ncclSend(in, count, ncclFloat32, (r + 1) % nRanks, comms[r], s));
          TRY_NCCL(ncclRecv(out, count, ncclFloat32, (r + nRanks - 1) % nRanks, comms[r], s));
          TRY_NCCL(ncclGroupEnd());
        }
        ++done;
      };
      try {
        for (int i = 0; i < warmup; ++i) once();
        TRY_NCCL(streamSync(s));
        const double t0 = now();
        for (int i = 0; i < iters; ++i) once();
        TRY_NCCL(streamSync(s));
        elapsed[r] = (now() - t0) / iters;
      } catch (const std::exception& e) {
        errors[r] = "rank " + std::to_string(r) + " after " + std::to_string(done) + " operations: " + e.what();
        ncclCommAbort(comms[r]);
        comms[r] = nullptr;
      }
      if (errors[r].empty()) destroyStream(s);  // a failed stream may still hold the aborted work
      devFree(in);
      devFree(out);
    });
  }
  for (auto& t : threads) t.join();
  for (ncclComm_t c : comms)
    if (c) ncclCommDestroy(c);
  for (const std::string& e : errors) {
    if (e.empty()) continue;
    *error += (error->empty() ? "" : "; ") + e;
  }
  if (!error->empty()) return -1;
  double worst = 0;
  for (double e : elapsed) worst = e > worst ? e : worst;
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  const char* outPath = nullptr;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "-o") && i + 1 < argc) outPath = argv[++i];
  gSim = std::getenv("TUTTI_GPU_CHECK_SIM") && !std::strcmp(std::getenv("TUTTI_GPU_CHECK_SIM"), "1");
  setenv("TUTTI_DEVICE", gSim ? "sim" : "cuda", 1);
  std::string gpu = "sim backend (CPU)";
  if (!gSim) {
    int n = 0;
    CHECK_CUDA(cudaGetDeviceCount(&n));
    cudaDeviceProp prop{};
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    gpu = prop.name;
  }
  const size_t big = gSim ? (1 << 16) : (size_t{256} << 20);
  const int iters = gSim ? 2 : 20, latIters = gSim ? 5 : 2000;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows show as they are measured, also into a pipe or file
  std::string md;
  auto line = [&](const std::string& s) {
    std::printf("%s\n", s.c_str());
    md += s + "\n";
  };
  line("# gpu_perf on " + gpu);
  if (gSim) line("(sim backend: the steps run, the numbers are not GPU figures)");
  const double copy = copyBandwidth(big, iters);
  char buf[512];
  std::snprintf(buf, sizeof buf, "\ncudaMemcpy device-to-device, %zu bytes: %.1f GB/s", big, copy / 1e9);
  line(buf);

  line("\n## Per-hop latency (8-byte ring AllReduce, 2 ranks: 2 hops)\n\n| protocol | time per op (us) | per hop (us) |\n|---|---|---|");
  int failed = 0;
  auto failedRow = [&](const std::string& row, const std::string& error) {
    std::fprintf(stderr, "gpu_perf: %s failed: %s\n", row.c_str(), error.c_str());
    ++failed;
  };
  for (const char* proto : {"LL", "LL128", "Simple"}) {
    std::string error;
    const double t = timeOp(Op::AllReduce, 2, 8, proto, gSim ? 1 : 100, latIters, &error);
    if (t < 0) {
      std::snprintf(buf, sizeof buf, "| %s | failed | failed |", proto);
      failedRow(std::string("per-hop latency, ") + proto, error);
    } else {
      std::snprintf(buf, sizeof buf, "| %s | %.2f | %.2f |", proto, t * 1e6, t * 1e6 / 2);
    }
    line(buf);
  }

  line("\n## Bus bandwidth at " + std::to_string(big) + " bytes (fraction of the copy bandwidth)\n\n"
       "| operation | ranks | protocol | time (us) | busbw (GB/s) | of copy |\n|---|---|---|---|---|---|");
  struct Row {
    Op op;
    int ranks;
  };
  for (Row row : {Row{Op::SendRecv, 2}, Row{Op::AllReduce, 2}, Row{Op::AllReduce, 4}}) {
    for (const char* proto : {"Simple", "LL128"}) {
      std::string error;
      const double t = timeOp(row.op, row.ranks, big, proto, gSim ? 1 : 5, iters, &error);
      const char* name = row.op == Op::AllReduce ? "AllReduce" : "SendRecv";
      if (t < 0) {
        std::snprintf(buf, sizeof buf, "| %s | %d | %s | failed | | |", name, row.ranks, proto);
        failedRow(std::string(name) + " " + std::to_string(row.ranks) + " ranks " + proto, error);
        line(buf);
        continue;
      }
      // nccl-tests' bus factors: AllReduce 2(n-1)/n, send/recv 1.
      const double factor = row.op == Op::AllReduce ? 2.0 * (row.ranks - 1) / row.ranks : 1.0;
      const double busbw = double(big) / t * factor;
      std::snprintf(buf, sizeof buf, "| %s | %d | %s | %.1f | %.1f | %.2f |", name, row.ranks, proto, t * 1e6,
                    busbw / 1e9, copy > 0 ? busbw / copy : 0.0);
      line(buf);
    }
  }
  line("\nTargets: Simple >= 0.85 of the copy bandwidth; LL128 >= 0.90 of Simple. NCCL reports about 1, 2 and 6 us "
       "per hop for LL, LL128 and Simple over NVLink.");
  if (outPath) {
    FILE* f = std::fopen(outPath, "w");
    if (!f) {
      std::fprintf(stderr, "gpu_perf: cannot write %s\n", outPath);
      return 1;
    }
    std::fputs(md.c_str(), f);
    std::fclose(f);
  }
  return failed ? 1 : 0;
}
