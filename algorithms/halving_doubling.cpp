// Recursive halving-doubling (Rabenseifner). The p2 = 2^floor(log2 p)
// active ranks reduce-scatter by recursive halving (each round, swap half of
// the range still being reduced with the partner whose virtual rank differs
// in one bit, farthest bit first, and keep reducing the other half) and
// allgather by recursive doubling (the same pairs in reverse, each round
// swapping everything gathered so far). The r = p - p2 extra ranks fold
// their data into a neighbour first and get their result from it last (see
// HalvingDoublingPattern). p ranks, n bytes, α per message, β per byte, γ
// per byte reduced; exchanges run both directions at once:
//
//   allreduce       2·log2(p2)·α + 2(p2-1)/p2·nβ + (p2-1)/p2·nγ
//                   r > 0 adds α + nβ + nγ (fold in) and α + nβ (result
//                   back, forwarded chunk by chunk as it arrives, so it
//                   overlaps the allgather unless one NIC carries both)
//   reduce-scatter  log2(p2)·α + (p2-1)/p2·nβ + (p2-1)/p2·nγ  (n = whole send buffer)
//                   r > 0 adds α + nβ + nγ (fold in) and α + (n/p)β (block back)
//   allgather       log2(p2)·α + (p2-1)/p2·nβ               (n = whole receive buffer)
//                   r > 0 adds α + (n/p)β (block in) and α + (p-1)/p·nβ (forwarded back)
//
// Every message is at most a chunk, so an exchange of b bytes costs
// ceil(b / chunk) α, not one: the α terms above hold for n up to about
// p·chunk bytes. Each element is reduced in exactly one place and copied
// from there, so all ranks hold the same bits; the order of the combines
// differs from element to element (as the ring's does): exact for integer
// types, min and max, and the checks' integer-valued floats, and otherwise
// the usual floating-point reassociation, fixed for a given p and count.
#include <algorithm>

#include "builders.hpp"
#include "butterfly.hpp"
#include "cost_terms.hpp"
#include "patterns.hpp"
#include "registry.hpp"

namespace nnpccl {

Schedule build_halving_doubling(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "halving_doubling";
    const Collective coll = args.collective;
    if (coll != Collective::Allreduce && coll != Collective::ReduceScatter && coll != Collective::Allgather)
        return sched; // not served: see builders.hpp
    sched.channels.resize(1);
    const HalvingDoublingPattern pattern(args.nranks, args.rank);
    const ButterflyPart whole{0, args.count};
    if (coll == Collective::Allreduce) {
        butterfly_allreduce(args, pattern, whole, sched.channels[0]);
    } else if (coll == Collective::ReduceScatter) {
        if (args.nranks > 1) sched.scratch_elems = args.count * static_cast<size_t>(args.nranks);
        butterfly_reduce_scatter(args, pattern, whole, sched.channels[0]);
    } else {
        butterfly_allgather(args, pattern, whole, sched.channels[0]);
    }
    return sched;
}

// Its entry in the registry (registry.cpp): its cost, how it is built on a
// topology and how many channels it takes.
namespace {

// Halving-doubling (halving_doubling.cpp): p2 = 2^floor(log2 p) active
// ranks, log2 p2 rounds per phase; in halving round j (partners differ in
// bit p2/2^(j+1)) every active rank swaps S/2^(j+1) with its partner, at
// ceil(that / C)·α plus the swap's bytes through the links their routes
// share; doubling runs the rounds backwards. The r = p - p2 extra ranks
// fold into a neighbour first (α + Sβ + Sγ) and get their result after:
// on the host that adds its bytes, on NNP-T it trails the allgather chunk
// by chunk and adds one chunk.
double predict_halving_doubling_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    if (p <= 1) return 0;
    const double total = static_cast<double>(call_bytes(args)), chunk = chunk_bytes(args);
    const HalvingDoublingPattern pattern(p, 0);
    const int active = pattern.active_count(), extras = p - active;
    const bool host = t.machine().shape() == Shape::Flat;
    auto exchange = [&](int mask, double bytes) {
        std::vector<Flow> flows;
        for (int v = 0; v < active; ++v) flows.push_back({pattern.active_rank(v), pattern.active_rank(v ^ mask), bytes});
        return flows;
    };
    auto fold = [&](double bytes, bool into_active) {
        std::vector<Flow> flows;
        for (int v = 0; v < extras; ++v)
            flows.push_back(into_active ? Flow{2 * v, 2 * v + 1, bytes} : Flow{2 * v + 1, 2 * v, bytes});
        return flows;
    };
    // Every partner's route, one search per rank.
    std::vector<Flow> partners = fold(0, true), back = fold(0, false);
    partners.insert(partners.end(), back.begin(), back.end());
    for (int mask = 1; mask < active; mask <<= 1) {
        const std::vector<Flow> round = exchange(mask, 0);
        partners.insert(partners.end(), round.begin(), round.end());
    }
    RouteTable routes(t);
    routes.trace(partners);
    auto time_us = [&](const std::vector<Flow> &flows) {
        const FlowCost cost = concurrent(t, flows, &routes);
        return flows.empty() ? 0 : messages(flows.front().bytes, chunk) * cost.latency_us + cost.transfer_us;
    };
    const bool halving = args.collective != Collective::Allgather;
    const bool doubling = args.collective != Collective::ReduceScatter;
    double us = 0;
    for (int j = 0; j < pattern.rounds(); ++j) {
        if (halving) us += time_us(exchange(active >> (j + 1), total / (2 << j))); // S/2, S/4, ...
        if (doubling) us += time_us(exchange(1 << j, total / active * (1 << j)));   // S/p2, 2S/p2, ...
    }
    double reduced = halving ? (active - 1.0) / active * total : 0;
    if (extras > 0) {
        // What goes to the active rank first, and what comes back last.
        const double in = args.collective == Collective::Allgather ? total / p : total;
        const double back = args.collective == Collective::Allreduce       ? total
                            : args.collective == Collective::ReduceScatter ? total / p
                                                                           : (p - 1.0) / p * total;
        us += time_us(fold(in, true));
        us += time_us(fold(host ? back : std::min(back, chunk), false));
        if (args.collective != Collective::Allgather) reduced += total;
    }
    return host_lockstep(t, inputs, with_reduction(t, inputs, args.elem_size, us, reduced));
}

Schedule build_on(const CollectiveArgs &args, const Topology &) { return build_halving_doubling(args); }

} // namespace

const AlgorithmInfo &halving_doubling_algorithm() {
    static const AlgorithmInfo info{
        "halving_doubling",
        "recursive halving then doubling (Rabenseifner): log2 p exchanges per phase; ranks beyond a power of two "
        "fold into a neighbour",
        "",
        {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather},
        build_on,
        applies_with_valid_root,
        predict_halving_doubling_us,
        one_channel};
    return info;
}

} // namespace nnpccl
