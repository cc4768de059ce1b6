// Double binary trees: node-level trees for 1..4096 nodes, and rank-level trees (chains inside nodes)
// up to 4096 ranks in several ranks-per-node shapes, contiguous or not.
#include "plan/plan.h"
#include "topo/trees.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace tutti {
namespace {

constexpr int kMaxRanks = 4096;

// Rank counts of the rank-level checks: every count up to 512, then powers of two with their neighbours
// and a stride of 61 up to kMaxRanks. Each check is linear in k, so every count to 4096 would cost ~17
// million rank checks per shape (minutes under sanitizers) for shapes whose structure repeats.
std::vector<int> rankCounts() {
  std::vector<int> ks;
  for (int k = 1; k <= 512; ++k) ks.push_back(k);
  for (int k = 513; k <= kMaxRanks; ++k) {
    const bool nearPow2 = ((k - 1) & (k - 2)) == 0 || (k & (k - 1)) == 0 || ((k + 1) & k) == 0;
    if (nearPow2 || k % 61 == 0 || k == kMaxRanks) ks.push_back(k);
  }
  return ks;
}

int floorLog2(int n) {
  int l = 0;
  while ((2 << l) <= n) ++l;
  return l;
}

// Checks that tree `t` over n nodes is a binary tree spanning all nodes with consistent links and height
// at most floor(log2 n); returns the number of children of every node.
std::vector<int> checkNodeTree(int n, int t) {
  std::vector<TreeNodeLinks> l(n);
  for (int i = 0; i < n; ++i) l[i] = treeDoubleNode(n, i, t);
  std::vector<int> nChildren(n, 0), depth(n, -1);
  int root = -1;
  for (int i = 0; i < n; ++i) {
    if (l[i].parent < 0) {
      EXPECT_EQ(root, -1) << "n=" << n << " tree " << t << ": second root " << i;
      root = i;
    } else {
      EXPECT_LT(l[i].parent, n);
      const TreeNodeLinks& p = l[l[i].parent];
      EXPECT_TRUE(p.child[0] == i || p.child[1] == i) << "n=" << n << " tree " << t << " node " << i;
    }
    EXPECT_FALSE(l[i].child[0] < 0 && l[i].child[1] >= 0) << "child[1] without child[0], node " << i;
    for (int c : l[i].child) {
      if (c < 0) continue;
      EXPECT_LT(c, n);
      if (c >= 0 && c < n) { EXPECT_EQ(l[c].parent, i) << "n=" << n << " tree " << t << " node " << i; }
      ++nChildren[i];
    }
    if (l[i].child[0] >= 0 && l[i].child[1] >= 0) { EXPECT_NE(l[i].child[0], l[i].child[1]); }
  }
  if (root < 0) {
    ADD_FAILURE() << "n=" << n << " tree " << t << ": no root";
    return nChildren;
  }
  std::vector<int> stack{root};
  depth[root] = 0;
  int reached = 0, height = 0;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    ++reached;
    height = std::max(height, depth[v]);
    for (int c : l[v].child) {
      if (c < 0 || c >= n) continue;
      if (depth[c] >= 0) {
        ADD_FAILURE() << "n=" << n << " tree " << t << ": node " << c << " reached twice";
        return nChildren;
      }
      depth[c] = depth[v] + 1;
      stack.push_back(c);
    }
  }
  EXPECT_EQ(reached, n) << "tree " << t;
  EXPECT_LE(height, floorLog2(n)) << "n=" << n << " tree " << t;
  return nChildren;
}

TEST(TreeNodes, FirstTreeIsInOrderWithEvenLeaves) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    for (int i = 0; i < n; ++i) {
      const TreeNodeLinks l = treeBinaryNode(n, i);
      if (l.child[0] >= 0) { EXPECT_LT(l.child[0], i); }
      if (l.child[1] >= 0) { EXPECT_GT(l.child[1], i); }
      const bool leaf = l.child[0] < 0;
      ASSERT_EQ(leaf, i % 2 == 0) << "n=" << n << " node " << i;
    }
  }
  EXPECT_EQ(treeBinaryNode(1, 0).parent, -1);
  EXPECT_EQ(treeBinaryNode(8, 7).parent, -1);  // root: 2^floor(log2 n) - 1
  EXPECT_EQ(treeBinaryNode(8, 3).parent, 7);
  EXPECT_EQ(treeBinaryNode(8, 6).parent, 5);
}

