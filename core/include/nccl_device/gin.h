/* GIN, NCCL's device-initiated one-sided operations (ncclGin): put with remote signal, signal, wait,
 * flush, and the world barrier (ncclBarrierSession) built on them.
 *
 * Tutti carries them out as stores into the target rank's memory, which reaches the ranks of the LSA team
 * only: a put is a copy into the peer's window followed by an atomic add (release) on the peer's signal,
 * so it is complete, and its signal visible, when put() returns; flush() only orders. A target outside the
 * LSA team stops the kernel (trap). ncclCommQueryProperties reports ginType NCCL_GIN_TYPE_NONE: there is no
 * network GIN. */
#ifndef NCCL_DEVICE_GIN_H_
#define NCCL_DEVICE_GIN_H_

#include "coop.h"
#include "core.h"
#include "lsa_barrier.h"
#include "ptr.h"

NCCL_EXTERN_C ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                                           ncclGinBarrierHandle_t* outHandle,
                                                           ncclDevResourceRequirements_t* outReq);

#ifdef __cplusplus
enum class ncclGinFenceLevel : uint32_t {
  None = 0,
  Put = 1u << 0,  /* puts issued before the barrier have landed */
  Get = 1u << 1,  /* gets issued before the barrier have landed */
  Relaxed = None,
};
NCCL_HOST_DEVICE_INLINE constexpr ncclGinFenceLevel operator|(ncclGinFenceLevel a, ncclGinFenceLevel b) {
  return static_cast<ncclGinFenceLevel>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}

/* Actions of a put or signal: on the target (remote) or on this rank when the put is done (local). */
struct ncclGin_None {};
struct ncclGin_SignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_SignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_CounterInc {
  ncclGinCounter_t counter;
};
#endif

#if defined(NCCL_DEVICE_API)
struct ncclGin {
  ncclDevComm const& comm;
  int contextId;

  NCCL_DEVICE_INLINE ncclGin(ncclDevComm const& c, int contextIndex) : comm(c), contextId(contextIndex) {}

  /* Copies `bytes` from this rank's srcWnd + srcOffset to team rank `peer`'s dstWnd + dstOffset, then does
   * the remote action on the peer and the local action here. The threads of `coop` share the copy. */
  template <typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None,
            typename Coop = ncclCoopThread>
  NCCL_DEVICE_INLINE void put(ncclTeam_t team, int peer, ncclWindow_t dstWnd, size_t dstOffset, ncclWindow_t srcWnd,
                              size_t srcOffset, size_t bytes, RemoteAction remote = ncclGin_None{},
                              LocalAction local = ncclGin_None{}, Coop coop = ncclCoopThread{}) const {
    const int world = ncclTeamRankToWorld(comm, team, peer);
    char* dst = (char*)ncclGetPeerPointer(dstWnd, dstOffset, world);
    const char* src = (const char*)ncclGetLocalPointer(srcWnd, srcOffset);
    if (!dst) nccl_port::trap();  /* the peer is not reachable by load/store */
    copy(coop, dst, src, bytes);
    coop.sync();
    if (coop.thread_rank() == 0) {
      act(world, remote);
      act(comm.rank, local);
    }
  }
  /* The remote action alone, ordered after this thread's earlier puts to the peer. */
  template <typename RemoteAction, typename Coop = ncclCoopThread>
  NCCL_DEVICE_INLINE void signal(ncclTeam_t team, int peer, RemoteAction remote, Coop coop = ncclCoopThread{}) const {
    coop.sync();
    if (coop.thread_rank() == 0) act(ncclTeamRankToWorld(comm, team, peer), remote);
  }
  /* Puts are complete when put() returns: flushing only orders the group. */
  template <typename Coop>
  NCCL_DEVICE_INLINE void flush(Coop coop, cuda::memory_order = cuda::memory_order_acquire) const {
    coop.sync();
  }

