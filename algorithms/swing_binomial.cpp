// Broadcast and reduce down (up) binomial trees whose edges are Swing's
// partners (swing.cpp): from the root, in step s every rank that holds the
// data sends it to its partner of step s, the steps from the last (the
// longest hop) to the first, so the holders double each step and a call
// takes log2 p steps of 1, 1, 3, 5, 11, ... hops per torus dimension,
// instead of the ring chain's p-1 or the torus's x+y. 2D channels (one on
// the host), each a piece of the data on its own labelling, start on
// different dimensions and mirror, so that the root's ports share its
// sends. Off a power-of-two torus the ranks are one ring, rotated so the
// root is the last; the ranks beyond the largest power of two hang from
// their neighbour as one more child (broadcast) or send to it first
// (reduce). Chunks pipeline: a rank forwards each chunk as it arrives.
//
// p ranks, n bytes, L = log2 p2 steps whose partners are d_s hops away,
// c chunks:
//   broadcast  Σ_s (d_s·α_hop + α) + L·n/(2D)·β at the root's busiest port
//              (the root sends everything L times), + one chunk per level
//   reduce     the same, + nγ at every level's rank (pipelined)
#include <algorithm>

#include "builders.hpp"
#include "cost_terms.hpp"
#include "registry.hpp"
#include "step_list.hpp"