TEST(TreeNodes, DoubleTreeSpansAndBalancesRoles) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    const std::vector<int> c0 = checkNodeTree(n, 0), c1 = checkNodeTree(n, 1);
    int interiorBoth = 0, leafBoth = 0, leafBothNode = -1, singleChild = 0;
    for (int i = 0; i < n; ++i) {
      interiorBoth += c0[i] > 0 && c1[i] > 0;
      if (c0[i] == 0 && c1[i] == 0) ++leafBoth, leafBothNode = i;
      singleChild += c0[i] == 1;
    }
    ASSERT_EQ(interiorBoth, 0) << "n=" << n;
    if (n % 2 == 0) {
      ASSERT_EQ(leafBoth, 0) << "n=" << n;
      ASSERT_EQ(singleChild, 1) << "n=" << n;
    } else {
      ASSERT_EQ(leafBoth, 1) << "n=" << n;
      ASSERT_EQ(leafBothNode, 0) << "n=" << n;
      ASSERT_EQ(singleChild, 0) << "n=" << n << ": odd counts give a full tree";
    }
    if (HasFailure()) return;
  }
}

TEST(TreeNodes, OutOfRangeNodeHasNoLinks) {
  for (auto [n, i] : {std::pair{0, 0}, {4, -1}, {4, 4}, {-3, 0}}) {
    const TreeNodeLinks l = treeDoubleNode(n, i, 1);
    EXPECT_EQ(l.parent, -1);
    EXPECT_EQ(l.child[0], -1);
    EXPECT_EQ(l.child[1], -1);
  }
}

// A rank -> host map for k ranks.
using Shape = std::function<std::vector<int>(int k)>;

struct NamedShape {
  std::string name;
  Shape make;
};

std::vector<NamedShape> shapes() {
  std::vector<NamedShape> s;
  for (int ppn : {1, 2, 3, 4, 8}) {
    s.push_back({"ppn" + std::to_string(ppn), [ppn](int k) {
                   std::vector<int> m(k);
                   for (int r = 0; r < k; ++r) m[r] = r / ppn;
                   return m;
                 }});
  }
  // Uneven node sizes 1..9, seeded per k so every run checks the same maps.
  s.push_back({"uneven", [](int k) {
                 std::mt19937 rng(k);
                 std::vector<int> m(k);
                 for (int r = 0, node = 0; r < k; ++node) {
                   const int size = 1 + static_cast<int>(rng() % 9);
                   for (int i = 0; i < size && r < k; ++i) m[r++] = node;
                 }
                 return m;
               }});
  // Ranks of a host spread out (round robin over ceil(k/4) hosts) with arbitrary host ids.
  s.push_back({"interleaved", [](int k) {
                 const int hosts = (k + 3) / 4;
                 std::vector<int> m(k);
                 for (int r = 0; r < k; ++r) m[r] = (r % hosts) * 7919 - 100000;
                 return m;
               }});
  return s;
}

