// The terms every algorithm's cost prediction is made of (cost_model.cpp
// has them; each algorithm's file combines them for its schedule). Times
// are µs; 1 GB/s is 1e3 bytes per µs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include "collective.hpp"
#include "cost_model.hpp"
#include "topology.hpp"

namespace nnpccl {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Ranks up to which every transfer's route is traced (nnpt-pod1024 is
// 1024; a route is closed form on a torus or ring, elsewhere one Dijkstra
// over the machine's links per source).
constexpr int kTracedSources = 1024;
// The most transfers a round that sends from every rank to many traces up
// to kTracedSources ranks (direct's p(p-1) on nnpt-pod1024, 1,047,552,
// fits); beyond, that many times kTracedSources / p, as routes grow longer
// with the machine and each is walked hop by hop.
constexpr double kTracedFlows = 1 << 20;
// The 2D torus simulation runs up to this many full slices on the busiest
// channel (the others in proportion) and extrapolates the rest (full
// slices repeat).
constexpr size_t kSimulatedSlices = 64;

// `bytes` over a link of `gbps`: infinity over no link.
double us_for(double bytes, double gbps);
// Messages of at most `chunk` bytes that `bytes` takes (0 for nothing).
double messages(double bytes, double chunk);
// The most bytes one message of the call carries.
double chunk_bytes(const CollectiveArgs &args);
// γ as it applies to the topology's chips: added to the transfers on the
// host, which reduces on the thread that moves the data; overlapped with
// them on an NNP-T chip, which reduces in its compute engines.
double with_reduction(const Topology &t, const CostInputs &inputs, size_t elem_size, double transfer_us,
                      double reduced_bytes);
// A round of an algorithm whose ranks move in lockstep, on a host with
// more ranks than cores (cost_model.cpp says why).
double host_lockstep(const Topology &t, const CostInputs &inputs, double us);

// One transfer of a round: `bytes` from rank `from` to rank `to`.
struct Flow {
    int from;
    int to;
    double bytes;
};

// Up to kTracedSources ranks every transfer's route is traced (one
// Dijkstra per source); beyond, only those from every stride-th rank,
// whose link loads then stand for the whole (contention among the others
// is missed: an underestimate, as the sample is not scaled up).
int tracing_stride(int nranks);
// The same for a round in which each rank sends to `fanout` others: a
// multiple of tracing_stride(nranks), coarser where the traced sources
// would send more than kTracedFlows allows. A prediction may leave the other
// sources' transfers out of such a round: concurrent() would skip their
// routes, and their ports' loads are those of the traced ones.
int tracing_stride(int nranks, double fanout);
// The flows' indices grouped by source, sources ascending.
std::vector<size_t> by_source(const std::vector<Flow> &flows);

// Routes kept for one prediction: an algorithm of several rounds traces
// every round's transfers at once, so that each source is searched once,
// and keeps only the routes it will ask for. With closed-form routes
// (Machine::closed_form_routes) it keeps only which pairs were traced and
// walks a route when asked: a route found is then good until the next
// find().
class RouteTable {
public:
    explicit RouteTable(const Topology &t) : t_(t), closed_form_(t.machine().closed_form_routes()) {}

    void trace(const std::vector<Flow> &flows) {
        const int stride = tracing_stride(t_.nranks());
        if (closed_form_) {
            for (const Flow &f : flows)
                if (f.from != f.to && f.from % stride == 0) pairs_.push_back(key(f.from, f.to));
            std::sort(pairs_.begin(), pairs_.end());
            pairs_.erase(std::unique(pairs_.begin(), pairs_.end()), pairs_.end());
            return;
        }
        RouteCursor routes(t_.machine());
        for (size_t i : by_source(flows)) {
            const Flow &f = flows[i];
            if (f.from == f.to || f.from % stride != 0 || routes_.count(key(f.from, f.to)) != 0) continue;
            routes_.emplace(key(f.from, f.to), routes.route(t_.chip_of(f.from), t_.chip_of(f.to)));
        }
    }
    const Route *find(int from, int to) const {
        if (closed_form_) {
            if (!std::binary_search(pairs_.begin(), pairs_.end(), key(from, to))) return nullptr;
            t_.machine().route_into(t_.chip_of(from), t_.chip_of(to), &found_);
            return &found_;
        }
        auto it = routes_.find(key(from, to));
        return it == routes_.end() ? nullptr : &it->second;
    }

private:
    static uint64_t key(int from, int to) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(from)) << 32) | static_cast<uint32_t>(to);
    }
    const Topology &t_;
    bool closed_form_;
    std::unordered_map<uint64_t, Route> routes_;
    std::vector<uint64_t> pairs_; // with closed-form routes: the traced pairs, sorted
    mutable Route found_;
};

struct FlowCost {
    double transfer_us = 0; // until the last byte is through
    double latency_us = 0;  // the longest route's
};

// Transfers that run at once: the time of the busiest link (bytes of every
// route crossing it), the busiest chip port in or out (bytes over its
// injection bandwidth) and the slowest route, and the longest route's
// latency. Routes not in `traced` are searched here, one source at a time,
// and not kept.
FlowCost concurrent(const Topology &t, const std::vector<Flow> &flows, const RouteTable *traced = nullptr);

// α of a round of `flows` whose longest route's latency is `latency_us`.
// On shared memory a rank posts its messages of a round together and α is
// the wait for them, paid once. Over a network transport within the host
// (CostInputs::host_over_network) each message is a system call on the
// rank's one thread and the kernel's wake-up of its receiver, paid one
// after another: α times the most messages a rank sends or receives in
// the round (p - 1 for direct).
double round_alpha_us(const Topology &t, const CostInputs &inputs, const std::vector<Flow> &flows, double latency_us);

// One message of a symmetric schedule: the port it leaves by and its size;
// `with_next`: it leaves beside the next message of its chain (a ring
// phase run both ways sends one each way per round).
struct PortMessage {
    int port;
    double bytes;
    bool with_next = false;
};

// Channels that each send a chain of messages, each message on one of a
// rank's ports (one message at a time per port, first come first served).
// A message starts once its channel's previous message has arrived (all of
// the previous round's, where messages go side by side) and its port is
// free, and arrives its port's latency after its last byte left.
// Every rank of a symmetric schedule does the same at the same moments, so
// one rank's ports stand for all. Returns when the last message arrives.
double simulate_ports(const std::vector<std::vector<PortMessage>> &channels, const std::vector<double> &port_gbps,
                      const std::vector<double> &port_latency_us);

// The smallest divisor of n that is at least `least`.
size_t smallest_divisor_at_least(int n, double least);

} // namespace nnpccl
