// The simulated machine: chips joined by directed links, each link with its
// bandwidth (GB/s per direction, 1 GB = 1e9 bytes) and latency (µs). A
// bidirectional ICL cable is two links, one per direction. Presets, topology
// files and the `flat` host model all build one of these; placement and
// embedding read it.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "status.hpp"

namespace nnpccl {

// Figures of one link direction.
struct LinkParams {
    double gbps = 56.0;      // bandwidth per direction (one NNP-T ICL port)
    double latency_us = 1.0; // per hop (not published for NNP-T; configurable)
};

// An NNP-T chip has 4 ICL ports of 56 GB/s per direction: 16 SerDes quads of
// 14 GB/s, 224 GB/s per direction in all.
constexpr int kIclPortsPerChip = 4;
constexpr double kIclPortGbps = 56.0;
constexpr double kIclQuadGbps = 14.0;
constexpr int kIclQuadsPerChip = 16;

struct Link {
    int from = 0;
    int to = 0;
    double gbps = 0;
    double latency_us = 0;
};

struct Chip {
    std::string host;          // the host (or chassis) the chip sits in; empty when unknown
    int ports = kIclPortsPerChip; // how many neighbours it can be cabled to
    double injection_gbps = 0; // what the chip can send per direction; 0 = the sum of its outgoing links
    bool network = false;      // a NIC or switch of a job's network (hosts_machine): never a rank's chip
};

// What the machine was built as: drawing and the torus algorithms use it;
// a file may state it (a torus is checked against its links).
enum class Shape { Graph, Ring, FullyConnected, HybridCubeMesh, Torus, Flat };

// The file-format spelling of a shape ("graph", "ring", "fully-connected",
// "hybrid-cube-mesh", "torus", "flat"), and back.
const char *shape_name(Shape shape);
bool parse_shape(const std::string &text, Shape *shape);

// Chip `x + y * x_dim + z * x_dim * y_dim` sits at (x, y, z) of an
// x_dim × y_dim × z_dim torus; z_dim is 1 on a 2D torus.
struct TorusDims {
    int x = 0;
    int y = 0;
    int z = 1;
};

// A path between two chips: the directed links it crosses, in order.
struct Route {
    bool reachable = false;
    std::vector<int> links; // indices into Machine::links()
    int hops = 0;
    double latency_us = 0;  // sum over the hops
    double gbps = 0;        // the slowest hop (0 when unreachable; +inf for a chip to itself)
};

class Machine {
public:
    Machine() = default;
    Machine(std::string name, Shape shape) : name_(std::move(name)), shape_(shape) {}

    const std::string &name() const { return name_; }
    void set_name(std::string name) { name_ = std::move(name); }
    Shape shape() const { return shape_; }
    void set_shape(Shape shape) {
        shape_ = shape;
        forget_routes();
    }
    // Meaningful when shape() == Shape::Torus.
    TorusDims torus() const { return torus_; }
    void set_torus(TorusDims dims) {
        torus_ = dims;
        forget_routes();
    }

    // Returns the new chip's index.
    int add_chip(Chip chip = {});
    // Adds the link from -> to. Fails (and says why) for an unknown chip, a
    // chip linked to itself, or a link that already exists.
    Status add_link(int from, int to, LinkParams params);
    // Both directions, same figures.
    Status add_duplex_link(int a, int b, LinkParams params);

    int num_chips() const { return static_cast<int>(chips_.size()); }
    const Chip &chip(int index) const { return chips_[static_cast<size_t>(index)]; }
    Chip &mutable_chip(int index) { return chips_[static_cast<size_t>(index)]; }
    const std::vector<Chip> &chips() const { return chips_; }
    const std::vector<Link> &links() const { return links_; }
    // Index of the link from -> to, or -1.
    int link_index(int from, int to) const;
    bool has_link(int from, int to) const { return link_index(from, to) >= 0; }
    bool has_duplex_link(int a, int b) const { return has_link(a, b) && has_link(b, a); }
    // Indices of the links leaving `chip`, in the order they were added.
    const std::vector<int> &out_links(int chip) const { return out_[static_cast<size_t>(chip)]; }
    // Chips joined to `chip` in both directions, ascending.
    std::vector<int> duplex_neighbours(int chip) const;
    // Distinct chips `chip` is cabled to (either direction): the ports it uses.
    int ports_used(int chip) const;

