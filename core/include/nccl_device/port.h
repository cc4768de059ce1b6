/* The few GPU operations the device API's inline code needs, so one source serves three compilers:
 *   - nvcc (__CUDACC__): CUDA intrinsics and libcu++ atomics at system scope;
 *   - the host compiler with TUTTI_SIMT_EMULATOR defined (Tutti's own sim tests, which link the CPU SIMT
 *     emulator of libnccl's sources): the emulator's thread ids and barriers, C++ atomics, and a switch
 *     point before every flag access so the emulator can interleave threads;
 *   - any other host compiler: none of the device code; the host API and the types only.
 * NCCL_DEVICE_API is defined (1) in the first two cases. */
#ifndef NCCL_DEVICE_PORT_H_
#define NCCL_DEVICE_PORT_H_

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define NCCL_EXTERN_C extern "C"
#else
#define NCCL_EXTERN_C
#endif

#if defined(__CUDACC__)
#include <cuda/atomic>
#define NCCL_DEVICE_API 1
#define NCCL_DEVICE_INLINE __device__ __forceinline__
#define NCCL_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#elif defined(TUTTI_SIMT_EMULATOR) && defined(__cplusplus)
#include <atomic>
#include <cstdlib>

#include "device/simt/emulator.h"
#define NCCL_DEVICE_API 1
#define NCCL_DEVICE_INLINE inline
#define NCCL_HOST_DEVICE_INLINE inline
/* libcu++'s names, for code written against them. */
namespace cuda {
using memory_order = std::memory_order;
inline constexpr memory_order memory_order_relaxed = std::memory_order_relaxed;
inline constexpr memory_order memory_order_acquire = std::memory_order_acquire;
inline constexpr memory_order memory_order_release = std::memory_order_release;
inline constexpr memory_order memory_order_acq_rel = std::memory_order_acq_rel;
inline constexpr memory_order memory_order_seq_cst = std::memory_order_seq_cst;
enum thread_scope { thread_scope_system, thread_scope_device, thread_scope_block, thread_scope_thread };
}  // namespace cuda
#else
#define NCCL_HOST_DEVICE_INLINE inline
#endif

