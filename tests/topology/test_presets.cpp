// Every preset: port counts, link counts, wrap-around, and what is embedded
// on it (rings Hamiltonian and edge-disjoint, trees spanning).
#include <catch2/catch.hpp>

#include <string>

#include "presets.hpp"
#include "succeeded.hpp"
#include "topology.hpp"
#include "topology_checks.hpp"

using namespace nnpccl;
using namespace topo_test;

namespace {

struct PresetCase {
    const char *spec;
    int chips;
    int bidirectional_links;
    int hamiltonian_rings; // edge-disjoint rings expected with every chip placed
    bool icl;              // NNP-T ICL wiring: at most 4 ports, 224 GB/s per chip
};

const PresetCase kPresets[] = {
    {"ring:2", 2, 1, 1, true},          {"ring:5", 5, 5, 1, true},         {"nnpt-ring8", 8, 8, 1, true},
    {"fc:4", 4, 6, 1, true},            {"fc:5", 5, 10, 2, true},          {"fc:8", 8, 28, 3, false},
    {"hcm8", 8, 16, 2, true},           {"nnpt-hcm8", 8, 16, 2, true},     {"torus:4x3", 12, 24, 2, true},
    {"torus:2x5", 10, 15, 1, true},     {"torus:3x3", 9, 18, 2, true},     {"torus:6x1", 6, 6, 1, true},
    {"nnpt-pod32", 32, 64, 2, true},    {"nnpt-pod1024", 1024, 2048, 2, true},
};

Topology load(const std::string &spec, int nranks = 0) {
    Topology t;
    std::string error;
    INFO(spec << ": " << error);
    REQUIRE(succeeded(load_topology(spec, nranks, &t), &error));
    return t;
}

} // namespace

TEST_CASE("every preset: ports, links and embedded rings and trees", "[presets]") {
    for (const PresetCase &c : kPresets) {
        SECTION(c.spec) {
            Topology t = load(c.spec);
            const Machine &m = t.machine();
            CHECK(m.num_chips() == c.chips);
            CHECK(t.nranks() == c.chips);
            CHECK(m.bidirectional_link_count() == c.bidirectional_links);
            CHECK(m.one_way_link_count() == 0);
            for (int chip = 0; chip < m.num_chips(); ++chip) {
                CHECK(m.ports_used(chip) <= m.chip(chip).ports);
                if (c.icl) {
                    CHECK(m.ports_used(chip) <= kIclPortsPerChip);
                    CHECK(m.injection_gbps(chip) <= kIclPortsPerChip * kIclPortGbps);
                }
                // Whatever the wiring, a chip's 16 SerDes quads bound what it sends.
                CHECK(m.injection_gbps(chip) <= kIclQuadsPerChip * kIclQuadGbps + 1e-9);
            }

            CHECK(t.hamiltonian_ring_count() == c.hamiltonian_rings);
            CHECK(static_cast<int>(t.rings().size()) == c.hamiltonian_rings);
            const auto g = rank_graph(t);
            for (const auto &ring : t.rings()) {
                CHECK(hamiltonian_in(g, ring));
                CHECK(ring.front() == 0);
            }
            CHECK(edge_disjoint(t.rings()));
            for (const RingEmbedding &e : t.ring_embeddings()) {
                CHECK(e.on_links);
                CHECK(e.bottleneck_gbps > 0);
                CHECK(e.forward.size() == e.ranks.size());
                CHECK(e.backward.size() == e.ranks.size());
            }

            CHECK(spanning_tree(t.spanning_tree().parent));
            CHECK(t.spanning_tree().edges_on_links == t.nranks() - 1);
            CHECK(spanning_tree(t.double_binary_tree(0).parent));
            CHECK(spanning_tree(t.double_binary_tree(1).parent));
            for (int r = 0; r < t.nranks(); ++r) {
                bool inner0 = !t.double_binary_tree(0).children[static_cast<size_t>(r)].empty();
                bool inner1 = !t.double_binary_tree(1).children[static_cast<size_t>(r)].empty();
                CHECK_FALSE((inner0 && inner1));
                CHECK(t.double_binary_tree(0).children[static_cast<size_t>(r)].size() <= 2);
                CHECK(t.double_binary_tree(1).children[static_cast<size_t>(r)].size() <= 2);
            }
        }
    }
}

TEST_CASE("the hybrid cube mesh is two fully connected quads plus twin links", "[presets]") {
    Topology t = load("nnpt-hcm8");
    const Machine &m = t.machine();
    for (int a = 0; a < 8; ++a) {
        CHECK(m.ports_used(a) == 4);
        for (int b = 0; b < 8; ++b) {
            bool same_quad = a != b && a / 4 == b / 4;
            bool twins = (a + 4) % 8 == b;
            CHECK(m.has_duplex_link(a, b) == (same_quad || twins));
        }
    }
}

