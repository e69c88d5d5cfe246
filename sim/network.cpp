// The simulator's Network: servers and routes (simulator.hpp).
#include <mutex>

#include "simulator.hpp"

namespace nnpccl::sim {

namespace {

constexpr double kBytesPerUsPerGbps = 1e3;

} // namespace

Network::Network(const Topology &topology) : topology_(topology) {
    const Machine &m = topology.machine();
    for (const Link &l : m.links())
        servers_.push_back({l.gbps > 0 ? 1.0 / (l.gbps * kBytesPerUsPerGbps) : 0.0, l.latency_us});
    link_count_ = servers_.size();
    egress_.assign(static_cast<size_t>(m.num_chips()), -1);
    ingress_.assign(static_cast<size_t>(m.num_chips()), -1);
    for (int c = 0; c < m.num_chips(); ++c) {
        const double gbps = m.chip(c).injection_gbps;
        if (!(gbps > 0)) continue;
        egress_[static_cast<size_t>(c)] = static_cast<int>(servers_.size());
        servers_.push_back({1.0 / (gbps * kBytesPerUsPerGbps), 0.0});
        ingress_[static_cast<size_t>(c)] = static_cast<int>(servers_.size());
        servers_.push_back({1.0 / (gbps * kBytesPerUsPerGbps), 0.0});
    }
    closed_form_ = m.closed_form_routes();
    if (!closed_form_) rows_.reset(new Row[static_cast<size_t>(m.num_chips())]);
}

void Network::fill_path(const Route &route, int from_chip, int to_chip, std::vector<uint32_t> *out) const {
    out->clear();
    if (from_chip == to_chip) return;
    if (egress_[static_cast<size_t>(from_chip)] >= 0)
        out->push_back(static_cast<uint32_t>(egress_[static_cast<size_t>(from_chip)]));
    for (int l : route.links) out->push_back(static_cast<uint32_t>(l));
    if (ingress_[static_cast<size_t>(to_chip)] >= 0)
        out->push_back(static_cast<uint32_t>(ingress_[static_cast<size_t>(to_chip)]));
}

const std::vector<uint32_t> *Network::path(int from_chip, int to_chip) const {
    const Machine &m = topology_.machine();
    if (closed_form_) {
        const uint64_t key =
            (static_cast<uint64_t>(static_cast<uint32_t>(from_chip)) << 32) | static_cast<uint32_t>(to_chip);
        std::lock_guard<std::mutex> lock(pairs_mutex_);
        auto [it, fresh] = pairs_.try_emplace(key);
        if (fresh) fill_path(m.route(from_chip, to_chip), from_chip, to_chip, &it->second);
        return &it->second;
    }
    Row &row = rows_[static_cast<size_t>(from_chip)];
    std::call_once(row.once, [&] {
        const std::vector<Route> routes = m.routes_from(from_chip);
        row.to.resize(routes.size());
        row.reachable.resize(routes.size());
        for (size_t c = 0; c < routes.size(); ++c) {
            row.reachable[c] = routes[c].reachable;
            if (routes[c].reachable) fill_path(routes[c], from_chip, static_cast<int>(c), &row.to[c]);
        }
        std::lock_guard<std::mutex> lock(pairs_mutex_);
        rows_found_ += routes.size();
    });
    const auto to = static_cast<size_t>(to_chip);
    return to == static_cast<size_t>(from_chip) || row.reachable[to] ? &row.to[to] : nullptr;
}

size_t Network::routes_found() const {
    std::lock_guard<std::mutex> lock(pairs_mutex_);
    return closed_form_ ? pairs_.size() : rows_found_;
}

} // namespace nnpccl::sim
