/* Cooperative groups of the device API: the threads that carry out one operation together. Each has
 * thread_rank() (this thread's index in the group), size() / num_threads() and sync(). */
#ifndef NCCL_DEVICE_COOP_H_
#define NCCL_DEVICE_COOP_H_

#include "port.h"

#if defined(NCCL_DEVICE_API)
/* The calling thread alone. */
struct ncclCoopThread {
  NCCL_DEVICE_INLINE int thread_rank() const { return 0; }
  NCCL_DEVICE_INLINE int size() const { return 1; }
  NCCL_DEVICE_INLINE int num_threads() const { return 1; }
  NCCL_DEVICE_INLINE void sync() {}
  NCCL_DEVICE_INLINE bool any(bool p) { return p; }  /* whether p holds on some thread (syncs) */
};

/* The calling thread's warp (every lane must take part). */
struct ncclCoopWarp {
  NCCL_DEVICE_INLINE int thread_rank() const { return nccl_port::lane(); }
  NCCL_DEVICE_INLINE int size() const { return 32; }
  NCCL_DEVICE_INLINE int num_threads() const { return 32; }
  NCCL_DEVICE_INLINE void sync() { nccl_port::warpSync(0xffffffffu); }
  NCCL_DEVICE_INLINE bool any(bool p) { return nccl_port::warpAny(p); }
};

/* The whole thread block (CTA). */
struct ncclCoopCta {
  NCCL_DEVICE_INLINE int thread_rank() const { return nccl_port::ctaThread(); }
  NCCL_DEVICE_INLINE int size() const { return nccl_port::ctaThreads(); }
  NCCL_DEVICE_INLINE int num_threads() const { return nccl_port::ctaThreads(); }
  NCCL_DEVICE_INLINE void sync() { nccl_port::ctaSync(); }
  NCCL_DEVICE_INLINE bool any(bool p) { return nccl_port::ctaAny(p); }
};
#endif

#endif /* NCCL_DEVICE_COOP_H_ */
