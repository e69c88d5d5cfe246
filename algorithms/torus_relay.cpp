// Allreduce for small messages on a torus: every rank's vector relayed
// along its row both ways, each rank summing the row's vectors in the
// order of their columns, then the row sums relayed along each column the
// same way and summed in the order of their rows. Each vector spreads as
// a broadcast tree embedded in the torus, dimension by dimension, so a
// call takes about x/2 + y/2 hops: 32 on nnpt-pod1024 (32x32), where
// swing_latency's recursive doubling takes 2 * (1+1+3+5+11) = 42 and the
// torus's rings 2(x+y-2) = 124. Every rank adds the same vectors in the
// same order, so all hold the same bits.
//
// A row of a ranks: the vectors from the a/2 ranks on the left arrive from
// the left, one hop further each step, and those of the (a-1)/2 on the
// right from the right; a rank forwards each one on until it has gone its
// distance. One channel carries both directions, so that the sum waits
// for both; a vector over a chunk goes chunk by chunk, each chunk the
// whole way (the messages stay one per stream ahead of their receive, as
// the ring's do).
//
// p = x·y ranks, n bytes, C bytes per chunk, α the latency of a hop, β per
// byte of a port, γ per byte reduced; h_x = x/2, h_y = y/2:
//
//   allreduce  ceil(n/C) · [h_x·(α + Cβ) + (x-1)·Cγ + h_y·(α + Cβ) + (y-1)·Cγ]
//
// Scratch: the row's x vectors, then the column's y row sums, (x+y)·count.
#include <algorithm>

#include "builders.hpp"
#include "cost_terms.hpp"
#include "patterns.hpp"
#include "registry.hpp"
#include "step_list.hpp"

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

Schedule build_relay(const CollectiveArgs &args, const RankGrid &grid) {
    Schedule sched;
    sched.algorithm = "torus_relay";
    if (args.collective != Collective::Allreduce || grid.x * grid.y != args.nranks) return sched;
    const auto here = std::find(grid.rank_at.begin(), grid.rank_at.end(), args.rank) - grid.rank_at.begin();
    const int i = static_cast<int>(here) % grid.x, j = static_cast<int>(here) / grid.x;
    RelayRing row, column;
    for (int k = 0; k < grid.x; ++k) row.ranks.push_back(grid.rank(k, j));
    for (int k = 0; k < grid.y; ++k) column.ranks.push_back(grid.rank(i, k));
    row.me = i;
    column.me = j;
    column.base = static_cast<size_t>(grid.x);
    sched.channels.resize(1);
    StepList steps(sched.channels[0]);
    if (args.nranks == 1) {
        steps.add(kStore, -1, -1, BufRef{Buf::Send, 0}, BufRef{Buf::Recv, 0}, args.count, true);
        return sched;
    }
    sched.scratch_elems = static_cast<size_t>(grid.x + grid.y) * args.count;
    const size_t count = args.count;
    // The own vector is copied to its slot first: sent from there, the
    // caller's buffer (the result's, in place) is free to be written.
    for (const ElemRange &c : chunked(0, count, std::max<size_t>(1, args.chunk_elems))) {
        steps.add(kStore, -1, -1, BufRef{Buf::Send, c.begin},
                  BufRef{Buf::Scratch, static_cast<size_t>(i) * count + c.begin}, c.size());
        relay(row, c, count, steps);
        const BufRef row_sum = grid.y > 1
                                   ? BufRef{Buf::Scratch, (column.base + static_cast<size_t>(j)) * count + c.begin}
                                   : BufRef{Buf::Recv, c.begin};
        sum_in_order(row, c, count, row_sum, grid.y == 1, steps);
        if (grid.y == 1) continue;
        relay(column, c, count, steps);
        sum_in_order(column, c, count, BufRef{Buf::Recv, c.begin}, true, steps);
    }
    return sched;
}

// Its entry in the registry (registry.cpp).

// Per chunk, each dimension's relay: h hops of a chunk, store and
// forward, then a - 1 sums of it (the model's γ).
double predict_relay_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    const RankGrid *grid = t.torus();
    if (p <= 1 || grid == nullptr) return p <= 1 ? 0 : kInfinity;
    const double total = static_cast<double>(call_bytes(args));
    const double chunk = std::min(total, chunk_bytes(args));
    const double rounds = messages(total, chunk);
    std::vector<int> row, column;
    for (int i = 0; i < grid->x; ++i) row.push_back(grid->rank(i, 0));
    for (int j = 0; j < grid->y; ++j) column.push_back(grid->rank(0, j));
    double us = 0;
    for (const std::vector<int> *ring : {&row, &column}) {
        const int a = static_cast<int>(ring->size());
        if (a == 1) continue;
        const RingEmbedding e = t.embed_ring(*ring);
        const double hops = a / 2;
        us += hops * (e.hop_latency_us + us_for(chunk, e.bottleneck_gbps));
        us += with_reduction(t, inputs, args.elem_size, 0.0, (a - 1) * chunk);
    }
    return host_lockstep(t, inputs, rounds * us);
}

bool applies_on(const CollectiveArgs &args, const Topology &t, std::string *why_not) {
    const RankGrid *grid = t.torus();
    if (t.machine().shape() != Shape::Flat && grid != nullptr && grid->x * grid->y == args.nranks) return true;
    if (why_not != nullptr)
        *why_not =
            t.machine().shape() == Shape::Flat
                ? "needs a machine of chips and links (a torus preset or file), not the host model '" + t.name() + "'"
            : grid == nullptr
                ? "needs ranks that fill a 2D torus or a block of one; topology '" + t.name() + "' has no torus grid"
                : "the ranks' grid is " + std::to_string(grid->x) + "x" + std::to_string(grid->y) + ", not " +
                      std::to_string(args.nranks) + " ranks";
    return false;
}

Schedule build_on(const CollectiveArgs &args, const Topology &t) { return build_relay(args, *t.torus()); }

} // namespace

Schedule build_torus_relay(const CollectiveArgs &args, const RankGrid &grid) { return build_relay(args, grid); }

const AlgorithmInfo &torus_relay_algorithm() {
    static const AlgorithmInfo info{
        "torus_relay",
        "every rank's vector relayed along its row both ways and summed in column order, then the row sums along "
        "each column, summed in row order: x/2 + y/2 hops, every rank the same bits; for small messages",
        "a machine of chips and links whose rank grid x*y holds every rank (torus:XxY, nnpt-pod32, nnpt-pod1024)",
        {Collective::Allreduce},
        build_on,
        applies_on,
        predict_relay_us,
        one_channel};
    return info;
}

} // namespace nnpccl
