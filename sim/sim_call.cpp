#include "sim_call.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

namespace nnpccl::sim {

namespace {

const SimCollective kCollectives[] = {
    {"allreduce", Collective::Allreduce}, {"reduce_scatter", Collective::ReduceScatter},
    {"allgather", Collective::Allgather}, {"broadcast", Collective::Broadcast},
    {"reduce", Collective::Reduce},       {"gather", Collective::Gather},
    {"scatter", Collective::Scatter},     {"alltoall", Collective::Alltoall},
    {"sendrecv", Collective::Send, true}, {"barrier", Collective::Barrier},
};

// What rank 0 sends: how many link crossings, and the distinct message sizes.
struct Traffic {
    uint64_t hops = 0;
    size_t largest = 0; // elements
    std::set<size_t> sizes;
};

Traffic rank_traffic(const Network &network, const ProgramSource &source, int rank) {
    Traffic t;
    RankProgram program;
    source(rank, &program);
    const Topology &topology = network.topology();
    for (const Schedule &s : program)
        for (const std::vector<Step> &channel : s.channels) {
            int last_peer = -1;
            uint64_t hops = 1;
            for (const Step &step : channel) {
                if (!step.has(kSend)) continue;
                if (step.send_peer != last_peer && step.send_peer >= 0 && step.send_peer < topology.nranks()) {
                    const std::vector<uint32_t> *path =
                        network.path(topology.chip_of(rank), topology.chip_of(step.send_peer));
                    hops = path != nullptr ? std::max<uint64_t>(1, path->size()) : 1;
                    last_peer = step.send_peer;
                }
                t.hops += hops;
                t.largest = std::max(t.largest, step.count);
                t.sizes.insert(step.count);
            }
        }
    return t;
}

SimCall with_count(const SimCall &call, size_t count) {
    SimCall c = call;
    c.count = count;
    return c;
}

} // namespace

const SimCollective *find_sim_collective(std::string_view name) {
    for (const SimCollective &c : kCollectives)
        if (name == c.name) return &c;
    return nullptr;
}

std::string sim_collective_names() {
    std::string names;
    for (const SimCollective &c : kCollectives) names += (names.empty() ? "" : ", ") + std::string(c.name);
    return names;
}

uint64_t estimate_hops(const Network &network, const AlgorithmInfo &algorithm, const SimCall &call) {
    // Up to 64 chunks of it, scaled: building rank 0's whole schedule of a
    // large direct allreduce takes longer than the answer is worth.
    const Topology &topology = network.topology();
    const size_t most = 64 * std::max<size_t>(1, call.chunk_bytes / std::max<size_t>(1, call.elem_size));
    const size_t count = std::min(call.count, most);
    const double scale = count > 0 ? static_cast<double>(call.count) / static_cast<double>(count) : 1;
    const uint64_t hops = rank_traffic(network, programs(algorithm, with_count(call, count), topology), 0).hops;
    return static_cast<uint64_t>(static_cast<double>(hops) * scale) * static_cast<uint64_t>(topology.nranks());
}

CollectiveArgs collective_args(const SimCall &call, int rank, int nranks) {
    CollectiveArgs a;
    const Collective c = call.what.collective;
    a.collective = c;
    a.count = c == Collective::Barrier ? 0 : call.count;
    a.root = has_root(c) ? call.root : is_point_to_point(c) ? (rank + 1) % std::max(1, nranks) : -1;
    // In place as src/call.hpp decides it from the pointers: gather's and
    // scatter's only at the root; never a send, recv or barrier.
    const bool rooted_only = c == Collective::Gather || c == Collective::Scatter;
    a.in_place =
        call.in_place && !is_point_to_point(c) && c != Collective::Barrier && (!rooted_only || rank == call.root);
    a.rank = rank;
    a.nranks = nranks;
    a.elem_size = c == Collective::Barrier ? 1 : std::max<size_t>(1, call.elem_size);
    a.chunk_elems = std::max<size_t>(1, call.chunk_bytes / a.elem_size);
    return a;
}

ProgramSource programs(const AlgorithmInfo &algorithm, const SimCall &call, const Topology &topology) {
    return [&algorithm, call, &topology](int rank, RankProgram *out) {
        const int p = topology.nranks();
        CollectiveArgs args = collective_args(call, rank, p);
        if (!call.what.exchange) {
            out->push_back(algorithm.build(args, topology));
            return;
        }
        args.collective = Collective::Send;
        args.root = (rank + 1) % p;
        out->push_back(algorithm.build(args, topology));
        args.collective = Collective::Recv;
        args.root = (rank + p - 1) % p;
        out->push_back(algorithm.build(args, topology));
    };
}

Status simulate_call(const Network &network, const AlgorithmInfo &algorithm, const SimCall &call,
                     const SimOptions &options, const Budget &budget, Outcome *out, TraceSink *trace) {
    *out = Outcome{};
    const Topology &topology = network.topology();
    const int p = topology.nranks();
    const ProgramSource whole = programs(algorithm, call, topology);
    SimOptions opts = options;
    opts.elem_size = collective_args(call, 0, p).elem_size;
    const Traffic traffic = rank_traffic(network, whole, 0);
    out->estimated_hops = traffic.hops * static_cast<uint64_t>(p);
    if (trace != nullptr || budget.max_hops == 0 || out->estimated_hops <= budget.max_hops || traffic.largest == 0)
        return simulate(network, whole, opts, &out->result, trace);

    // Steady state: the call cut to u and to 2u units of its largest
    // message (the largest u within the budget for both), which run the
    // same messages as the whole call in fewer rounds. The time the second
    // u units add is the rounds' pace, and the rest of the call is taken to
    // keep it. Rounds are told apart by separate runs: within one run, the
    // last rank to finish a round is held up by others' next rounds.
    const size_t units = call.count / traffic.largest;
    const uint64_t hops_per_unit =
        std::max<uint64_t>(1, traffic.hops / std::max<size_t>(1, units)) * static_cast<uint64_t>(p);
    size_t u = 1;
    while (8 * u <= units && 3 * 2 * u * hops_per_unit <= budget.max_hops) u *= 2;
    const size_t counts[2] = {u * traffic.largest, 2 * u * traffic.largest};
    if (call.count % traffic.largest != 0 || 2 * counts[1] > call.count)
        return simulate(network, whole, opts, &out->result, trace);
    SimResult r[2];
    ProgramSource parts[2];
    for (int i = 0; i < 2; ++i) {
        parts[i] = programs(algorithm, with_count(call, counts[i]), topology);
        if (rank_traffic(network, parts[i], 0).sizes != traffic.sizes)
            return simulate(network, whole, opts, &out->result, trace); // not the same messages: no shortcut
        out->counts[i] = counts[i];
    }
    // The two are apart: the smaller one on a thread of its own.
    Status ran[2];
    std::thread smaller([&] { ran[0] = simulate(network, parts[0], opts, &r[0], nullptr); });
    ran[1] = simulate(network, parts[1], opts, &r[1], nullptr);
    smaller.join();
    NNPCCL_TRY(ran[0]);
    NNPCCL_TRY(ran[1]);
    const double span = static_cast<double>(counts[1] - counts[0]);
    const double slope = (r[1].time_us - r[0].time_us) / span;
    const double first = r[0].time_us / static_cast<double>(counts[0]);
    out->slope_spread = slope > 0 ? std::fabs(slope - first) / slope : 0;
    const double ahead = static_cast<double>(call.count - counts[1]);
    auto extend = [&](double last, double previous) { return last + (last - previous) / span * ahead; };
    auto extend_count = [&](uint64_t last, uint64_t previous) {
        return static_cast<uint64_t>(std::llround(extend(static_cast<double>(last), static_cast<double>(previous))));
    };
    SimResult &e = out->result;
    e.time_us = extend(r[1].time_us, r[0].time_us);
    e.busy_us.resize(r[1].busy_us.size());
    e.bytes.resize(r[1].bytes.size());
    for (size_t l = 0; l < e.busy_us.size(); ++l) {
        e.busy_us[l] = extend(r[1].busy_us[l], r[0].busy_us[l]);
        e.bytes[l] = extend(r[1].bytes[l], r[0].bytes[l]);
    }
    // The steady state's queues and path: those of the larger part.
    e.peak_queue_bytes = r[1].peak_queue_bytes;
    e.critical_path = std::move(r[1].critical_path);
    e.steps = extend_count(r[1].steps, r[0].steps);
    e.messages = extend_count(r[1].messages, r[0].messages);
    e.bytes_sent = extend_count(r[1].bytes_sent, r[0].bytes_sent);
    e.hops = r[0].hops + r[1].hops; // the work done
    out->extrapolated = true;
    return Status::ok();
}

} // namespace nnpccl::sim
