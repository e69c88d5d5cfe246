// Swing allreduce (De Sensi, Bonato, Saam, Hoefler, "Swing: Short-cutting
// Rings for Higher Bandwidth Allreduce", NSDI 2024): recursive halving and
// doubling (butterfly.hpp) whose partners, on a torus, are short hops
// away. In step s rank r exchanges with
//
//   r + ρ(s) when r is even, r - ρ(s) when odd (mod the ring's size),
//   ρ(s) = Σ_{i=0..s} (-2)^i = 1, -1, 3, -5, 11, -21, ...
//
// so the steps' partners are |ρ(s)| = 1, 1, 3, 5, 11, ... hops away, about
// 2/3 of recursive doubling's 1, 2, 4, 8, 16: the halving's first, largest
// exchange goes one hop. On a torus (2D, or 3D with a rank on every chip)
// the steps take the dimensions in turn (each ring's coordinate swings by
// ρ of that dimension's own step count),
// and 2D channels, each 1/(2D) of the data, start on a different dimension,
// half of them mirrored (-ρ for even, +ρ for odd), so every port of a chip
// carries bytes in every step. Each dimension must be a power of two;
// otherwise (and off a torus) the ranks are one ring, and the ranks beyond
// the largest power of two fold into a neighbour first as in
// halving_doubling.cpp. On the host (`flat`) there is one channel: the
// links share one memory system.
//
// p ranks, n bytes, D dimensions, a step's partner d_s hops away:
//   swing (bandwidth-optimal) allreduce
//                  2·log2(p)·α + Σ_s 2·d_s·α_hop + 2(p-1)/p·nβ/(2D ports) + (p-1)/p·nγ
//                  (a round's bytes through the links the channels' routes
//                  share: concurrent(); step s carries n/2^(s+1) per rank)
//   reduce-scatter, allgather  half of that
//   swing_latency  log2(p)·α + Σ_s d_s·α_hop + log2(p)·nβ/(2D) + log2(p)·nγ
//                  (recursive doubling of the whole vector: the fewest
//                  rounds and hops, every round carrying all of it)
//
// The swing pairing is not a hypercube (partners of different steps do not
// commute), but its groups are: the ranks a rank reaches in steps s..L-1
// form a partition refined step by step (the paper's proof), so labelling
// each rank by the side of its group it falls on at each step gives the
// butterfly's data layout, and each rank's partner per step is Swing's.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <tuple>

#include "builders.hpp"
#include "butterfly.hpp"
#include "cost_terms.hpp"
#include "registry.hpp"

