// Double binary tree (as NCCL's): two binary trees over the ranks in which
// no rank is inner in both (DoubleTreePattern), each carrying half the data
// on its own channel, cut into chunks that pipeline up and down the tree.
// Reduce combines up the tree, broadcast copies down it, allreduce does both
// with the broadcast of a chunk trailing its reduction by a fixed lag so
// that the two directions overlap. Allreduce uses the trees over all ranks
// (height h = floor(log2 p)); reduce and broadcast hang both from the root
// (height h = floor(log2(p-1)) + 1).
//
// p ranks, n bytes, α per message, β per byte, γ per byte reduced, C bytes
// per chunk, k = ceil(n / 2C) chunks per tree. Per pipeline stage a rank is
// inner in one tree and a leaf in the other, so it moves about 2C in and
// 2C out (4C each way in allreduce, where both directions run at once):
//
//   broadcast   (h + k - 1)·(α + 2Cβ)          ≈ h·α + nβ for k >> h
//   reduce      (h + k - 1)·(α + 2Cβ + 2Cγ)    ≈ h·α + nβ + nγ
//   allreduce   (2h + k - 1)·(α + 4Cβ + 2Cγ)   ≈ 2h·α + 2nβ + nγ
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
            // Chunk j goes down `lag` reductions after it went up, on every
            // rank alike: each step then waits only for steps of earlier
            // chunks (or the same chunk nearer the leaves going up, nearer
            // the top going down), so no slot count can deadlock it, and a
            // lag of twice the height keeps ranks from waiting on the way
            // back while the way up has work.
            const size_t lag = 2 * static_cast<size_t>(tree.height());
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
// allreduce), all at once: α of the longest edge route plus the stage's
// bytes through the busiest link or port.
//   allreduce            (2h + k - 1) stages, trees over all ranks
//   broadcast, reduce    (h + k - 1) stages, both trees hung from the root
// Up to kTracedSources ranks the trees are the builder's; beyond, the
// topology's double binary tree embedding (the same shape over ring 0's
// order) stands in for them.
double predict_double_binary_tree_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    if (p <= 1) return 0;
    const double total = static_cast<double>(call_bytes(args)), chunk = chunk_bytes(args);
    const bool allreduce = args.collective == Collective::Allreduce;
    const int root = allreduce ? -1 : args.root;
    const bool up = args.collective != Collective::Broadcast, down = args.collective != Collective::Reduce;
    std::vector<int> parents[2];
    int height = 0;
    for (int which = 0; which < 2; ++which) {
        if (p <= kTracedSources) {
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
    const double half = total / 2, pieces = messages(half, chunk), piece = half / std::max(1.0, pieces);
    std::vector<Flow> stage;
    for (const std::vector<int> &parent : parents)
        for (int r = 0; r < p; ++r) {
            const int above = parent[static_cast<size_t>(r)];
            if (above < 0) continue;
            if (up) stage.push_back({r, above, piece});
            if (down) stage.push_back({above, r, piece});
        }
    const FlowCost cost = concurrent(t, stage);
    const double stages = (allreduce ? 2 * height : height) + pieces - 1;
    const double reduced = args.collective == Collective::Broadcast ? 0 : total;
    return host_lockstep(t, inputs,
                         with_reduction(t, inputs, args.elem_size, stages * (cost.latency_us + cost.transfer_us), reduced));
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
