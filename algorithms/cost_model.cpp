// The cost model (cost_model.hpp). Notation as in the builders' headers:
// p ranks, S the call's bytes (call_bytes), C bytes per chunk, α a message's
// latency (its route's), β per byte (1 / its route's bandwidth), γ per byte
// reduced. Three pieces are shared by every algorithm:
//
//   concurrent()      transfers that run at once: the time of the busiest
//                     link (bytes of every route crossing it), the busiest
//                     chip port in or out (bytes over its injection
//                     bandwidth) and the slowest route, and the longest
//                     route's latency
//   with_reduction()  γ added to (host) or overlapped with (NNP-T) transfers
//   simulate_ports()  a symmetric schedule's channels on one rank's ports,
//                     message by message (the 2D torus, whose channels
//                     share ports phase by phase)
#include "cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "builders.hpp"
#include "patterns.hpp"

namespace nnpccl {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kBytesPerUsPerGbps = 1e3;
// NNP-T: HBM2 at about 1.2 TB/s, and a reduction reads two operands and
// writes one (DESIGN.md: reduction speed is not the device's bottleneck).
constexpr double kDeviceReduceUsPerByte = 3.0 / 1.2e6;
// Ranks up to which every transfer's route is traced (nnpt-pod1024 is
// 1024; a route search there takes about 0.15 ms).
constexpr int kTracedSources = 1024;
// The 2D torus simulation runs up to this many full slices on the busiest
// channel (the others in proportion) and extrapolates the rest (full
// slices repeat).
constexpr size_t kSimulatedSlices = 64;

double us_for(double bytes, double gbps) {
    if (bytes <= 0) return 0;
    return gbps > 0 ? bytes / (gbps * kBytesPerUsPerGbps) : kInfinity;
}

// Messages of at most `chunk` bytes that `bytes` takes (0 for nothing).
double messages(double bytes, double chunk) { return bytes <= 0 ? 0 : std::ceil(bytes / std::max(1.0, chunk)); }

double chunk_bytes(const CollectiveArgs &args) {
    return static_cast<double>(std::max<size_t>(1, args.chunk_elems) * args.elem_size);
}

// γ as it applies to the topology's chips; see cost_model.hpp.
double with_reduction(const Topology &t, const CostInputs &inputs, size_t elem_size, double transfer_us,
                      double reduced_bytes) {
    if (t.machine().shape() == Shape::Flat)
        return transfer_us + reduced_bytes * inputs.host_reduce_us(elem_size);
    return std::max(transfer_us, reduced_bytes * kDeviceReduceUsPerByte);
}

// Algorithms whose ranks move in lockstep (direct, halving-doubling, the
// double binary tree, pairwise): a round ends when its last rank has done
// its part, and with r ranks on each core of a `flat` host a core runs its
// ranks' parts one after another, so the round takes r times as long. The
// ring's bytes escape this: it is a pipeline, each rank waits only for its
// left neighbour, and neighbours sit on different cores (affinity.hpp pins
// round robin), so one core's rank copies while the other's forwards. Its
// messages' α do not: α on the host is the rank's own work (the slot
// handshake, waking the receiver), done by the one thread that drives all
// of the rank's channels and waiting for the receiver's turn on its core,
// so on `flat` the ring pays every channel's α, r times, where every rank
// works in every step (allreduce, reduce-scatter, allgather; a broadcast or
// reduce chain's piece moves one hop at a time and waits for no one; see
// predict_ring_us()). Measured, 4 ranks on 2 cores, ccl-bench --compare 5
// (algorithms taking turns), allgather of 256 KiB: ring 45 us, direct 76,
// halving-doubling 79 (the model without the term predicted direct
// fastest); of 32 KiB: halving-doubling 13, direct 13, ring 17 (the ring
// was the choice there until its α counted r times).
double host_lockstep(const Topology &t, const CostInputs &inputs, double us) {
    if (t.machine().shape() != Shape::Flat) return us;
    return us * std::max(1.0, inputs.host_ranks_per_core);
}

struct Flow {
    int from;
    int to;
    double bytes;
};

// Up to kTracedSources ranks every transfer's route is traced (one
// Dijkstra per source); beyond, only those from every stride-th rank,
// whose link loads then stand for the whole (contention among the others
// is missed: an underestimate, as the sample is not scaled up).
int tracing_stride(int nranks) { return nranks > kTracedSources ? (nranks + kTracedSources - 1) / kTracedSources : 1; }

// The flows' indices grouped by source, sources ascending.
std::vector<size_t> by_source(const std::vector<Flow> &flows) {
    std::vector<size_t> order(flows.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return flows[a].from < flows[b].from; });
    return order;
}

