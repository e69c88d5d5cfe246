// Broadcast, reduce and allreduce on trees embedded in a torus of one to
// three dimensions (torus_trees.hpp has the trees' shape): every edge is one
// link, and a rank is as many hops from the root as the torus puts it (one
// more on the root's lines beyond the first), so a small call takes about
// the torus's radius in hops: Σ_d a_d/2, 32 on nnpt-pod1024 (32x32) and 12
// on torus:8x8x8, where swing_binomial's trees take 42 hops and the
// torus's rings x+y. D channels (one per dimension), each a 1/D piece of the
// data on a tree whose root sends along its own dimension only, so the
// root's ports carry n/D each; on a 2D torus the two trees share no
// directed link. Chunks pipeline down (broadcast), up (reduce) and both
// ways at once (allreduce: up to the grid's centre and down again, a rank
// at depth d sending chunk j - 2d down right after chunk j up, as the
// double binary tree does).
//
// D channels, piece n/D in k chunks of C bytes, h the deepest rank's hops,
// α the latency of a hop, β per byte of a link, γ per byte reduced:
//   broadcast  h·(α + Cβ) + (k - 1)·Cβ·m      m: the most pieces a link carries
//   reduce     the same, + nγ overlapped on NNP-T's compute engines
//   allreduce  2h·(α + Cβ) + (k - 1)·max(Cβ·m, α + Cβ) + nγ
//              (a chunk comes down two chunks after it went up: two per
//              round trip over an edge, whatever the links' load)
// so at 4 KiB a broadcast takes ~h hops, and for large n it runs at a
// link's bandwidth per piece: n/(D·β) (a ring's pipeline, at n/(4β) on a
// 2D torus's four ports, takes over beyond some MiB where h is large).
#include "torus_trees.hpp"

#include <algorithm>

#include "cost_terms.hpp"
#include "patterns.hpp"
#include "registry.hpp"
#include "step_list.hpp"

