// Alltoall: block j of rank i's send buffer goes to block i of rank j's
// receive buffer. p ranks, m bytes per block (n = p·m per rank), α per
// message, β per byte, one injection port per rank:
//
//   pairwise  p-1 rounds; in round k rank r sends block r+k to rank r+k and
//             receives block r-k from rank r-k, chunk by chunk, alternating:
//             (p-1)α + (p-1)·mβ = (p-1)α + (p-1)/p·nβ. Every rank sends to
//             one peer and receives from one per round, so no receiver is
//             ever flooded: the choice for blocks beyond a few KiB.
//   direct    for each chunk, send it to all p-1 peers, then receive it from
//             all of them: α + (p-1)·mβ, saving (p-2)α, but each receiver
//             takes p-1 streams at once (incast), and the chunk rounds run
//             in lock step: for small blocks.
//
// Both need only one slot per stream: every stream carries at most one
// message that its receiver has not yet reached. A block larger than a
// chunk costs one α per chunk, most of it hidden by the chunk in flight.
//
// In place (send == recv, as MPI_IN_PLACE; NCCL has no in-place alltoall)
// the blocks for the other ranks are first copied to scratch, because
// pairwise receives block r-k in round k but sends it only in round p-k:
// (p-1)·m more bytes of memcpy and p·count elements of scratch.
#include <algorithm>

#include "builders.hpp"
#include "cost_terms.hpp"
#include "registry.hpp"
#include "patterns.hpp"
#include "step_list.hpp"

namespace nnpccl {

namespace {

class Alltoall {
public:
    Alltoall(const CollectiveArgs &args, Schedule &sched)
        : args_(args), sched_(sched), chunk_(std::max<size_t>(1, args.chunk_elems)) {
        sched_.channels.resize(1);
    }

    // Our own block goes straight across (or stays, in place), and in place
    // the others' are staged where the sends will read them.
    void prepare() {
        StepList steps(sched_.channels[0]);
        const size_t mine = block_begin(args_.rank), end = block_begin(args_.nranks);
        if (!args_.in_place) {
            steps.add(kStore, -1, -1, BufRef{Buf::Send, mine}, BufRef{Buf::Recv, mine}, args_.count);
            return;
        }
        sched_.scratch_elems = end;
        outgoing_ = Buf::Scratch;
        steps.add(kStore, -1, -1, BufRef{Buf::Send, 0}, BufRef{Buf::Scratch, 0}, mine);
        steps.add(kStore, -1, -1, BufRef{Buf::Send, mine + args_.count}, BufRef{Buf::Scratch, mine + args_.count},
                  end - mine - args_.count);
    }

    void pairwise() {
        StepList steps(sched_.channels[0]);
        for (int k = 1; k < args_.nranks; ++k) {
            const int to = peer(k), from = peer(-k);
            const std::vector<ElemRange> pieces = chunked(0, args_.count, chunk_);
            // Send before receive, chunk by chunk: both ends of every
            // stream move in step, so one free slot per stream is enough.
            for (const ElemRange &c : pieces) {
                steps.add(kSend, -1, to, BufRef{outgoing_, block_begin(to) + c.begin}, {}, c.size());
                steps.add(kRecv | kStore, from, -1, {}, BufRef{Buf::Recv, block_begin(from) + c.begin}, c.size());
            }
        }
    }

    void direct() {
        StepList steps(sched_.channels[0]);
        for (const ElemRange &c : chunked(0, args_.count, chunk_)) {
            // Each rank starts with the rank after it, so the ranks' first
            // messages of a round go to p different receivers, not all to one.
            for (int k = 1; k < args_.nranks; ++k)
                steps.add(kSend, -1, peer(k), BufRef{outgoing_, block_begin(peer(k)) + c.begin}, {}, c.size());
            for (int k = 1; k < args_.nranks; ++k)
                steps.add(kRecv | kStore, peer(-k), -1, {}, BufRef{Buf::Recv, block_begin(peer(-k)) + c.begin},
                          c.size());
        }
    }

private:
    int peer(int offset) const { return ((args_.rank + offset) % args_.nranks + args_.nranks) % args_.nranks; }
    size_t block_begin(int rank) const { return static_cast<size_t>(rank) * args_.count; }

    const CollectiveArgs &args_;
    Schedule &sched_;
    size_t chunk_;
    Buf outgoing_ = Buf::Send; // where the blocks for the other ranks are read from
};

} // namespace

Schedule build_pairwise_alltoall(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "pairwise";
    if (args.collective != Collective::Alltoall) return sched; // not served: see builders.hpp
    Alltoall alltoall(args, sched);
    alltoall.prepare();
    alltoall.pairwise();
    return sched;
}

Schedule build_direct_alltoall(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "direct";
    if (args.collective != Collective::Alltoall) return sched; // not served: see builders.hpp
    Alltoall alltoall(args, sched);
    alltoall.prepare();
    alltoall.direct();
    return sched;
}

// Its entry in the registry (registry.cpp): its cost, how it is built on a
// topology and how many channels it takes.
namespace {

// Pairwise alltoall (alltoall.cpp): p-1 rounds, in round k rank r sends its
// block of m = S/p bytes to r+k: ceil(m / C)·α plus the round's bytes
// through the links their routes share. Beyond kSampledRounds rounds, a
// stride of them stands for all.
double predict_pairwise_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    constexpr int kSampledRounds = 32;
    const int p = args.nranks;
    if (p <= 1) return 0;
    const double block = static_cast<double>(call_bytes(args)) / p, chunk = chunk_bytes(args);
    const int stride = (p - 1 + kSampledRounds - 1) / kSampledRounds;
    auto round = [&](int k) {
        std::vector<Flow> flows;
        for (int r = 0; r < p; ++r) flows.push_back({r, (r + k) % p, block});
        return flows;
    };
    std::vector<Flow> partners;
    for (int k = 1; k < p; k += stride) {
        const std::vector<Flow> flows = round(k);
        partners.insert(partners.end(), flows.begin(), flows.end());
    }
    RouteTable routes(t);
    routes.trace(partners); // one search per rank
    double us = 0;
    for (int k = 1; k < p; k += stride) {
        const FlowCost cost = concurrent(t, round(k), &routes);
        us += std::min(stride, p - k) * (messages(block, chunk) * cost.latency_us + cost.transfer_us);
    }
    return host_lockstep(t, inputs, us);
}

Schedule build_on(const CollectiveArgs &args, const Topology &) { return build_pairwise_alltoall(args); }

} // namespace

const AlgorithmInfo &pairwise_algorithm() {
    static const AlgorithmInfo info{"pairwise",
                                    "p-1 rounds; in round k every rank sends to rank+k and receives from rank-k",
                                    "",
                                    {Collective::Alltoall},
                                    build_on,
                                    applies_with_valid_root,
                                    predict_pairwise_us,
                                    one_channel};
    return info;
}

} // namespace nnpccl
