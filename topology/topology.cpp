// Topology: placement, then ring and tree embedding on the placed chips.
// Rings come from the cheapest method that applies — a construction for the
// complete graph and the torus (linear), then a bounded search for more (or
// for any ring at all on other graphs), and last a routed ring when the
// placed chips have no Hamiltonian ring over links.
#include "topology.hpp"

#include <algorithm>
#include <deque>
#include <fstream>
#include <limits>

#include "graph.hpp"
#include "placement.hpp"
#include "rings.hpp"
#include "topo_file.hpp"
#include "trees.hpp"

namespace nnpccl {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// A fresh ring search on a large graph mostly burns its budget; beyond this
// size the constructed rings stand.
constexpr int kFreshSearchMaxRanks = 256;

// Every placed chip reaches every other over links (both ways). Checks
// reachability from and to the first placed chip. O(C + L).
bool placed_chips_connected(const Machine &m, const std::vector<int> &chips, std::string *error) {
    const size_t n = static_cast<size_t>(m.num_chips());
    std::vector<std::vector<int>> forward(n), backward(n);
    for (const Link &l : m.links()) {
        forward[static_cast<size_t>(l.from)].push_back(l.to);
        backward[static_cast<size_t>(l.to)].push_back(l.from);
    }
    for (const auto *adjacent : {&forward, &backward}) {
        std::vector<char> seen(n, 0);
        std::deque<int> queue{chips[0]};
        seen[static_cast<size_t>(chips[0])] = 1;
        while (!queue.empty()) {
            int c = queue.front();
            queue.pop_front();
            for (int d : (*adjacent)[static_cast<size_t>(c)])
                if (!seen[static_cast<size_t>(d)]) {
                    seen[static_cast<size_t>(d)] = 1;
                    queue.push_back(d);
                }
        }
        for (int c : chips)
            if (!seen[static_cast<size_t>(c)]) {
                bool out = adjacent == &forward;
                *error = "topology '" + m.name() + "': no links lead from chip " +
                         std::to_string(out ? chips[0] : c) + " to chip " + std::to_string(out ? c : chips[0]) +
                         " (rank 0's chip and a placed chip)";
                return false;
            }
    }
    return true;
}

// The ranks' graph: ranks joined when their chips are cabled both ways.
UndirectedGraph rank_graph(const Machine &m, const std::vector<int> &chip_of_rank) {
    const int p = static_cast<int>(chip_of_rank.size());
    std::vector<int> rank_of_chip(static_cast<size_t>(m.num_chips()), -1);
    for (int r = 0; r < p; ++r) rank_of_chip[static_cast<size_t>(chip_of_rank[static_cast<size_t>(r)])] = r;
    UndirectedGraph g(p);
    for (const Link &l : m.links()) {
        int a = rank_of_chip[static_cast<size_t>(l.from)], b = rank_of_chip[static_cast<size_t>(l.to)];
        if (a >= 0 && b >= 0 && m.has_link(l.to, l.from)) g.add_edge(a, b);
    }
    return g;
}

// The ranks grouped by their chips' hosts (Topology::host_groups()).
void group_by_host(const Machine &m, const std::vector<int> &chip_of_rank, std::vector<std::vector<int>> *groups,
                   std::vector<int> *host_of_rank) {
    std::vector<std::string> names;
    for (size_t r = 0; r < chip_of_rank.size(); ++r) {
        const std::string &host = m.chip(chip_of_rank[r]).host;
        auto it = std::find(names.begin(), names.end(), host);
        const auto g = static_cast<size_t>(it - names.begin());
        if (it == names.end()) {
            names.push_back(host);
            groups->emplace_back();
        }
        (*groups)[g].push_back(static_cast<int>(r));
        host_of_rank->push_back(static_cast<int>(g));
    }
}

// The ranks' grid on a torus: the bounding box of their chips' coordinates
// when they fill it exactly.
RankGrid torus_grid(const Machine &m, const std::vector<int> &chip_of_rank) {
    RankGrid grid;
    const TorusDims d = m.torus();
    if (m.shape() != Shape::Torus || d.z > 1) return grid;
    int x0 = d.x, y0 = d.y, x1 = -1, y1 = -1;
    for (int c : chip_of_rank) {
        x0 = std::min(x0, c % d.x);
        x1 = std::max(x1, c % d.x);
        y0 = std::min(y0, c / d.x);
        y1 = std::max(y1, c / d.x);
    }
    const int w = x1 - x0 + 1, h = y1 - y0 + 1;
    if (static_cast<size_t>(w) * static_cast<size_t>(h) != chip_of_rank.size()) return grid;
    grid.x = w;
    grid.y = h;
    grid.wrap_x = w == d.x;
    grid.wrap_y = h == d.y;
    grid.rank_at.assign(chip_of_rank.size(), -1);
    for (size_t r = 0; r < chip_of_rank.size(); ++r) {
        int c = chip_of_rank[r];
        grid.rank_at[static_cast<size_t>(c % d.x - x0 + (c / d.x - y0) * w)] = static_cast<int>(r);
    }
    return grid;
}

// A 3D torus whose chips all hold their own rank: the rings of the 2D
// torus X × (Y·Z) whose second dimension follows a Hamiltonian ring of the
// Y × Z plane (each of its hops one link); empty otherwise.
std::vector<VertexRing> torus3d_rings(const Machine &m, const std::vector<int> &chip_of_rank) {
    const TorusDims d = m.torus();
    if (m.shape() != Shape::Torus || d.z <= 1 || static_cast<int>(chip_of_rank.size()) != m.num_chips()) return {};
    for (size_t r = 0; r < chip_of_rank.size(); ++r)
        if (chip_of_rank[r] != static_cast<int>(r)) return {};
    const std::vector<VertexRing> planes = torus_rings(d.y, d.z);
    if (planes.empty()) return {};
    const VertexRing &plane = planes.front(); // vertex j + k*Y of the plane
    std::vector<VertexRing> rings = torus_rings(d.x, d.y * d.z);
    for (VertexRing &ring : rings)
        for (int &v : ring) v = v % d.x + plane[static_cast<size_t>(v / d.x)] * d.x;
    return rings;
}

// Rings built from the shape, before any search; in ranks.
std::vector<VertexRing> constructed_rings(const Machine &m, const std::vector<int> &chip_of_rank,
                                          const UndirectedGraph &g, const RankGrid &grid) {
    const int p = g.size();
    if (std::vector<VertexRing> rings = torus3d_rings(m, chip_of_rank); !rings.empty()) return rings;
    auto in_ranks = [&](std::vector<VertexRing> rings) {
        for (VertexRing &ring : rings)
            for (int &v : ring) v = grid.rank_at[static_cast<size_t>(v)];
        return rings;
    };
    if (grid.x > 0 && grid.wrap_x && grid.wrap_y) return in_ranks(torus_rings(grid.x, grid.y));
    if (g.is_complete()) return complete_graph_rings(p);
    if (grid.x > 0) {
        if (grid.y == 1 && grid.wrap_x) return in_ranks(torus_rings(grid.x, 1));
        if (grid.x == 1 && grid.wrap_y) return in_ranks(torus_rings(1, grid.y));
        VertexRing ring = grid_ring(grid.x, grid.y);
        if (!ring.empty()) return in_ranks({ring});
    }
    return {};
}

// Spanning tree from `root`, over links where they reach; a rank the links
// among the placed chips do not reach hangs from the tree rank with the
// shortest route to it.
std::vector<int> spanning_parents(const Machine &m, const std::vector<int> &chip_of_rank, const UndirectedGraph &g,
                                  int root) {
    std::vector<int> parent = bfs_tree(g, root);
    for (;;) {
        auto missing = std::find(parent.begin(), parent.end(), -2);
        if (missing == parent.end()) return parent;
        int u = static_cast<int>(missing - parent.begin());
        std::vector<Route> from_u = m.routes_from(chip_of_rank[static_cast<size_t>(u)]);
        int best = -1;
        for (size_t t = 0; t < parent.size(); ++t) {
            const Route &r = from_u[static_cast<size_t>(chip_of_rank[t])];
            if (parent[t] != -2 && r.reachable &&
                (best < 0 || r.hops < from_u[static_cast<size_t>(chip_of_rank[static_cast<size_t>(best)])].hops))
                best = static_cast<int>(t);
        }
        parent[static_cast<size_t>(u)] = best;
        // Everything the links reach from u joins below it.
        std::deque<int> queue{u};
        while (!queue.empty()) {
            int v = queue.front();
            queue.pop_front();
            for (int w : g.neighbours(v))
                if (parent[static_cast<size_t>(w)] == -2) {
                    parent[static_cast<size_t>(w)] = v;
                    queue.push_back(w);
                }
        }
    }
}

// A ring through every rank when no Hamiltonian ring exists over links:
// the depth-first preorder of the spanning tree, each hop routed. Its total
// hop count is at most twice the best possible (the tree walk bound).
VertexRing routed_ring(const std::vector<int> &spanning_parent) {
    std::vector<std::vector<int>> children = children_of(spanning_parent);
    VertexRing order;
    std::vector<int> stack{0};
    while (!stack.empty()) {
        int v = stack.back();
        stack.pop_back();
        order.push_back(v);
        const auto &c = children[static_cast<size_t>(v)];
        for (auto it = c.rbegin(); it != c.rend(); ++it) stack.push_back(*it);
    }
    return order;
}

double route_gbps(const Route &r) { return r.reachable ? r.gbps : 0.0; }

} // namespace