// Routes kept for one prediction: an algorithm of several rounds traces
// every round's transfers at once, so that each source is searched once,
// and keeps only the routes it will ask for.
class RouteTable {
public:
    explicit RouteTable(const Topology &t) : t_(t) {}

    void trace(const std::vector<Flow> &flows) {
        const int stride = tracing_stride(t_.nranks());
        const std::vector<size_t> order = by_source(flows);
        std::vector<Route> row;
        int row_source = -1;
        for (size_t i : order) {
            const Flow &f = flows[i];
            if (f.from == f.to || f.from % stride != 0 || routes_.count(key(f.from, f.to)) != 0) continue;
            if (f.from != row_source) {
                row = t_.machine().routes_from(t_.chip_of(f.from));
                row_source = f.from;
            }
            routes_.emplace(key(f.from, f.to), row[static_cast<size_t>(t_.chip_of(f.to))]);
        }
    }
    const Route *find(int from, int to) const {
        auto it = routes_.find(key(from, to));
        return it == routes_.end() ? nullptr : &it->second;
    }

private:
    static uint64_t key(int from, int to) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(from)) << 32) | static_cast<uint32_t>(to);
    }
    const Topology &t_;
    std::unordered_map<uint64_t, Route> routes_;
};

struct FlowCost {
    double transfer_us = 0; // until the last byte is through
    double latency_us = 0;  // the longest route's
};

// Transfers that run at once; see the file comment. Routes not in `traced`
// are searched here, one source at a time, and not kept.
FlowCost concurrent(const Topology &t, const std::vector<Flow> &flows, const RouteTable *traced = nullptr) {
    FlowCost cost;
    const int p = t.nranks(), stride = tracing_stride(p);
    std::vector<double> out(static_cast<size_t>(p), 0), in(static_cast<size_t>(p), 0);
    std::vector<double> load(t.machine().links().size(), 0);
    std::vector<Route> row;
    int row_source = -1;
    for (size_t i : by_source(flows)) {
        const Flow &f = flows[i];
        if (f.from == f.to) continue;
        out[static_cast<size_t>(f.from)] += f.bytes;
        in[static_cast<size_t>(f.to)] += f.bytes;
        if (f.from % stride != 0) continue;
        const Route *r = traced != nullptr ? traced->find(f.from, f.to) : nullptr;
        if (r == nullptr) {
            if (f.from != row_source) {
                row = t.machine().routes_from(t.chip_of(f.from));
                row_source = f.from;
            }
            r = &row[static_cast<size_t>(t.chip_of(f.to))];
        }
        if (!r->reachable) return {kInfinity, kInfinity};
        for (int link : r->links) load[static_cast<size_t>(link)] += f.bytes;
        cost.transfer_us = std::max(cost.transfer_us, us_for(f.bytes, r->gbps));
        cost.latency_us = std::max(cost.latency_us, r->latency_us);
    }
    for (int r = 0; r < p; ++r)
        cost.transfer_us = std::max({cost.transfer_us, us_for(out[static_cast<size_t>(r)], t.injection_gbps(r)),
                                     us_for(in[static_cast<size_t>(r)], t.injection_gbps(r))});
    const std::vector<Link> &links = t.machine().links();
    for (size_t l = 0; l < links.size(); ++l) cost.transfer_us = std::max(cost.transfer_us, us_for(load[l], links[l].gbps));
    return cost;
}

// One message of a symmetric schedule: the port it leaves by and its size.
struct PortMessage {
    int port;
    double bytes;
};

// Channels that each send a chain of messages, each message on one of a
// rank's ports (one message at a time per port, first come first served).
// A message starts once its channel's previous message has arrived (the
// ring step sending it waited for the one before) and its port is free,
// and arrives its port's latency after its last byte left. Every rank of a
// symmetric schedule does the same at the same moments, so one rank's ports
// stand for all. Returns when the last message arrives (µs).
double simulate_ports(const std::vector<std::vector<PortMessage>> &channels, const std::vector<double> &port_gbps,
                      const std::vector<double> &port_latency_us) {
    using Ready = std::pair<double, size_t>; // when the channel's next message may start; the channel
    std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> ready;
    std::vector<size_t> next(channels.size(), 0);
    std::vector<double> port_free(port_gbps.size(), 0);
    for (size_t c = 0; c < channels.size(); ++c)
        if (!channels[c].empty()) ready.push({0.0, c});
    double end = 0;
    while (!ready.empty()) {
        const auto [at, c] = ready.top();
        ready.pop();
        const PortMessage &m = channels[c][next[c]++];
        const auto port = static_cast<size_t>(m.port);
        const double sent = std::max(at, port_free[port]) + us_for(m.bytes, port_gbps[port]);
        port_free[port] = sent;
        const double arrived = sent + port_latency_us[port];
        end = std::max(end, arrived);
        if (next[c] < channels[c].size()) ready.push({arrived, c});
    }
    return end;
}