// Checks one rank-level tree: spanning from one root, links consistent both ways, arity <= 3, chains
// inside nodes in rank order (tree 0) or reverse rank order (tree 1), node links only between heads.
// Returns the first violation ("" if none); plain checks, as this runs for hundreds of thousands of ranks.
// *depth gets the most links between a rank and the root.
std::string checkRankTree(const std::vector<int>& nodeOf, const DoubleTree& dt, int t, int* depth) {
  const int k = static_cast<int>(nodeOf.size());
  const std::vector<TreeLinks>& l = dt.links[t];
  auto at = [](int r) { return "rank " + std::to_string(r) + ": "; };
  if (static_cast<int>(l.size()) != k) return "wrong number of links";
  // Ranks of each node in chain order: chain[first[n] .. first[n + 1]).
  std::vector<int> first(dt.nNodes + 1, 0), chain(k);
  for (int r = 0; r < k; ++r) {
    if (dt.nodeIndex[r] < 0 || dt.nodeIndex[r] >= dt.nNodes) return at(r) + "bad node index";
    ++first[dt.nodeIndex[r] + 1];
  }
  for (int n = 0; n < dt.nNodes; ++n) first[n + 1] += first[n];
  std::vector<int> fill(first.begin(), first.end() - 1);
  for (int r = 0; r < k; ++r) chain[fill[dt.nodeIndex[r]]++] = r;
  for (int n = 0; n < dt.nNodes; ++n) {
    if (first[n] == first[n + 1]) return "node " + std::to_string(n) + " is empty";
    if (t == 1) std::reverse(chain.begin() + first[n], chain.begin() + first[n + 1]);
  }
  auto head = [&](int r) { return chain[first[dt.nodeIndex[r]]]; };

  int root = -1;
  for (int r = 0; r < k; ++r) {
    const TreeLinks& x = l[r];
    const int nd = x.nDown();
    for (int i = nd; i < kTreeMaxArity; ++i)
      if (x.down[i] != -1) return at(r) + "gap in down[]";
    for (int i = 0; i < nd; ++i) {
      const int d = x.down[i];
      if (d < 0 || d >= k || d == r) return at(r) + "bad child " + std::to_string(d);
      if (l[d].up != r) return at(r) + "child " + std::to_string(d) + " has another parent";
      for (int j = 0; j < i; ++j)
        if (x.down[j] == d) return at(r) + "duplicate child";
      if (dt.nodeIndex[d] != dt.nodeIndex[r] && (r != head(r) || d != head(d)))
        return at(r) + "node link to " + std::to_string(d) + " not between heads";
    }
    if (x.up < 0) {
      if (root >= 0) return "two roots: " + std::to_string(root) + " and " + std::to_string(r);
      root = r;
    } else if (x.up >= k || std::find(l[x.up].down, l[x.up].down + kTreeMaxArity, r) ==
                                l[x.up].down + kTreeMaxArity) {
      return at(r) + "parent does not list it as a child";
    }
  }
  if (root < 0) return "no root";
  // Chain contiguity: position i > 0 hangs under position i - 1 of its own node, and has exactly one
  // child in its node (the next position, listed first) unless it ends the chain.
  for (int n = 0; n < dt.nNodes; ++n) {
    const int len = first[n + 1] - first[n];
    for (int i = 0; i < len; ++i) {
      const int r = chain[first[n] + i];
      const TreeLinks& x = l[r];
      if (i > 0 && x.up != chain[first[n] + i - 1]) return at(r) + "chain broken";
      if (i == 0 && x.up >= 0 && dt.nodeIndex[x.up] == n) return at(r) + "head's parent in its own node";
      int sameNode = 0;
      for (int j = 0; j < x.nDown(); ++j) sameNode += dt.nodeIndex[x.down[j]] == n;
      if (sameNode != (i + 1 < len ? 1 : 0)) return at(r) + "wrong number of children in its node";
      if (i + 1 < len && x.down[0] != chain[first[n] + i + 1]) return at(r) + "chain child is not first";
    }
  }
  // Every rank reached exactly once from the root.
  std::vector<char> seen(k, 0);
  std::vector<int> level(k, 0);
  std::vector<int> stack{root};
  int reached = 0;
  *depth = 0;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (seen[v]) return at(v) + "reached twice";
    seen[v] = 1;
    ++reached;
    *depth = std::max(*depth, level[v]);
    for (int i = 0; i < l[v].nDown(); ++i) {
      level[l[v].down[i]] = level[v] + 1;
      stack.push_back(l[v].down[i]);
    }
  }
  if (reached != k) return "reached " + std::to_string(reached) + " of " + std::to_string(k) + " ranks";
  return "";
}

class TreeRanks : public ::testing::TestWithParam<int> {};

