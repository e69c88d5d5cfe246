// Hamiltonian rings: constructions for the shapes that have one, and a
// bounded search for the rest. A ring is the sequence of vertices around it;
// it closes from the last vertex back to the first.
#pragma once

#include <functional>
#include <vector>

#include "graph.hpp"

namespace nnpccl {

using VertexRing = std::vector<int>;

// K_n: floor((n-1)/2) edge-disjoint Hamiltonian rings (Walecki), the most
// there can be. n <= 2 gives the one ring [0] or [0, 1].
std::vector<VertexRing> complete_graph_rings(int n);

// The x × y torus (vertex i + j*x at (i, j), wrap-around in both
// dimensions): two edge-disjoint Hamiltonian rings, which use every link,
// when both sizes are at least 3 and of the same parity; otherwise one.
std::vector<VertexRing> torus_rings(int x, int y);

// A Hamiltonian ring of the w × h grid without wrap-around (vertex i + j*w),
// or an empty ring when the construction does not apply (w*h odd, or a side
// of 1 with more than 2 vertices).
VertexRing grid_ring(int w, int h);

// Search budget: DFS steps over all attempts together.
constexpr long kDefaultRingSearchSteps = 1000000;

// Up to `want` edge-disjoint Hamiltonian rings of `g`: keeps `seed` (rings
// already known, edge-disjoint), then searches for more among the edges they
// leave. Backtracking with Warnsdorff's order (fewest onward choices first)
// and dead-end pruning; exponential in the worst case, so bounded by
// `steps`: it returns what it found when the budget runs out.
std::vector<VertexRing> find_disjoint_rings(const UndirectedGraph &g, int want, std::vector<VertexRing> seed,
                                            long steps = kDefaultRingSearchSteps);

// A simple cycle of exactly `length` vertices through `start`, or an empty
// ring if none is found within `steps` DFS steps. Placement uses it to pick
// a ring-friendly set of chips.
VertexRing find_cycle(const UndirectedGraph &g, int length, int start, long steps);

// A Hamiltonian path whose ends are cheapest to join (closing_cost(end,
// start), e.g. the hops of the route between them), for when the graph has
// no Hamiltonian ring: the ring then has one routed hop. Stops at the first
// path costing <= good_enough, or when `steps` run out; empty if no path
// was found.
VertexRing find_hamiltonian_path(const UndirectedGraph &g, long steps, const std::function<int(int, int)> &closing_cost,
                                 int good_enough);

// Whether `ring` visits every vertex of `g` once with every hop an edge of g.
bool is_hamiltonian_ring(const UndirectedGraph &g, const VertexRing &ring);

// Rotates `ring` so that it starts at its smallest vertex.
void rotate_to_smallest(VertexRing *ring);

} // namespace nnpccl