namespace nnpccl {

namespace {

// A rank's place in channel c's tree: its parent and its children, in the
// order the data goes to them.
struct TreeLinks {
    int parent = -1;
    std::vector<int> children;
};

TreeLinks tree_links(const SwingShape &shape, int nranks, int root, int rank, int channel) {
    TreeLinks links;
    if (nranks <= 1) return links;
    const bool torus = !shape.dims.empty();
    // Off the torus: virtual ranks rotated so the root is the last, which
    // is never folded.
    auto to_virtual = [&](int r) { return torus ? r : ((r - root - 1) % nranks + nranks) % nranks; };
    auto to_rank = [&](int v) { return torus ? v : (v + root + 1) % nranks; };
    const int me = to_virtual(rank), top = to_virtual(root);
    const HalvingDoublingPattern plain(nranks, me);
    if (plain.is_extra()) { // hangs from its active neighbour
        links.parent = to_rank(plain.fold_partner());
        return links;
    }
    const HalvingDoublingPattern mine = swing_pattern(shape, nranks, me, channel);
    const HalvingDoublingPattern theirs = swing_pattern(shape, nranks, top, channel);
    const int rounds = mine.rounds(), label = mine.virtual_rank(), root_label = theirs.virtual_rank();
    // The step this rank receives in: the first (highest) bit where its
    // label and the root's differ; the root receives in none.
    int joined = rounds;
    for (int s = 0; s < rounds; ++s)
        if (((label ^ root_label) >> (rounds - 1 - s)) & 1) {
            joined = s;
            break;
        }
    if (joined < rounds) links.parent = to_rank(mine.exchange_partner(1 << (rounds - 1 - joined)));
    for (int s = joined - 1; s >= 0; --s)
        links.children.push_back(to_rank(mine.exchange_partner(1 << (rounds - 1 - s))));
    if (plain.fold_partner() >= 0) links.children.push_back(to_rank(plain.fold_partner()));
    return links;
}

void tree_broadcast(const CollectiveArgs &args, const TreeLinks &links, ElemRange part, size_t chunk,
                    std::vector<Step> &out) {
    StepList steps(out);
    const bool root = args.rank == args.root;
    for (const ElemRange &c : chunked(part.begin, part.end, chunk)) {
        const BufRef from{root ? Buf::Send : Buf::Recv, c.begin}, into{Buf::Recv, c.begin};
        // The first step takes the chunk (receives it, or copies the root's
        // out of place) and sends it to the first child; the rest send it on.
        uint8_t first = root ? (args.in_place ? 0 : kStore) : kRecv | kStore;
        if (!links.children.empty()) first |= kSend;
        const int first_child = links.children.empty() ? -1 : links.children.front();
        if (first != 0) steps.add(first, links.parent, first_child, from, into, c.size());
        for (size_t i = 1; i < links.children.size(); ++i) steps.add(kSend, -1, links.children[i], from, {}, c.size());
    }
}

void tree_reduce(const CollectiveArgs &args, const TreeLinks &links, ElemRange part, size_t chunk,
                 std::vector<Step> &out) {
    StepList steps(out);
    const bool root = args.rank == args.root;
    // The children's data comes in the reverse of the broadcast's order:
    // the farthest subtree, the first to finish, first.
    std::vector<int> from(links.children.rbegin(), links.children.rend());
    for (const ElemRange &c : chunked(part.begin, part.end, chunk)) {
        const BufRef own{Buf::Send, c.begin}, partial{Buf::Scratch, c.begin}, result{Buf::Recv, c.begin};
        if (from.empty()) {
            if (root)
                steps.add(kStore, -1, -1, own, result, c.size(), true);
            else
                steps.add(kSend, -1, links.parent, own, {}, c.size());
            continue;
        }
        BufRef acc = own;
        for (size_t i = 0; i < from.size(); ++i) {
            const bool last = i + 1 == from.size();
            if (!last) {
                steps.add(kRecv | kReduce | kStore, from[i], -1, acc, partial, c.size());
                acc = partial;
            } else if (root) {
                steps.add(kRecv | kReduce | kStore, from[i], -1, acc, result, c.size(), true);
            } else {
                steps.add(kRecv | kReduce | kSend, from[i], links.parent, acc, {}, c.size());
            }
        }
    }
}

} // namespace

Schedule build_swing_binomial(const CollectiveArgs &args, const SwingShape &shape) {
    Schedule sched;
    sched.algorithm = "swing_binomial";
    if (args.collective != Collective::Broadcast && args.collective != Collective::Reduce) return sched;
    if (args.root < 0 || args.root >= args.nranks) return sched;
    const auto channels = static_cast<size_t>(std::max(1, shape.channels));
    sched.channels.resize(channels);
    if (args.collective == Collective::Reduce) sched.scratch_elems = args.count;
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    for (size_t c = 0; c < channels; ++c) {
        const TreeLinks links = tree_links(shape, args.nranks, args.root, args.rank, static_cast<int>(c));
        const size_t lo = piece_begin(args.count, channels, c);
        const ElemRange part{lo, lo + piece_size(args.count, channels, c)};
        if (args.collective == Collective::Broadcast)
            tree_broadcast(args, links, part, chunk, sched.channels[c]);
        else
            tree_reduce(args, links, part, chunk, sched.channels[c]);
    }
    return sched;
}

// Its entry in the registry (registry.cpp).
namespace {

// Every tree edge carries its channel's piece. The first chunk goes down
// the slowest root-to-leaf path (each edge's route latency and one chunk's
// transfer, after the parent's sends of it to its earlier children), and the rest follows through the busiest link or
// port: the root's, which sends its piece once per step.
double predict_swing_binomial_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    if (p <= 1) return 0;
    const SwingShape shape = swing_shape(t, p);
    const double total = static_cast<double>(call_bytes(args));
    const double share = total / shape.channels;
    const double chunk = std::min(share, static_cast<double>(std::max<size_t>(1, args.chunk_elems) * args.elem_size));
    std::vector<Flow> every, edges;  // edges: parent before child, with one chunk each
    std::vector<double> sent_before; // per edge: the chunks its parent sends its earlier children first
    for (int c = 0; c < shape.channels; ++c) {
        std::vector<TreeLinks> links;
        for (int r = 0; r < p; ++r) links.push_back(tree_links(shape, p, args.root, r, c));
        std::vector<int> frontier{args.root};
        while (!frontier.empty()) {
            std::vector<int> next;
            for (int r : frontier)
                for (size_t k = 0; k < links[static_cast<size_t>(r)].children.size(); ++k) {
                    const int child = links[static_cast<size_t>(r)].children[k];
                    sent_before.push_back(static_cast<double>(k));
                    edges.push_back({r, child, chunk});
                    every.push_back({r, child, share - chunk}); // the first chunk is in the path's time
                    next.push_back(child);
                }
            frontier.swap(next);
        }
    }
    RouteTable routes(t);
    routes.trace(edges);
    // The first chunk's way down the slowest root-to-leaf path: each edge's
    // route latency and the chunk's transfer over its slowest hop. Edges
    // come parent first within each channel's tree, so every parent's
    // arrival is its own tree's when a child reads it.
    std::vector<double> arrival(static_cast<size_t>(p), 0);
    double path = 0;
    for (size_t i = 0; i < edges.size(); ++i) {
        const Flow &edge = edges[i];
        const Route *route = routes.find(edge.from, edge.to);
        const double hop = route != nullptr ? route->latency_us + (1 + sent_before[i]) * us_for(chunk, route->gbps) : 0;
        const double at = arrival[static_cast<size_t>(edge.from)] + hop;
        arrival[static_cast<size_t>(edge.to)] = at;
        path = std::max(path, at);
    }
    const FlowCost all = concurrent(t, every, &routes);
    const double reduced = args.collective == Collective::Reduce ? total : 0;
    return with_reduction(t, inputs, args.elem_size, path + all.transfer_us, reduced);
}

Schedule build_on(const CollectiveArgs &args, const Topology &t) {
    return build_swing_binomial(args, swing_shape(t, args.nranks));
}

int channels_on(const Topology &t) { return swing_shape(t, t.nranks()).channels; }

bool applies_off_host(const CollectiveArgs &args, const Topology &t, std::string *why_not) {
    if (t.machine().shape() != Shape::Flat) return applies_with_valid_root(args, t, why_not);
    if (why_not != nullptr)
        *why_not = "needs a machine of chips and links (a torus, ring or mesh preset or file), not the host model '" +
                   t.name() + "'";
    return false;
}

} // namespace

const AlgorithmInfo &swing_binomial_algorithm() {
    static const AlgorithmInfo info{
        "swing_binomial",
        "binomial trees of Swing's partners (1, 1, 3, 5, 11, ... hops per torus dimension), log2 p levels, "
        "2 per dimension (one mirrored), chunks pipelined down (broadcast) or up (reduce)",
        "a machine of chips and links, not the host model",
        {Collective::Broadcast, Collective::Reduce},
        build_on,
        applies_off_host,
        predict_swing_binomial_us,
        channels_on};
    return info;
}

} // namespace nnpccl
