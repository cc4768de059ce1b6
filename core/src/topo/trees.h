// Double binary trees (NCCL paper, "tree" algorithm): a binary tree across nodes, a chain inside each
// node, and a second tree that swaps the roles of interior nodes and leaves so that both trees together
// use every node's links about evenly. Pure functions of the rank -> node map; no communication.
#pragma once

#include "device/common/tree.h"  // TreeLinks, kTreeMaxArity, kTreeCount

#include <tutti/common.h>
#include <tutti/transport.h>

#include <vector>

namespace tutti {

// A node's place in a tree across nodes. Node indices, not ranks.
struct TreeNodeLinks {
  int parent = -1;            // -1 at the root
  int child[2] = {-1, -1};    // -1 = none; child[0] is set whenever child[1] is
};

// The first tree over `nNodes` nodes: in-order numbering by lowest set bit of the 1-based label
// (label = node + 1), so leaves are the even nodes and interior nodes the odd ones; the root is node
// 2^floor(log2 nNodes) - 1, the height is floor(log2 nNodes). For odd nNodes the tree is full (every interior
// node has two children); for even nNodes exactly one interior node has a single child.
// (NCCL numbers from 0 instead, which for odd counts leaves one node interior in both trees.)
// Requires 0 <= node < nNodes.
TreeNodeLinks treeBinaryNode(int nNodes, int node);

// Tree `tree` (0 or 1) of the double binary tree. Tree 1 is tree 0 mirrored (node i plays node
// nNodes-1-i) for even nNodes, shifted (node i plays node i-1 mod nNodes) for odd nNodes. Then no node
// is interior in both trees, and no node (even nNodes) or only node 0 (odd nNodes) is a leaf in both.
TreeNodeLinks treeDoubleNode(int nNodes, int node, int tree);

// Every rank's links in both trees.
struct DoubleTree {
  int nNodes = 0;
  std::vector<int> nodeIndex;             // rank -> node; nodes are numbered in order of their lowest rank
  std::vector<TreeLinks> links[kTreeCount];  // links[t][rank]
  int depth = 0;  // most links between a rank and its root, over both trees (0: one rank)
  const TreeLinks& channelLinks(int channel, int rank) const { return links[channel % kTreeCount][rank]; }
};

// Builds both trees from nodeOf[rank] = any identifier of the rank's host (ranks of one host need not be
// contiguous). Inside a node the ranks form a chain in rank order for tree 0 and in reverse order for
// tree 1; the chain's head carries the node's links to other nodes (parent head and child nodes' heads),
// so a head has up to kTreeMaxArity children: the next rank of its chain first, then its child nodes.
// Fails with ncclInvalidArgument on an empty map.
ncclResult_t topoDoubleTree(const std::vector<int>& nodeOf, DoubleTree* out);

// nodeOf for topoDoubleTree from the peers' host identities (same grouping as topoRing).
std::vector<int> topoNodeOf(const std::vector<tuttiPeerInfo_t>& peers);

}  // namespace tutti
