// The machine a communicator plans on: a simulated machine (machine.hpp),
// the chip each rank runs on, and what the algorithms plan with — rings,
// trees, the torus grid and link costs, all in ranks.
//
// Build one with load_topology() (a preset name or a topology file) or
// Topology::flat() (the host model: every pair linked, one ring in rank order).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "status.hpp"

#include "machine.hpp"
#include "presets.hpp"

namespace nnpccl {

// A ring over ranks as the algorithms use it: each direction is a channel.
struct RingEmbedding {
    std::vector<int> ranks;      // the ranks in ring order, starting at rank 0
    std::vector<Route> forward;  // forward[i]: ranks[i] -> ranks[i+1] (wrapping)
    std::vector<Route> backward; // backward[i]: ranks[i+1] -> ranks[i]
    bool on_links = false;       // every hop, both ways, is one link: a Hamiltonian ring of the machine
    double bottleneck_gbps = 0;  // the slowest hop in either direction (+inf for a single rank)
    double hop_latency_us = 0;   // the slowest hop's latency
};

// A tree over ranks. Edges that are not one link are costed by the route
// their data takes.
struct TreeEmbedding {
    int root = 0;
    std::vector<int> parent;                 // per rank; -1 at the root
    std::vector<std::vector<int>> children;  // per rank, ascending
    std::vector<Route> up;                   // per rank: rank -> parent (empty at the root)
    std::vector<Route> down;                 // per rank: parent -> rank
    int depth = 0;                           // edges from the root to the deepest rank
    int edges_on_links = 0;                  // edges that are one link both ways
    double bottleneck_gbps = 0;              // the slowest edge, either direction (+inf for one rank)
    double hop_latency_us = 0;               // the slowest edge's latency
};

// Ranks laid out on a torus (or a block of one): rank at (i, j) is
// rank_at[i + j*x]; wrap_x says whether each row closes over a link back to
// its start (the block spans the whole torus along x), likewise wrap_y.
struct RankGrid {
    int x = 0;
    int y = 0;
    bool wrap_x = false;
    bool wrap_y = false;
    std::vector<int> rank_at;
    int rank(int i, int j) const { return rank_at[static_cast<size_t>(i + j * x)]; }
};

class Topology {
public:
    Topology() = default;

    // The host model for `nranks` ranks (the default with no topology
    // given, docs/design.md): every pair linked at `host` figures, one ring in rank
    // order — its links share one memory system, so more rings would not
    // add bandwidth. Never fails. (On a machine of several hosts, the ring
    // visits each host's ranks in a row: it crosses the network h times.)
    static Topology flat(int nranks);
    static Topology flat(int nranks, LinkParams host);

    // Places `nranks` ranks on `machine` (see placement.hpp; `requested` is
    // a file's placement list, or empty) and embeds rings and trees.
    // nranks <= 0 means one rank per chip (or per placement-list entry).
    // Network nodes (Chip::network) hold no rank: with no list, the ranks
    // take the other chips in order.
    static Status create(Machine machine, const std::vector<int> &requested, int nranks, Topology *out);

    const std::string &name() const { return machine_.name(); }
    int nranks() const { return static_cast<int>(chip_of_rank_.size()); }
    // Rings over the ranks, each as the sequence of ranks around it. Never
    // empty for nranks() >= 1.
    const std::vector<std::vector<int>> &rings() const { return rings_; }
    // Whether the ring algorithm runs each ring of more than two ranks
    // backward as well as forward: where the rings one way leave a chip's
    // injection bandwidth unused (NNP-T: two rings of 56 GB/s hops against
    // 224 GB/s per chip), so backward is more bandwidth. Not on `flat`,
    // whose one link per pair is the whole memory system: there backward
    // would add messages, not bandwidth. (A ring of two is one link both
    // ways already.)
    bool rings_both_ways() const;
    // The ring algorithm's channels, one per ring and direction: ring 0
    // forward, ring 0 backward (if run), ring 1 forward, ...
    std::vector<std::vector<int>> ring_channels() const;