RingEmbedding Topology::embed_ring(const std::vector<int> &ranks) const {
    RingEmbedding e;
    e.ranks = ranks;
    e.on_links = true;
    e.bottleneck_gbps = kInfinity;
    const size_t p = ranks.size();
    for (size_t i = 0; i < p && p > 1; ++i) {
        int a = ranks[i], b = ranks[(i + 1) % p];
        e.forward.push_back(route(a, b));
        e.backward.push_back(route(b, a));
        for (const Route *r : {&e.forward.back(), &e.backward.back()}) {
            e.on_links = e.on_links && r->hops == 1;
            e.bottleneck_gbps = std::min(e.bottleneck_gbps, route_gbps(*r));
            e.hop_latency_us = std::max(e.hop_latency_us, r->latency_us);
        }
    }
    return e;
}

TreeEmbedding Topology::embed_tree(const std::vector<int> &parent) const {
    TreeEmbedding t;
    t.parent = parent;
    t.children = children_of(parent);
    t.bottleneck_gbps = kInfinity;
    t.up.resize(parent.size());
    t.down.resize(parent.size());
    for (size_t v = 0; v < parent.size(); ++v) {
        if (parent[v] < 0) {
            t.root = static_cast<int>(v);
            continue;
        }
        t.up[v] = route(static_cast<int>(v), parent[v]);
        t.down[v] = route(parent[v], static_cast<int>(v));
        if (t.up[v].hops == 1 && t.down[v].hops == 1) ++t.edges_on_links;
        for (const Route *r : {&t.up[v], &t.down[v]}) {
            t.bottleneck_gbps = std::min(t.bottleneck_gbps, route_gbps(*r));
            t.hop_latency_us = std::max(t.hop_latency_us, r->latency_us);
        }
    }
    // Depth: breadth-first from the root.
    std::vector<std::pair<int, int>> queue{{t.root, 0}};
    for (size_t i = 0; i < queue.size(); ++i) {
        t.depth = std::max(t.depth, queue[i].second);
        for (int c : t.children[static_cast<size_t>(queue[i].first)]) queue.push_back({c, queue[i].second + 1});
    }
    return t;
}

