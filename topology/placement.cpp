#include "placement.hpp"

#include <algorithm>
#include <utility>

#include "graph.hpp"
#include "rings.hpp"

namespace nnpccl {

UndirectedGraph link_graph(const Machine &machine) {
    UndirectedGraph g(machine.num_chips());
    for (const Link &l : machine.links())
        if (machine.has_link(l.to, l.from)) g.add_edge(l.from, l.to);
    return g;
}

namespace {

constexpr int kSmallMachineChips = 64;
constexpr long kPlacementSearchSteps = 200000;

// The most compact w × h block (least w + h, then least h) of `k` chips,
// at the torus's origin; w = 0 when none fits. With `ring`, only blocks that
// have a Hamiltonian ring over links: an even number of chips in at least
// two rows and columns, or a whole row or column (which wraps around).
std::pair<int, int> compact_block(const TorusDims &d, int k, bool ring, bool two_dimensional) {
    std::pair<int, int> best{0, 0};
    for (int w = 1; w <= d.x && k > 0; ++w) {
        if (k % w != 0 || k / w > d.y) continue;
        int h = k / w;
        bool full_line = (w == d.x && h == 1) || (h == d.y && w == 1);
        bool has_ring = full_line || (w >= 2 && h >= 2 && k % 2 == 0) || k <= 2;
        if ((ring && !has_ring) || (two_dimensional && (w < 2 || h < 2))) continue;
        if (best.first == 0 || std::make_pair(w + h, h) < std::make_pair(best.first + best.second, best.second))
            best = {w, h};
    }
    return best;
}

// Chips for `k` ranks on a torus, ring-friendliest first:
//  1. a block with a Hamiltonian ring;
//  2. a block of at least two rows and columns (an odd number of chips:
//     no ring, but a path whose ends are two hops apart);
//  3. a ring block of k+1 chips less its last corner (the same);
//  4. the first k chips in row-major order (whole rows, then part of the
//     next: still connected).
std::vector<int> torus_chips(const Machine &m, int k) {
    const TorusDims d = m.torus();
    std::pair<int, int> block = compact_block(d, k, true, false);
    if (block.first == 0) block = compact_block(d, k, false, true);
    bool drop_corner = false;
    if (block.first == 0 && k + 1 <= d.x * d.y) {
        block = compact_block(d, k + 1, true, false);
        drop_corner = block.first != 0;
    }
    std::vector<int> chips;
    if (block.first == 0) {
        for (int c = 0; c < k; ++c) chips.push_back(c);
        return chips;
    }
    for (int j = 0; j < block.second; ++j)
        for (int i = 0; i < block.first; ++i) chips.push_back(i + j * d.x);
    if (drop_corner) chips.pop_back();
    return chips;
}

// Grows a connected set of `k` chips from `seed`: next the chip with the
// most links into the set, ties to the lowest id. O(k · C · degree).
std::vector<int> grow_from(const UndirectedGraph &g, int seed, int k) {
    std::vector<char> in(static_cast<size_t>(g.size()), 0);
    std::vector<int> links_in(static_cast<size_t>(g.size()), 0);
    std::vector<int> chosen{seed};
    in[static_cast<size_t>(seed)] = 1;
    for (int u : g.neighbours(seed)) ++links_in[static_cast<size_t>(u)];
    while (static_cast<int>(chosen.size()) < k) {
        int next = -1;
        for (int c = 0; c < g.size(); ++c)
            if (!in[static_cast<size_t>(c)] && links_in[static_cast<size_t>(c)] > 0 &&
                (next < 0 || links_in[static_cast<size_t>(c)] > links_in[static_cast<size_t>(next)]))
                next = c;
        if (next < 0) return {}; // the component of `seed` is too small
        in[static_cast<size_t>(next)] = 1;
        chosen.push_back(next);
        for (int u : g.neighbours(next)) ++links_in[static_cast<size_t>(u)];
    }
    std::sort(chosen.begin(), chosen.end());
    return chosen;
}

} // namespace

Status place_ranks(const Machine &machine, int nranks, const std::vector<int> &requested, std::vector<int> *chips) {
    const int n_chips = machine.num_chips();
    chips->clear();
    if (nranks < 1) return Status(NNPCCL_ERR_INVALID_ARGUMENT, "placement: a job needs at least one rank");
    if (nranks > n_chips)
        return Status(NNPCCL_ERR_INVALID_ARGUMENT, "placement: " + std::to_string(nranks) + " ranks but topology '" +
                                                       machine.name() + "' has only " + std::to_string(n_chips) +
                                                       " chip" + (n_chips == 1 ? "" : "s") + " (one rank per chip)");
    if (!requested.empty()) {
        if (static_cast<int>(requested.size()) < nranks)
            return Status(NNPCCL_ERR_INVALID_ARGUMENT, "placement: " + std::to_string(nranks) +
                                                           " ranks but the topology's placement list names only " +
                                                           std::to_string(requested.size()) + " chips");
        chips->assign(requested.begin(), requested.begin() + nranks);
        return Status::ok();
    }
    if (nranks == n_chips) {
        for (int c = 0; c < n_chips; ++c) chips->push_back(c);
        return Status::ok();
    }
    if (machine.shape() == Shape::Torus && machine.torus().z == 1) {
        *chips = torus_chips(machine, nranks);
        return Status::ok();
    }
    UndirectedGraph g = link_graph(machine);
    // An odd ring cannot exist in a two-colourable graph: skip the search.
    if (n_chips <= kSmallMachineChips && nranks >= 3 && !(nranks % 2 == 1 && g.is_bipartite())) {
        VertexRing cycle = find_cycle(g, nranks, 0, kPlacementSearchSteps);
        if (!cycle.empty()) {
            std::sort(cycle.begin(), cycle.end());
            *chips = cycle;
            return Status::ok();
        }
    }
    for (int seed = 0; seed < n_chips; ++seed) {
        *chips = grow_from(g, seed, nranks);
        if (!chips->empty()) return Status::ok();
    }
    return Status(NNPCCL_ERR_INVALID_ARGUMENT, "placement: topology '" + machine.name() + "' has no " +
                                                   std::to_string(nranks) +
                                                   " chips joined by links (jobs must use adjacent chips)");
}

} // namespace nnpccl
