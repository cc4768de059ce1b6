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

// LL all-to-all sessions and GIN barriers: `aux` holds, at offset 0, one error count per block (zeroed by
// the host), and from kAuxSlots on, one int per rank that the GIN barrier kernel's peers write.
struct LlArgs {
  ncclDevComm devComm;
  ncclLLA2AHandle lla2a;        // kGrid blocks of ncclLLA2ACalcSlots(nRanks, sizeof(LlPair)) slots
  ncclGinBarrierHandle ginBar;  // one GIN barrier of the world, from ncclGinBarrierCreateRequirement
  ncclWindow_t aux;
  int round;
};
constexpr size_t kAuxSlots = 256;  // bytes of error counts before the GIN barrier kernel's slots
constexpr int kLlEpochs = 4;

// A value of two 8-byte lines, so the LL session's multi-line path is used.
struct LlPair {
  unsigned long long a, b;
};
// What `from` sends `to` in epoch `tag` from block `block`.
NCCL_HOST_DEVICE_INLINE unsigned long long llValue(int from, int to, int tag, int block) {
  return (unsigned long long)from << 40 ^ (unsigned long long)to << 24 ^ (unsigned long long)tag << 8 ^
         (unsigned long long)block;
}

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

// Block b runs LL all-to-all session b for kLlEpochs epochs: even epochs, every rank sends every peer an
// LlPair in the slot of its own rank and receives one from each; odd epochs, thread 0 broadcasts a double
// and receives the sum of everyone's with recvReduce. Wrong values count into aux's error word of the block.
DEVAPI_KERNEL void llAlltoAll(const LlArgs& a) {
  const ncclDevComm& comm = a.devComm;
  ncclCoopCta cta;
  const int b = blockId(), n = comm.nRanks;
  int bad = 0;
  {
    ncclLLA2ASession<ncclCoopCta> ll{cta, comm, ncclTeamWorld(comm), a.lla2a, static_cast<uint32_t>(b), n};
    for (int e = 0; e < kLlEpochs; ++e) {
      const int tag = a.round * kLlEpochs + e;
      if (e % 2 == 0) {
        for (int p = cta.thread_rank(); p < n; p += cta.size())
          ll.send(p, comm.rank, LlPair{llValue(comm.rank, p, tag, b), ~llValue(comm.rank, p, tag, b)});
        for (int s = cta.thread_rank(); s < n; s += cta.size()) {
          const LlPair got = ll.recv<LlPair>(s);
          if (got.a != llValue(s, comm.rank, tag, b) || got.b != ~llValue(s, comm.rank, tag, b)) ++bad;
        }
      } else if (cta.thread_rank() == 0) {
        ll.bcast(comm.rank, static_cast<double>(comm.rank + 1) * (tag + 1));
        const double sum = ll.recvReduce<4, double>(0, n, 1, [](double v) { return v; },
                                                    [](double x, double y) { return x + y; });
        if (sum != static_cast<double>(n * (n + 1) / 2) * (tag + 1)) ++bad;
      }
      ll.endEpoch(cta);
    }
  }
  if (bad) nccl_port::fetchAdd(static_cast<int*>(ncclGetLocalPointer(a.aux, 0)) + b, bad, cuda::memory_order_relaxed);
}

// Block 0: every rank stores round * 1000 + rank into its slot of every peer's aux window, passes the
// world GIN barrier (devComm.worldGinBarrier), checks every slot of its own, and passes the barrier of
// a.ginBar before anyone's next round overwrites them.
DEVAPI_KERNEL void ginBarrierRound(const LlArgs& a) {
  const ncclDevComm& comm = a.devComm;
  if (blockId() != 0) return;
  ncclCoopCta cta;
  ncclGin gin{comm, 0};
  const int n = comm.nRanks;
  for (int p = cta.thread_rank(); p < n; p += cta.size()) {
    int* slots = static_cast<int*>(ncclGetPeerPointer(a.aux, kAuxSlots, p));
    slots[comm.rank] = a.round * 1000 + comm.rank;
  }
  {
    ncclGinBarrierSession<ncclCoopCta> bar{cta, gin, ncclTeamTagWorld{}, 0};
    bar.sync(cta, cuda::memory_order_relaxed, ncclGinFenceLevel::Put);
  }
  int bad = 0;
  const int* mine = static_cast<const int*>(ncclGetLocalPointer(a.aux, kAuxSlots));
  for (int r = cta.thread_rank(); r < n; r += cta.size())
    if (mine[r] != a.round * 1000 + r) ++bad;
  if (bad) nccl_port::fetchAdd(static_cast<int*>(ncclGetLocalPointer(a.aux, 0)) + 63, bad, cuda::memory_order_relaxed);
  ncclGinBarrier(cta, ncclGinAllContexts(comm), ncclTeamWorld(comm), a.ginBar, 0);
}

#endif  // NCCL_DEVICE_API
