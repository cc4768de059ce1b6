#include "topo/trees.h"

#include "util/check.h"

#include <algorithm>
#include <climits>
#include <unordered_map>

namespace tutti {
namespace {

// Labels are 1-based in-order positions: a label's lowest set bit is its height-class in the perfect
// tree over 1..2^m-1 (bit 1: leaf), its children are label -/+ bit/2. Labels past nNodes are cut off;
// a left child whose perfect-tree parent was cut hangs as the right child of its nearest kept ancestor.
int lowBit(int x) { return x & -x; }

int rootLabel(int n) {
  int r = 1;
  while (r <= n / 2) r <<= 1;
  return r;  // highest power of two <= n
}

TreeNodeLinks labelLinks(int n, int x) {
  TreeNodeLinks l;
  const int b = lowBit(x);
  if (x != rootLabel(n)) {
    // Bit 2b clear: x is a left child of x + b, unless x + b was cut; then x hangs under x - b (>= 1,
    // since x == b with 2x > n would be the root).
    const int p = ((x & (b << 1)) == 0 && x + b <= n) ? x + b : x - b;
    l.parent = p - 1;
  }
  if (b > 1) {
    l.child[0] = x - b / 2 - 1;  // left subtree lies below x <= n: never cut
    int c = b / 2;
    while (c > 0 && x + c > n) c >>= 1;  // right child: the largest kept x + c
    if (c > 0) l.child[1] = x + c - 1;
  }
  return l;
}

// Applies a node permutation to a tree-0 view: `map` sends tree-0 node indices to tree-t indices.
template <typename Map>
TreeNodeLinks mapLinks(const TreeNodeLinks& l, Map map) {
  TreeNodeLinks m;
  m.parent = l.parent < 0 ? -1 : map(l.parent);
  for (int i = 0; i < 2; ++i) m.child[i] = l.child[i] < 0 ? -1 : map(l.child[i]);
  return m;
}

}  // namespace

TreeNodeLinks treeBinaryNode(int nNodes, int node) {
  if (nNodes <= 0 || node < 0 || node >= nNodes) return {};
  return labelLinks(nNodes, node + 1);
}

TreeNodeLinks treeDoubleNode(int nNodes, int node, int tree) {
  if (nNodes <= 0 || node < 0 || node >= nNodes) return {};
  if (tree % kTreeCount == 0) return treeBinaryNode(nNodes, node);
  if (nNodes % 2 == 0) {
    auto mirror = [nNodes](int i) { return nNodes - 1 - i; };
    return mapLinks(treeBinaryNode(nNodes, mirror(node)), mirror);
  }
  // Shift: node i plays tree-0 node i-1, so tree-0 neighbour j becomes node j+1.
  auto shift = [nNodes](int j) { return j + 1 == nNodes ? 0 : j + 1; };
  return mapLinks(treeBinaryNode(nNodes, node == 0 ? nNodes - 1 : node - 1), shift);
}

ncclResult_t topoDoubleTree(const std::vector<int>& nodeOf, DoubleTree* out) {
  if (out == nullptr) TUTTI_FAIL(ncclInvalidArgument, "topoDoubleTree: null output");
  if (nodeOf.empty()) TUTTI_FAIL(ncclInvalidArgument, "topoDoubleTree: no ranks");
  if (nodeOf.size() > static_cast<size_t>(INT_MAX)) {
    TUTTI_FAIL(ncclInvalidArgument, "topoDoubleTree: {} ranks do not fit an int", nodeOf.size());
  }
  const int nRanks = static_cast<int>(nodeOf.size());

  DoubleTree t;
  t.nodeIndex.resize(nRanks);
  std::unordered_map<int, int> index;  // host id -> node, in order of the node's lowest rank
  index.reserve(nodeOf.size());
  std::vector<int> size;
  for (int r = 0; r < nRanks; ++r) {
    auto [it, fresh] = index.try_emplace(nodeOf[r], static_cast<int>(size.size()));
    if (fresh) size.push_back(0);
    ++size[it->second];
    t.nodeIndex[r] = it->second;
  }
  t.nNodes = static_cast<int>(size.size());
  // Ranks grouped by node, ascending within a node: node n holds members[first[n] .. first[n + 1]).
  std::vector<int> first(t.nNodes + 1, 0), members(nRanks);
  for (int n = 0; n < t.nNodes; ++n) first[n + 1] = first[n] + size[n];
  std::vector<int> fill(first.begin(), first.end() - 1);
  for (int r = 0; r < nRanks; ++r) members[fill[t.nodeIndex[r]]++] = r;

  for (int tree = 0; tree < kTreeCount; ++tree) {
    std::vector<TreeLinks>& links = t.links[tree];
    links.assign(nRanks, TreeLinks{});
    // Chain position i of node `n` in this tree; tree 1 walks the node backwards so that the two trees
    // use different heads (and so different network endpoints) where a node has several ranks.
    auto chainAt = [&](int n, int i) {
      return tree == 0 ? members[first[n] + i] : members[first[n + 1] - 1 - i];
    };
    for (int n = 0; n < t.nNodes; ++n) {
      const int len = first[n + 1] - first[n];
      for (int i = 0; i < len; ++i) {
        TreeLinks& l = links[chainAt(n, i)];
        if (i > 0) l.up = chainAt(n, i - 1);
        if (i + 1 < len) l.down[0] = chainAt(n, i + 1);
      }
      const TreeNodeLinks nl = treeDoubleNode(t.nNodes, n, tree);
      TreeLinks& head = links[chainAt(n, 0)];
      if (nl.parent >= 0) head.up = chainAt(nl.parent, 0);
      for (int c : nl.child) {
        if (c < 0) continue;
        const int slot = head.nDown();
        // Cannot happen with two node children and one chain child; guards the arity contract.
        if (slot == kTreeMaxArity) {
          TUTTI_FAIL(ncclInternalError, "tree {}: node {} has too many children", tree, n);
        }
        head.down[slot] = chainAt(c, 0);
      }
    }
  }
  // Depth: breadth first from each tree's root (the one rank without a parent).
  for (const std::vector<TreeLinks>& links : t.links) {
    std::vector<int> level(nRanks, -1), queue;
    queue.reserve(nRanks);
    for (int r = 0; r < nRanks; ++r)
      if (links[r].up < 0) {
        level[r] = 0;
        queue.push_back(r);
      }
    for (size_t i = 0; i < queue.size(); ++i) {
      const TreeLinks& l = links[queue[i]];
      t.depth = std::max(t.depth, level[queue[i]]);
      for (int c = 0; c < l.nDown(); ++c) {
        level[l.down[c]] = level[queue[i]] + 1;
        queue.push_back(l.down[c]);
      }
    }
  }
  *out = std::move(t);
  return ncclSuccess;
}

std::vector<int> topoNodeOf(const std::vector<tuttiPeerInfo_t>& peers) {
  std::unordered_map<uint64_t, int> index;
  std::vector<int> nodeOf;
  nodeOf.reserve(peers.size());
  for (const auto& p : peers) {
    auto it = index.try_emplace(p.hostHash, static_cast<int>(index.size())).first;
    nodeOf.push_back(it->second);
  }
  return nodeOf;
}

}  // namespace tutti