TreeEmbedding Topology::spanning_tree(int root) const {
    return embed_tree(spanning_parents(machine_, chip_of_rank_, rank_graph(machine_, chip_of_rank_), root));
}

int Topology::hamiltonian_ring_count() const {
    int n = 0;
    for (const RingEmbedding &r : ring_embeddings_) n += r.on_links ? 1 : 0;
    return n;
}

bool Topology::rings_both_ways() const {
    double one_way = 0;
    for (const RingEmbedding &r : ring_embeddings_) one_way += r.bottleneck_gbps;
    return one_way < min_injection_gbps();
}

std::vector<std::vector<int>> Topology::ring_channels() const {
    const bool both = rings_both_ways();
    std::vector<std::vector<int>> channels;
    for (const std::vector<int> &ring : rings_) {
        channels.push_back(ring);
        if (both && ring.size() > 2) channels.emplace_back(ring.rbegin(), ring.rend());
    }
    return channels;
}

std::vector<std::vector<int>> Topology::dimension_rings(int axis) const {
    std::vector<std::vector<int>> rings;
    if (grid_.x == 0) return rings;
    int count = axis == 0 ? grid_.y : grid_.x, length = axis == 0 ? grid_.x : grid_.y;
    for (int k = 0; k < count; ++k) {
        std::vector<int> ring;
        for (int i = 0; i < length; ++i) ring.push_back(axis == 0 ? grid_.rank(i, k) : grid_.rank(k, i));
        rings.push_back(ring);
    }
    return rings;
}