namespace nnpccl {

namespace {

// Two messages in flight per exchange: a link stays busy while its rank
// reduces the message before (the two slots every transport keeps).
constexpr size_t kSwingSendsAhead = 1;

int log2_exact(int n) {
    int k = 0;
    while ((1 << k) < n) ++k;
    return (1 << k) == n ? k : -1;
}

int swing_rho(int s) {
    int rho = 0, term = 1;
    for (int i = 0; i <= s; ++i, term *= -2) rho += term;
    return rho;
}

struct SwingStep {
    int dim;
    int s; // the step's count within its dimension
};

// Round robin over the dimensions from `start`, each as many steps as its
// log2 size.
std::vector<SwingStep> swing_steps(const std::vector<int> &dims, int start) {
    const int d = static_cast<int>(dims.size());
    std::vector<int> left(dims.size()), done(dims.size(), 0);
    for (size_t i = 0; i < dims.size(); ++i) left[i] = log2_exact(dims[i]);
    std::vector<SwingStep> steps;
    for (bool any = true; any;) {
        any = false;
        for (int k = 0; k < d; ++k) {
            const auto i = static_cast<size_t>((start + k) % d);
            if (done[i] == left[i]) continue;
            steps.push_back({static_cast<int>(i), done[i]++});
            any = true;
        }
    }
    return steps;
}

// The torus index (coordinates, first dimension fastest) of `index`'s partner.
int swing_peer(int index, SwingStep step, const std::vector<int> &dims, bool mirrored) {
    int stride = 1;
    for (int i = 0; i < step.dim; ++i) stride *= dims[static_cast<size_t>(i)];
    const int size = dims[static_cast<size_t>(step.dim)];
    const int c = index / stride % size;
    const int sign = ((c % 2 == 0) != mirrored) ? 1 : -1;
    const int moved = ((c + sign * swing_rho(step.s)) % size + size) % size;
    return index + (moved - c) * stride;
}

// Each torus index's label: bit L-1-s says on which side of its step-s
// group it is (the half whose lowest index is larger); returned as the
// index of each label. Computed once per torus shape and channel.
std::vector<int> swing_index_of_label(const std::vector<int> &dims, int start, bool mirrored) {
    static std::mutex lock;
    static std::map<std::vector<int>, std::vector<int>> cache;
    std::vector<int> key = dims;
    key.push_back(start);
    key.push_back(mirrored ? 1 : 0);
    const std::lock_guard<std::mutex> hold(lock);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    const std::vector<SwingStep> steps = swing_steps(dims, start);
    const int n = std::accumulate(dims.begin(), dims.end(), 1, std::multiplies<int>());
    const int rounds = static_cast<int>(steps.size());
    std::vector<int> lowest(static_cast<size_t>(n)), label(static_cast<size_t>(n), 0);
    std::iota(lowest.begin(), lowest.end(), 0);
    for (int s = rounds - 1; s >= 0; --s) {
        std::vector<int> merged(lowest);
        for (int x = 0; x < n; ++x) {
            const auto q = static_cast<size_t>(swing_peer(x, steps[static_cast<size_t>(s)], dims, mirrored));
            const auto me = static_cast<size_t>(x);
            if (lowest[q] < lowest[me]) label[me] |= 1 << (rounds - 1 - s);
            merged[me] = std::min(lowest[me], lowest[q]);
        }
        lowest.swap(merged);
    }
    std::vector<int> index_of_label(static_cast<size_t>(n));
    for (int x = 0; x < n; ++x) index_of_label[static_cast<size_t>(label[static_cast<size_t>(x)])] = x;
    return cache.emplace(key, index_of_label).first->second;
}

} // namespace

namespace {

// A 3D torus whose every chip holds one rank, its dimensions powers of
// two: its dimensions (those larger than 1) and the rank at each chip
// (chip i + x·(j + y·k) at (i, j, k), first dimension fastest as
// swing_peer() counts). False otherwise.
bool torus3d_shape(const Topology &t, int nranks, SwingShape *shape) {
    const Machine &m = t.machine();
    const TorusDims d = m.torus();
    if (m.shape() != Shape::Torus || d.z <= 1 || nranks != m.num_chips()) return false;
    for (int size : {d.x, d.y, d.z})
        if (log2_exact(size) < 0) return false;
    std::vector<int> rank_at(static_cast<size_t>(nranks), -1);
    for (int r = 0; r < nranks; ++r) {
        const int chip = t.chip_of(r);
        if (chip < 0 || chip >= nranks || rank_at[static_cast<size_t>(chip)] >= 0) return false;
        rank_at[static_cast<size_t>(chip)] = r;
    }
    for (int size : {d.x, d.y, d.z})
        if (size > 1) shape->dims.push_back(size);
    shape->rank_at = std::move(rank_at);
    return true;
}

} // namespace

SwingShape swing_shape(const Topology &t, int nranks) {
    SwingShape shape;
    const RankGrid *grid = t.torus();
    const bool flat = t.machine().shape() == Shape::Flat;
    if (!flat && grid != nullptr && grid->x * grid->y == nranks && log2_exact(grid->x) >= 0 &&
        log2_exact(grid->y) >= 0) {
        for (int d : {grid->x, grid->y})
            if (d > 1) shape.dims.push_back(d);
        shape.rank_at = grid->rank_at;
    } else if (!flat) {
        torus3d_shape(t, nranks, &shape);
    }
    shape.channels = flat ? 1 : 2 * std::max<int>(1, static_cast<int>(shape.dims.size()));
    return shape;
}

// The pattern of channel c: on the torus the positions are the ranks (no
// rank folds), on one ring the active ranks' positions.
HalvingDoublingPattern swing_pattern(const SwingShape &shape, int nranks, int rank, int channel) {
    const HalvingDoublingPattern plain(nranks, rank);
    const int active = plain.active_count();
    if (active <= 1) return plain;
    const bool torus = !shape.dims.empty();
    const std::vector<int> dims = torus ? shape.dims : std::vector<int>{active};
    const int start = channel / 2 % static_cast<int>(dims.size());
    const bool mirrored = channel % 2 == 1;
    std::vector<int> index_of_label = swing_index_of_label(dims, start, mirrored);
    int index = plain.virtual_rank();
    if (torus) {
        index = static_cast<int>(std::find(shape.rank_at.begin(), shape.rank_at.end(), rank) - shape.rank_at.begin());
        for (int &i : index_of_label) i = shape.rank_at[static_cast<size_t>(i)];
    }
    const std::vector<SwingStep> steps = swing_steps(dims, start);
    const int rounds = static_cast<int>(steps.size());
    ButterflyPairing pairing;
    pairing.partner_by_bit.resize(static_cast<size_t>(rounds));
    for (int s = 0; s < rounds; ++s) {
        const int peer = swing_peer(index, steps[static_cast<size_t>(s)], dims, mirrored);
        pairing.partner_by_bit[static_cast<size_t>(rounds - 1 - s)] =
            torus ? shape.rank_at[static_cast<size_t>(peer)] : peer;
    }
    pairing.position_of_label = std::move(index_of_label);
    return HalvingDoublingPattern(nranks, rank, std::move(pairing));
}

Schedule build_swing(const CollectiveArgs &args, const SwingShape &shape, bool latency_optimal) {
    Schedule sched;
    sched.algorithm = latency_optimal ? "swing_latency" : "swing";
    const Collective coll = args.collective;
    const bool blockwise = coll == Collective::ReduceScatter || coll == Collective::Allgather;
    if (coll != Collective::Allreduce && !(blockwise && !latency_optimal)) return sched; // not served
    const auto channels = static_cast<size_t>(std::max(1, shape.channels));
    sched.channels.resize(channels);
    if (coll == Collective::ReduceScatter && args.nranks > 1)
        sched.scratch_elems = args.count * static_cast<size_t>(args.nranks);
    if (latency_optimal && args.nranks > 1) sched.scratch_elems = 2 * args.count;
    for (size_t c = 0; c < channels; ++c) {
        const HalvingDoublingPattern pattern = swing_pattern(shape, args.nranks, args.rank, static_cast<int>(c));
        // Channel c takes piece c of the data (of each block, block-wise).
        const size_t lo = piece_begin(args.count, channels, c);
        const ButterflyPart part{lo, lo + piece_size(args.count, channels, c), kSwingSendsAhead};
        std::vector<Step> &out = sched.channels[c];
        if (coll == Collective::ReduceScatter)
            butterfly_reduce_scatter(args, pattern, part, out);
        else if (coll == Collective::Allgather)
            butterfly_allgather(args, pattern, part, out);
        else if (latency_optimal)
            butterfly_doubling_allreduce(args, pattern, part, out);
        else
            butterfly_allreduce(args, pattern, part, out);
    }
    return sched;
}

// Its entries in the registry (registry.cpp): the cost, how it is built on
// a topology and how many channels it takes.
namespace {

// The bandwidth-optimal butterfly's channels: on a torus of two or more
// dimensions three per pairing (each a third of its data), so that while
// one waits for a step's first message or reduces it, the others' messages
// cross the port; the links serve them in turn. On nnpt-pod32 at 4 MiB
// the butterfly took 53.6 us with one channel per port, 46.6 with two,
// 44.8 with three and 44.1 with four (ccl-sim); three is the least that
// reaches 80% of the bound there, and every 2D-torus transport opens 12
// streams per peer for it (torus2d and the ring take 8).
// Allreduce only: the model does not see the lanes' gain for reduce-scatter
// and allgather (allgather of 4 MiB on pod32: 25.1 us simulated with two,
// 34.2 predicted), so there it would choose no better, and they keep one.
constexpr int kSwingLanes = 3;

SwingShape bandwidth_shape(const Topology &t, int nranks, Collective collective) {
    SwingShape shape = swing_shape(t, nranks);
    if (t.machine().shape() != Shape::Flat && shape.dims.size() >= 2 && collective == Collective::Allreduce) {
        shape.lanes = kSwingLanes;
        shape.channels *= kSwingLanes;
    }
    return shape;
}

// The rank at position x of channel c's pairing, and its partner in step s.
struct SwingRoutes {
    const SwingShape &shape;
    const HalvingDoublingPattern plain;
    std::vector<int> dims;