size_t smallest_divisor_at_least(int n, double least) {
    auto d = static_cast<size_t>(std::max(1.0, least));
    while (static_cast<size_t>(n) % d != 0) ++d;
    return d;
}

} // namespace

double CostInputs::host_reduce_us(size_t elem_size) const {
    switch (elem_size) {
    case 1: return host_reduce_us_per_byte[0];
    case 2: return host_reduce_us_per_byte[1];
    case 8: return host_reduce_us_per_byte[3];
    default: return host_reduce_us_per_byte[2];
    }
}

size_t call_bytes(const CollectiveArgs &args) {
    const size_t bytes = args.count * args.elem_size;
    switch (args.collective) {
    case Collective::ReduceScatter:
    case Collective::Allgather:
    case Collective::Gather:
    case Collective::Scatter:
    case Collective::Alltoall: return bytes * static_cast<size_t>(std::max(1, args.nranks));
    default: return bytes;
    }
}

double bus_bandwidth_factor(Collective c, int nranks) {
    const double p = std::max(1, nranks);
    switch (c) {
    case Collective::Allreduce: return 2 * (p - 1) / p;
    case Collective::ReduceScatter:
    case Collective::Allgather:
    case Collective::Gather:
    case Collective::Scatter:
    case Collective::Alltoall: return (p - 1) / p;
    default: return 1;
    }
}

double lower_bound_us(const CollectiveArgs &args, const Topology &topology) {
    if (args.nranks <= 1) return 0;
    return us_for(static_cast<double>(call_bytes(args)) * bus_bandwidth_factor(args.collective, args.nranks),
                  topology.min_injection_gbps());
}