  NCCL_DEVICE_INLINE uint64_t readSignal(ncclGinSignal_t s, int bits = 64,
                                         cuda::memory_order order = cuda::memory_order_acquire) const {
    return nccl_port::load(signalWord(comm.rank, s), order) & mask(bits);
  }
  /* Waits until signal `s` has reached `least` (compared as a rolling `bits`-bit count). */
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitSignal(Coop coop, ncclGinSignal_t s, uint64_t least, int bits = 64,
                                     cuda::memory_order order = cuda::memory_order_acquire) const {
    if (coop.thread_rank() == 0) {
      uint64_t* word = signalWord(comm.rank, s);
      (void)nccl_port::waitUntil([&] { return reached(nccl_port::load(word, order), least, bits); }, comm.abortFlag, 0);
    }
    coop.sync();  /* ends at once when the communicator is aborted */
  }
  NCCL_DEVICE_INLINE void resetSignal(ncclGinSignal_t s) const {
    nccl_port::store(signalWord(comm.rank, s), (uint64_t)0, cuda::memory_order_relaxed);
  }
  NCCL_DEVICE_INLINE uint64_t readCounter(ncclGinCounter_t c, int bits = 56,
                                          cuda::memory_order order = cuda::memory_order_acquire) const {
    return nccl_port::load(counterWord(c), order) & mask(bits);
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitCounter(Coop coop, ncclGinCounter_t c, uint64_t least, int bits = 56,
                                      cuda::memory_order order = cuda::memory_order_acquire) const {
    if (coop.thread_rank() == 0) {
      uint64_t* word = counterWord(c);
      (void)nccl_port::waitUntil([&] { return reached(nccl_port::load(word, order), least, bits); }, comm.abortFlag, 0);
    }
    coop.sync();
  }
  NCCL_DEVICE_INLINE void resetCounter(ncclGinCounter_t c) const {
    nccl_port::store(counterWord(c), (uint64_t)0, cuda::memory_order_relaxed);
  }

 private:
  static NCCL_DEVICE_INLINE uint64_t mask(int bits) { return bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1); }
  static NCCL_DEVICE_INLINE bool reached(uint64_t v, uint64_t least, int bits) {
    const uint64_t diff = (v - least) & mask(bits);
    return bits >= 64 ? (int64_t)diff >= 0 : diff < ((uint64_t)1 << (bits - 1));
  }
  NCCL_DEVICE_INLINE uint64_t* signalWord(int world, ncclGinSignal_t s) const {
    if ((int)s >= comm.ginSignalCount || !comm.resources[world]) nccl_port::trap();
    return (uint64_t*)(comm.resources[world] + comm.ginSignals) + s;
  }
  NCCL_DEVICE_INLINE uint64_t* counterWord(ncclGinCounter_t c) const {
    if ((int)c >= comm.ginCounterCount) nccl_port::trap();
    return (uint64_t*)(comm.resources[comm.rank] + comm.ginCounters) + c;
  }
  NCCL_DEVICE_INLINE void act(int, ncclGin_None) const {}
  NCCL_DEVICE_INLINE void act(int world, ncclGin_SignalInc a) const {
    nccl_port::fetchAdd(signalWord(world, a.signal), (uint64_t)1, cuda::memory_order_release);
  }
  NCCL_DEVICE_INLINE void act(int world, ncclGin_SignalAdd a) const {
    nccl_port::fetchAdd(signalWord(world, a.signal), a.value, cuda::memory_order_release);
  }
  NCCL_DEVICE_INLINE void act(int, ncclGin_CounterInc a) const {
    nccl_port::fetchAdd(counterWord(a.counter), (uint64_t)1, cuda::memory_order_release);
  }
  /* 8-byte words where both ends are aligned, bytes otherwise; the group's threads take turns. */
  template <typename Coop>
  static NCCL_DEVICE_INLINE void copy(Coop coop, char* dst, const char* src, size_t bytes) {
    size_t done = 0;
    if ((((uintptr_t)dst | (uintptr_t)src) & 7) == 0) {
      const size_t words = bytes / 8;
      for (size_t i = coop.thread_rank(); i < words; i += coop.size())
        ((uint64_t*)dst)[i] = ((const uint64_t*)src)[i];
      done = words * 8;
    }
    for (size_t i = done + coop.thread_rank(); i < bytes; i += coop.size()) dst[i] = src[i];
  }
};

/* A barrier of a whole team: the world (devComm.worldBarrier, ncclDevCommRequirements.barrierCount) or
 * the LSA team (devComm.lsaBarrier). Every member must be in the LSA team: Tutti's GIN is load/store. */
template <typename Coop>
struct ncclBarrierSession {
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagWorld, ncclGin gin, uint32_t index, bool multimem = false)
      : core_(coop, gin.comm, ncclTeamWorld(gin.comm), gin.comm.worldBarrier.bufHandle,
              gin.comm.worldBarrier.nBarriers, index) {
    if (multimem) nccl_port::trap();
  }
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagLsa, ncclDevComm const& comm, uint32_t index,
                                        bool multimem = false)
      : core_(coop, comm, ncclTeamLsa(comm), comm.lsaBarrier.bufHandle, comm.lsaBarrier.nBarriers, index) {
    if (multimem) nccl_port::trap();
  }
  NCCL_DEVICE_INLINE ~ncclBarrierSession() { core_.finish(); }
  ncclBarrierSession(ncclBarrierSession const&) = delete;

  NCCL_DEVICE_INLINE void sync(Coop, cuda::memory_order order,
                               ncclGinFenceLevel = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get) {
    core_.arrive(order);
    (void)core_.wait(order);
  }
  /* ncclTimeout once timeoutCycles passed (nanoseconds on the emulator), ncclInvalidUsage once aborted. */
  NCCL_DEVICE_INLINE ncclResult_t sync(Coop, cuda::memory_order order, ncclGinFenceLevel, uint64_t timeoutCycles) {
    core_.arrive(order);
    return core_.wait(order, timeoutCycles);
  }

 private:
  nccl_detail::BarrierCore<Coop> core_;
};
#endif

#endif /* NCCL_DEVICE_GIN_H_ */
