#include "machine.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <set>

namespace nnpccl {

namespace {

struct ShapeSpelling {
    Shape shape;
    const char *name;
};
const ShapeSpelling kShapes[] = {
    {Shape::Graph, "graph"},   {Shape::Ring, "ring"},   {Shape::FullyConnected, "fully-connected"},
    {Shape::HybridCubeMesh, "hybrid-cube-mesh"}, {Shape::Torus, "torus"}, {Shape::Flat, "flat"},
};

} // namespace

const char *shape_name(Shape shape) {
    for (const auto &s : kShapes)
        if (s.shape == shape) return s.name;
    return "graph";
}

bool parse_shape(const std::string &text, Shape *shape) {
    for (const auto &s : kShapes)
        if (text == s.name) {
            *shape = s.shape;
            return true;
        }
    return false;
}

int Machine::add_chip(Chip chip) {
    chips_.push_back(std::move(chip));
    out_.emplace_back();
    in_.emplace_back();
    return num_chips() - 1;
}

Status Machine::add_link(int from, int to, LinkParams params) {
    if (from < 0 || from >= num_chips() || to < 0 || to >= num_chips())
        return Status(NNPCCL_ERR_INVALID_ARGUMENT, "link " + std::to_string(from) + "->" + std::to_string(to) +
                                                       " names a chip that does not exist (" +
                                                       std::to_string(num_chips()) + " chips)");
    if (from == to)
        return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                      "link " + std::to_string(from) + "->" + std::to_string(to) + " joins a chip to itself");
    if (has_link(from, to))
        return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                      "link " + std::to_string(from) + "->" + std::to_string(to) + " is given twice");
    int index = static_cast<int>(links_.size());
    links_.push_back(Link{from, to, params.gbps, params.latency_us});
    min_latency_us_ = std::min(min_latency_us_, params.latency_us);
    out_[static_cast<size_t>(from)].push_back(index);
    in_[static_cast<size_t>(to)].push_back(index);
    index_.emplace(key(from, to), index);
    return Status::ok();
}

Status Machine::add_duplex_link(int a, int b, LinkParams params) {
    NNPCCL_TRY(add_link(a, b, params));
    return add_link(b, a, params);
}

int Machine::link_index(int from, int to) const {
    auto it = index_.find(key(from, to));
    return it == index_.end() ? -1 : it->second;
}

std::vector<int> Machine::duplex_neighbours(int chip) const {
    std::vector<int> out;
    for (int l : out_links(chip))
        if (has_link(links_[static_cast<size_t>(l)].to, chip)) out.push_back(links_[static_cast<size_t>(l)].to);
    std::sort(out.begin(), out.end());
    return out;
}

int Machine::ports_used(int chip) const {
    std::set<int> peers;
    for (int l : out_[static_cast<size_t>(chip)]) peers.insert(links_[static_cast<size_t>(l)].to);
    for (int l : in_[static_cast<size_t>(chip)]) peers.insert(links_[static_cast<size_t>(l)].from);
    return static_cast<int>(peers.size());
}

int Machine::bidirectional_link_count() const {
    int pairs = 0;
    for (const Link &l : links_)
        if (l.from < l.to && has_link(l.to, l.from)) ++pairs;
    return pairs;
}

int Machine::one_way_link_count() const {
    int one_way = 0;
    for (const Link &l : links_)
        if (!has_link(l.to, l.from)) ++one_way;
    return one_way;
}

double Machine::injection_gbps(int chip) const {
    if (this->chip(chip).injection_gbps > 0) return this->chip(chip).injection_gbps;
    double sum = 0;
    for (int l : out_links(chip)) sum += links_[static_cast<size_t>(l)].gbps;
    return sum;
}

Status Machine::check_ports() const {
    for (int c = 0; c < num_chips(); ++c) {
        int used = ports_used(c);
        if (used > chip(c).ports)
            return Status(NNPCCL_ERR_INVALID_ARGUMENT, "chip " + std::to_string(c) + " is linked to " +
                                                           std::to_string(used) + " chips but has " +
                                                           std::to_string(chip(c).ports) + " ports");
    }
    return Status::ok();
}

namespace {

// Dijkstra on (latency, hops), lexicographic; each chip settled once.
// O(L log C) for L links and C chips; it stops early once `stop_at` is
// settled (-1: never), and then only routes to settled chips are complete.
struct ShortestPaths {
    std::vector<double> latency;
    std::vector<int> hops;
    std::vector<int> via; // the link that reaches each chip
    std::vector<char> settled;

    ShortestPaths(const Machine &m, int from, int stop_at) {
        const size_t n = static_cast<size_t>(m.num_chips());
        latency.assign(n, std::numeric_limits<double>::infinity());
        hops.assign(n, std::numeric_limits<int>::max());
        via.assign(n, -1);
        settled.assign(n, 0);
        using Entry = std::pair<std::pair<double, int>, int>; // ((latency, hops), chip)
        std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
        latency[static_cast<size_t>(from)] = 0;
        hops[static_cast<size_t>(from)] = 0;
        queue.push({{0.0, 0}, from});
        while (!queue.empty()) {
            int c = queue.top().second;
            queue.pop();
            if (settled[static_cast<size_t>(c)]) continue;
            settled[static_cast<size_t>(c)] = 1;
            if (c == stop_at) break;
            for (int l : m.out_links(c)) {
                const Link &link = m.links()[static_cast<size_t>(l)];
                auto t = static_cast<size_t>(link.to);
                double lat = latency[static_cast<size_t>(c)] + link.latency_us;
                int h = hops[static_cast<size_t>(c)] + 1;
                if (std::make_pair(lat, h) < std::make_pair(latency[t], hops[t])) {
                    latency[t] = lat;
                    hops[t] = h;
                    via[t] = l;
                    queue.push({{lat, h}, link.to});
                }
            }
        }
    }

    Route to(const Machine &m, int chip) const {
        Route r;
        auto c = static_cast<size_t>(chip);
        if (!settled[c]) return r;
        r.reachable = true;
        r.hops = hops[c];
        r.latency_us = latency[c];
        r.gbps = std::numeric_limits<double>::infinity();
        for (int at = chip; via[static_cast<size_t>(at)] >= 0;) {
            const Link &link = m.links()[static_cast<size_t>(via[static_cast<size_t>(at)])];
            r.links.push_back(via[static_cast<size_t>(at)]);
            r.gbps = std::min(r.gbps, link.gbps);
            at = link.from;
        }
        std::reverse(r.links.begin(), r.links.end());
        return r;
    }
};

} // namespace

std::vector<Route> Machine::routes_from(int from) const {
    ShortestPaths paths(*this, from, -1);
    std::vector<Route> routes;
    for (int c = 0; c < num_chips(); ++c) routes.push_back(paths.to(*this, c));
    return routes;
}

Route Machine::route(int from, int to) const {
    // One direct link is the common case on ICL rings and meshes. Any other
    // path has two hops or more, so the direct link wins whenever it is no
    // slower than two of the fastest links.
    int direct = link_index(from, to);
    if (direct >= 0 && links_[static_cast<size_t>(direct)].latency_us <= 2 * min_latency_us_) {
        const Link &l = links_[static_cast<size_t>(direct)];
        return Route{true, {direct}, 1, l.latency_us, l.gbps};
    }
    return ShortestPaths(*this, from, to).to(*this, to);
}

} // namespace nnpccl
