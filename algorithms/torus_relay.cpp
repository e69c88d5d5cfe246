// Allreduce for small messages on a torus: every rank's vector relayed
// along its line in the first dimension both ways, each rank summing the
// line's vectors in the order of their coordinates, then the sums relayed
// along each line of the second dimension the same way and summed in
// coordinate order, then (on a 3D torus) the third. Each vector spreads as
// a broadcast tree embedded in the torus, dimension by dimension, so a
// call takes about Σ a_d/2 hops: 32 on nnpt-pod1024 (32x32), where
// swing_latency's recursive doubling takes 2 * (1+1+3+5+11) = 42 and the
// torus's rings 2(x+y-2) = 124; 12 on torus:8x8x8. Every rank adds the
// same vectors in the same order, so all hold the same bits.
//
// A line of a ranks: the vectors from the a/2 ranks on the left arrive from
// the left, one hop further each step, and those of the (a-1)/2 on the
// right from the right; a rank forwards each one on until it has gone its
// distance. One channel carries both directions, so that the sum waits
// for both; a vector over a chunk goes chunk by chunk, each chunk the
// whole way (the messages stay one per stream ahead of their receive, as
// the ring's do).
//
// p = Π a_d ranks, n bytes, C bytes per chunk, α the latency of a hop, β per
// byte of a port, γ per byte reduced; h_d = a_d/2:
//
//   allreduce  ceil(n/C) · Σ_d [h_d·(α + Cβ) + (a_d - 1)·Cγ]
//
// Scratch: each dimension's line of vectors, Σ a_d · count.
#include <algorithm>

#include "builders.hpp"
#include "cost_terms.hpp"
#include "patterns.hpp"
#include "registry.hpp"
#include "step_list.hpp"
#include "torus_trees.hpp"

namespace nnpccl {

namespace {

// One dimension's ring through this rank and where its vectors lie: the
// vector of ring position k at scratch offset (base + k)·count.
struct RelayRing {
    std::vector<int> ranks; // in coordinate order
    int me = 0;             // this rank's position
    size_t base = 0;