TEST_CASE("tori wrap around in both dimensions", "[presets]") {
    for (const char *spec : {"nnpt-pod32", "torus:5x4", "nnpt-pod1024"}) {
        Topology t = load(spec);
        const Machine &m = t.machine();
        REQUIRE(m.shape() == Shape::Torus);
        const int X = m.torus().x, Y = m.torus().y;
        CHECK(X * Y == m.num_chips());
        for (int y = 0; y < Y; ++y) CHECK(m.has_duplex_link(X - 1 + y * X, y * X));
        for (int x = 0; x < X; ++x) CHECK(m.has_duplex_link(x + (Y - 1) * X, x));
        for (int c = 0; c < m.num_chips(); ++c) CHECK(m.ports_used(c) == 4);
        const RankGrid *grid = t.torus();
        REQUIRE(grid != nullptr);
        CHECK(grid->x == X);
        CHECK(grid->y == Y);
        CHECK(grid->wrap_x);
        CHECK(grid->wrap_y);
        CHECK(t.dimension_rings(0).size() == static_cast<size_t>(Y));
        CHECK(t.dimension_rings(1).size() == static_cast<size_t>(X));
        for (const auto &row : t.dimension_rings(0)) CHECK(t.embed_ring(row).on_links);
        for (const auto &column : t.dimension_rings(1)) CHECK(t.embed_ring(column).on_links);
    }
    Topology pod32 = load("nnpt-pod32");
    CHECK(pod32.machine().torus().x == 8);
    CHECK(pod32.machine().torus().y == 4);
    CHECK(pod32.machine().chip(31).host == "chassis3");
}

// Backward adds bandwidth where the rings one way leave a chip's ports
// idle (every NNP-T preset: at most two rings of 56 GB/s hops, 112 or 224
// GB/s per chip), not on flat, whose one ring already takes the host link.
TEST_CASE("the ring algorithm runs rings both ways where that adds bandwidth", "[presets]") {
    for (const char *spec : {"nnpt-ring8", "nnpt-hcm8", "nnpt-pod32", "fc:4", "torus:3x3"}) {
        INFO(spec);
        Topology t = load(spec);
        CHECK(t.rings_both_ways());
        const std::vector<std::vector<int>> channels = t.ring_channels();
        REQUIRE(channels.size() == 2 * t.rings().size());
        for (size_t r = 0; r < t.rings().size(); ++r) {
            CHECK(channels[2 * r] == t.rings()[r]);
            CHECK(channels[2 * r + 1] == std::vector<int>(t.rings()[r].rbegin(), t.rings()[r].rend()));
        }
    }
    CHECK(load("ring:2").ring_channels().size() == 1); // one cable, used both ways by the one ring
    CHECK_FALSE(Topology::flat(4).rings_both_ways());
    CHECK(Topology::flat(4).ring_channels() == Topology::flat(4).rings());
}

TEST_CASE("flat: every pair linked at host figures, one ring in rank order", "[presets]") {
    Topology t = Topology::flat(5);
    CHECK(t.name() == "flat");
    CHECK(t.nranks() == 5);
    REQUIRE(t.rings().size() == 1);
    CHECK(t.rings()[0] == std::vector<int>{0, 1, 2, 3, 4});
    CHECK(t.machine().bidirectional_link_count() == 10);
    CHECK(t.min_injection_gbps() == Approx(10.0));
    Topology loaded = load("", 5);
    CHECK(loaded.name() == "flat");
    CHECK(loaded.rings() == t.rings());
    CHECK(Topology::flat(1).rings() == std::vector<std::vector<int>>{{0}});

    Topology custom = Topology::flat(3, LinkParams{25.0, 0.5});
    CHECK(custom.ring_bandwidth_gbps(0) == Approx(25.0));
    CHECK(custom.ring_hop_latency_us(0) == Approx(0.5));
}

TEST_CASE("allreduce lower bound is 2(p-1)/p * n / B", "[presets]") {
    Topology t = load("nnpt-hcm8");
    CHECK(t.min_injection_gbps() == Approx(224.0));
    // 2 * 7/8 * 1 MiB / 224 GB/s
    CHECK(t.allreduce_lower_bound_us(1 << 20) == Approx(2.0 * 7 / 8 * 1048576 / 224e3));
    Topology ring = load("nnpt-ring8");
    CHECK(ring.min_injection_gbps() == Approx(112.0));
    CHECK(load("ring:5", 0).allreduce_lower_bound_us(0) == 0);
}

TEST_CASE("fully connected boxes beyond 5 chips split their quads", "[presets]") {
    Topology t = load("fc:8");
    CHECK(t.machine().links().front().gbps == Approx(28.0)); // 2 quads of 14 GB/s
    CHECK(t.machine().chip(0).ports == 7);
    Topology big = load("fc:17");
    CHECK(big.machine().links().front().gbps == Approx(14.0));
    CHECK(big.hamiltonian_ring_count() == 8);
}

TEST_CASE("bad preset specs are rejected with a message", "[presets]") {
    Topology t;
    std::string error;
    for (const char *spec : {"ring:0", "ring:x", "fc:18", "torus:8", "torus:0x4", "torus:8x4x2x2", "nnpt-pod64"}) {
        INFO(spec);
        CHECK_FALSE(succeeded(load_topology(spec, 0, &t), &error));
        CHECK(error.find(spec) != std::string::npos);
    }
    CHECK_FALSE(succeeded(load_topology("no-such-topology", 0, &t), &error));
    CHECK(error.find("neither a preset") != std::string::npos);
    TopologyOptions options;
    options.icl.latency_us = 0.25;
    REQUIRE(succeeded(load_topology("nnpt-ring8", 0, options, &t), &error));
    CHECK(t.ring_hop_latency_us(0) == Approx(0.25));
}