    // A link pair a<->b counts once as bidirectional; a link with no
    // reverse counts as one-way.
    int bidirectional_link_count() const;
    int one_way_link_count() const;

    // What `chip` can send per direction: Chip::injection_gbps, or the sum
    // of its outgoing links when that is 0.
    double injection_gbps(int chip) const;

    // Every chip's cabling fits its ports; otherwise names the first that does not.
    Status check_ports() const;

    // Least-latency path (ties: fewer hops) from `from` to `to`. On a torus
    // or ring whose links are all there with one latency (the presets, a
    // file's torus) in closed form, O(hops): the path the search below
    // takes, each hop back from `to` to the lowest-numbered chip one hop
    // nearer `from`. On a torus with some of its cables missing the same,
    // where that path is all there (it is then still a shortest one), and
    // a search for that pair where not. Elsewhere Dijkstra over the links,
    // O(L log C).
    Route route(int from, int to) const;
    // The same, into `out` (its link list's storage reused).
    void route_into(int from, int to, Route *out) const;
    // Whether route() is in closed form here (no search per source).
    bool closed_form_routes() const;
    // Every chip's route from one source, in one pass of Dijkstra: O(L log C)
    // (the reference the closed form is tested against).
    std::vector<Route> routes_from(int from) const;

private:
    // The torus or ring as a lattice of up to three dimensions, found the
    // first time a route is asked for (and again after the machine changes).
    struct Lattice {
        std::once_flag once;
        std::atomic<bool> found{false};
        bool closed_form = false;
        int dims[3] = {1, 1, 1};
        // step[(chip * 3 + dim) * 2 + (0: +1, 1: -1)]: the link taking
        // that step from the chip, -1 where the dimension has size 1.
        // step[] is -1 too for a cable missing from a torus (ccl-sim
        // --fail-link, --fail-chip): a path that would cross it is searched.
        std::vector<int> step;
    };
    const Lattice &lattice() const;
    void forget_routes() {
        if (!lattice_ || lattice_->found.load() || lattice_.use_count() != 1) lattice_ = std::make_shared<Lattice>();
    }
    bool find_lattice(Lattice *l) const;
    void lattice_route(const Lattice &l, int from, int to, Route *out) const;

    static uint64_t key(int from, int to) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(from)) << 32) | static_cast<uint32_t>(to);
    }

    std::string name_;
    Shape shape_ = Shape::Graph;
    TorusDims torus_;
    std::vector<Chip> chips_;
    std::vector<Link> links_;
    std::vector<std::vector<int>> out_;
    std::vector<std::vector<int>> in_;
    std::unordered_map<uint64_t, int> index_;
    double min_latency_us_ = std::numeric_limits<double>::infinity();
    // Copies share it until one of them changes (each change starts afresh).
    mutable std::shared_ptr<Lattice> lattice_ = std::make_shared<Lattice>();
};

// Routes asked for one after another, grouped by source (as a cost
// prediction walks its transfers): closed form where the machine has it,
// otherwise one search per source, kept until the source changes.
class RouteCursor {
public:
    explicit RouteCursor(const Machine &m) : m_(m), closed_form_(m.closed_form_routes()) {}
    const Route &route(int from_chip, int to_chip);

private:
    const Machine &m_;
    bool closed_form_;
    Route one_;
    int row_source_ = -1;
    std::vector<Route> row_;
};

} // namespace nnpccl
