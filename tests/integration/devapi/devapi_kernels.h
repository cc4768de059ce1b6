// Kernels written against NCCL's device API, in the style of NCCL's device API examples. One source: the
// sim test compiles it with the host compiler for the CPU SIMT emulator (TUTTI_SIMT_EMULATOR), and
// devapi_kernels.cu with nvcc for sm_80 and sm_90, whose launchers the GPU test calls.
#pragma once

#include <nccl_device.h>

struct KernelArgs {
  ncclWindow_t sendwin, recvwin;
  size_t count;  // elements per rank (AllReduce) or per peer (AlltoAll)
  int iteration;
  ncclDevComm devComm;
};

// A barrier with a time limit: every thread records what its sync returned.
struct TimeoutArgs {
  ncclDevComm devComm;
  uint64_t timeoutCycles;  // 0: no limit (only an abort or revoke ends the wait)
  int* results;            // one per thread of block 0
};

// The host side of the GPU test (devapi_gpu_test.cc, host compiler) sees the argument types only.
#if defined(NCCL_DEVICE_API)

#if defined(__CUDACC__)
#define DEVAPI_KERNEL __device__
__device__ inline int blockId() { return blockIdx.x; }
__device__ inline int gridSize() { return gridDim.x; }
#else
#define DEVAPI_KERNEL inline
inline int blockId() { return tutti::simt::emu::current().block->bid; }
inline int gridSize() { return tutti::simt::emu::current().block->nblocks; }
#endif

// Each LSA rank sums every peer's send elements in a grid-stride slice and stores the sum into every peer's
// receive window, between LSA barriers (as NCCL's 01_allreduce_lsa example does).
DEVAPI_KERNEL void allReduceLsa(const KernelArgs& a) {
  const ncclDevComm& comm = a.devComm;
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                         static_cast<uint32_t>(blockId())};
  bar.sync(ncclCoopCta(), cuda::memory_order_relaxed);  // everyone's send data is written (before the launch)
  const int nLsa = ncclTeamLsa(comm).nRanks;
  const size_t tid = blockId() * ncclCoopCta().size() + ncclCoopCta().thread_rank();
  const size_t stride = static_cast<size_t>(gridSize()) * ncclCoopCta().size();
  // Rank r handles elements r, r + nLsa, ...: every element is summed by exactly one rank.
  for (size_t i = comm.lsaRank + tid * nLsa; i < a.count; i += stride * nLsa) {
    float sum = 0;
    for (int peer = 0; peer < nLsa; ++peer) sum += static_cast<const float*>(ncclGetLsaPointer(a.sendwin, 0, peer))[i];
    for (int peer = 0; peer < nLsa; ++peer) static_cast<float*>(ncclGetLsaPointer(a.recvwin, 0, peer))[i] = sum;
  }
  bar.sync(ncclCoopCta(), cuda::memory_order_release);  // every store landed before anyone reads its result
}

// Rank r puts its block for peer p into p's receive window at r's slot, with a signal; the receiver waits
// for one signal per rank (as nccl-tests' GIN AlltoAll does). Block b of every rank serves the peers
// p = b (mod grid) and bumps their signal b, so only block p % grid of peer p waits, for nRanks puts. A
// block reads its signal before it arrives at its barrier, and puts come after the senders' same barrier:
// no put can land before the value it is counted from was read.
DEVAPI_KERNEL void alltoAllGin(const KernelArgs& a) {
  const ncclDevComm& comm = a.devComm;
  ncclGin gin{comm, 0};
  const ncclGinSignal_t sig = static_cast<ncclGinSignal_t>(blockId());
  const uint64_t before = gin.readSignal(sig);
  ncclBarrierSession<ncclCoopCta> bar{ncclCoopCta(), ncclTeamTagWorld(), gin, static_cast<uint32_t>(blockId())};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire, ncclGinFenceLevel::Relaxed);
  const size_t bytes = a.count * sizeof(float);
  for (int peer = blockId() + gridSize() * ncclCoopCta().thread_rank(); peer < comm.nRanks;
       peer += gridSize() * ncclCoopCta().size())
    gin.put(ncclTeamWorld(comm), peer, a.recvwin, comm.rank * bytes, a.sendwin, peer * bytes, bytes,
            ncclGin_SignalInc{sig});
  if (comm.rank % gridSize() == blockId()) gin.waitSignal(ncclCoopCta(), sig, before + comm.nRanks);
  gin.flush(ncclCoopCta());
  bar.sync(ncclCoopCta(), cuda::memory_order_release, ncclGinFenceLevel::Relaxed);
}

DEVAPI_KERNEL void barrierWithTimeout(const TimeoutArgs& a) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), a.devComm, ncclTeamTagLsa(), 0};
  ncclResult_t res = ncclSuccess;
  if (a.timeoutCycles) res = bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel, a.timeoutCycles);
  else bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
  a.results[ncclCoopCta().thread_rank()] = a.timeoutCycles ? static_cast<int>(res) : 1;
}

#endif  // NCCL_DEVICE_API
