// Invariant checks shared by the topology tests: a ring is Hamiltonian, rings
// are edge-disjoint, a parent array is a spanning tree.
#pragma once

#include <set>
#include <utility>
#include <vector>

#include "graph.hpp"
#include "machine.hpp"
#include "topology.hpp"

namespace topo_test {

// Each rank once.
inline bool visits_each_once(const std::vector<int> &ring, int n) {
    if (static_cast<int>(ring.size()) != n) return false;
    std::vector<char> seen(static_cast<size_t>(n), 0);
    for (int v : ring) {
        if (v < 0 || v >= n || seen[static_cast<size_t>(v)]) return false;
        seen[static_cast<size_t>(v)] = 1;
    }
    return true;
}

// Each ring closes over links of `g`, visiting every vertex once.
inline bool hamiltonian_in(const nnpccl::UndirectedGraph &g, const std::vector<int> &ring) {
    if (!visits_each_once(ring, g.size())) return false;
    for (size_t i = 0; i < ring.size() && ring.size() > 1; ++i)
        if (!g.has_edge(ring[i], ring[(i + 1) % ring.size()])) return false;
    return true;
}

// No undirected edge is used by two rings (or twice by one).
inline bool edge_disjoint(const std::vector<std::vector<int>> &rings) {
    std::set<std::pair<int, int>> used;
    for (const auto &ring : rings) {
        if (ring.size() < 3) continue; // a 2-ring is one edge used both ways
        for (size_t i = 0; i < ring.size(); ++i) {
            int a = ring[i], b = ring[(i + 1) % ring.size()];
            if (!used.insert({std::min(a, b), std::max(a, b)}).second) return false;
        }
    }
    return true;
}

// One root, and every vertex reaches it without a cycle.
inline bool spanning_tree(const std::vector<int> &parent) {
    const int n = static_cast<int>(parent.size());
    int roots = 0;
    for (int v = 0; v < n; ++v) {
        if (parent[static_cast<size_t>(v)] == -1) ++roots;
        int at = v, steps = 0;
        while (at >= 0 && steps <= n) {
            if (at >= n) return false;
            at = parent[static_cast<size_t>(at)];
            ++steps;
        }
        if (at != -1 || steps > n) return false;
    }
    return roots == 1;
}

// The ranks' graph of a topology: ranks joined when their chips are cabled both ways.
inline nnpccl::UndirectedGraph rank_graph(const nnpccl::Topology &t) {
    nnpccl::UndirectedGraph g(t.nranks());
    for (int a = 0; a < t.nranks(); ++a)
        for (int b = a + 1; b < t.nranks(); ++b)
            if (t.machine().has_duplex_link(t.chip_of(a), t.chip_of(b))) g.add_edge(a, b);
    return g;
}

} // namespace topo_test