double Topology::min_injection_gbps() const {
    double b = kInfinity;
    for (int r = 0; r < nranks(); ++r) b = std::min(b, injection_gbps(r));
    return b;
}

double Topology::network_gbps() const {
    double gbps = kInfinity;
    if (!spans_hosts()) return gbps;
    // The links between network nodes (NIC and switch), not the ones
    // between a NIC and its host's ranks.
    for (const Link &l : machine_.links())
        if (machine_.chip(l.from).network && machine_.chip(l.to).network) gbps = std::min(gbps, l.gbps);
    return gbps;
}

double Topology::allreduce_lower_bound_us(size_t bytes) const {
    const int p = nranks();
    if (p <= 1) return 0;
    // GB/s = 1e3 bytes per µs.
    const double n = static_cast<double>(bytes);
    double bound = 2.0 * (p - 1) / p * n / (min_injection_gbps() * 1e3);
    if (spans_hosts()) {
        // Each host's link must carry 2(h-1)/h of the buffer out (and in).
        const double h = static_cast<double>(host_groups_.size());
        bound = std::max(bound, 2.0 * (h - 1) / h * n / (network_gbps() * 1e3));
    }
    return bound;
}

Status Topology::create(Machine machine, const std::vector<int> &requested, int nranks, Topology *out) {
    Topology t;
    // Network nodes hold no rank: without a placement list, ranks take the
    // other chips in order.
    std::vector<int> rank_chips = requested;
    if (rank_chips.empty()) {
        for (int c = 0; c < machine.num_chips(); ++c)
            if (!machine.chip(c).network) rank_chips.push_back(c);
        if (static_cast<int>(rank_chips.size()) == machine.num_chips()) rank_chips.clear();
    }
    if (nranks <= 0) nranks = rank_chips.empty() ? machine.num_chips() : static_cast<int>(rank_chips.size());
    for (int chip : requested)
        if (chip >= 0 && chip < machine.num_chips() && machine.chip(chip).network)
            return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                          "topology '" + machine.name() + "': the placement puts a rank on chip " +
                              std::to_string(chip) + ", a network node (no rank runs there)");
    if (requested.empty() && !rank_chips.empty() && nranks > static_cast<int>(rank_chips.size()))
        return Status(NNPCCL_ERR_INVALID_ARGUMENT, "topology '" + machine.name() + "': " + std::to_string(nranks) +
                                                       " ranks but only " + std::to_string(rank_chips.size()) +
                                                       " chips can hold a rank (the others are network nodes)");
    if (Status ports = machine.check_ports(); !ports)
        return Status(NNPCCL_ERR_INVALID_ARGUMENT, "topology '" + machine.name() + "': " + ports.message());
    std::string error;
    NNPCCL_TRY(place_ranks(machine, nranks, rank_chips, &t.chip_of_rank_));
    if (!placed_chips_connected(machine, t.chip_of_rank_, &error)) return Status(NNPCCL_ERR_INVALID_ARGUMENT, error);
    t.machine_ = std::move(machine);
    const Machine &m = t.machine_;
    const int p = nranks;
    const UndirectedGraph g = rank_graph(m, t.chip_of_rank_);
    t.grid_ = torus_grid(m, t.chip_of_rank_);
    const std::vector<int> spanning = spanning_parents(m, t.chip_of_rank_, g, 0);

    group_by_host(m, t.chip_of_rank_, &t.host_groups_, &t.host_of_rank_);
    std::vector<VertexRing> rings;
    if (m.shape() == Shape::Flat || p <= 2) {
        // Host by host, so that the ring crosses each host's network link
        // once each way.
        VertexRing in_order;
        for (const std::vector<int> &group : t.host_groups_)
            in_order.insert(in_order.end(), group.begin(), group.end());
        rings.push_back(in_order);
    } else {
        const std::vector<VertexRing> built = constructed_rings(m, t.chip_of_rank_, g, t.grid_);
        // Each Hamiltonian ring takes two links at every chip.
        const size_t most = static_cast<size_t>(std::max(1, g.min_degree() / 2));
        rings = find_disjoint_rings(g, static_cast<int>(most), built);
        // The constructed ring may be the wrong first choice for a second
        // one (a torus with sides of different parity): search afresh.
        if (rings.size() < most && !built.empty() && p <= kFreshSearchMaxRanks) {
            std::vector<VertexRing> fresh = find_disjoint_rings(g, static_cast<int>(most), {});
            if (fresh.size() > rings.size()) rings = fresh;
        }
        if (rings.empty()) {
            // No ring over links: a Hamiltonian path closed by one routed hop
            // (two hops is the best such a hop can be), else a tree walk.
            const auto &chip = t.chip_of_rank_;
            VertexRing path = find_hamiltonian_path(
                g, kDefaultRingSearchSteps,
                [&](int end, int start) {
                    return m.route(chip[static_cast<size_t>(end)], chip[static_cast<size_t>(start)]).hops;
                },
                2);
            rings.push_back(path.empty() ? routed_ring(spanning) : path);
        }
    }
    for (VertexRing &ring : rings) {
        rotate_to_smallest(&ring);
        t.ring_embeddings_.push_back(t.embed_ring(ring));
        t.rings_.push_back(ring);
    }

    t.spanning_tree_ = t.embed_tree(spanning);
    for (int which = 0; which < 2; ++which)
        t.double_binary_tree_[which] = t.embed_tree(binary_tree(t.rings_.front(), which));
    *out = std::move(t);
    return Status::ok();
}