namespace nnpccl {

std::string no_torus_grid_reason(const Topology &t, int nranks) {
    if (t.machine().shape() == Shape::Flat)
        return "needs a machine of chips and links (a torus preset or file), not the host model '" + t.name() + "'";
    return "needs ranks that fill a 2D torus or a block of one, or a 3D torus one rank per chip; topology '" +
           t.name() + "' has no such grid of " + std::to_string(nranks) + " ranks";
}

bool torus_trees_grid(const Topology &t, int nranks, TorusGrid *out) {
    TorusGrid grid;
    if (t.machine().shape() == Shape::Flat || nranks != t.nranks()) return false;
    if (const RankGrid *g = t.torus()) {
        if (g->x * g->y != nranks) return false;
        if (g->x > 1) grid.dims.push_back(g->x), grid.wrap.push_back(g->wrap_x);
        if (g->y > 1) grid.dims.push_back(g->y), grid.wrap.push_back(g->wrap_y);
        grid.rank_at = g->rank_at;
    } else {
        const TorusDims d = t.machine().torus();
        if (t.machine().shape() != Shape::Torus || d.z <= 1 || nranks != t.machine().num_chips()) return false;
        grid.rank_at.assign(static_cast<size_t>(nranks), -1);
        for (int r = 0; r < nranks; ++r) {
            int &at = grid.rank_at[static_cast<size_t>(t.chip_of(r))];
            if (at >= 0) return false; // two ranks on a chip: some chip holds none
            at = r;
        }
        for (int a : {d.x, d.y, d.z})
            if (a > 1) grid.dims.push_back(a), grid.wrap.push_back(true);
    }
    *out = std::move(grid);
    return true;
}

TorusTree::TorusTree(const TorusGrid &grid, int root_index, int channel) : grid_(grid) {
    const int dims = static_cast<int>(grid.dims.size());
    for (int j = 0; j < dims; ++j) order_.push_back((channel + j) % dims);
    root_ = coords(root_index);
    if (dims > 0) {
        const int first = order_[0];
        root_side_ = grid.wrap[static_cast<size_t>(first)] ||
                             root_[static_cast<size_t>(first)] + 1 < grid.dims[static_cast<size_t>(first)]
                         ? 1
                         : -1;
    }
}

TorusTree::Coords TorusTree::coords(int index) const {
    Coords c{};
    for (size_t d = 0; d < grid_.dims.size(); ++d) {
        c[d] = index % grid_.dims[d];
        index /= grid_.dims[d];
    }
    return c;
}

int TorusTree::index_of(const Coords &c) const {
    int index = 0;
    for (size_t d = grid_.dims.size(); d-- > 0;) index = index * grid_.dims[d] + c[d];
    return index;
}

int TorusTree::wrapped(int d, int coordinate) const {
    const int a = grid_.dims[static_cast<size_t>(d)];
    return (coordinate % a + a) % a;
}

// Along a line that wraps, the root reaches offsets 1..a/2 going up and the
// rest going down; along one that does not, each side its own way.
int TorusTree::side(int d, int coordinate) const {
    const int r = root_[static_cast<size_t>(d)];
    if (coordinate == r) return 0;
    if (!grid_.wrap[static_cast<size_t>(d)]) return coordinate > r ? 1 : -1;
    const int a = grid_.dims[static_cast<size_t>(d)];
    return wrapped(d, coordinate - r) <= a / 2 ? 1 : -1;
}

// One hop towards the root along the last dimension (in the tree's order)
// in which the rank is off the root's lines; a rank on one of the root's
// lines along a later dimension hangs from the rank beside it along the
// first instead, so that no line but the first passes through the root.
int TorusTree::parent(int index) const {
    const Coords c = coords(index);
    int last = -1, differing = 0;
    for (size_t j = 0; j < order_.size(); ++j)
        if (c[static_cast<size_t>(order_[j])] != root_[static_cast<size_t>(order_[j])]) {
            last = static_cast<int>(j);
            ++differing;
        }
    if (last < 0) return -1;
    Coords up = c;
    if (last > 0 && differing == 1) {
        up[static_cast<size_t>(order_[0])] = wrapped(order_[0], root_[static_cast<size_t>(order_[0])] + root_side_);
        return index_of(up);
    }
    const int d = order_[static_cast<size_t>(last)];
    up[static_cast<size_t>(d)] = wrapped(d, c[static_cast<size_t>(d)] - side(d, c[static_cast<size_t>(d)]));
    return index_of(up);
}

// The neighbours whose parent this rank is, by the place in the tree's
// order of the dimension they lie along: an earlier dimension's child heads
// a sub-tree that spans the later ones.
std::vector<int> TorusTree::children(int index) const {
    std::vector<int> out;
    const Coords c = coords(index);
    for (int d : order_)
        for (int way : {1, -1}) {
            const int a = grid_.dims[static_cast<size_t>(d)], at = c[static_cast<size_t>(d)] + way;
            if (!grid_.wrap[static_cast<size_t>(d)] && (at < 0 || at >= a)) continue;
            Coords next = c;
            next[static_cast<size_t>(d)] = wrapped(d, at);
            const int n = index_of(next);
            if (n == index || std::find(out.begin(), out.end(), n) != out.end())
                continue; // a line of 2 wraps onto itself
            if (parent(n) == index) out.push_back(n);
        }
    return out;
}

int TorusTree::depth(int index) const {
    int hops = 0;
    for (int at = parent(index); at >= 0; at = parent(at)) ++hops;
    return hops;
}

namespace {

// A rank's place in one channel's tree, in ranks.
struct TreeNode {
    int parent = -1;
    std::vector<int> children;
    int depth = 0;
};

TreeNode tree_node(const TorusGrid &grid, int root_index, int channel, int index) {
    const TorusTree tree(grid, root_index, channel);
    TreeNode node;
    const int up = tree.parent(index);
    node.parent = up < 0 ? -1 : grid.rank_at[static_cast<size_t>(up)];
    for (int child : tree.children(index)) node.children.push_back(grid.rank_at[static_cast<size_t>(child)]);
    node.depth = tree.depth(index);
    return node;
}

// Chunk c combined up the tree: partial sums in `partial`, the top's
// result in the receive buffer (an avg divided there, once). The children's
// data comes in the reverse of the broadcast's order: the smallest sub-tree,
// the first done, first.
void reduce_up(const TreeNode &node, const ElemRange &c, Buf partial, StepList &steps) {
    const BufRef mine{Buf::Send, c.begin};
    if (node.children.empty()) {
        if (node.parent >= 0)
            steps.add(kSend, -1, node.parent, mine, {}, c.size());
        else
            steps.add(kStore, -1, -1, mine, BufRef{Buf::Recv, c.begin}, c.size(), true);
        return;
    }
    for (size_t i = 0; i < node.children.size(); ++i) {
        const int child = node.children[node.children.size() - 1 - i];
        const BufRef operand = i == 0 ? mine : BufRef{partial, c.begin};
        if (i + 1 < node.children.size())
            steps.add(kRecv | kReduce | kStore, child, -1, operand, BufRef{partial, c.begin}, c.size());
        else if (node.parent >= 0)
            steps.add(kRecv | kReduce | kSend, child, node.parent, operand, {}, c.size());
        else
            steps.add(kRecv | kReduce | kStore, child, -1, operand, BufRef{Buf::Recv, c.begin}, c.size(), true);
    }
}

// Chunk c copied down the tree into every receive buffer; the top sends
// from `top_source` and stores it too when `top_copies`. The first child's
// copy rides on the step that stores the chunk.
void broadcast_down(const TreeNode &node, const ElemRange &c, Buf top_source, bool top_copies, StepList &steps) {
    const BufRef result{Buf::Recv, c.begin};
    const bool stores = node.parent >= 0 || top_copies;
    const int first = node.children.empty() ? -1 : node.children[0];
    const uint8_t forward = first >= 0 ? kSend : 0;
    if (node.parent >= 0)
        steps.add(kRecv | kStore | forward, node.parent, first, {}, result, c.size());
    else if (top_copies)
        steps.add(kStore | forward, -1, first, BufRef{top_source, c.begin}, result, c.size());
    const BufRef source{stores ? Buf::Recv : top_source, c.begin};
    for (size_t i = stores ? 1 : 0; i < node.children.size(); ++i)
        steps.add(kSend, -1, node.children[i], source, {}, c.size());
}

// The allreduce's top: the grid's centre, which is as near every rank as
// any on a torus and nearest on a block of one.
int centre_index(const TorusGrid &grid) {
    int index = 0;
    for (size_t d = grid.dims.size(); d-- > 0;) index = index * grid.dims[d] + grid.dims[d] / 2;
    return index;
}

int index_of_rank(const TorusGrid &grid, int rank) {
    return static_cast<int>(std::find(grid.rank_at.begin(), grid.rank_at.end(), rank) - grid.rank_at.begin());
}

} // namespace

Schedule build_torus_trees(const CollectiveArgs &args, const TorusGrid &grid) {
    Schedule sched;
    sched.algorithm = "torus_trees";
    const Collective coll = args.collective;
    if (coll != Collective::Allreduce && coll != Collective::Broadcast && coll != Collective::Reduce) return sched;
    if (static_cast<int>(grid.rank_at.size()) != args.nranks) return sched;
    if (coll != Collective::Allreduce && (args.root < 0 || args.root >= args.nranks)) return sched;
    const int root_index = coll == Collective::Allreduce ? centre_index(grid) : index_of_rank(grid, args.root);
    const int me = index_of_rank(grid, args.rank);
    const bool top = me == root_index;
    // Off the root, a reduce's receive buffer is not ours to use.
    const Buf partial = coll == Collective::Reduce && !top ? Buf::Scratch : Buf::Recv;
    if (partial == Buf::Scratch) sched.scratch_elems = args.count;
    const size_t channels = std::max<size_t>(1, grid.dims.size()), chunk = std::max<size_t>(1, args.chunk_elems);
    sched.channels.resize(channels);
    for (size_t ch = 0; ch < channels; ++ch) {
        const TreeNode node = tree_node(grid, root_index, static_cast<int>(ch), me);
        StepList steps(sched.channels[ch]);
        const size_t lo = piece_begin(args.count, channels, ch);
        const std::vector<ElemRange> chunks = chunked(lo, lo + piece_size(args.count, channels, ch), chunk);
        if (coll == Collective::Reduce) {
            for (const ElemRange &c : chunks) reduce_up(node, c, partial, steps);
        } else if (coll == Collective::Broadcast) {
            for (const ElemRange &c : chunks) broadcast_down(node, c, Buf::Send, !args.in_place, steps);
        } else {
            // double_binary_tree.cpp says why a lag of twice the depth
            // neither deadlocks nor makes the way up wait for the way down.
            const size_t lag = 2 * static_cast<size_t>(node.depth);
            for (size_t j = 0; j < chunks.size() + lag; ++j) {
                if (j < chunks.size()) reduce_up(node, chunks[j], partial, steps);
                if (j >= lag) broadcast_down(node, chunks[j - lag], Buf::Recv, false, steps);
            }
        }
    }
    return sched;
}

// Its entry in the registry (registry.cpp).
namespace {

// The first chunk's way through the trees: down, each edge's link latency
// and one chunk's transfer after the parent had it; up, a rank sends once
// its children's chunks are in. The chunks behind it follow at the pace of
// the busiest link, every edge carrying its channel's piece each way it is
// used (concurrent()).
struct TreeWays {
    double down_us = 0, up_us = 0;
    double slowest_edge_us = 0; // a chunk's latency and transfer over the slowest edge
    std::vector<Flow> flows; // the chunks behind the first, per edge and direction
};

TreeWays tree_ways(const Topology &t, const TorusGrid &grid, int root_index, int channels, double chunk, double rest,
                   bool up, bool down) {
    TreeWays ways;
    const size_t p = grid.rank_at.size();
    std::vector<double> arrival(p), done(p);
    for (int c = 0; c < channels; ++c) {
        const TorusTree tree(grid, root_index, c);
        std::vector<int> order{root_index}; // parents before children
        std::vector<std::vector<int>> children(p);
        for (size_t i = 0; i < order.size(); ++i) {
            const int node = order[i];
            children[static_cast<size_t>(node)] = tree.children(node);
            for (int child : children[static_cast<size_t>(node)]) order.push_back(child);
        }
        arrival[static_cast<size_t>(root_index)] = 0;
        for (int node : order) {
            const int from = grid.rank_at[static_cast<size_t>(node)];
            for (int child : children[static_cast<size_t>(node)]) {
                const int to = grid.rank_at[static_cast<size_t>(child)];
                const Route link = t.route(from, to);
                const double hop = link.latency_us + us_for(chunk, link.gbps);
                ways.slowest_edge_us = std::max(ways.slowest_edge_us, hop);
                arrival[static_cast<size_t>(child)] = arrival[static_cast<size_t>(node)] + hop;
                ways.down_us = std::max(ways.down_us, arrival[static_cast<size_t>(child)]);
                if (down) ways.flows.push_back({from, to, rest});
                if (up) ways.flows.push_back({to, from, rest});
            }
        }
        for (size_t i = order.size(); i-- > 0;) {
            const int node = order[i];
            const int at = grid.rank_at[static_cast<size_t>(node)];
            double ready = 0;
            for (int child : children[static_cast<size_t>(node)]) {
                const Route link = t.route(grid.rank_at[static_cast<size_t>(child)], at);
                ready = std::max(ready, done[static_cast<size_t>(child)] + link.latency_us + us_for(chunk, link.gbps));
            }
            done[static_cast<size_t>(node)] = ready;
        }
        ways.up_us = std::max(ways.up_us, done[static_cast<size_t>(root_index)]);
    }
    return ways;
}

double predict_torus_trees_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    if (p <= 1) return 0;
    TorusGrid grid;
    if (!torus_trees_grid(t, p, &grid)) return kInfinity;
    const Collective coll = args.collective;
    const bool allreduce = coll == Collective::Allreduce;
    const int root_index = allreduce ? centre_index(grid) : index_of_rank(grid, args.root);
    const int channels = std::max(1, static_cast<int>(grid.dims.size()));
    const double total = static_cast<double>(call_bytes(args)), share = total / channels;
    const double chunk = std::min(share, chunk_bytes(args));
    const bool up = coll != Collective::Broadcast, down = coll != Collective::Reduce;
    TreeWays ways = tree_ways(t, grid, root_index, channels, chunk, share - chunk, up, down);
    RouteTable routes(t);
    routes.trace(ways.flows);
    const FlowCost rest = concurrent(t, ways.flows, &routes);
    const double first = (up ? ways.up_us : 0) + (down ? ways.down_us : 0);
    // Allreduce: a rank sends chunk j - 2d down only once its parent has
    // it, which the parent sends after chunk j - 2 up, which waited for
    // this rank's chunk j - 2: two chunks per round trip over an edge, so
    // the chunks behind the first follow at least an edge's latency and
    // transfer apart, however idle the links.
    double behind = rest.transfer_us;
    if (up && down) behind = std::max(behind, (messages(share, chunk) - 1) * ways.slowest_edge_us);
    const double reduced = coll == Collective::Broadcast ? 0 : total;
    return with_reduction(t, inputs, args.elem_size, first + behind, reduced);
}

bool applies_on(const CollectiveArgs &args, const Topology &t, std::string *why_not) {
    TorusGrid grid;
    if (torus_trees_grid(t, args.nranks, &grid)) return applies_with_valid_root(args, t, why_not);
    if (why_not != nullptr) *why_not = no_torus_grid_reason(t, args.nranks);
    return false;
}

Schedule build_on(const CollectiveArgs &args, const Topology &t) {
    TorusGrid grid;
    if (!torus_trees_grid(t, args.nranks, &grid)) return Schedule{};
    return build_torus_trees(args, grid);
}

int channels_on(const Topology &t) {
    TorusGrid grid;
    return torus_trees_grid(t, t.nranks(), &grid) ? std::max(1, static_cast<int>(grid.dims.size())) : 1;
}

} // namespace

const AlgorithmInfo &torus_trees_algorithm() {
    static const AlgorithmInfo info{
        "torus_trees",
        "shortest-path trees of torus links, dimension by dimension, one per dimension with half (a third) of the "
        "data, the root sending along its own dimension: about the torus's radius in hops; chunks pipelined down "
        "(broadcast), up (reduce) or both (allreduce, through the grid's centre)",
        "a machine of chips and links whose ranks fill a 2D torus or a block of one, or a 3D torus one rank per chip",
        {Collective::Allreduce, Collective::Broadcast, Collective::Reduce},
        build_on,
        applies_on,
        predict_torus_trees_us,
        channels_on};
    return info;
}

} // namespace nnpccl