    const Machine &machine() const { return machine_; }
    int chip_of(int rank) const { return chip_of_rank_[static_cast<size_t>(rank)]; }
    const std::vector<int> &placement() const { return chip_of_rank_; }

    // rings() with their costs, same order.
    const std::vector<RingEmbedding> &ring_embeddings() const { return ring_embeddings_; }
    double ring_bandwidth_gbps(int ring) const { return ring_embeddings_[static_cast<size_t>(ring)].bottleneck_gbps; }
    double ring_hop_latency_us(int ring) const { return ring_embeddings_[static_cast<size_t>(ring)].hop_latency_us; }
    // How many of the rings are Hamiltonian rings of the machine (all of
    // them, or none when the placed chips have no ring over links and a
    // routed ring stands in). They are pairwise edge-disjoint.
    int hamiltonian_ring_count() const;

    // Breadth-first spanning tree over links from rank 0 (or `root`).
    const TreeEmbedding &spanning_tree() const { return spanning_tree_; }
    TreeEmbedding spanning_tree(int root) const;
    // The two trees of the double binary tree (which = 0 or 1), built over
    // the order of ring 0 so that their lowest edges are ring hops.
    const TreeEmbedding &double_binary_tree(int which) const {
        return double_binary_tree_[static_cast<size_t>(which)];
    }

    // The ranks grouped by the host their chips sit in (Chip::host), hosts
    // in the order of their lowest rank, ranks ascending; one group when
    // the machine names no hosts. host_of(rank) indexes it.
    const std::vector<std::vector<int>> &host_groups() const { return host_groups_; }
    int host_of(int rank) const { return host_of_rank_[static_cast<size_t>(rank)]; }
    // A job's machine of several hosts (hosts_machine()): the host model
    // with a network between hosts, where the hierarchical algorithm plans.
    bool spans_hosts() const { return machine_.shape() == Shape::Flat && host_groups_.size() > 1; }

    // The ranks' grid when the machine is a torus and they fill it or a
    // block of it; nullptr otherwise.
    const RankGrid *torus() const { return grid_.x > 0 ? &grid_ : nullptr; }
    // The grid's dimension rings: axis 0 gives one ring per row (x), axis 1
    // one per column (y); empty without a grid.
    std::vector<std::vector<int>> dimension_rings(int axis) const;

    // What a rank's chip can send per direction (GB/s), and the least of
    // them: B of the allreduce lower bound.
    double injection_gbps(int rank) const { return machine_.injection_gbps(chip_of(rank)); }
    double min_injection_gbps() const;
    // The slowest host's network link (GB/s per direction) when the ranks
    // span hosts (spans_hosts()); +inf otherwise.
    double network_gbps() const;
    // Allreduce of `bytes` cannot finish faster than 2(p-1)/p · n / B (µs),
    // nor, across h hosts, than 2(h-1)/h · n over a host's network link.
    double allreduce_lower_bound_us(size_t bytes) const;

    // The route data takes from one rank's chip to another's.
    Route route(int from_rank, int to_rank) const { return machine_.route(chip_of(from_rank), chip_of(to_rank)); }
    // Costs of any ring or tree over the ranks (e.g. a dimension ring).
    RingEmbedding embed_ring(const std::vector<int> &ranks) const;
    TreeEmbedding embed_tree(const std::vector<int> &parent) const;

private:
    Machine machine_;
    std::vector<int> chip_of_rank_;
    std::vector<std::vector<int>> rings_;
    std::vector<RingEmbedding> ring_embeddings_;
    TreeEmbedding spanning_tree_;
    TreeEmbedding double_binary_tree_[2];
    RankGrid grid_;
    std::vector<std::vector<int>> host_groups_;
    std::vector<int> host_of_rank_;
};

// Builds the topology `spec` names for `nranks` ranks: a preset (see
// presets.hpp; empty means "flat") or the path of a topology file. A
// failure is an invalid argument whose one line says what is wrong (for a
// file: where, and which field). Never throws.
Status load_topology(const std::string &spec, int nranks, const TopologyOptions &options, Topology *out);
Status load_topology(const std::string &spec, int nranks, Topology *out);

} // namespace nnpccl
