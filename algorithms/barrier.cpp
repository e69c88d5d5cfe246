// Dissemination barrier: in round k every rank signals the rank 2^k places
// ahead and waits for the one 2^k places behind. ceil(log2 p) rounds, so
// ceil(log2 p)·α, and no rank leaves before all have arrived.
#include "builders.hpp"
#include "cost_terms.hpp"
#include "registry.hpp"
#include "patterns.hpp"

namespace nnpccl {

Schedule build_dissemination_barrier(const CollectiveArgs &args, const std::vector<int> &ring_order) {
    Schedule sched;
    sched.algorithm = "dissemination";
    sched.channels.resize(1);
    RingPattern ring(ring_order, args.rank);
    const int rounds = ceil_log2(ring.size());
    for (int k = 0; k < rounds; ++k) {
        int distance = 1 << k;
        Step signal;
        signal.flags = kSend;
        signal.send_peer = ring.rank_at(ring.position() + distance);
        Step wait;
        wait.flags = kRecv;
        wait.recv_peer = ring.rank_at(ring.position() - distance);
        // Send first: a rank that waited before signalling would wait forever.
        sched.channels[0].push_back(signal);
        sched.channels[0].push_back(wait);
    }
    return sched;
}

// Its entry in the registry (registry.cpp): its cost, how it is built on a
// topology and how many channels it takes.
namespace {

// Dissemination barrier (barrier.cpp): ceil(log2 p) rounds along ring 0,
// each the longest route's latency from a rank to the one 2^k places ahead.
double predict_dissemination_us(const CollectiveArgs &args, const Topology &t, const CostInputs &) {
    const int p = args.nranks;
    const std::vector<int> &ring = t.rings().front();
    auto round = [&](int distance) {
        std::vector<Flow> flows;
        for (int i = 0; i < p; ++i)
            flows.push_back({ring[static_cast<size_t>(i)], ring[static_cast<size_t>((i + distance) % p)], 0});
        return flows;
    };
    std::vector<Flow> partners;
    for (int distance = 1; distance < p; distance *= 2) {
        const std::vector<Flow> flows = round(distance);
        partners.insert(partners.end(), flows.begin(), flows.end());
    }
    RouteTable routes(t);
    routes.trace(partners); // one search per rank
    double us = 0;
    for (int distance = 1; distance < p; distance *= 2) us += concurrent(t, round(distance), &routes).latency_us;
    return us;
}

Schedule build_on(const CollectiveArgs &args, const Topology &t) {
    return build_dissemination_barrier(args, t.rings().front());
}

} // namespace

const AlgorithmInfo &dissemination_algorithm() {
    static const AlgorithmInfo info{"dissemination",
                                    "ceil(log2 p) rounds of zero-byte messages",
                                    "",
                                    {Collective::Barrier},
                                    build_on,
                                    applies_with_valid_root,
                                    predict_dissemination_us,
                                    one_channel};
    return info;
}

} // namespace nnpccl