// Ring (ring.cpp), k = the topology's ring channels (each ring, and
// backward too where Topology::rings_both_ways()), each with S/k:
//   allreduce       2(p-1)·s messages, s = ceil(S/k / (p·C)) slices; 2(p-1)/p·S/k bytes per hop
//   reduce-scatter, allgather  (p-1)·ceil(S/(k·p) / C) messages; (p-1)/p·S/k bytes per hop
//   broadcast, reduce  a chain from (into) the root: (p-2+c)·(α + S/(k·c)·β), c = ceil(S/k / C)
// A channel takes its messages' α plus its bytes over the ring's slowest
// hop; rings that share links (routed hops, or `flat`'s one memory system)
// share them (concurrent()).
double predict_ring_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    if (p <= 1) return 0;
    const double total = static_cast<double>(call_bytes(args)), chunk = chunk_bytes(args);
    // A ring's embedding costs both directions (its slowest hop either
    // way), so the backward channel takes the same α and β over the
    // reversed ranks.
    struct Channel {
        const RingEmbedding *ring;
        std::vector<int> ranks;
    };
    std::vector<Channel> channels;
    for (const RingEmbedding &ring : t.ring_embeddings()) {
        channels.push_back({&ring, ring.ranks});
        if (t.rings_both_ways() && ring.ranks.size() > 2)
            channels.push_back({&ring, std::vector<int>(ring.ranks.rbegin(), ring.ranks.rend())});
    }
    const double share = total / static_cast<double>(channels.size());
    std::vector<Flow> flows;
    // Per channel, its messages' α and its bytes' time on the critical path.
    double slowest_channel = 0, slowest_bytes = 0, every_alpha = 0;
    const bool chain = args.collective == Collective::Broadcast || args.collective == Collective::Reduce;
    for (const Channel &channel : channels) {
        const std::vector<int> &ranks = channel.ranks;
        const double alpha = channel.ring->hop_latency_us, gbps = channel.ring->bottleneck_gbps;
        double alpha_us = 0, bytes_us = 0, hop_bytes = 0;
        int root_position = 0;
        switch (args.collective) {
        case Collective::Allreduce:
            hop_bytes = 2.0 * (p - 1) / p * share;
            alpha_us = 2.0 * (p - 1) * messages(share, p * chunk) * alpha;
            bytes_us = us_for(hop_bytes, gbps);
            break;
        case Collective::ReduceScatter:
        case Collective::Allgather:
            hop_bytes = (p - 1.0) / p * share;
            alpha_us = (p - 1.0) * messages(share / p, chunk) * alpha;
            bytes_us = us_for(hop_bytes, gbps);
            break;
        default: { // broadcast, reduce: a pipelined chain
            const double pieces = messages(share, chunk);
            hop_bytes = share;
            alpha_us = (p - 2 + pieces) * alpha;
            bytes_us = (p - 2 + pieces) * us_for(share / pieces, gbps);
            root_position = static_cast<int>(std::find(ranks.begin(), ranks.end(), args.root) - ranks.begin());
            break;
        }
        }
        slowest_channel = std::max(slowest_channel, alpha_us + bytes_us);
        slowest_bytes = std::max(slowest_bytes, bytes_us);
        every_alpha += alpha_us;
        for (int i = 0; i < p; ++i) {
            // A chain has no hop back into its start (broadcast: the root; reduce: the one after it).
            if (chain && (i + 1) % p == (args.collective == Collective::Broadcast ? root_position : (root_position + 1) % p))
                continue;
            flows.push_back({ranks[static_cast<size_t>(i)], ranks[static_cast<size_t>((i + 1) % p)], hop_bytes});
        }
    }
    const double through_links = concurrent(t, flows).transfer_us;
    // A chain's piece moves one hop at a time: its α do not wait their turn.
    const double host_alpha = chain ? every_alpha : host_lockstep(t, inputs, every_alpha);
    const double transfer = t.machine().shape() == Shape::Flat ? host_alpha + std::max(slowest_bytes, through_links)
                                                               : std::max(slowest_channel, through_links);
    double reduced = 0;
    if (args.collective == Collective::Allreduce || args.collective == Collective::ReduceScatter)
        reduced = (p - 1.0) / p * total;
    if (args.collective == Collective::Reduce) reduced = total;
    return with_reduction(t, inputs, args.elem_size, transfer, reduced);
}

// Direct (direct.cpp, linear.cpp, alltoall.cpp): per chunk every transfer
// starts at once and the next chunk waits for them, so c = ceil(m / C)
// rounds of α plus every byte through the most loaded link or port:
//   allreduce   c·α + (p-1)·Sβ (everyone's buffer to everyone) + (p-1)·Sγ
//   allgather   c·α + (p-1)·mβ out of and into every rank, m = S/p per rank
//   reduce-scatter  the same + (p-1)·mγ, each rank folding its block
//   gather      c·α + (p-1)·mβ into the root, m = S/p per rank
//   scatter     the same out of the root
//   alltoall    c·α + (p-1)·mβ out of and into every rank, m = S/p per pair
double predict_direct_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    if (p <= 1) return 0;
    const double total = static_cast<double>(call_bytes(args)), chunk = chunk_bytes(args);
    const double per_pair = args.collective == Collective::Allreduce ? total : total / p;
    std::vector<Flow> flows;
    for (int a = 0; a < p; ++a)
        for (int b = 0; b < p; ++b) {
            if (a == b) continue;
            const bool wanted = args.collective == Collective::Gather    ? b == args.root
                                : args.collective == Collective::Scatter ? a == args.root
                                                                         : true;
            if (wanted) flows.push_back({a, b, per_pair});
        }
    const FlowCost cost = concurrent(t, flows);
    const double transfer = messages(per_pair, chunk) * cost.latency_us + cost.transfer_us;
    const double reduced = args.collective == Collective::Allreduce       ? (p - 1.0) * total
                           : args.collective == Collective::ReduceScatter ? (p - 1.0) * per_pair
                                                                          : 0;
    return host_lockstep(t, inputs, with_reduction(t, inputs, args.elem_size, transfer, reduced));
}

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