TEST_P(TreeRanks, SpanningTreesWithChainsInsideNodes) {
  const NamedShape shape = shapes()[GetParam()];
  for (int k : rankCounts()) {
    SCOPED_TRACE(shape.name + " k=" + std::to_string(k));
    const std::vector<int> nodeOf = shape.make(k);
    DoubleTree dt;
    ASSERT_EQ(topoDoubleTree(nodeOf, &dt), ncclSuccess);
    ASSERT_EQ(static_cast<int>(dt.nodeIndex.size()), k);
    // Node numbering follows each node's lowest rank.
    int next = 0;
    bool ordered = true;
    for (int r = 0; r < k; ++r) {
      ordered = ordered && dt.nodeIndex[r] <= next;
      if (dt.nodeIndex[r] == next) ++next;
    }
    ASSERT_TRUE(ordered);
    ASSERT_EQ(next, dt.nNodes);
    int depth = 0;
    for (int t = 0; t < kTreeCount; ++t) {
      int d = -1;
      ASSERT_EQ(checkRankTree(nodeOf, dt, t, &d), "") << "tree " << t;
      depth = std::max(depth, d);
    }
    ASSERT_EQ(dt.depth, depth);
    // Channels alternate between the trees.
    ASSERT_EQ(&dt.channelLinks(0, k - 1), &dt.links[0][k - 1]);
    ASSERT_EQ(&dt.channelLinks(3, 0), &dt.links[1][0]);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, TreeRanks, ::testing::Range(0, static_cast<int>(shapes().size())),
                         [](const ::testing::TestParamInfo<int>& i) { return shapes()[i.param].name; });

// The depth the planner sizes tree chunks by: links across nodes plus the chain inside a node.
TEST(TreeRanks, DepthOfSmallShapes) {
  struct Case {
    std::vector<int> nodeOf;
    int depth;
  };
  for (const Case& c : std::vector<Case>{{{0}, 0},
                                         {{0, 1}, 1},
                                         {{0, 1, 2, 3}, 2},          // node tree of height 2 (root, 1 child, 1 leaf)
                                         {{0, 0, 0, 0}, 3},          // one node: a chain of 4
                                         {{0, 0, 1, 1}, 2},          // heads linked, chain of 2 below
                                         {{0, 1, 2, 3, 4, 5, 6, 7}, 3}}) {
    DoubleTree dt;
    ASSERT_EQ(topoDoubleTree(c.nodeOf, &dt), ncclSuccess);
    EXPECT_EQ(dt.depth, c.depth) << c.nodeOf.size() << " ranks on " << dt.nNodes << " nodes";
  }
}

// Tree Simple steps: a share that makes few slot-sized chunks per link of depth is cut finer, never below
// 32 KiB; large shares keep whole slots.
TEST(TreeChunks, SmallSharesAreCutForPipelining) {
  constexpr size_t K = 1024;
  EXPECT_EQ(treeChunkBytes(512 * K, 64 * K, 2), 32 * K);           // two chunks instead of one
  EXPECT_EQ(treeChunkBytes(512 * K, 1024 * K, 2), 128 * K);        // 8 chunks = 4 per link of depth
  EXPECT_EQ(treeChunkBytes(512 * K, 1024 * K - 1, 2), 64 * K);     // one byte short of 8 x 128 KiB
  EXPECT_EQ(treeChunkBytes(512 * K, 4096 * K, 2), 512 * K);
  EXPECT_EQ(treeChunkBytes(512 * K, 4096 * K, 3), 256 * K);        // deeper trees want more chunks
  EXPECT_EQ(treeChunkBytes(512 * K, 1, 1), 32 * K);
  EXPECT_EQ(treeChunkBytes(512 * K, 0, 0), 32 * K);                // a one-rank "tree" is never deeper than 1
  EXPECT_EQ(treeChunkBytes(48 * K, 1, 2), 48 * K);                 // a slot below 64 KiB is never cut
  EXPECT_EQ(treeChunkBytes(100 * K, 1, 2), 50 * K);
}

TEST(TreeRanks, HeadsDifferBetweenTreesWhenNodesHaveSeveralRanks) {
  // 3 nodes of 4 ranks: tree 0 enters node 1 at rank 4, tree 1 at rank 7.
  std::vector<int> nodeOf{5, 5, 5, 5, 9, 9, 9, 9, 2, 2, 2, 2};
  DoubleTree dt;
  ASSERT_EQ(topoDoubleTree(nodeOf, &dt), ncclSuccess);
  EXPECT_EQ(dt.nNodes, 3);
  // Tree 0: node 1 is the root, its head (rank 4) has its chain child first, then nodes 0 and 2.
  EXPECT_EQ(dt.links[0][4].up, -1);
  EXPECT_EQ(dt.links[0][4].down[0], 5);
  EXPECT_EQ(dt.links[0][4].down[1], 0);
  EXPECT_EQ(dt.links[0][4].down[2], 8);
  EXPECT_EQ(dt.links[0][7].up, 6);
  EXPECT_EQ(dt.links[0][7].nDown(), 0);
  // Tree 1 (shifted): node 1 is a leaf under node 2, entered at its highest rank.
  EXPECT_EQ(dt.links[1][7].up, 11);
  EXPECT_EQ(dt.links[1][7].down[0], 6);
  EXPECT_EQ(dt.links[1][4].up, 5);
  EXPECT_EQ(dt.links[1][4].nDown(), 0);
}

TEST(TreeRanks, TopoNodeOfGroupsByHost) {
  std::vector<tuttiPeerInfo_t> peers(5);
  const uint64_t hosts[] = {77, 12, 77, 12, 40};
  for (int r = 0; r < 5; ++r) {
    peers[r] = {};
    peers[r].rank = r;
    peers[r].hostHash = hosts[r];
  }
  EXPECT_EQ(topoNodeOf(peers), (std::vector<int>{0, 1, 0, 1, 2}));
}

TEST(TreeRanks, BadInputIsAnError) {
  DoubleTree dt;
  EXPECT_EQ(topoDoubleTree({}, &dt), ncclInvalidArgument);
  EXPECT_EQ(topoDoubleTree({0, 1}, nullptr), ncclInvalidArgument);
}

}  // namespace
}  // namespace tutti