    int at(int k) const {
        const int a = static_cast<int>(ranks.size());
        return ranks[static_cast<size_t>(((k % a) + a) % a)];
    }
    int position(int k) const {
        const int a = static_cast<int>(ranks.size());
        return ((k % a) + a) % a;
    }
};

// Relays chunk [c.begin, c.end) of every position's vector around `ring`:
// this rank's own lies at its slot already.
void relay(const RelayRing &ring, const ElemRange &c, size_t count, StepList &steps) {
    const int a = static_cast<int>(ring.ranks.size());
    const int from_left = a / 2, from_right = (a - 1) / 2;
    const int left = ring.at(ring.me - 1), right = ring.at(ring.me + 1);
    auto slot = [&](int k) {
        return BufRef{Buf::Scratch, (ring.base + static_cast<size_t>(ring.position(k))) * count + c.begin};
    };
    if (from_left > 0) steps.add(kSend, -1, right, slot(ring.me), {}, c.size());
    if (from_right > 0) steps.add(kSend, -1, left, slot(ring.me), {}, c.size());
    for (int k = 1; k <= std::max(from_left, from_right); ++k) {
        if (k <= from_left)
            steps.add(static_cast<uint8_t>(kRecv | kStore | (k < from_left ? kSend : 0)), left, right, {},
                      slot(ring.me - k), c.size());
        if (k <= from_right)
            steps.add(static_cast<uint8_t>(kRecv | kStore | (k < from_right ? kSend : 0)), right, left, {},
                      slot(ring.me + k), c.size());
    }
}

// dst = the ring's vectors' chunk summed in position order; `finalize` on
// the last combine.
void sum_in_order(const RelayRing &ring, const ElemRange &c, size_t count, BufRef dst, bool finalize, StepList &steps) {
    const int a = static_cast<int>(ring.ranks.size());
    auto slot = [&](int k) { return BufRef{Buf::Scratch, (ring.base + static_cast<size_t>(k)) * count + c.begin}; };
    steps.add(kStore, -1, -1, slot(0), dst, c.size(), finalize && a == 1);
    for (int k = 1; k < a; ++k) steps.add(kReduce, -1, -1, slot(k), dst, c.size(), finalize && k == a - 1);
}

// A grid of one to three dimensions: the lines through this rank along each,
// their vectors' slots one dimension after another.
std::vector<RelayRing> relay_rings(const TorusGrid &grid, int index) {
    std::vector<RelayRing> rings;
    size_t base = 0, stride = 1;
    for (size_t d = 0; d < grid.dims.size(); ++d) {
        const int a = grid.dims[d];
        const int at = static_cast<int>(static_cast<size_t>(index) / stride % static_cast<size_t>(a));
        RelayRing ring;
        for (int k = 0; k < a; ++k)
            ring.ranks.push_back(grid.rank_at[static_cast<size_t>(index + (k - at) * static_cast<int>(stride))]);
        ring.me = at;
        ring.base = base;
        base += static_cast<size_t>(a);
        stride *= static_cast<size_t>(a);
        rings.push_back(std::move(ring));
    }
    return rings;
}

Schedule build_relay(const CollectiveArgs &args, const TorusGrid &grid) {
    Schedule sched;
    sched.algorithm = "torus_relay";
    if (args.collective != Collective::Allreduce || static_cast<int>(grid.rank_at.size()) != args.nranks) return sched;
    const auto here = std::find(grid.rank_at.begin(), grid.rank_at.end(), args.rank) - grid.rank_at.begin();
    const std::vector<RelayRing> rings = relay_rings(grid, static_cast<int>(here));
    sched.channels.resize(1);
    StepList steps(sched.channels[0]);
    if (rings.empty()) {
        steps.add(kStore, -1, -1, BufRef{Buf::Send, 0}, BufRef{Buf::Recv, 0}, args.count, true);
        return sched;
    }
    const size_t count = args.count;
    sched.scratch_elems = (rings.back().base + rings.back().ranks.size()) * count;
    // The own vector is copied to its slot first: sent from there, the
    // caller's buffer (the result's, in place) is free to be written. Each
    // dimension's sum lands in this rank's slot of the next dimension's line.
    for (const ElemRange &c : chunked(0, count, std::max<size_t>(1, args.chunk_elems))) {
        steps.add(kStore, -1, -1, BufRef{Buf::Send, c.begin},
                  BufRef{Buf::Scratch, static_cast<size_t>(rings[0].me) * count + c.begin}, c.size());
        for (size_t d = 0; d < rings.size(); ++d) {
            relay(rings[d], c, count, steps);
            const bool last = d + 1 == rings.size();
            const BufRef sum =
                last ? BufRef{Buf::Recv, c.begin}
                     : BufRef{Buf::Scratch,
                              (rings[d + 1].base + static_cast<size_t>(rings[d + 1].me)) * count + c.begin};
            sum_in_order(rings[d], c, count, sum, last, steps);
        }
    }
    return sched;
}

// Its entry in the registry (registry.cpp).

// Per chunk, each dimension's relay: h hops of a chunk, store and
// forward, then a - 1 sums of it (the model's γ).
double predict_relay_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    TorusGrid grid;
    if (p <= 1 || !torus_trees_grid(t, p, &grid)) return p <= 1 ? 0 : kInfinity;
    const double total = static_cast<double>(call_bytes(args));
    const double chunk = std::min(total, chunk_bytes(args));
    const double rounds = messages(total, chunk);
    double us = 0;
    for (const RelayRing &ring : relay_rings(grid, 0)) {
        const int a = static_cast<int>(ring.ranks.size());
        const RingEmbedding e = t.embed_ring(ring.ranks);
        const double hops = a / 2;
        us += hops * (e.hop_latency_us + us_for(chunk, e.bottleneck_gbps));
        us += with_reduction(t, inputs, args.elem_size, 0.0, (a - 1) * chunk);
    }
    return host_lockstep(t, inputs, rounds * us);
}

bool applies_on(const CollectiveArgs &args, const Topology &t, std::string *why_not) {
    TorusGrid grid;
    if (torus_trees_grid(t, args.nranks, &grid)) return true;
    if (why_not != nullptr) *why_not = no_torus_grid_reason(t, args.nranks);
    return false;
}

Schedule build_on(const CollectiveArgs &args, const Topology &t) {
    TorusGrid grid;
    if (!torus_trees_grid(t, args.nranks, &grid)) return Schedule{};
    return build_relay(args, grid);
}

} // namespace

Schedule build_torus_relay(const CollectiveArgs &args, const RankGrid &grid) {
    TorusGrid dims;
    if (grid.x > 1) dims.dims.push_back(grid.x), dims.wrap.push_back(grid.wrap_x);
    if (grid.y > 1) dims.dims.push_back(grid.y), dims.wrap.push_back(grid.wrap_y);
    dims.rank_at = grid.rank_at;
    return build_relay(args, dims);
}

Schedule build_torus_relay(const CollectiveArgs &args, const TorusGrid &grid) { return build_relay(args, grid); }

const AlgorithmInfo &torus_relay_algorithm() {
    static const AlgorithmInfo info{
        "torus_relay",
        "every rank's vector relayed along its line of x both ways and summed in coordinate order, then the sums "
        "along each line of y, then z: x/2 + y/2 (+ z/2) hops, every rank the same bits; for small messages",
        "a machine of chips and links whose ranks fill a 2D torus or a block of one (torus:XxY, nnpt-pod32, "
        "nnpt-pod1024), or a 3D torus one rank per chip (torus:XxYxZ)",
        {Collective::Allreduce},
        build_on,
        applies_on,
        predict_relay_us,
        one_channel};
    return info;
}

} // namespace nnpccl
