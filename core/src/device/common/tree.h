// Tree AllReduce, written once over a primitives type `P` (host: the Simple primitives; CUDA: the device
// primitives), as in the NCCL paper: reduce up the tree to the root, then broadcast back down. Each of
// the two phases is pipelined by chunks across loop iterations; the phases run one after the other.
//
// Why two sequential phases (NCCL's "up/down" variant) and not "root does recvReduceCopySend in the
// reduce loop": a single executor per channel that is still sending chunk j up cannot drain its parent's
// broadcast of chunk i < j, so once a FIFO fills (NCCL_STEPS slots) the root blocks on its down send while
// its children block on their up sends: a deadlock for any channel with more than ~2 * NCCL_STEPS chunks.
// The root therefore finishes the reduction into its output (recvReduceCopy) and broadcasts from there.
//
// Primitives required, beyond what ring.h uses. The program takes TWO primitives objects of type P:
//   up   : recv peers = every child (TreeLinks::down, 0..kTreeMaxArity), send peer = the parent (or none).
//   down : recv peer  = the parent (or none), send peers = every child.
// A "recv" step takes one chunk from EVERY recv peer; a "send" step writes the same chunk to EVERY send
// peer. All calls take element offsets into the user's buffers and a count (possibly 0: the step happens).
//   up.send(in, n)                   leaf: input -> parent
//   up.recvReduceSend(in, n)         middle: reduce(input, all children) -> parent (no postOp)
//   up.recvReduceCopy(in, out, n)    root: postOp(reduce(input, all children)) -> output
//   down.sendFromOutput(out, n)      root: output -> all children (NEW: ring.h never sends from output)
//   down.recvCopySend(out, n)        middle: parent -> output and -> all children
//   down.recv(out, n)                leaf: parent -> output
//   p.localCopy(in, out, n)          one rank alone: output = postOp(preOp(input))
// So the host Simple primitives must accept several recv connections (reducing all of them with the
// input, in a fixed order so every rank computes bit-identical results) and several send connections
// (one slot written per connection and step), and add sendFromOutput. The step counter (HostStepCounter)
// needs sendFromOutput too (no receive, counts nothing): its count of one object is the number of steps
// made on EACH of that object's receive connections (children for `up`, the parent for `down`).
#pragma once

#include "device/common/work.h"

namespace tutti {

// Up to two children across nodes plus one child in the intra-node chain (NCCL_MAX_TREE_ARITY).
inline constexpr int kTreeMaxArity = 3;
// The double binary tree: channel c follows tree c % kTreeCount.
inline constexpr int kTreeCount = 2;

// One rank's place in one tree. Plain data, shared by the topology code and both backends.
struct TreeLinks {
  int up = -1;                                // parent rank; -1 at the root
  int down[kTreeMaxArity] = {-1, -1, -1};     // children, filled from index 0; -1 = none
  TUTTI_HOST_DEVICE int nDown() const {
    int n = 0;
    while (n < kTreeMaxArity && down[n] >= 0) ++n;
    return n;
  }
};

// One channel's share of a tree AllReduce. Counts are datatype elements.
struct TreeWork {
  size_t chOffset;    // start of this channel's share in the buffers
  size_t chCount;     // elements of this channel's share
  size_t chunkCount;  // elements per step (at most one FIFO slot); > 0
  TreeLinks links;    // this rank in the channel's tree (channel c uses tree c % kTreeCount)
};

#define TUTTI_TREE_STEP(call)                       \
  do {                                              \
    ncclResult_t stepRes_ = (call);                 \
    if (stepRes_ != ncclSuccess) return stepRes_;   \
  } while (0)

// AllReduce over the channel's tree. `up` and `down` are built over this rank's links as described above;
// every rank of the tree must run this with the same chCount and chunkCount.
template <typename P>
TUTTI_HOST_DEVICE ncclResult_t treeAllReduce(P& up, P& down, const TreeWork& w) {
  const bool root = w.links.up < 0;
  const bool leaf = w.links.down[0] < 0;
  if (root && leaf) return up.localCopy(w.chOffset, w.chOffset, w.chCount);
  if (w.chunkCount == 0) return ncclInternalError;

  for (size_t done = 0; done < w.chCount; done += w.chunkCount) {  // reduce: leaves -> root
    const size_t n = minSize(w.chunkCount, w.chCount - done), off = w.chOffset + done;
    if (root) TUTTI_TREE_STEP(up.recvReduceCopy(off, off, n));
    else if (leaf) TUTTI_TREE_STEP(up.send(off, n));
    else TUTTI_TREE_STEP(up.recvReduceSend(off, n));
  }
  for (size_t done = 0; done < w.chCount; done += w.chunkCount) {  // broadcast: root -> leaves
    const size_t n = minSize(w.chunkCount, w.chCount - done), off = w.chOffset + done;
    if (root) TUTTI_TREE_STEP(down.sendFromOutput(off, n));
    else if (leaf) TUTTI_TREE_STEP(down.recv(off, n));
    else TUTTI_TREE_STEP(down.recvCopySend(off, n));
  }
  return ncclSuccess;
}

#undef TUTTI_TREE_STEP

}  // namespace tutti
