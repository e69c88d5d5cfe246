// An undirected simple graph on vertices 0..n-1: the shape ring and tree
// embedding work on (vertices are ranks, or chips during placement; an edge
// is a link usable in both directions).
#pragma once

#include <cstddef>
#include <vector>

namespace nnpccl {

class UndirectedGraph {
public:
    UndirectedGraph() = default;
    explicit UndirectedGraph(int n) : adjacent_(static_cast<size_t>(n)) {}

    int size() const { return static_cast<int>(adjacent_.size()); }
    // Adds a-b once; a repeated edge is ignored.
    void add_edge(int a, int b);
    bool has_edge(int a, int b) const;
    // Neighbours of v, ascending.
    const std::vector<int> &neighbours(int v) const { return adjacent_[static_cast<size_t>(v)]; }
    int degree(int v) const { return static_cast<int>(neighbours(v).size()); }
    int min_degree() const;
    long edge_count() const;
    bool is_complete() const;
    bool is_connected() const;
    // Two-colourable: such a graph has no ring of odd length.
    bool is_bipartite() const;

private:
    std::vector<std::vector<int>> adjacent_;
};

} // namespace nnpccl
