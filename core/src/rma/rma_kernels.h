// The kernels of one-sided operations on the device backends (sim and cuda), queued on the caller's stream
// by rma/device_ops.cc:
//   - signal: adds 1 to the target rank's counter for this rank, after a system-wide fence, so the data of
//     the puts queued before it on the stream (copies, complete when the kernel starts) is visible to a
//     waiter that sees the count;
//   - wait: for each descriptor, takes its opCnt from the peer's count (a counter of signals consumed,
//     advanced by the kernel itself, so a captured graph consumes anew every time it is replayed) and polls
//     the counter until it has arrived, the communicator is aborted, or the timeout passes.
// One thread does the work; the block is one warp. The same source is compiled by nvcc (rma_kernels.cu)
// and, for the sim backend's emulator, by the host compiler (rma_kernels_sim.cc).
#pragma once

#include "device/simt/simt.h"

#include <cstdint>

namespace tutti::rma::dev {

struct SignalArgs {
  uint64_t* counter;  // in the target rank's signal block (mapped here)
};

inline constexpr int kMaxWaitDescs = 32;

struct WaitDesc {
  const uint64_t* counter;  // this rank's counter of signals from the peer
  uint64_t* consumed;       // signals from the peer consumed by earlier waits (device memory)
  uint64_t opCnt;
};

enum class WaitEnd : int32_t { Done = 0, Aborted = 1, TimedOut = 2 };

// Written by the kernel (pinned memory), read by the host function queued after it.
struct WaitStatus {
  WaitEnd end;
  int32_t desc;     // the descriptor that did not finish
  uint64_t target;  // the count it waited for
  uint64_t seen;    // the count it last saw
};

struct WaitArgs {
  const uint32_t* abortWord;  // nonzero: give up (ncclCommAbort, ncclCommRevoke)
  uint64_t timeoutNs;         // 0: wait forever (TUTTI_TIMEOUT)
  WaitStatus* status;
  int32_t n;
  WaitDesc desc[kMaxWaitDescs];
};
static_assert(sizeof(WaitArgs) <= 4096, "a kernel argument is limited to 4 KB");

TUTTI_DEVICE uint64_t fetchAdd64(uint64_t* p, uint64_t v) {
#if defined(__CUDACC__)
  return atomicAdd_system(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  simt::emu::switchPoint();
  return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
#endif
}

TUTTI_DEVICE_FN inline void signalBody(const SignalArgs& a) {
  if (simt::tid() != 0) return;
  simt::fenceSystem();  // the stream's earlier copies into the peer's window before the count
  fetchAdd64(a.counter, 1);
}

TUTTI_DEVICE_FN inline void waitBody(const WaitArgs& a) {
  if (simt::tid() != 0) return;
  WaitStatus st{WaitEnd::Done, -1, 0, 0};
  const uint64_t start = simt::clockNs();
  for (int i = 0; i < a.n && st.end == WaitEnd::Done; ++i) {
    const WaitDesc& d = a.desc[i];
    const uint64_t target = fetchAdd64(d.consumed, d.opCnt) + d.opCnt;
    unsigned pause = 32;
    for (uint64_t polls = 0;; ++polls) {
      const uint64_t seen = simt::loadAcquire(d.counter);
      if (seen >= target) break;
      if ((polls & 63) == 0) {
        WaitEnd end = WaitEnd::Done;
        if (simt::loadAcquire32(a.abortWord) != 0) end = WaitEnd::Aborted;
        else if (a.timeoutNs && simt::clockNs() - start > a.timeoutNs) end = WaitEnd::TimedOut;
        if (end != WaitEnd::Done) {
          st = WaitStatus{end, i, target, seen};
          break;
        }
      }
      simt::nanosleep(pause);  // a wait may last long: leave the SM (the CPU) to others
      if (pause < 4096) pause *= 2;
    }
  }
  simt::fenceSystem();
  *a.status = st;
}

}  // namespace tutti::rma::dev
