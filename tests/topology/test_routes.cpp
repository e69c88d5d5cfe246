// Routes on tori and rings in closed form: the very paths Dijkstra finds
// (the simulator's and the cost model's figures do not move), as many hops
// as the cyclic distances add up to, the search kept where the machine is
// not a regular torus, and a 128x128 torus that plans without routing
// every pair.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <string>

#include "presets.hpp"
#include "succeeded.hpp"
#include "topology.hpp"

using namespace nnpccl;

namespace {

const LinkParams kIcl{kIclPortGbps, 1.0};

int cyclic(int a, int b, int n) {
    const int d = std::abs(a - b) % n;
    return std::min(d, n - d);
}

// Every pair's closed-form route against the Dijkstra row of its source.
void check_against_search(const Machine &m) {
    INFO(m.name());
    for (int from = 0; from < m.num_chips(); ++from) {
        const std::vector<Route> searched = m.routes_from(from);
        for (int to = 0; to < m.num_chips(); ++to) {
            INFO(from << " -> " << to);
            const Route r = m.route(from, to);
            const Route &s = searched[static_cast<size_t>(to)];
            REQUIRE(r.reachable);
            CHECK(r.links == s.links);
            CHECK(r.hops == s.hops);
            CHECK(r.latency_us == s.latency_us);
            CHECK(r.gbps == s.gbps);
        }
    }
}

} // namespace

TEST_CASE("closed-form torus routes are the links Dijkstra takes, pair by pair") {
    const int shapes[][3] = {{4, 4, 1}, {5, 3, 1}, {6, 7, 1}, {8, 4, 1}, {2, 5, 1}, {1, 6, 1},
                             {3, 3, 3}, {4, 2, 3}, {5, 4, 3}, {2, 2, 2}, {4, 4, 4}, {3, 1, 5}};
    for (const auto &d : shapes) {
        const Machine m = torus_machine(d[0], d[1], d[2], kIcl);
        REQUIRE(m.closed_form_routes());
        check_against_search(m);
        // Hops: the cyclic distance in each dimension, added up.
        for (int from = 0; from < m.num_chips(); from += 3)
            for (int to = 0; to < m.num_chips(); ++to) {
                const int hops = cyclic(from % d[0], to % d[0], d[0]) +
                                 cyclic(from / d[0] % d[1], to / d[0] % d[1], d[1]) +
                                 cyclic(from / (d[0] * d[1]), to / (d[0] * d[1]), d[2]);
                CHECK(m.route(from, to).hops == hops);
            }
    }
}

TEST_CASE("closed-form ring routes are the links Dijkstra takes") {
    for (int n : {2, 3, 5, 8, 11}) {
        const Machine m = ring_machine(n, kIcl);
        REQUIRE(m.closed_form_routes());
        check_against_search(m);
    }
}

TEST_CASE("a torus that is not regular keeps the search") {
    SECTION("one link slower to cross") {
        Machine m("uneven", Shape::Torus);
        m.set_torus({3, 3});
        for (int c = 0; c < 9; ++c) m.add_chip();
        for (int c = 0; c < 9; ++c) {
            const int x = c % 3, y = c / 3;
            const LinkParams slow{kIclPortGbps, c == 0 ? 5.0 : 1.0};
            REQUIRE(m.add_duplex_link(c, (x + 1) % 3 + y * 3, slow).is_ok());
            REQUIRE(m.add_duplex_link(c, x + (y + 1) % 3 * 3, kIcl).is_ok());
        }
        CHECK_FALSE(m.closed_form_routes());
        // 0 -> 1 avoids the slow link: two hops round the other way.
        CHECK(m.route(0, 1).hops == 2);
        check_against_search(m);
    }
    SECTION("a link missing") {
        Machine m("cut", Shape::Ring);
        for (int c = 0; c < 5; ++c) m.add_chip();
        for (int c = 0; c + 1 < 5; ++c) REQUIRE(m.add_duplex_link(c, c + 1, kIcl).is_ok());
        CHECK_FALSE(m.closed_form_routes());
        CHECK(m.route(0, 4).hops == 4);
    }
    SECTION("a machine changed after its first route") {
        Machine m = ring_machine(4, kIcl);
        CHECK(m.route(0, 2).hops == 2);
        const Machine copy = m;
        REQUIRE(m.add_duplex_link(0, 2, kIcl).is_ok());
        CHECK_FALSE(m.closed_form_routes());
        CHECK(m.route(0, 2).hops == 1);
        CHECK(copy.closed_form_routes());
        CHECK(copy.route(0, 2).hops == 2);
    }
}

