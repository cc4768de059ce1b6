/* Barriers among the ranks of a team that reach each other by load/store (ncclLsaBarrierSession).
 *
 * A barrier handle names, in every rank's resource block, nBarriers rows of one 32-bit arrival word per
 * team rank, then one epoch word per barrier. To pass barrier `index` for the (e+1)-th time, each team rank
 * writes e+1 into its own word of that row in every member's block (release), then waits until every word
 * of the row in its own block has reached e+1 (acquire). Only the CTA that owns a barrier index uses it;
 * the session keeps the epoch in a register and writes it back when it ends. */
#ifndef NCCL_DEVICE_LSA_BARRIER_H_
#define NCCL_DEVICE_LSA_BARRIER_H_

#include "coop.h"
#include "core.h"

/* Fills *outReq with the resource buffer of nBarriers barriers among `team`'s ranks; its handle is written to
 * outHandle->bufHandle by ncclDevCommCreate. Link outReq into resourceRequirementsList. */
NCCL_EXTERN_C ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                           ncclLsaBarrierHandle_t* outHandle,
                                                           ncclDevResourceRequirements_t* outReq);

#ifdef __cplusplus
/* Bytes of the resource buffer of nBarriers barriers among nRanks ranks. */
NCCL_HOST_DEVICE_INLINE size_t ncclLsaBarrierBytes(int nBarriers, int nRanks) {
  return (size_t)nBarriers * ((size_t)nRanks + 1) * sizeof(uint32_t);
}
#endif

#if defined(NCCL_DEVICE_API)
namespace nccl_detail {

/* One result for the whole group: aborted if any thread saw the abort, else timed out if any did. */
template <typename Coop>
NCCL_DEVICE_INLINE ncclResult_t agree(Coop& coop, ncclResult_t mine) {
  const bool aborted = coop.any(mine == ncclInvalidUsage);
  const bool timedOut = coop.any(mine == ncclTimeout);
  return aborted ? ncclInvalidUsage : timedOut ? ncclTimeout : ncclSuccess;
}

/* The barrier among `team` whose rows start `handle` bytes into every member's resource block. */
template <typename Coop>
struct BarrierCore {
  Coop coop;
  char* const* resources;  /* by world rank */
  int worldFirst;          /* world rank of team rank 0 */
  ncclTeam_t team;
  uint32_t* row;           /* this rank's row of arrivals for `index` */
  uint32_t* epochWord;     /* this rank's epoch of `index` */
  uint32_t offsetInRow;    /* byte offset of the row in every block */
  uint32_t epoch;
  uint8_t* abortFlag;

  NCCL_DEVICE_INLINE BarrierCore(Coop c, ncclDevComm const& comm, ncclTeam_t t, ncclDevResourceHandle_t handle,
                                 int nBarriers, uint32_t index)
      : coop(c), resources(comm.resources), team(t), abortFlag(comm.abortFlag) {
    worldFirst = comm.rank - t.rank * t.stride;
    if ((int)index >= nBarriers) nccl_port::trap();  /* a barrier the device communicator does not have */
    offsetInRow = handle + index * (uint32_t)t.nRanks * (uint32_t)sizeof(uint32_t);
    char* mine = resources[comm.rank];
    row = (uint32_t*)(mine + offsetInRow);
    epochWord = (uint32_t*)(mine + handle + (size_t)nBarriers * t.nRanks * sizeof(uint32_t)) + index;
    epoch = nccl_port::load(epochWord, cuda::memory_order_relaxed);
  }
  NCCL_DEVICE_INLINE void arrive(cuda::memory_order order) {
    coop.sync();  /* the group's earlier stores come before any thread's release below */
    for (int t = coop.thread_rank(); t < team.nRanks; t += coop.size()) {
      char* peerBlock = resources[worldFirst + t * team.stride];
      if (!peerBlock) nccl_port::trap();  /* not reachable by load/store */
      uint32_t* word = (uint32_t*)(peerBlock + offsetInRow) + team.rank;
      nccl_port::store(word, epoch + 1, order == cuda::memory_order_relaxed ? order : cuda::memory_order_release);
    }
  }
  /* ncclSuccess; ncclTimeout after timeoutCycles (0: no limit) or ncclInvalidUsage once the communicator
   * is aborted, for the whole group (the barrier is then left behind: the session must not be used again). */
  NCCL_DEVICE_INLINE ncclResult_t wait(cuda::memory_order order, uint64_t timeoutCycles = 0) {
    const cuda::memory_order ld = order == cuda::memory_order_relaxed ? order : cuda::memory_order_acquire;
    ncclResult_t res = ncclSuccess;
    for (int t = coop.thread_rank(); t < team.nRanks && res == ncclSuccess; t += coop.size()) {
      uint32_t* word = row + t;
      const uint32_t want = epoch + 1;
      res = nccl_port::waitUntil([&] { return (int32_t)(nccl_port::load(word, ld) - want) >= 0; }, abortFlag,
                                 timeoutCycles);
    }
    epoch += 1;
    return nccl_detail::agree(coop, res);  /* also orders: every thread sees what the waits acquired */
  }
  NCCL_DEVICE_INLINE void finish() {
    if (coop.thread_rank() == 0) nccl_port::store(epochWord, epoch, cuda::memory_order_relaxed);
  }
};

}  // namespace nccl_detail

template <typename Coop>
struct ncclLsaBarrierSession {
  /* Barrier `index` of `handle`, among `team` (the LSA team or a part of it). */
  NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop coop, ncclDevComm const& comm, ncclTeam_t team,
                                           ncclLsaBarrierHandle_t handle, uint32_t index, bool multimem = false,
                                           ncclMultimemHandle_t = {})
      : core_(coop, comm, team, handle.bufHandle, handle.nBarriers, index) {
    if (multimem) nccl_port::trap();  /* multimem needs NVLink SHARP */
  }
  /* Barrier `index` of the communicator's LSA barriers (devComm.lsaBarrier). */
  NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop coop, ncclDevComm const& comm, ncclTeamTagLsa, uint32_t index,
                                           bool multimem = false)
      : ncclLsaBarrierSession(coop, comm, ncclTeamLsa(comm), comm.lsaBarrier, index, multimem) {}
  NCCL_DEVICE_INLINE ~ncclLsaBarrierSession() { core_.finish(); }
  ncclLsaBarrierSession(ncclLsaBarrierSession const&) = delete;

  NCCL_DEVICE_INLINE void arrive(Coop, cuda::memory_order order) { core_.arrive(order); }
  /* Without a limit a wait ends only when every member arrived or the communicator is aborted. */
  NCCL_DEVICE_INLINE void wait(Coop, cuda::memory_order order) { (void)core_.wait(order); }
  NCCL_DEVICE_INLINE void sync(Coop, cuda::memory_order order) {
    core_.arrive(order);
    (void)core_.wait(order);
  }
  /* ncclTimeout once timeoutCycles passed (nanoseconds on the emulator), ncclInvalidUsage once aborted. */
  NCCL_DEVICE_INLINE ncclResult_t wait(Coop, cuda::memory_order order, uint64_t timeoutCycles) {
    return core_.wait(order, timeoutCycles);
  }
  NCCL_DEVICE_INLINE ncclResult_t sync(Coop, cuda::memory_order order, uint64_t timeoutCycles) {
    core_.arrive(order);
    return core_.wait(order, timeoutCycles);
  }

 private:
  nccl_detail::BarrierCore<Coop> core_;
};
#endif

#endif /* NCCL_DEVICE_LSA_BARRIER_H_ */
