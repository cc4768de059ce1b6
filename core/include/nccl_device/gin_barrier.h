/* GIN barriers (ncclGinBarrierSession, ncclGinBarrier): a barrier among the ranks of a team, its resource
 * buffer made by ncclGinBarrierCreateRequirement (or devComm.railGinBarrier / devComm.worldGinBarrier from
 * ncclDevCommRequirements.railGinBarrierCount / worldGinBarrierCount).
 *
 * Tutti's GIN is load/store (gin.h): a put has landed, with release, when it returns. So a GIN barrier is
 * the barrier of lsa_barrier.h over the given team (every member must be in the LSA team; another is a
 * trap): each rank stores its arrival into every member's block and waits for every member's in its own.
 * A fence level other than None makes the arrival a release and the wait an acquire, whatever the memory
 * order asked, so the puts issued before the barrier are visible after it. Contexts do not matter: a
 * barrier bound to ncclGinAllContexts is the same barrier. */
#ifndef NCCL_DEVICE_GIN_BARRIER_H_
#define NCCL_DEVICE_GIN_BARRIER_H_

#include "core.h"
#include "gin.h"

#ifdef __cplusplus
/* Every GIN context of a communicator (a barrier's fence covers them all). */
struct ncclGinAllContexts {
  ncclDevComm const& comm;
  NCCL_HOST_DEVICE_INLINE constexpr ncclGinAllContexts(ncclDevComm const& c) : comm(c) {}
};
#endif

#if defined(NCCL_DEVICE_API)
template <typename Coop>
struct ncclGinBarrierSession {
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin gin, ncclTeam team, ncclGinBarrierHandle handle,
                                           uint32_t index)
      : core_(coop, gin.comm, team, handle.bufHandle, handle.nBarriers, index) {}
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin gin, ncclTeamTagRail, uint32_t index)
      : ncclGinBarrierSession(coop, gin, ncclTeamRail(gin.comm), gin.comm.railGinBarrier, index) {}
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin gin, ncclTeamTagWorld, uint32_t index)
      : ncclGinBarrierSession(coop, gin, ncclTeamWorld(gin.comm), gin.comm.worldGinBarrier, index) {}
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGinAllContexts all, ncclTeam team,
                                           ncclGinBarrierHandle handle, uint32_t index)
      : core_(coop, all.comm, team, handle.bufHandle, handle.nBarriers, index) {}
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGinAllContexts all, ncclTeamTagRail, uint32_t index)
      : ncclGinBarrierSession(coop, all, ncclTeamRail(all.comm), all.comm.railGinBarrier, index) {}
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGinAllContexts all, ncclTeamTagWorld, uint32_t index)
      : ncclGinBarrierSession(coop, all, ncclTeamWorld(all.comm), all.comm.worldGinBarrier, index) {}
  NCCL_DEVICE_INLINE ~ncclGinBarrierSession() { core_.finish(); }
  ncclGinBarrierSession(ncclGinBarrierSession const&) = delete;

  NCCL_DEVICE_INLINE void sync(Coop, cuda::memory_order order,
                               ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get) {
    order = fenced(order, fence);
    core_.arrive(order);
    (void)core_.wait(order);
  }
  /* ncclTimeout once timeoutCycles passed (nanoseconds on the emulator), ncclInvalidUsage once aborted. */
  NCCL_DEVICE_INLINE ncclResult_t sync(Coop, cuda::memory_order order, ncclGinFenceLevel fence,
                                       uint64_t timeoutCycles) {
    order = fenced(order, fence);
    core_.arrive(order);
    return core_.wait(order, timeoutCycles);
  }

 private:
  static NCCL_DEVICE_INLINE cuda::memory_order fenced(cuda::memory_order order, ncclGinFenceLevel fence) {
    return fence == ncclGinFenceLevel::None ? order : cuda::memory_order_acq_rel;
  }
  nccl_detail::BarrierCore<Coop> core_;
};

/* One-shot barriers: a session made, synced and ended. */
template <typename Coop, typename Gin>
NCCL_DEVICE_INLINE void ncclGinBarrier(Coop coop, Gin gin, ncclTeam team, ncclGinBarrierHandle handle, uint32_t index,
                                       cuda::memory_order order = cuda::memory_order_acq_rel,
                                       ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get) {
  ncclGinBarrierSession<Coop> bar{coop, gin, team, handle, index};
  bar.sync(coop, order, fence);
}
template <typename Coop, typename Gin>
NCCL_DEVICE_INLINE void ncclGinBarrier(Coop coop, Gin gin, ncclTeamTagRail tag, uint32_t index,
                                       cuda::memory_order order = cuda::memory_order_acq_rel,
                                       ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get) {
  ncclGinBarrierSession<Coop> bar{coop, gin, tag, index};
  bar.sync(coop, order, fence);
}
template <typename Coop, typename Gin>
NCCL_DEVICE_INLINE void ncclGinBarrier(Coop coop, Gin gin, ncclTeamTagWorld tag, uint32_t index,
                                       cuda::memory_order order = cuda::memory_order_acq_rel,
                                       ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get) {
  ncclGinBarrierSession<Coop> bar{coop, gin, tag, index};
  bar.sync(coop, order, fence);
}
#endif

#endif /* NCCL_DEVICE_GIN_BARRIER_H_ */