TEST_CASE("a torus with a cable down keeps the closed form where its path is whole, and searches the rest") {
    // 6x5 less the cable 0-1 (ccl-sim --fail-link 0-1), then less chip 8's cables too.
    const Machine whole = torus_machine(6, 5, kIcl);
    Machine m("cut", Shape::Torus);
    m.set_torus({6, 5});
    for (int c = 0; c < whole.num_chips(); ++c) m.add_chip();
    for (const Link &l : whole.links())
        if (!(l.from + l.to == 1 && l.from * l.to == 0) && l.from != 8 && l.to != 8)
            REQUIRE(m.add_link(l.from, l.to, kIcl).is_ok());
    REQUIRE(m.closed_form_routes());
    const int cut = m.link_index(0, 1);
    CHECK(cut < 0);
    for (int from = 0; from < m.num_chips(); ++from) {
        const std::vector<Route> searched = m.routes_from(from);
        for (int to = 0; to < m.num_chips(); ++to) {
            INFO(from << " -> " << to);
            const Route r = m.route(from, to);
            const Route &s = searched[static_cast<size_t>(to)];
            REQUIRE(r.reachable == s.reachable);
            if (!r.reachable) continue;
            // A shortest path of the cut machine: its links all there, in a chain.
            CHECK(r.hops == s.hops);
            int at = from;
            for (int l : r.links) {
                REQUIRE(l >= 0);
                CHECK(m.links()[static_cast<size_t>(l)].from == at);
                at = m.links()[static_cast<size_t>(l)].to;
            }
            CHECK(at == to);
        }
    }
    CHECK(m.route(0, 1).hops == 3);
    CHECK_FALSE(m.route(0, 8).reachable);
}

TEST_CASE("torus:XxYxZ is a 3D torus of six ports per chip") {
    Machine m;
    std::string error;
    REQUIRE(succeeded(build_preset("torus:4x3x2", 0, TopologyOptions(), &m), &error));
    CHECK(m.name() == "torus:4x3x2");
    CHECK(m.num_chips() == 24);
    CHECK(m.torus().z == 2);
    // x and y wrap (4 and 3 long); z of 2 is one cable.
    CHECK(m.bidirectional_link_count() == 24 + 24 + 12);
    CHECK(m.check_ports().is_ok());
    for (const char *bad : {"torus:4x4x4x4", "torus:4x4x", "torus:4x0x4", "torus:1x1x1", "torus:64x64x64"})
        CHECK_FALSE(build_preset(bad, 0, TopologyOptions(), &m).is_ok());
    Topology t;
    REQUIRE(succeeded(load_topology("torus:4x4x4", 0, &t), &error));
    CHECK(t.nranks() == 64);
    CHECK(t.hamiltonian_ring_count() >= 2);
    CHECK(t.torus() == nullptr); // the 2D grid the torus2d algorithm runs on
}

TEST_CASE("a 128x128 torus plans without routing every pair") {
    // Routing every pair took minutes and more than 8 GB here; the closed
    // form takes each of the 16,384 ranks' few routes the embedding needs.
    const auto start = std::chrono::steady_clock::now();
    Topology t;
    std::string error;
    REQUIRE(succeeded(load_topology("torus:128x128", 0, &t), &error));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(seconds < 60);
    CHECK(t.nranks() == 16384);
    REQUIRE(t.machine().closed_form_routes());
    CHECK(t.route(0, 64 + 64 * 128).hops == 128);
    CHECK(t.double_binary_tree(0).depth > 0);
}
