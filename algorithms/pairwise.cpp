// Pairwise alltoall: block j of rank i's send buffer goes to block i of
// rank j's receive buffer, one peer at a time. p ranks, m bytes per block
// (n = p·m per rank), α per message, β per byte, one injection port per
// rank:
//
//   p-1 rounds; in round k rank r sends block r+k to rank r+k and
//   receives block r-k from rank r-k, chunk by chunk, alternating:
//   (p-1)α + (p-1)·mβ = (p-1)α + (p-1)/p·nβ. Every rank sends to one peer
//   and receives from one per round, so no receiver is ever flooded: the
//   choice for blocks beyond a few KiB (direct.cpp's alltoall, every chunk
//   to all peers at once, saves (p-2)α for small ones).
//
// It needs only one slot per stream: every stream carries at most one
// message that its receiver has not yet reached. A block larger than a
// chunk costs one α per chunk, most of it hidden by the chunk in flight.
//
// In place it sends from copies in scratch (alltoall_in_place.hpp says
// why) and pairs the ranks symmetrically (round k of a 1-factorization: r
// and k - r mod p-1, the rank left over with p-1, for even p; r and k - r
// mod p, one rank idle, for odd p), so a rank sends block j to j and
// receives j's block into the same place: p-1 rounds (p for odd p).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>

#include "alltoall_in_place.hpp"
#include "builders.hpp"
#include "cost_terms.hpp"
#include "patterns.hpp"
#include "registry.hpp"
#include "step_list.hpp"

namespace nnpccl {

namespace {

class Pairwise {
public:
    Pairwise(const CollectiveArgs &args, Schedule &sched)
        : args_(args), sched_(sched), chunk_(std::max<size_t>(1, args.chunk_elems)) {
        sched_.channels.resize(1);
    }

    void build() {
        copy_own_alltoall_block(args_, sched_);
        StepList steps(sched_.channels[0]);
        if (args_.in_place) {
            const int p = args_.nranks, rounds = p % 2 == 0 ? p - 1 : p;
            size_t set = 0;
            for (int k = 0; k < rounds; ++k) {
                const int with = exchange_partner(k);
                if (with < 0) continue;
                // Copy out, send, then receive into the place just copied from.
                for (const ElemRange &c : chunked(0, args_.count, chunk_)) {
                    const BufRef place{Buf::Recv, block_begin(with) + c.begin};
                    send_from_copy(steps, with, place, c.size(),
                                   alltoall_copy_slot(args_, chunk_, sched_, set, 2, 0, 1));
                    steps.add(kRecv | kStore, with, -1, {}, place, c.size());
                    set ^= 1;
                }
            }
            return;
        }
        for (int k = 1; k < args_.nranks; ++k) {
            const int to = peer(k), from = peer(-k);
            const std::vector<ElemRange> pieces = chunked(0, args_.count, chunk_);
            // Send before receive, chunk by chunk: both ends of every
            // stream move in step, so one free slot per stream is enough.
            for (const ElemRange &c : pieces) {
                steps.add(kSend, -1, to, BufRef{Buf::Send, block_begin(to) + c.begin}, {}, c.size());
                steps.add(kRecv | kStore, from, -1, {}, BufRef{Buf::Recv, block_begin(from) + c.begin}, c.size());
            }
        }
    }

private:
    int peer(int offset) const { return ((args_.rank + offset) % args_.nranks + args_.nranks) % args_.nranks; }
    // This rank's partner in round k of the in-place pairing (header), -1
    // when it sits the round out; the partner's partner is this rank.
    int exchange_partner(int k) const {
        const int p = args_.nranks, r = args_.rank;
        if (p % 2 != 0) {
            const int with = ((k - r) % p + p) % p;
            return with == r ? -1 : with;
        }
        const int m = p - 1; // odd, so 2 has an inverse mod m: (m + 1) / 2
        if (r == m) return static_cast<int>(static_cast<int64_t>(k) * ((m + 1) / 2) % m);
        const int with = ((k - r) % m + m) % m;
        return with == r ? m : with;
    }
    size_t block_begin(int rank) const { return alltoall_block_begin(args_, rank); }