    SwingRoutes(const SwingShape &s, int p) : shape(s), plain(p, 0) {
        dims = shape.dims.empty() ? std::vector<int>{plain.active_count()} : shape.dims;
    }
    int rank_at(int x) const {
        return shape.dims.empty() ? plain.active_rank(x) : shape.rank_at[static_cast<size_t>(x)];
    }
    // Every active rank's transfer to its partner in step s of each channel.
    std::vector<Flow> step(int s, double bytes) const {
        std::vector<Flow> flows;
        for (int c = 0; c < shape.channels; ++c) {
            const int start = c / 2 % static_cast<int>(dims.size());
            const SwingStep at = swing_steps(dims, start)[static_cast<size_t>(s)];
            for (int x = 0; x < plain.active_count(); ++x)
                flows.push_back({rank_at(x), rank_at(swing_peer(x, at, dims, c % 2 == 1)), bytes});
        }
        return flows;
    }
};

// What each step's transfers cost (concurrent()), which the message size
// does not change: the model asks for one call at several sizes
// (chunk_choice.cpp), and on 16,384 ranks tracing the steps' routes is
// most of a prediction. The last call shape's are kept, per thread; the
// machine is named as chunk_choice.cpp names it, and the ranks' places on
// it too (a topology made after another's end may take its address).
struct SwingStepCosts {
    std::vector<FlowCost> cost;
    std::vector<double> bytes; // of each transfer of the step
};
using StepKey =
    std::tuple<bool, int, size_t, size_t, int, int, const Topology *, std::string, size_t, size_t, std::vector<int>>;

std::shared_ptr<const SwingStepCosts> swing_step_costs(const CollectiveArgs &args, const Topology &t,
                                                       const SwingShape &shape, bool latency_optimal) {
    static thread_local StepKey last_key;
    static thread_local std::shared_ptr<const SwingStepCosts> last;
    std::vector<int> places(static_cast<size_t>(args.nranks));
    for (int r = 0; r < args.nranks; ++r) places[static_cast<size_t>(r)] = t.chip_of(r);
    StepKey key{latency_optimal, static_cast<int>(args.collective), args.count, args.elem_size, args.root,
                args.nranks, &t, t.name(), t.machine().links().size(), t.machine().chips().size(), std::move(places)};
    if (last != nullptr && key == last_key) return last;
    const SwingRoutes routes_of(shape, args.nranks);
    const double share = static_cast<double>(call_bytes(args)) / shape.channels;
    auto costs = std::make_shared<SwingStepCosts>();
    for (int s = 0; s < routes_of.plain.rounds(); ++s) {
        const std::vector<Flow> flows = routes_of.step(s, latency_optimal ? share : share / (2 << s));
        RouteTable routes(t);
        routes.trace(flows);
        costs->cost.push_back(flows.empty() ? FlowCost{} : concurrent(t, flows, &routes));
        costs->bytes.push_back(flows.empty() ? 0 : flows.front().bytes);
    }
    last_key = std::move(key);
    last = costs;
    return last;
}

// Per step s of the L = log2 p2 (in both phases, or once for the latency
// variant, and for reduce-scatter and allgather): every channel's
// transfers at once, at the longest route's latency plus the bytes through
// the busiest link or port (concurrent()); on the host each message's α
// as well. The r = p - p2 extra ranks fold in and out as in
// halving_doubling.cpp.
double predict_swing(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs, bool latency_optimal) {
    const int p = args.nranks;
    if (p <= 1) return 0;
    const SwingShape shape = latency_optimal ? swing_shape(t, p) : bandwidth_shape(t, p, args.collective);
    const HalvingDoublingPattern plain(p, 0);
    const int active = plain.active_count(), extras = p - active, rounds = plain.rounds();
    const double total = static_cast<double>(call_bytes(args)), chunk = chunk_bytes(args);
    const bool host = t.machine().shape() == Shape::Flat;
    const std::shared_ptr<const SwingStepCosts> steps = swing_step_costs(args, t, shape, latency_optimal);
    // Channels per pairing: beside a channel waiting out a step's latency
    // or reducing, the others' messages keep the links busy.
    const double lanes = shape.lanes;
    // On the host every message's α is the rank's work. On a machine a
    // round's messages stream behind the first (its route's latency, its
    // own transfer and its reduction), kSwingSendsAhead + 1 in flight per
    // channel, so the busiest link sets their pace unless a message's round
    // trip is longer. A reduce-scatter or allgather step sends each rank's
    // block part apart where they do not touch (the labels are not in rank
    // order, and with several channels each takes a part of every block).
    // Returns the step's time along one channel's chain and, apart, the
    // busiest link's time.
    struct StepTime {
        double chain_us = 0, link_us = 0, latency_us = 0;
    };
    auto step_us = [&](const FlowCost &cost, double bytes, double runs) {
        const double count = std::max(runs, messages(bytes, chunk));
        if (host) {
            const double us = count * cost.latency_us + cost.transfer_us;
            return StepTime{us, us, 0};
        }
        const double each = cost.transfer_us / count;
        const double reduce_us = with_reduction(t, inputs, args.elem_size, 0, bytes / count);
        const double round_trip = each / lanes + cost.latency_us + reduce_us;
        const double pace = std::max(each / lanes, round_trip / static_cast<double>(kSwingSendsAhead + 1));
        return StepTime{round_trip + (count - 1) * pace, cost.transfer_us, cost.latency_us + reduce_us};
    };
    auto time_us = [&](const FlowCost &cost, double bytes, double runs) {
        const StepTime step = step_us(cost, bytes, runs);
        return std::max(step.chain_us, step.link_us + step.latency_us);
    };
    auto flows_us = [&](const std::vector<Flow> &flows, double runs) {
        if (flows.empty()) return 0.0;
        RouteTable routes(t);
        routes.trace(flows);
        return time_us(concurrent(t, flows, &routes), flows.front().bytes, runs);
    };
    const bool both_phases = args.collective == Collective::Allreduce && !latency_optimal;
    const bool blockwise = args.collective != Collective::Allreduce;
    // With one channel per pairing every step waits for the one before,
    // each paying its latency; with L lanes the channels drift apart and
    // while one waits out a step's latency the others' bytes cross, so the
    // call takes its chain's steps, or its links' bytes and 1/L of its
    // steps' latencies, whichever is longer.
    double chain = 0, link = 0, latency = 0;
    for (int s = 0; s < rounds; ++s) {
        const double runs = blockwise && total > 0 ? static_cast<double>(active >> (s + 1)) : 1;
        const auto at = static_cast<size_t>(s);
        if (steps->bytes[at] > 0 || steps->cost[at].transfer_us > 0 || steps->cost[at].latency_us > 0) {
            const StepTime step = step_us(steps->cost[at], steps->bytes[at], runs);
            const double phases = both_phases ? 2 : 1;
            chain += phases * (lanes > 1 ? step.chain_us : std::max(step.chain_us, step.link_us + step.latency_us));
            link += phases * step.link_us;
            latency += phases * step.latency_us;
        }
    }
    double us = std::max(chain, link + latency / lanes);
    const bool reduces = args.collective != Collective::Allgather;
    double reduced = !reduces ? 0 : latency_optimal ? rounds * total : (active - 1.0) / active * total;
    if (extras > 0) {
        const double in = args.collective == Collective::Allgather ? total / p : total;
        const double back = args.collective == Collective::Allreduce       ? total
                            : args.collective == Collective::ReduceScatter ? total / p
                                                                           : (p - 1.0) / p * total;
        std::vector<Flow> fold_in, fold_out;
        for (int v = 0; v < extras; ++v) {
            fold_in.push_back({2 * v, 2 * v + 1, in / shape.channels});
            fold_out.push_back(
                {2 * v + 1, 2 * v, (host ? back : std::min(back, chunk * shape.channels)) / shape.channels});
        }
        us += flows_us(fold_in, 1) + flows_us(fold_out, 1);
        if (reduces) reduced += total;
    }
    return host_lockstep(t, inputs, with_reduction(t, inputs, args.elem_size, us, reduced));
}

double predict_bandwidth_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    return predict_swing(args, t, inputs, false);
}

double predict_latency_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    return predict_swing(args, t, inputs, true);
}

