// The only GPU vocabulary device code may use. Under nvcc every call is the CUDA intrinsic or one PTX
// instruction (no cost); compiled by the host compiler it is the CPU SIMT emulator (emulator.h), which runs
// every GPU thread as a fiber, warps of 32, each block on its own OS thread.
//
// Memory: device code touches FIFO flags and counters only through these loads and stores, so the
// emulator can order them (C++ acquire/release) and put a switch point in front of each. Plain data (user
// buffers, FIFO slots after their flag was seen) is read and written with ordinary C++.
//
// 128-bit line accesses (warpLoad128 / warpStore128): one 16-byte volatile access per lane, executed by the
// warp as one instruction. LL128 relies on such a warp store of a 128-byte line (8 lanes x 16 bytes, the flag
// in the last 8 bytes) being seen whole by a warp load that sees its flag. The GPU gives that for connections
// that declare LL128 safety; the emulator gives it by performing the lanes' stores together in ascending
// lane order (release) and the loads in descending order (acquire), so a load that sees a line's last word
// sees the words before it.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TUTTI_DEVICE __device__ __forceinline__
#define TUTTI_DEVICE_FN __device__
// A large device function kept out of line: ptxas time grows much faster than linearly with function size.
#define TUTTI_DEVICE_NOINLINE __device__ __noinline__
#else
#define TUTTI_DEVICE inline
#define TUTTI_DEVICE_FN
#define TUTTI_DEVICE_NOINLINE inline
#include "device/simt/emulator.h"
#endif

namespace tutti::simt {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullMask = 0xffffffffu;

struct alignas(16) U128 {
  uint64_t lo, hi;
};

#if defined(__CUDACC__)

TUTTI_DEVICE int tid() { return threadIdx.x; }
TUTTI_DEVICE int nthreads() { return blockDim.x; }
TUTTI_DEVICE int bid() { return blockIdx.x; }
TUTTI_DEVICE int nblocks() { return gridDim.x; }
TUTTI_DEVICE int lane() { return threadIdx.x % kWarpSize; }
TUTTI_DEVICE int warp() { return threadIdx.x / kWarpSize; }

TUTTI_DEVICE void syncBlock() { __syncthreads(); }
// bar.sync `id` for `n` threads (a multiple of 32; whole warps take part). Id 0 is __syncthreads'.
TUTTI_DEVICE void barSync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
TUTTI_DEVICE void syncWarp(unsigned mask = kFullMask) { __syncwarp(mask); }
TUTTI_DEVICE uint64_t shfl(unsigned mask, uint64_t v, int src) { return __shfl_sync(mask, v, src); }
TUTTI_DEVICE unsigned ballot(unsigned mask, bool p) { return __ballot_sync(mask, p); }
TUTTI_DEVICE bool any(unsigned mask, bool p) { return __any_sync(mask, p); }
TUTTI_DEVICE int firstLane(unsigned mask) { return __ffs(mask) - 1; }

TUTTI_DEVICE uint64_t loadVolatile(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.volatile.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
TUTTI_DEVICE uint64_t loadAcquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
TUTTI_DEVICE uint32_t loadAcquire32(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
TUTTI_DEVICE void storeRelaxed(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
TUTTI_DEVICE void storeRelease(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
TUTTI_DEVICE void storeRelaxed32(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
TUTTI_DEVICE void storeRelease32(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// Returns the old value (device- and host-visible memory alike).
TUTTI_DEVICE uint32_t atomicAdd32(uint32_t* p, uint32_t v) { return atomicAdd_system(p, v); }
TUTTI_DEVICE U128 warpLoad128(unsigned, const U128* p) {
  U128 v;
  asm volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(v.lo), "=l"(v.hi) : "l"(p) : "memory");
  return v;
}
TUTTI_DEVICE void warpStore128(unsigned, U128* p, U128 v) {
  asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(v.lo), "l"(v.hi) : "memory");
}
TUTTI_DEVICE void fence() { __threadfence(); }
TUTTI_DEVICE void fenceSystem() { __threadfence_system(); }
TUTTI_DEVICE void nanosleep(unsigned ns) { __nanosleep(ns); }
TUTTI_DEVICE uint64_t clockNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// A poll that found nothing: on the GPU the other warps keep the SM busy, nothing to do.
TUTTI_DEVICE void spinPause() {}
TUTTI_DEVICE char* sharedMem() {
  extern __shared__ __align__(16) char tuttiDynamicShared[];
  return tuttiDynamicShared;
}

#else  // the CPU emulator

TUTTI_DEVICE int tid() { return emu::current().tid; }
TUTTI_DEVICE int nthreads() { return emu::current().block->nthreads; }
TUTTI_DEVICE int bid() { return emu::current().block->bid; }
TUTTI_DEVICE int nblocks() { return emu::current().block->nblocks; }
TUTTI_DEVICE int lane() { return emu::current().tid % kWarpSize; }
TUTTI_DEVICE int warp() { return emu::current().tid / kWarpSize; }

TUTTI_DEVICE void syncBlock() { emu::barrier(0, emu::current().block->nthreads); }
TUTTI_DEVICE void barSync(int id, int n) { emu::barrier(id, n); }
TUTTI_DEVICE void syncWarp(unsigned mask = kFullMask) { emu::warpSync(mask); }
TUTTI_DEVICE uint64_t shfl(unsigned mask, uint64_t v, int src) { return emu::warpShfl(mask, v, src); }
TUTTI_DEVICE unsigned ballot(unsigned mask, bool p) { return emu::warpBallot(mask, p); }
TUTTI_DEVICE bool any(unsigned mask, bool p) { return emu::warpBallot(mask, p) != 0; }
TUTTI_DEVICE int firstLane(unsigned mask) { return mask ? __builtin_ctz(mask) : -1; }

TUTTI_DEVICE uint64_t loadVolatile(const uint64_t* p) {
  emu::switchPoint();
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
TUTTI_DEVICE uint64_t loadAcquire(const uint64_t* p) {
  emu::switchPoint();
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
TUTTI_DEVICE uint32_t loadAcquire32(const uint32_t* p) {
  emu::switchPoint();
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
TUTTI_DEVICE void storeRelaxed(uint64_t* p, uint64_t v) {
  emu::switchPoint();
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
TUTTI_DEVICE void storeRelease(uint64_t* p, uint64_t v) {
  emu::switchPoint();
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
TUTTI_DEVICE void storeRelaxed32(uint32_t* p, uint32_t v) {
  emu::switchPoint();
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
TUTTI_DEVICE void storeRelease32(uint32_t* p, uint32_t v) {
  emu::switchPoint();
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
TUTTI_DEVICE uint32_t atomicAdd32(uint32_t* p, uint32_t v) {
  emu::switchPoint();
  return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}
TUTTI_DEVICE U128 warpLoad128(unsigned mask, const U128* p) {
  U128 v;
  emu::warpAccess128(mask, const_cast<U128*>(p), &v.lo, false);
  return v;
}
TUTTI_DEVICE void warpStore128(unsigned mask, U128* p, U128 v) { emu::warpAccess128(mask, p, &v.lo, true); }
TUTTI_DEVICE void fence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
TUTTI_DEVICE void fenceSystem() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
TUTTI_DEVICE void nanosleep(unsigned ns) { emu::sleepNs(ns); }
TUTTI_DEVICE uint64_t clockNs() { return emu::clockNs(); }
TUTTI_DEVICE void spinPause() { emu::spinYield(); }
TUTTI_DEVICE char* sharedMem() { return emu::current().block->shared; }

#endif

}  // namespace tutti::simt