    const CollectiveArgs &args_;
    Schedule &sched_;
    size_t chunk_;
};

} // namespace

Schedule build_pairwise_alltoall(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "pairwise";
    if (args.collective != Collective::Alltoall) return sched; // not served: see builders.hpp
    Pairwise(args, sched).build();
    return sched;
}

// Its entry in the registry (registry.cpp): its cost, how it is built on a
// topology and how many channels it takes.
namespace {

// Pairwise alltoall: p-1 rounds, in round k rank r sends its
// block of m = S/p bytes to r+k in c = ceil(m / C) chunks, T the round's
// bytes through the links their routes share. A rank sends its next chunk
// only once the previous one from r-k has come in, so a chunk's latency
// lies on the chain of ranks r, r-k, r-2k, ... (a cycle of the round's
// permutation): on NNP-T, the cycle's mean route latency ᾱ per chunk, with
// its chunk time t, unless the shared links are slower:
//   round    max(ᾱ + T, c·(ᾱ + t))
// On the host, where α is the rank's own work, every chunk's α adds to the
// round's transfers: c·α + T (α: the longest route's).
// Beyond kSampledRounds rounds, one round in each of kSampledRounds equal
// strata stands for its stratum; the round picked moves through the
// stratum from one to the next, so that on a torus the samples' partners
// are not all in the same column (every 32nd round of 1023 on a torus 32
// wide would all be one column over, the cheapest).
double predict_pairwise_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    constexpr int kSampledRounds = 32;
    const int p = args.nranks;
    if (p <= 1) return 0;
    const double block = static_cast<double>(call_bytes(args)) / p, chunk = chunk_bytes(args);
    const double pieces = messages(block, chunk);
    const bool host = t.machine().shape() == Shape::Flat;
    // (round, the rounds it stands for)
    std::vector<std::pair<int, int>> sampled;
    const int strata = std::min(p - 1, kSampledRounds);
    for (int i = 0; i < strata; ++i) {
        const int lo = 1 + static_cast<int>(static_cast<int64_t>(i) * (p - 1) / strata);
        const int hi = 1 + static_cast<int>(static_cast<int64_t>(i + 1) * (p - 1) / strata);
        // 13 is prime, so over successive strata of any size but its
        // multiples the offset takes every value.
        sampled.push_back({lo + (i * 13) % (hi - lo), hi - lo});
    }
    auto round = [&](int k) {
        std::vector<Flow> flows;
        for (int r = 0; r < p; ++r) flows.push_back({r, (r + k) % p, block});
        return flows;
    };
    std::vector<Flow> partners;
    for (const auto &[k, weight] : sampled) {
        const std::vector<Flow> flows = round(k);
        partners.insert(partners.end(), flows.begin(), flows.end());
    }
    RouteTable routes(t);
    routes.trace(partners); // one search per rank
    double us = 0;
    for (const auto &[k, weight] : sampled) {
        const FlowCost cost = concurrent(t, round(k), &routes);
        double per_round = pieces * cost.latency_us + cost.transfer_us;
        if (!host) {
            // The cycles of r -> r+k: gcd(p, k) of them, p / gcd long, each
            // from its smallest rank.
            double slowest = 0, mean_latency = 0;
            const int cycles = std::gcd(p, k);
            for (int start = 0; start < cycles; ++start) {
                double latency = 0, gbps = kInfinity;
                int n = 0;
                for (int r = start; n == 0 || r != start; r = (r + k) % p, ++n) {
                    const Route *route = routes.find(r, (r + k) % p);
                    latency += route != nullptr ? route->latency_us : cost.latency_us;
                    if (route != nullptr) gbps = std::min(gbps, route->gbps);
                }
                mean_latency = std::max(mean_latency, latency / n);
                slowest = std::max(slowest, us_for(block / std::max(1.0, pieces), gbps));
            }
            per_round = std::max(mean_latency + cost.transfer_us, pieces * (mean_latency + slowest));
        }
        us += weight * per_round;
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