#if defined(NCCL_DEVICE_API)
namespace nccl_port {

/* A load takes the acquire part of an order, a store its release part. */
NCCL_DEVICE_INLINE cuda::memory_order loadOrder(cuda::memory_order o) {
  return o == cuda::memory_order_release ? cuda::memory_order_relaxed
         : o == cuda::memory_order_acq_rel ? cuda::memory_order_acquire : o;
}
NCCL_DEVICE_INLINE cuda::memory_order storeOrder(cuda::memory_order o) {
  return o == cuda::memory_order_acquire ? cuda::memory_order_relaxed
         : o == cuda::memory_order_acq_rel ? cuda::memory_order_release : o;
}

#if defined(__CUDACC__)
template <typename T>
using Atomic = cuda::atomic_ref<T, cuda::thread_scope_system>;
NCCL_DEVICE_INLINE void switchPoint() {}
NCCL_DEVICE_INLINE int ctaThread() { return threadIdx.x; }
NCCL_DEVICE_INLINE int ctaThreads() { return blockDim.x; }
NCCL_DEVICE_INLINE int lane() { return threadIdx.x & 31; }
NCCL_DEVICE_INLINE void ctaSync() { __syncthreads(); }
NCCL_DEVICE_INLINE void warpSync(unsigned mask) { __syncwarp(mask); }
NCCL_DEVICE_INLINE bool warpAny(bool p) { return __any_sync(0xffffffffu, p); }
NCCL_DEVICE_INLINE bool ctaAny(bool p) { return __syncthreads_or(p) != 0; }
NCCL_DEVICE_INLINE void spinPause() { __nanosleep(64); }
NCCL_DEVICE_INLINE void trap() { __trap(); }
NCCL_DEVICE_INLINE uint64_t clock() { return clock64(); }
#else
template <typename T>
using Atomic = std::atomic_ref<T>;
namespace emu = tutti::simt::emu;
inline void switchPoint() { emu::switchPoint(); }
inline int ctaThread() { return emu::current().tid; }
inline int ctaThreads() { return emu::current().block->nthreads; }
inline int lane() { return emu::current().tid & 31; }
inline void ctaSync() { emu::barrier(0, emu::current().block->nthreads); }
inline void warpSync(unsigned mask) { emu::warpSync(mask); }
inline bool warpAny(bool p) { return emu::warpBallot(0xffffffffu, p) != 0; }
/* The fibers of a block share one OS thread: a thread_local word is the block's. */
inline bool ctaAny(bool p) {
  static thread_local bool vote;
  ctaSync();
  if (ctaThread() == 0) vote = false;
  ctaSync();
  if (p) vote = true;
  ctaSync();
  const bool result = vote;
  ctaSync();
  return result;
}
inline void spinPause() { emu::spinYield(); }
[[noreturn]] inline void trap() { std::abort(); }
inline uint64_t clock() { return emu::clockNs(); }  /* "cycles" are nanoseconds on the emulator */
#endif

/* Flag and counter accesses (system scope on the GPU). */
template <typename T>
NCCL_DEVICE_INLINE T load(T* p, cuda::memory_order order) {
  switchPoint();
  return Atomic<T>(*p).load(loadOrder(order));
}
template <typename T>
NCCL_DEVICE_INLINE void store(T* p, T v, cuda::memory_order order) {
  switchPoint();
  Atomic<T>(*p).store(v, storeOrder(order));
}
template <typename T>
NCCL_DEVICE_INLINE T fetchAdd(T* p, T v, cuda::memory_order order) {
  switchPoint();
  return Atomic<T>(*p).fetch_add(v, order);
}

/* A 16-byte line of four 32-bit words {x, y, z, w}, stored and loaded as the LL protocol does: each 8-byte
 * half ({x, y} and {z, w}) is seen whole, so a flag in y and w validates the data word beside it. */
#if defined(__CUDACC__)
NCCL_DEVICE_INLINE void storeLine(uint32_t* p, uint32_t x, uint32_t y, uint32_t z, uint32_t w) {
  asm volatile("st.relaxed.sys.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}
NCCL_DEVICE_INLINE void loadLine(const uint32_t* p, uint32_t v[4]) {
  asm volatile("ld.relaxed.sys.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "l"(p)
               : "memory");
}
#else
inline void storeLine(uint32_t* p, uint32_t x, uint32_t y, uint32_t z, uint32_t w) {
  switchPoint();
  auto* half = reinterpret_cast<uint64_t*>(p);
  Atomic<uint64_t>(half[0]).store((uint64_t)y << 32 | x, std::memory_order_relaxed);
  Atomic<uint64_t>(half[1]).store((uint64_t)w << 32 | z, std::memory_order_relaxed);
}
inline void loadLine(const uint32_t* p, uint32_t v[4]) {
  switchPoint();
  auto* half = reinterpret_cast<uint64_t*>(const_cast<uint32_t*>(p));
  const uint64_t a = Atomic<uint64_t>(half[0]).load(std::memory_order_relaxed);
  const uint64_t b = Atomic<uint64_t>(half[1]).load(std::memory_order_relaxed);
  v[0] = (uint32_t)a;
  v[1] = (uint32_t)(a >> 32);
  v[2] = (uint32_t)b;
  v[3] = (uint32_t)(b >> 32);
}
#endif

/* A device-side wait: polls `done` until it holds, the communicator is aborted (*abortFlag non-zero, checked
 * every few polls) or, with timeoutCycles > 0, that many cycles passed. ncclSuccess, ncclInvalidUsage
 * (aborted) or ncclTimeout. */
template <typename Done>
NCCL_DEVICE_INLINE ncclResult_t waitUntil(Done done, uint8_t* abortFlag, uint64_t timeoutCycles) {
  const uint64_t start = timeoutCycles ? clock() : 0;
  for (unsigned polls = 0; !done(); ++polls) {
    spinPause();
    if ((polls & 63) != 63) continue;
    if (abortFlag && load(abortFlag, cuda::memory_order_relaxed)) return ncclInvalidUsage;
    if (timeoutCycles && clock() - start >= timeoutCycles) return ncclTimeout;
  }
  return ncclSuccess;
}

}  // namespace nccl_port
#endif

#endif /* NCCL_DEVICE_PORT_H_ */
