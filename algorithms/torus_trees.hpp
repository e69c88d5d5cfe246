// Trees embedded in a torus (torus_trees.cpp): broadcast, reduce and
// allreduce down and up shortest-path trees whose every edge is one link.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "collective.hpp"
#include "schedule.hpp"
#include "topology.hpp"

namespace nnpccl {

// The ranks on a torus of up to three dimensions, or a block of one:
// dims[d] positions along dimension d (only dimensions longer than 1),
// wrap[d] whether its lines close over a link, rank_at[i] the rank at index
// i (first dimension fastest). One rank has no dimensions.
struct TorusGrid {
    std::vector<int> dims;
    std::vector<bool> wrap;
    std::vector<int> rank_at;
};

// The grid the ranks fill: Topology::torus()'s 2D grid, or a 3D torus
// every chip of which holds one rank. False (and no grid) otherwise, or on
// the host model.
bool torus_trees_grid(const Topology &t, int nranks, TorusGrid *out);
// Why `nranks` ranks have no such grid on `t`: the applies rules' reason
// for the algorithms that run on it (torus_trees, torus_relay).
std::string no_torus_grid_reason(const Topology &t, int nranks);

// Channel c's tree over grid indices. Its dimensions are taken in the
// order c, c+1, ... (mod D): the root sends along the first only, its line
// there relays both ways, then every rank reached relays along the next
// dimension both ways, and so on, each rank one hop from its parent. The
// root's lines along the other dimensions are fed from the lines beside
// them along the first (one hop more), so that the root's ports on the
// other dimensions are free for the other channels' trees (on a 2D torus
// the two trees then share no link in the same direction).
class TorusTree {
public:
    TorusTree(const TorusGrid &grid, int root_index, int channel);
    int parent(int index) const; // -1 at the root
    // Sub-trees in the order data goes to them: the deepest first.
    std::vector<int> children(int index) const;
    int depth(int index) const;

private:
    using Coords = std::array<int, 3>;
    Coords coords(int index) const;
    int index_of(const Coords &c) const;
    int side(int d, int coordinate) const; // +1, -1: which way the root reaches it; 0 on the root's
    int wrapped(int d, int coordinate) const;

    const TorusGrid &grid_;
    std::vector<int> order_;
    Coords root_{};
    int root_side_ = 1; // the way along order_[0] the root's other lines are fed from
};

// This rank's schedule on the grid: broadcast and reduce down (up) the
// trees from args.root, allreduce up to the grid's centre and down again,
// chunks pipelined both ways; one channel per dimension, each a piece of
// the data. Other collectives, a grid not holding every rank, or a root
// outside 0..p-1 get no channels.
Schedule build_torus_trees(const CollectiveArgs &args, const TorusGrid &grid);

// torus_relay's allreduce (torus_relay.cpp) on a grid of one to three
// dimensions: every vector relayed along the lines of each dimension in
// turn, summed in coordinate order on every rank.
Schedule build_torus_relay(const CollectiveArgs &args, const TorusGrid &grid);

} // namespace nnpccl
