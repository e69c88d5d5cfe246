// Double binary tree (as NCCL's): two binary trees over the ranks in which
// no rank is inner in both (DoubleTreePattern), each carrying half the data
// on its own channel, cut into chunks that pipeline up and down the tree.
// Reduce combines up the tree, broadcast copies down it, allreduce does both
// on one channel per tree, a rank at depth d sending chunk j - 2d down
// right after chunk j up (the builder says why), so that the two
// directions overlap. Allreduce uses the trees over all ranks (height h =
// floor(log2 p)); reduce and broadcast hang both from the root (height h =
// floor(log2(p-1)) + 1).
//
// p ranks, n bytes, α per message, β per byte, γ per byte reduced, C bytes
// per chunk, k = ceil(n / 2C) chunks per tree. Per pipeline stage a rank is
// inner in one tree and a leaf in the other, so it moves about 2C in and
// 2C out (4C each way in allreduce, where both directions run at once):
//
//   broadcast   h·α + (h + k - 1)·2Cβ           ≈ h·α + nβ for k >> h
//   reduce      h·α + (h + k - 1)·(2Cβ + 2Cγ)   ≈ h·α + nβ + nγ
//   allreduce   2h·α + (2h + k - 1)·(4Cβ + 2Cγ) ≈ 2h·α + 2nβ + nγ
//
// α is paid per level, not per chunk: a rank forwards chunk j + 1 while
// chunk j is in flight, through the stream's slots (on a host, where every
// message's α is the rank's own work, the registry entry below says what is
// charged).
//
// Messages per rank grow with n/C (not with p, as the ring's do), so the
// trees win for small and medium n on many ranks. Every element is reduced
// at its tree's top and copied from there: all ranks hold the same bits.
#include <algorithm>

#include "builders.hpp"
#include "cost_terms.hpp"
#include "registry.hpp"
#include "patterns.hpp"
#include "step_list.hpp"

namespace nnpccl {

namespace {

class TreeChannel {
public:
    TreeChannel(const DoubleTreePattern &tree, std::vector<Step> &out) : tree_(tree), steps_(out) {}

    // Combines chunk c of every rank's send buffer up the tree. Inner
    // partial sums go to `partial`; the top stores the result in the
    // receive buffer (and divides an avg there, once).
    void reduce_up(const ElemRange &c, Buf partial) {
        const std::vector<int> &children = tree_.children();
        const int parent = tree_.parent();
        const BufRef mine{Buf::Send, c.begin};
        if (children.empty()) {
            if (parent >= 0) steps_.add(kSend, -1, parent, mine, {}, c.size());
            else steps_.add(kStore, -1, -1, mine, BufRef{Buf::Recv, c.begin}, c.size(), true);
            return;
        }
        for (size_t i = 0; i < children.size(); ++i) {
            const BufRef operand = i == 0 ? mine : BufRef{partial, c.begin};
            const bool last = i + 1 == children.size();
            if (!last)
                steps_.add(kRecv | kReduce | kStore, children[i], -1, operand, BufRef{partial, c.begin}, c.size());
            else if (parent >= 0)
                steps_.add(kRecv | kReduce | kSend, children[i], parent, operand, {}, c.size());
            else
                steps_.add(kRecv | kReduce | kStore, children[i], -1, operand, BufRef{Buf::Recv, c.begin}, c.size(),
                           true);
        }
    }