// 2D torus (torus2d.cpp): the channels of torus2d_layout(), each a chain of
// messages on a rank's four ports X+, X-, Y+, Y- (see simulate_ports()):
// per slice of E elements t(a-1) messages of E/(t·a) along the first
// dimension, 2(b-1) of E/(a·b) along the second, t(a-1) along the first
// again. The ports take the latency and bandwidth of the grid's first row
// and column.
double predict_torus2d_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    const RankGrid *grid = t.torus();
    if (p <= 1 || grid == nullptr) return p <= 1 ? 0 : kInfinity;
    const double total = static_cast<double>(call_bytes(args)), elem = static_cast<double>(args.elem_size);
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    std::vector<int> row, column;
    for (int i = 0; i < grid->x; ++i) row.push_back(grid->rank(i, 0));
    for (int j = 0; j < grid->y; ++j) column.push_back(grid->rank(0, j));
    const RingEmbedding along_x = t.embed_ring(row), along_y = t.embed_ring(column);
    enum Port { XForward, XBackward, YForward, YBackward };
    const std::vector<double> gbps = {along_x.bottleneck_gbps, along_x.bottleneck_gbps, along_y.bottleneck_gbps,
                                      along_y.bottleneck_gbps};
    const std::vector<double> latency = {along_x.hop_latency_us, along_x.hop_latency_us, along_y.hop_latency_us,
                                         along_y.hop_latency_us};
    const std::vector<Torus2dChannel> layout = torus2d_layout(args.count, grid->x, grid->y, chunk);
    const size_t slice_elems = chunk * static_cast<size_t>(p);
    // Per channel: its full slices after the lead one, and their size.
    std::vector<size_t> full(layout.size());
    double most = 0;
    for (size_t c = 0; c < layout.size(); ++c) {
        full[c] = messages(static_cast<double>(layout[c].count - layout[c].lead), static_cast<double>(slice_elems));
        most = std::max(most, static_cast<double>(full[c]));
    }
    // Runs every channel with `scale` of its full slices.
    auto simulate = [&](double scale) {
        std::vector<std::vector<PortMessage>> channels(layout.size());
        for (size_t c = 0; c < layout.size(); ++c) {
            const Torus2dChannel &ch = layout[c];
            const int a = ch.x_first ? grid->x : grid->y, b = ch.x_first ? grid->y : grid->x;
            const int first = ch.x_first ? (ch.reversed ? XBackward : XForward) : (ch.reversed ? YBackward : YForward);
            const int second = ch.x_first ? (ch.reversed ? YBackward : YForward) : (ch.reversed ? XBackward : XForward);
            auto add_slice = [&](double elems) {
                const size_t row_slices = smallest_divisor_at_least(b, messages(elems, static_cast<double>(a) * chunk));
                const size_t along_first = row_slices * static_cast<size_t>(a - 1), along_second = 2 * static_cast<size_t>(b - 1);
                const PortMessage row_piece{first, elems * elem / static_cast<double>(row_slices * static_cast<size_t>(a))};
                const PortMessage column_piece{second, elems * elem / p};
                channels[c].insert(channels[c].end(), along_first, row_piece);    // reduce-scatter
                channels[c].insert(channels[c].end(), along_second, column_piece); // allreduce
                channels[c].insert(channels[c].end(), along_first, row_piece);    // allgather
            };
            if (ch.lead > 0) add_slice(static_cast<double>(ch.lead));
            if (full[c] == 0) continue;
            const double size = static_cast<double>(ch.count - ch.lead) / static_cast<double>(full[c]);
            const auto run = static_cast<size_t>(std::max(1.0, std::round(static_cast<double>(full[c]) * scale)));
            for (size_t k = 0; k < run; ++k) add_slice(size);
        }
        return simulate_ports(channels, gbps, latency);
    };
    double transfer = 0;
    const double simulated = static_cast<double>(kSimulatedSlices);
    if (most <= simulated) {
        transfer = simulate(1.0);
    } else {
        // Full slices repeat: time grows by the same step per slice.
        const double many = simulate(simulated / most), half = simulate(simulated / 2 / most);
        transfer = many + (most - simulated) * (many - half) / (simulated / 2);
    }
    return with_reduction(t, inputs, args.elem_size, transfer, (p - 1.0) / p * total);
}

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

// Send and recv (p2p.cpp): α + mβ over the route between the two ranks, the
// chunks pipelining through the stream's slots.
double predict_p2p_us(const CollectiveArgs &args, const Topology &t, const CostInputs &) {
    if (args.root < 0 || args.root >= args.nranks || args.root == args.rank) return 0;
    const Route r = args.collective == Collective::Send ? t.route(args.rank, args.root) : t.route(args.root, args.rank);
    return r.latency_us + us_for(static_cast<double>(call_bytes(args)), r.gbps);
}

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

} // namespace nnpccl
