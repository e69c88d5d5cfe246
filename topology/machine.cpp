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
    forget_routes();
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
    forget_routes();
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
    const Lattice &l = lattice();
    if (l.closed_form) {
        Route r;
        lattice_route(l, from, to, &r);
        return r;
    }
    // One direct link is the common case on ICL rings and meshes. Any other
    // path has two hops or more, so the direct link wins whenever it is no
    // slower than two of the fastest links.
    int direct = link_index(from, to);
    if (direct >= 0 && links_[static_cast<size_t>(direct)].latency_us <= 2 * min_latency_us_) {
        const Link &link = links_[static_cast<size_t>(direct)];
        return Route{true, {direct}, 1, link.latency_us, link.gbps};
    }
    return ShortestPaths(*this, from, to).to(*this, to);
}

void Machine::route_into(int from, int to, Route *out) const {
    const Lattice &l = lattice();
    if (l.closed_form)
        lattice_route(l, from, to, out);
    else
        *out = route(from, to);
}

bool Machine::closed_form_routes() const { return lattice().closed_form; }

const Machine::Lattice &Machine::lattice() const {
    if (!lattice_) lattice_ = std::make_shared<Lattice>(); // a moved-from machine
    Lattice &l = *lattice_;
    std::call_once(l.once, [&] {
        l.closed_form = find_lattice(&l);
        l.found.store(true);
    });
    return l;
}

// A torus (or ring) of chips numbered along x, then y, then z, every
// neighbour cabled, nothing else, and one latency on every link: then
// the least-latency paths are the fewest-hop paths and the closed form
// applies. O(C + L), once.
bool Machine::find_lattice(Lattice *l) const {
    const int n = num_chips();
    if (shape_ == Shape::Torus) {
        l->dims[0] = torus_.x;
        l->dims[1] = torus_.y;
        l->dims[2] = torus_.z;
    } else if (shape_ == Shape::Ring) {
        l->dims[0] = n;
    } else {
        return false;
    }
    if (l->dims[0] < 1 || l->dims[1] < 1 || l->dims[2] < 1 ||
        static_cast<long>(l->dims[0]) * l->dims[1] * l->dims[2] != n || links_.empty())
        return false;
    for (const Link &link : links_)
        if (link.latency_us != links_.front().latency_us || !(link.latency_us >= 0)) return false;
    const int stride[3] = {1, l->dims[0], l->dims[0] * l->dims[1]};
    l->step.assign(static_cast<size_t>(n) * 6, -1);
    size_t present = 0; // the lattice's links that are there: nothing else may be
    for (int c = 0; c < n; ++c)
        for (int k = 0; k < 3; ++k) {
            const int size = l->dims[k];
            if (size == 1) continue;
            const int at = c / stride[k] % size;
            for (int way = 0; way < 2; ++way) {
                const int next = way == 0 ? (at + 1) % size : (at + size - 1) % size;
                const int link = link_index(c, c + (next - at) * stride[k]);
                // Only a torus may miss some (a ring without one is a line).
                if (link < 0 && shape_ != Shape::Torus) return false;
                l->step[(static_cast<size_t>(c) * 3 + static_cast<size_t>(k)) * 2 + static_cast<size_t>(way)] = link;
                present += link >= 0 && (size > 2 || way == 0);
            }
        }
    return present == links_.size();
}

// Back from `to`: each hop to the lowest-numbered chip one hop nearer
// `from`, which is the link Dijkstra above settles first (it settles
// chips of one distance in ascending order and keeps the first way in).
// O(hops).
void Machine::lattice_route(const Lattice &l, int from, int to, Route *out) const {
    out->reachable = true;
    out->links.clear();
    out->latency_us = 0;
    out->gbps = std::numeric_limits<double>::infinity();
    int size[3], stride[3], at[3], ahead[3], axis[3], dims = 0; // the dimensions longer than 1
    for (int k = 0, s = 1; k < 3; s *= l.dims[k], ++k) {
        if (l.dims[k] == 1) continue;
        axis[dims] = k;
        size[dims] = l.dims[k];
        stride[dims] = s;
        at[dims] = to / s % l.dims[k];
        // Steps up from `from` to `to` along this dimension, mod its size.
        ahead[dims] = (at[dims] - from / s % l.dims[k] + l.dims[k]) % l.dims[k];
        ++dims;
    }
    for (int cur = to; cur != from;) {
        int best = std::numeric_limits<int>::max(), best_k = 0, best_way = 0;
        for (int k = 0; k < dims; ++k) {
            if (ahead[k] == 0) continue;
            // Reached going up (from the chip below) or down (from above),
            // whichever is shorter; both when they tie.
            if (2 * ahead[k] <= size[k]) {
                const int chip = cur + (at[k] == 0 ? size[k] - 1 : -1) * stride[k];
                if (chip < best) best = chip, best_k = k, best_way = 0;
            }
            if (2 * ahead[k] >= size[k]) {
                const int chip = cur + (at[k] == size[k] - 1 ? 1 - size[k] : 1) * stride[k];
                if (chip < best) best = chip, best_k = k, best_way = 1;
            }
        }
        const int k = best_k;
        const int link =
            l.step[(static_cast<size_t>(best) * 3 + static_cast<size_t>(axis[k])) * 2 + static_cast<size_t>(best_way)];
        if (link < 0) { // a cable of a damaged torus is missing: search for this pair
            *out = ShortestPaths(*this, from, to).to(*this, to);
            return;
        }
        out->links.push_back(link);
        if (best_way == 0) {
            at[k] = at[k] == 0 ? size[k] - 1 : at[k] - 1;
            --ahead[k];
        } else {
            at[k] = at[k] == size[k] - 1 ? 0 : at[k] + 1;
            ahead[k] = ahead[k] + 1 == size[k] ? 0 : ahead[k] + 1;
        }
        cur = best;
    }
    std::reverse(out->links.begin(), out->links.end());
    for (int link : out->links) {
        out->latency_us += links_[static_cast<size_t>(link)].latency_us;
        out->gbps = std::min(out->gbps, links_[static_cast<size_t>(link)].gbps);
    }
    out->hops = static_cast<int>(out->links.size());
}

const Route &RouteCursor::route(int from_chip, int to_chip) {
    if (closed_form_) {
        m_.route_into(from_chip, to_chip, &one_);
        return one_;
    }
    if (from_chip != row_source_) {
        row_ = m_.routes_from(from_chip);
        row_source_ = from_chip;
    }
    return row_[static_cast<size_t>(to_chip)];
}

} // namespace nnpccl