    // Copies chunk c down the tree into every receive buffer. The top sends
    // from `top_source` (its send buffer for a broadcast, the result it
    // reduced for an allreduce) and stores it too when `top_copies`.
    void broadcast_down(const ElemRange &c, Buf top_source, bool top_copies) {
        const std::vector<int> &children = tree_.children();
        const int parent = tree_.parent();
        const BufRef result{Buf::Recv, c.begin};
        // The first child's copy rides on the step that stores the chunk,
        // where there is one; the other child's is read back from there.
        const bool stores = parent >= 0 || top_copies;
        const int first = children.empty() ? -1 : children[0];
        const uint8_t forward = first >= 0 ? kSend : 0;
        if (parent >= 0) steps_.add(kRecv | kStore | forward, parent, first, {}, result, c.size());
        else if (top_copies) steps_.add(kStore | forward, -1, first, BufRef{top_source, c.begin}, result, c.size());
        const BufRef source{stores ? Buf::Recv : top_source, c.begin};
        for (size_t i = stores ? 1 : 0; i < children.size(); ++i)
            steps_.add(kSend, -1, children[i], source, {}, c.size());
    }

private:
    const DoubleTreePattern &tree_;
    StepList steps_;
};

} // namespace

Schedule build_double_binary_tree(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "double_binary_tree";
    const Collective coll = args.collective;
    if (coll != Collective::Allreduce && coll != Collective::Broadcast && coll != Collective::Reduce)
        return sched; // not served: see builders.hpp
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    const int root = coll == Collective::Allreduce ? -1 : args.root;
    // Off the root, a reduce's receive buffer is not ours to use.
    const Buf partial = coll == Collective::Reduce && args.rank != args.root ? Buf::Scratch : Buf::Recv;
    if (partial == Buf::Scratch) sched.scratch_elems = args.count;
    sched.channels.resize(2);
    for (int which = 0; which < 2; ++which) {
        const DoubleTreePattern tree(args.nranks, root, which, args.rank);
        TreeChannel channel(tree, sched.channels[static_cast<size_t>(which)]);
        const auto half = static_cast<size_t>(which);
        const size_t lo = piece_begin(args.count, 2, half);
        const std::vector<ElemRange> chunks = chunked(lo, lo + piece_size(args.count, 2, half), chunk);
        if (coll == Collective::Reduce) {
            for (const ElemRange &c : chunks) channel.reduce_up(c, partial);
        } else if (coll == Collective::Broadcast) {
            for (const ElemRange &c : chunks) channel.broadcast_down(c, Buf::Send, !args.in_place);
        } else {
            // A rank at depth d sends chunk j - 2d down right after chunk j
            // up: chunk j reaches the top d steps after it left this rank,
            // goes straight down (the top's lag is 0) and is back d steps
            // later, so chunk j - 2d is here just when it is wanted, and the
            // way up never waits for the way down (a lag of 2h everywhere
            // made the top hold every chunk for 2h steps, and each chunk
            // cost the deepest rank's round trip). Every step waits only for
            // steps its peers take earlier in their own order (chunk j up
            // needs the children's chunk j up; chunk j down needs the
            // parent's, which it sends after chunk j + 2d - 2 up), so no
            // slot count can deadlock it; a stream holds about two chunks.
            const size_t lag = 2 * static_cast<size_t>(tree.depth());
            for (size_t j = 0; j < chunks.size() + lag; ++j) {
                if (j < chunks.size()) channel.reduce_up(chunks[j], partial);
                if (j >= lag) channel.broadcast_down(chunks[j - lag], Buf::Recv, false);
            }
        }
    }
    return sched;
}

// Its entry in the registry (registry.cpp): its cost, how it is built on a
// topology and how many channels it takes.
namespace {

// Double binary tree (double_binary_tree.cpp): two trees of height h, S/2
// each in k = ceil(S/2 / C) chunks of c bytes; per pipeline stage every tree
// edge carries a chunk up (reduce, allreduce) and one down (broadcast,
// allreduce), all at once: T, the stage's bytes through the busiest link or
// port. Up to kTracedSources ranks the trees are the builder's; beyond, the
// topology's double binary tree embedding (the same shape over ring 0's
// order) stands in for them.
//
// On NNP-T a message's α is its route's latency, which the chunks behind
// it in the stream's slots overlap. The first chunk crosses each edge of
// its way once, α_e + c/B_e (+ cγ where it is reduced, going up); W is the
// longest way between a rank and the top (L its latencies alone), and the
// chunks behind the first follow at the slowest edge's pace t, or as the
// busiest link lets them, T a stage:
//   broadcast, reduce    P(k) = max(W + (k - 1)·t, L + k·T)
// Allreduce's builder sends a chunk down from each rank as soon as it
// comes back from the top, so the first chunk goes all the way up and down
// and the others follow with both directions under way, T_both a stage of
// every edge up and down at once:
//   allreduce            max(W_up + W_down + (k - 1)·t', L_up + L_down + k·T_both)
// t' at least half an edge's round trip (α + c/B each way): a chunk goes
// down two chunks after it went up.
// On the host α is the rank's own work, paid for every message, the edges
// all cost the same and rounds run in lockstep:
//   allreduce            (2h + k - 1)·(α + T)
//   broadcast, reduce    (h + k - 1)·(α + T)
// One chunk over one tree edge: its route's latency, and its whole time
// (going up, with the parent's reduction of it).
struct Crossing {
    double latency_us = 0, us = 0;
};
// The longest way of a chunk between a rank and the top (W), its latencies
// alone, and the slowest edge a chunk crosses; one per direction.
struct Way {
    double us = 0, latency_us = 0, edge_us = 0;
    double crossing_us = 0; // the slowest edge's latency and transfer
};

// Each tree's parent of every rank (the pattern's up to kTracedSources
// ranks, the topology's embedding beyond); returns the taller tree's height.
int tree_parents(const Topology &t, int p, int root, bool traced, std::vector<int> (&parents)[2]) {
    int height = 0;
    for (int which = 0; which < 2; ++which) {
        if (traced) {
            for (int r = 0; r < p; ++r) {
                const DoubleTreePattern node(p, root, which, r);
                parents[which].push_back(node.parent());
                height = std::max(height, node.height());
            }
        } else {
            parents[which] = t.double_binary_tree(which).parent;
            height = std::max(height, t.double_binary_tree(which).depth);
        }
    }
    return height;
}

// The up (0) and down (1) ways over both trees, each rank's walked once:
// O(p) crossings. `crossing(which, node, above, upward)` costs one edge.
template <class CrossingFn> void longest_ways(const std::vector<int> (&parents)[2], int p, const bool (&used)[2],
                                              const CrossingFn &crossing, Way (&ways)[2]) {
    for (int which = 0; which < 2; ++which) {
        const std::vector<int> &parent = parents[which];
        std::vector<Way> to_top[2];
        to_top[0].assign(static_cast<size_t>(p), Way{-1, -1, 0}); // -1: not yet known
        to_top[1] = to_top[0];
        for (int r = 0; r < p; ++r) {
            std::vector<int> path; // r and its ancestors whose way is not yet known, nearest first
            int at = r;
            while (at >= 0 && to_top[0][static_cast<size_t>(at)].us < 0) {
                path.push_back(at);
                at = parent[static_cast<size_t>(at)];
            }
            for (int dir = 0; dir < 2; ++dir) {
                Way known = at >= 0 ? to_top[dir][static_cast<size_t>(at)] : Way{};
                for (size_t i = path.size(); i-- > 0;) {
                    const int node = path[i], above = parent[static_cast<size_t>(node)];
                    if (above >= 0 && used[dir]) {
                        const Crossing c = crossing(which, node, above, dir == 0);
                        known.us += c.us;
                        known.latency_us += c.latency_us;
                        ways[dir].edge_us = std::max(ways[dir].edge_us, c.us - c.latency_us);
                        ways[dir].crossing_us = std::max(ways[dir].crossing_us, c.us);
                    }
                    to_top[dir][static_cast<size_t>(node)] = known;
                }
            }
            const size_t at_r = static_cast<size_t>(r);
            for (int dir = 0; dir < 2; ++dir) {
                ways[dir].us = std::max(ways[dir].us, to_top[dir][at_r].us);
                ways[dir].latency_us = std::max(ways[dir].latency_us, to_top[dir][at_r].latency_us);
            }
        }
    }
}

double predict_double_binary_tree_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    if (p <= 1) return 0;
    const double total = static_cast<double>(call_bytes(args)), chunk = chunk_bytes(args);
    const bool allreduce = args.collective == Collective::Allreduce;
    const int root = allreduce ? -1 : args.root;
    const bool up = args.collective != Collective::Broadcast, down = args.collective != Collective::Reduce;
    const bool traced = p <= kTracedSources;
    std::vector<int> parents[2];
    const int height = tree_parents(t, p, root, traced, parents);
    const double half = total / 2, pieces = messages(half, chunk), piece = half / std::max(1.0, pieces);
    std::vector<Flow> directed[2], stage; // up, down; both
    for (const std::vector<int> &parent : parents)
        for (int r = 0; r < p; ++r) {
            const int above = parent[static_cast<size_t>(r)];
            if (above < 0) continue;
            if (up) directed[0].push_back({r, above, piece});
            if (down) directed[1].push_back({above, r, piece});
        }
    for (const std::vector<Flow> &flows : directed) stage.insert(stage.end(), flows.begin(), flows.end());
    RouteTable routes(t);
    if (traced) routes.trace(stage);
    const FlowCost cost = concurrent(t, stage, traced ? &routes : nullptr);
    const double reduced = args.collective == Collective::Broadcast ? 0 : total;
    if (t.machine().shape() == Shape::Flat) {
        const double stages = (allreduce ? 2 * height : height) + pieces - 1;
        return host_lockstep(
            t, inputs,
            with_reduction(t, inputs, args.elem_size, stages * (cost.latency_us + cost.transfer_us), reduced));
    }
    const double reduce_piece = with_reduction(t, inputs, args.elem_size, 0, piece);
    auto crossing = [&](int which, int node, int above, bool upward) {
        const Route *r = nullptr;
        if (traced)
            r = upward ? routes.find(node, above) : routes.find(above, node);
        else
            r = &(upward ? t.double_binary_tree(which).up
                         : t.double_binary_tree(which).down)[static_cast<size_t>(node)];
        if (r == nullptr || !r->reachable) return Crossing{kInfinity, kInfinity};
        return Crossing{r->latency_us, r->latency_us + us_for(piece, r->gbps) + (upward ? reduce_piece : 0)};
    };
    Way ways[2]; // up, down
    const bool used[2] = {up, down};
    longest_ways(parents, p, used, crossing, ways);
    // k chunks down (or up) the trees: the first one's way and the others
    // behind it at the slowest edge's pace, or, where links are shared, the
    // busiest link's k stages between the way's latencies.
    auto pipeline = [&](int dir, double k) {
        if (!used[dir]) return 0.0;
        const double busiest = concurrent(t, directed[dir], traced ? &routes : nullptr).transfer_us;
        const Way &w = ways[dir];
        return std::max(w.us + (k - 1) * w.edge_us, w.latency_us + k * busiest);
    };
    const double k = std::max(1.0, pieces);
    double transfer = pipeline(0, k) + pipeline(1, k);
    if (allreduce) {
        // The first chunk's way up and back down, the others behind it with
        // both directions under way at once. A rank's chunk j - 2d comes
        // down after its parent sent chunk j - 2 up, which waited for this
        // rank's chunk j - 2: two chunks per round trip over the edge, so
        // however idle the links, a chunk per half a round trip at most.
        const double round_trip = ways[0].crossing_us + ways[1].crossing_us;
        const double pace = std::max({ways[0].edge_us, ways[1].edge_us, round_trip / 2});
        transfer = std::max(ways[0].us + ways[1].us + (k - 1) * pace,
                            ways[0].latency_us + ways[1].latency_us + k * cost.transfer_us);
    }
    return with_reduction(t, inputs, args.elem_size, transfer, reduced);
}

Schedule build_on(const CollectiveArgs &args, const Topology &) { return build_double_binary_tree(args); }

int channels_on(const Topology &) { return 2; }

} // namespace

const AlgorithmInfo &double_binary_tree_algorithm() {
    static const AlgorithmInfo info{
        "double_binary_tree",
        "two binary trees, no rank inner in both, half the data each, chunks pipelined up and down",
        "",
        {Collective::Allreduce, Collective::Broadcast, Collective::Reduce},
        build_on,
        applies_with_valid_root,
        predict_double_binary_tree_us,
        channels_on};
    return info;
}

} // namespace nnpccl
