// The cost model's shared machinery (cost_terms.hpp); each algorithm's
// prediction is in its own file, next to its builder. Notation as in the
// builders' headers:
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

#include "cost_terms.hpp"

namespace nnpccl {

namespace {

constexpr double kBytesPerUsPerGbps = 1e3;
// NNP-T: HBM2 at about 1.2 TB/s, and a reduction reads two operands and
// writes one (docs/design.md: reduction speed is not the device's bottleneck).
constexpr double kDeviceReduceUsPerByte = 3.0 / 1.2e6;

} // namespace

double us_for(double bytes, double gbps) {
    if (bytes <= 0) return 0;
    return gbps > 0 ? bytes / (gbps * kBytesPerUsPerGbps) : kInfinity;
}

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
// ring's bytes escape this on shared memory: it is a pipeline, each rank
// waits only for its left neighbour, and neighbours sit on different cores
// (affinity.hpp pins round robin), so one core's rank copies while the
// other's forwards. (Not over a network transport, whose kernel copies
// each message on both ends' cores: CostInputs::host_over_network.) Its
// messages' α do not: α on the host is the rank's own work (the slot
// handshake, waking the receiver), done by the one thread that drives all
// of the rank's channels and waiting for the receiver's turn on its core,
// so on `flat` the ring pays every channel's α, r times, where every rank
// works in every step (allreduce, reduce-scatter, allgather; a broadcast or
// reduce chain's piece moves one hop at a time and waits for no one; see
// ring.cpp). docs/performance.md, "Selection", has what showed it.
double host_lockstep(const Topology &t, const CostInputs &inputs, double us) {
    if (t.machine().shape() != Shape::Flat) return us;
    return us * std::max(1.0, inputs.host_ranks_per_core);
}

int tracing_stride(int nranks) { return nranks > kTracedSources ? (nranks + kTracedSources - 1) / kTracedSources : 1; }

int tracing_stride(int nranks, double fanout) {
    int stride = tracing_stride(nranks);
    const double most = kTracedFlows * std::min(1.0, static_cast<double>(kTracedSources) / nranks);
    while (stride < nranks && (nranks + stride - 1) / stride * fanout > most) stride *= 2;
    return stride;
}

// A counting sort, stable: O(flows + sources).
std::vector<size_t> by_source(const std::vector<Flow> &flows) {
    int sources = 0;
    for (const Flow &f : flows) sources = std::max(sources, f.from + 1);
    std::vector<size_t> start(static_cast<size_t>(sources) + 1, 0), order(flows.size());
    for (const Flow &f : flows) ++start[static_cast<size_t>(f.from) + 1];
    for (size_t s = 1; s < start.size(); ++s) start[s] += start[s - 1];
    for (size_t i = 0; i < flows.size(); ++i) order[start[static_cast<size_t>(flows[i].from)]++] = i;
    return order;
}

FlowCost concurrent(const Topology &t, const std::vector<Flow> &flows, const RouteTable *traced) {
    FlowCost cost;
    const int p = t.nranks(), stride = tracing_stride(p);
    std::vector<double> out(static_cast<size_t>(p), 0), in(static_cast<size_t>(p), 0);
    std::vector<double> load(t.machine().links().size(), 0);
    RouteCursor routes(t.machine());
    for (size_t i : by_source(flows)) {
        const Flow &f = flows[i];
        if (f.from == f.to) continue;
        out[static_cast<size_t>(f.from)] += f.bytes;
        in[static_cast<size_t>(f.to)] += f.bytes;
        if (f.from % stride != 0) continue;
        const Route *r = traced != nullptr ? traced->find(f.from, f.to) : nullptr;
        if (r == nullptr) r = &routes.route(t.chip_of(f.from), t.chip_of(f.to));
        if (!r->reachable) return {kInfinity, kInfinity};
        for (int link : r->links) load[static_cast<size_t>(link)] += f.bytes;
        cost.transfer_us = std::max(cost.transfer_us, us_for(f.bytes, r->gbps));
        cost.latency_us = std::max(cost.latency_us, r->latency_us);
    }
    for (int r = 0; r < p; ++r) {
        const double most = std::max(out[static_cast<size_t>(r)], in[static_cast<size_t>(r)]);
        if (most > 0) cost.transfer_us = std::max(cost.transfer_us, us_for(most, t.injection_gbps(r)));
    }
    const std::vector<Link> &links = t.machine().links();
    for (size_t l = 0; l < links.size(); ++l) cost.transfer_us = std::max(cost.transfer_us, us_for(load[l], links[l].gbps));
    return cost;
}

double round_alpha_us(const Topology &t, const CostInputs &inputs, const std::vector<Flow> &flows, double latency_us) {
    if (t.machine().shape() != Shape::Flat || !inputs.host_over_network) return latency_us;
    std::vector<int> sent(static_cast<size_t>(t.nranks()), 0), received(static_cast<size_t>(t.nranks()), 0);
    int most = 0;
    for (const Flow &f : flows) {
        if (f.from == f.to) continue;
        most = std::max({most, ++sent[static_cast<size_t>(f.from)], ++received[static_cast<size_t>(f.to)]});
    }
    return std::max(1, most) * latency_us;
}

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
        double arrived = at;
        for (bool more = true; more && next[c] < channels[c].size();) {
            const PortMessage &m = channels[c][next[c]++];
            const auto port = static_cast<size_t>(m.port);
            const double sent = std::max(at, port_free[port]) + us_for(m.bytes, port_gbps[port]);
            port_free[port] = sent;
            arrived = std::max(arrived, sent + port_latency_us[port]);
            more = m.with_next;
        }
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

double CostInputs::host_reduce_us(size_t elem_size) const {
    switch (elem_size) {
    case 1: return host_reduce_us_per_byte[0];
    case 2: return host_reduce_us_per_byte[1];
    case 8: return host_reduce_us_per_byte[3];
    default: return host_reduce_us_per_byte[2];
    }
}

double lower_bound_us(const CollectiveArgs &args, const Topology &topology) {
    if (args.nranks <= 1) return 0;
    const double bytes = static_cast<double>(call_bytes(args));
    const double chips =
        us_for(bytes * bus_bandwidth_factor(args.collective, args.nranks), topology.min_injection_gbps());
    if (!topology.spans_hosts()) return chips;
    // Across h hosts, each host's link carries what h ranks of one chip each would.
    const int hosts = static_cast<int>(topology.host_groups().size());
    return std::max(chips, us_for(bytes * bus_bandwidth_factor(args.collective, hosts), topology.network_gbps()));
}

} // namespace nnpccl