Schedule build_bandwidth(const CollectiveArgs &args, const Topology &t) {
    return build_swing(args, bandwidth_shape(t, args.nranks, args.collective), false);
}

Schedule build_latency(const CollectiveArgs &args, const Topology &t) {
    return build_swing(args, swing_shape(t, args.nranks), true);
}

int channels_on(const Topology &t) { return swing_shape(t, t.nranks()).channels; }

int bandwidth_channels_on(const Topology &t) { return bandwidth_shape(t, t.nranks(), Collective::Allreduce).channels; }

bool applies_off_host(const CollectiveArgs &args, const Topology &t, std::string *why_not) {
    if (t.machine().shape() != Shape::Flat) return applies_with_valid_root(args, t, why_not);
    if (why_not != nullptr)
        *why_not = "needs a machine of chips and links (a torus, ring or mesh preset or file), not the host model '" +
                   t.name() + "', where halving_doubling and direct are its equals";
    return false;
}

// Across hosts the network links are the bottleneck, and Swing's partners
// cross them at every step of both halves, where the hierarchical algorithm
// crosses them once per block: the model's figures for Swing there were
// never checked against a run, so it leaves multi-host jobs to the
// algorithms that were.
bool applies_within_a_host(const CollectiveArgs &args, const Topology &t, std::string *why_not) {
    if (!t.spans_hosts()) return applies_with_valid_root(args, t, why_not);
    if (why_not != nullptr)
        *why_not = "runs within one host or on a machine of chips and links, not across the hosts of '" + t.name() +
                   "' (hierarchical crosses the network fewer times)";
    return false;
}

} // namespace

const AlgorithmInfo &swing_algorithm() {
    static const AlgorithmInfo info{
        "swing",
        "Swing (bandwidth-optimal): recursive halving then doubling with partners 1, 1, 3, 5, 11, ... hops away, "
        "the dimensions of a torus in turn, 2 pairings per dimension (one mirrored) so every port works, three "
        "channels each for allreduce on a torus; "
        "reduce-scatter and allgather are its halves",
        "not across hosts",
        {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather},
        build_bandwidth,
        applies_within_a_host,
        predict_bandwidth_us,
        bandwidth_channels_on};
    return info;
}

const AlgorithmInfo &swing_latency_algorithm() {
    static const AlgorithmInfo info{
        "swing_latency",
        "Swing (latency-optimal): recursive doubling of the whole vector with Swing's partners, log2 p messages "
        "of about 2/3 the hops of recursive doubling's, one channel per torus port",
        "a machine of chips and links, not the host model",
        {Collective::Allreduce},
        build_latency,
        applies_off_host,
        predict_latency_us,
        channels_on};
    return info;
}

} // namespace nnpccl
