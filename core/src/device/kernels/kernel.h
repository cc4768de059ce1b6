// The kernel: grid = the launch's blocks (one per channel, plus one each for point-to-point sends and
// receives), one block runs its work items in order. Per item, warp 0 loads the item and warp 1 the
// connections it uses into shared memory; then every thread runs the algorithm's step program
// (device/common/ring.h, tree.h) over the device primitives (prims.h).
//
// One instance per datatype (kernel_inst.cc.in); the reduction op is a switch at the start of each work
// item, the protocol a branch per step (see prims.h). A launch carries work of one datatype.
#pragma once

#include "device/common/pat.h"
#include "device/common/ring.h"
#include "device/common/tree.h"
#include "device/kernels/dev_work.h"
#include "device/kernels/prims.h"
#include "device/kernels/sym.h"
#include "device/simt/simt.h"

#include <type_traits>

namespace tutti::dev {

// Shared memory of a block: its stop state, the work item running and the connections it uses (slot 0 the
// receive connection, 1 the send connection, then the tree's children: receives, then sends).
struct KernelShared {
  BlockShared block;
  DevWork work;
  DevConn conns[2 + 2 * kTreeMaxArity];
  SymPeers sym;  // Sym: the item's peers
};
inline constexpr int kConnSlots = 2 + 2 * kTreeMaxArity;

// Which connection of the table each shared slot mirrors (-1: none).
TUTTI_DEVICE int connOfSlot(const DevWork& w, int slot) {
  if (slot == 0) return w.recvConn;
  if (slot == 1) return w.sendConn;
  if (slot < 2 + kTreeMaxArity) return w.childRecv[slot - 2];
  return w.childSend[slot - 2 - kTreeMaxArity];
}

// Copies a plain struct with `n` cooperating threads (`t` this thread's index among them), 4 bytes each.
template <typename S>
TUTTI_DEVICE void cooperativeCopy(S* dst, const S* src, int t, int n) {
  static_assert(sizeof(S) % 4 == 0, "copied as 4-byte words");
  auto* d = reinterpret_cast<uint32_t*>(dst);
  const auto* s = reinterpret_cast<const uint32_t*>(src);
  for (size_t i = t; i < sizeof(S) / 4; i += n) d[i] = s[i];
}

template <typename T, typename Op>
TUTTI_DEVICE_NOINLINE ncclResult_t runWork(KernelShared* sh, const DevConn* conns, const Op& op, const WaitEnv& env) {
  const DevWork& w = sh->work;
  const DevConn* slot[kConnSlots];
  for (int s = 0; s < kConnSlots; ++s) slot[s] = connOfSlot(w, s) >= 0 ? &sh->conns[s] : nullptr;
  const DevConn* none[1] = {nullptr};
  auto nonNull = [](const DevConn* const* v, int n) {
    int k = 0;
    for (int i = 0; i < n; ++i) k += v[i] != nullptr;
    return k;
  };
  switch (w.kind) {
    case WorkKind::Ring: {
      DevPrims<T, Op> p(&slot[0], nonNull(&slot[0], 1), &slot[1], nonNull(&slot[1], 1), w.sendbuff, w.recvbuff, op,
                        w.proto, env);
      const ncclResult_t r = runRingCollective(p, w.coll);
      p.finish();
      return r;
    }
    case WorkKind::Tree: {
      const int nc = w.nChildren;
      DevPrims<T, Op> up(&slot[2], nc, &slot[1], w.isRoot ? 0 : 1, w.sendbuff, w.recvbuff, op, w.proto, env);
      DevPrims<T, Op> down(&slot[0], w.isRoot ? 0 : 1, &slot[2 + kTreeMaxArity], nc, w.sendbuff, w.recvbuff, op,
                           w.proto, env);
      TreeWork tw{w.coll.chOffset, w.coll.chCount, w.coll.chunkCount, TreeLinks{}};
      tw.links.up = w.isRoot ? -1 : 0;
      for (int i = 0; i < nc; ++i) tw.links.down[i] = 0;
      const ncclResult_t r = treeAllReduce(up, down, tw);
      up.finish();
      down.finish();
      return r;
    }
    case WorkKind::Pat: {
      // Each step's two connections go into the shared slots 0 (receive) and 1 (send) while it runs.
      const int nRanks = w.coll.nRanks;
      auto dim = [&](int d, auto&& body) -> ncclResult_t {
        simt::syncBlock();  // the previous step is done with the slots
        if (nRanks > 1 && simt::warp() == 0) {
          cooperativeCopy(&sh->conns[0], &conns[w.patConns[2 * d]], simt::lane(), simt::kWarpSize);
          cooperativeCopy(&sh->conns[1], &conns[w.patConns[2 * d + 1]], simt::lane(), simt::kWarpSize);
        }
        simt::syncBlock();
        const DevConn* recv[1] = {&sh->conns[0]};
        const DevConn* send[1] = {&sh->conns[1]};
        const int n = nRanks > 1 ? 1 : 0;
        DevPrims<T, Op> p(recv, n, send, n, w.sendbuff, w.recvbuff, op, w.proto, env);
        const ncclResult_t r = body(p);
        p.finish();
        return r;
      };
      return runPatCollective(dim, w.coll, w.sendbuff, w.recvbuff);
    }
    case WorkKind::Sym:
      return runSymmetric<T>(sh->sym, w, env);  // the same instance for every op
    case WorkKind::Send: {
      DevPrims<T, Op> p(none, 0, &slot[1], 1, w.sendbuff, w.recvbuff, op, w.proto, env);
      const ncclResult_t r = p.send(0, w.coll.count);
      p.finish();
      return r;
    }
    case WorkKind::Recv: {
      DevPrims<T, Op> p(&slot[0], 1, none, 0, w.sendbuff, w.recvbuff, op, w.proto, env);
      const ncclResult_t r = p.recv(0, w.coll.count);
      p.finish();
      return r;
    }
  }
  if (simt::tid() == 0) recordStop(env, StopReason::BadWork, -1, false, 0);
  return ncclInternalError;
}

template <typename T>
TUTTI_DEVICE_FN void kernelBody(const KernelArgs& a) {
  auto* sh = reinterpret_cast<KernelShared*>(simt::sharedMem());
  const int b = simt::bid(), t = simt::tid(), warp = simt::warp(), lane = simt::lane();
  if (t == 0) {
    sh->block.stop = 0;
    sh->block.status = DevStatus{};
  }
  for (int i = 0; i < a.nWork; ++i) {
    const DevWork& item = workAt(a, i);
    if (item.block != b) continue;
    simt::syncBlock();  // the previous item is done with the shared copies (and stored its steps)
    if (warp == 0) cooperativeCopy(&sh->work, &item, lane, simt::kWarpSize);
    if (item.kind == WorkKind::Sym) {
      cooperativeCopy(&sh->sym, item.sym, t, simt::nthreads());
    } else if (warp == 1 || simt::nthreads() == simt::kWarpSize) {
      for (int s = 0; s < kConnSlots; ++s) {
        const int c = connOfSlot(item, s);
        if (c >= 0) cooperativeCopy(&sh->conns[s], &a.conns[c], lane, simt::kWarpSize);
      }
    }
    simt::syncBlock();
    if (a.workTimes && t == 0) a.workTimes[2 * i] = simt::clockNs();
    const WaitEnv env{a.abortWord, a.timeoutNs, a.warnNs, a.warnNs ? &a.slowWaits[i] : nullptr, &sh->block, i};
    dispatchRedOp<T>(sh->work.op, [&](const auto& op) {
      using Op = std::decay_t<decltype(op)>;
      return runWork<T, Op>(sh, a.conns, op, env);
    });
    simt::syncBlock();
    if (a.workTimes && t == 0) a.workTimes[2 * i + 1] = simt::clockNs();
    if (stopped(env)) break;
  }
  simt::syncBlock();
  if (t == 0) a.status[b] = sh->block.status;
}

// Whether this compilation target has the kernel for T (fp8 reductions need sm_90, minArchForReduction); the
// host refuses such calls before launching, so the stub below only guards against a launch that slipped by.
template <typename T>
inline constexpr bool kKernelBuiltForTarget =
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    !std::is_same_v<T, Float8E4M3> && !std::is_same_v<T, Float8E5M2>;
#else
    true;
#endif

template <typename T>
TUTTI_DEVICE_FN void kernelMain(const KernelArgs& a) {
  if constexpr (!kKernelBuiltForTarget<T>) {
    if (simt::tid() == 0) a.status[simt::bid()] = DevStatus{StopReason::Unsupported, 0, -1, 0, 0, 0, 0, 0};
    return;
  } else {
    kernelBody<T>(a);
  }
}
#if defined(__CUDACC__)
// NCCL's most threads per block (LL128 on sm_90 uses 640); one block per SM.
template <typename T>
__global__ void __launch_bounds__(640, 1) tuttiKernel(KernelArgs args) {
  kernelMain<T>(args);
}
#else
// The emulator's entry: the same body, the argument passed by pointer.
template <typename T>
void tuttiKernelSim(const void* args) {
  kernelMain<T>(*static_cast<const KernelArgs*>(args));
}
#endif

}  // namespace tutti::dev
