// Tree shapes over vertices (ranks): a BFS spanning tree over links, and the
// two complementary binary trees of a double binary tree. A tree is given by
// each vertex's parent (-1 at the root).
#pragma once

#include <vector>

#include "graph.hpp"

namespace nnpccl {

// Breadth-first tree of `g` from `root`: every edge is a link and each
// vertex is as few hops from the root as the links allow. Vertices `g`
// cannot reach get parent -2. O(V + E).
std::vector<int> bfs_tree(const UndirectedGraph &g, int root);

// One of the two binary trees of a double binary tree over the vertices in
// `order` (a permutation of 0..p-1). Number the positions 1..p; position i = 2^k·odd sits
// at height k of an in-order binary tree, its parent i ± 2^k (the one that is
// an odd multiple of 2^(k+1)), skipping parents beyond p; the root is the
// largest power of two <= p. Tree 0 maps index i to order[i-1], tree 1 to
// order[i mod p]: odd indices are leaves, so tree 0's inner vertices sit at
// odd positions of `order` and tree 1's at even ones — no vertex is inner in
// both, which is what lets the two trees split the bandwidth. Depth about
// log2(p). O(p log p).
std::vector<int> binary_tree(const std::vector<int> &order, int which);

// Children lists from a parent array.
std::vector<std::vector<int>> children_of(const std::vector<int> &parent);

} // namespace nnpccl
