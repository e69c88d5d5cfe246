// Placement: too many ranks is an error that says so; fewer ranks than chips
// take a connected set of adjacent chips, ring-friendly where possible.
#include <catch2/catch.hpp>

#include <deque>
#include <set>
#include <string>

#include "placement.hpp"
#include "presets.hpp"
#include "succeeded.hpp"
#include "topo_file.hpp"
#include "topology.hpp"
#include "topology_checks.hpp"

using namespace nnpccl;
using namespace topo_test;

namespace {

// The placed chips are joined by links among themselves.
bool connected_over_links(const Topology &t) { return rank_graph(t).is_connected(); }

} // namespace

TEST_CASE("more ranks than chips is an error that says so", "[placement]") {
    Topology t;
    std::string error;
    CHECK_FALSE(succeeded(load_topology("nnpt-hcm8", 9, &t), &error));
    CHECK(error.find("9 ranks") != std::string::npos);
    CHECK(error.find("only 8 chips") != std::string::npos);
    CHECK_FALSE(succeeded(load_topology("nnpt-pod32", 33, &t), &error));
    CHECK(error.find("33 ranks") != std::string::npos);
}

TEST_CASE("fewer ranks than chips: a connected set of adjacent chips", "[placement]") {
    for (const char *spec : {"nnpt-hcm8", "nnpt-ring8", "fc:8", "nnpt-pod32", "torus:5x4", "torus:3x3"}) {
        Topology full;
        std::string error;
        REQUIRE(succeeded(load_topology(spec, 0, &full), &error));
        for (int k = 1; k <= full.machine().num_chips(); ++k) {
            INFO(spec << " with " << k << " ranks");
            Topology t;
            REQUIRE(succeeded(load_topology(spec, k, &t), &error));
            CHECK(t.nranks() == k);
            std::set<int> chips(t.placement().begin(), t.placement().end());
            CHECK(chips.size() == static_cast<size_t>(k));
            CHECK(connected_over_links(t));
            REQUIRE(!t.rings().empty());
            for (const auto &ring : t.rings()) CHECK(visits_each_once(ring, k));
            CHECK(edge_disjoint(t.rings()));
            CHECK(spanning_tree(t.spanning_tree().parent));
            CHECK(spanning_tree(t.double_binary_tree(0).parent));
            CHECK(spanning_tree(t.double_binary_tree(1).parent));
            // Ring-friendly: the machines that have a ring of k chips get one.
            std::string s = spec;
            bool ring_expected = k <= 2 || s == "fc:8" || s == "nnpt-hcm8" || (s == "nnpt-pod32" && k % 2 == 0) ||
                                 (s == "nnpt-ring8" && k == 8);
            if (ring_expected) CHECK(t.hamiltonian_ring_count() >= 1);
            // Without one, the ring's one routed hop is as short as it can be.
            if (t.hamiltonian_ring_count() == 0 && s == "nnpt-pod32") CHECK(t.ring_hop_latency_us(0) <= 2.0 + 1e-9);
        }
    }
}

TEST_CASE("a torus job gets a compact block and its grid", "[placement]") {
    Topology t;
    std::string error;
    REQUIRE(succeeded(load_topology("nnpt-pod32", 8, &t), &error));
    CHECK(t.placement() == std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11});
    REQUIRE(t.torus() != nullptr);
    CHECK(t.torus()->x == 4);
    CHECK(t.torus()->y == 2);
    CHECK_FALSE(t.torus()->wrap_x);
    CHECK(t.hamiltonian_ring_count() == 1);
    REQUIRE(succeeded(load_topology("nnpt-pod1024", 64, &t), &error));
    CHECK(t.torus()->x == 8);
    CHECK(t.torus()->y == 8);
}

TEST_CASE("a placement list puts rank r on the chip it names", "[placement]") {
    Machine m = ring_machine(6, LinkParams{});
    std::vector<int> chips;
    std::string error;
    REQUIRE(succeeded(place_ranks(m, 3, {4, 5, 0}, &chips), &error));
    CHECK(chips == std::vector<int>{4, 5, 0});
    CHECK_FALSE(succeeded(place_ranks(m, 4, {4, 5, 0}, &chips), &error));
    CHECK(error.find("names only 3 chips") != std::string::npos);
    CHECK_FALSE(succeeded(place_ranks(m, 0, {}, &chips), &error));

    // Non-adjacent chips from a list still get a ring, routed through the others.
    Topology t;
    REQUIRE(succeeded(Topology::create(ring_machine(6, LinkParams{}), {0, 2, 4}, 0, &t), &error));
    CHECK(t.hamiltonian_ring_count() == 0);
    CHECK(t.ring_embeddings()[0].forward[0].hops == 2);
    CHECK(spanning_tree(t.spanning_tree().parent));
}

TEST_CASE("placed chips with no links between them are refused", "[placement]") {
    TopologyFile file;
    std::string error;
    REQUIRE(
        succeeded(parse_topology_text("{\"chips\": 4, \"links\": [{\"from\": 0, \"to\": 1}, {\"from\": 2, \"to\": 3}],"
                                      " \"placement\": [0, 2]}",
                                      "split.json", &file),
                  &error));
    Topology t;
    CHECK_FALSE(succeeded(Topology::create(file.machine, file.placement, 0, &t), &error));
    CHECK(error.find("no links lead from chip 0 to chip 2") != std::string::npos);
    // Without a list, placement keeps to one connected part.
    REQUIRE(succeeded(Topology::create(file.machine, {}, 2, &t), &error));
    CHECK(t.placement() == std::vector<int>{0, 1});
    CHECK_FALSE(succeeded(Topology::create(file.machine, {}, 3, &t), &error));
    CHECK(error.find("no 3 chips joined by links") != std::string::npos);
}