Topology Topology::flat(int nranks) { return flat(nranks, TopologyOptions().host); }

Topology Topology::flat(int nranks, LinkParams host) {
    Topology t;
    if (nranks >= 1) create(flat_machine(nranks, host), {}, nranks, &t);
    return t;
}

Status load_topology(const std::string &spec, int nranks, const TopologyOptions &options, Topology *out) {
    const std::string name = spec.empty() ? "flat" : spec;
    if (is_preset_spec(name)) {
        Machine machine;
        NNPCCL_TRY(build_preset(name, nranks, options, &machine));
        return Topology::create(std::move(machine), {}, nranks, out);
    }
    if (!std::ifstream(name).good())
        return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                      "topology '" + name +
                          "' is neither a preset (ring:N fc:N hcm8 torus:XxY torus:XxYxZ nnpt-ring8 nnpt-hcm8 " +
                          "nnpt-pod32 nnpt-pod1024 flat hosts:HxL hosts:A,B,...) nor a readable topology file");
    TopologyFile file;
    NNPCCL_TRY(read_topology_file(name, &file));
    return Topology::create(std::move(file.machine), file.placement, nranks, out);
}

Status load_topology(const std::string &spec, int nranks, Topology *out) {
    return load_topology(spec, nranks, TopologyOptions(), out);
}

} // namespace nnpccl
