// The ring and tree constructions on their own: Walecki on complete graphs,
// the torus pair, the grid snake, the bounded search, double binary trees.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "rings.hpp"
#include "trees.hpp"
#include "topology_checks.hpp"

using namespace nnpccl;
using namespace topo_test;

namespace {

UndirectedGraph complete(int n) {
    UndirectedGraph g(n);
    for (int a = 0; a < n; ++a)
        for (int b = a + 1; b < n; ++b) g.add_edge(a, b);
    return g;
}

UndirectedGraph torus(int x, int y) {
    UndirectedGraph g(x * y);
    for (int j = 0; j < y; ++j)
        for (int i = 0; i < x; ++i) {
            if (x > 1) g.add_edge(i + j * x, (i + 1) % x + j * x);
            if (y > 1) g.add_edge(i + j * x, i + ((j + 1) % y) * x);
        }
    return g;
}

UndirectedGraph grid(int w, int h) {
    UndirectedGraph g(w * h);
    for (int j = 0; j < h; ++j)
        for (int i = 0; i < w; ++i) {
            if (i + 1 < w) g.add_edge(i + j * w, i + 1 + j * w);
            if (j + 1 < h) g.add_edge(i + j * w, i + (j + 1) * w);
        }
    return g;
}

} // namespace

TEST_CASE("Walecki: floor((n-1)/2) edge-disjoint Hamiltonian rings of K_n", "[rings]") {
    for (int n = 1; n <= 40; ++n) {
        INFO("n = " << n);
        auto rings = complete_graph_rings(n);
        CHECK(static_cast<int>(rings.size()) == (n <= 2 ? 1 : (n - 1) / 2));
        UndirectedGraph g = complete(n);
        for (const auto &r : rings) CHECK(hamiltonian_in(g, r));
        CHECK(edge_disjoint(rings));
    }
}

TEST_CASE("torus rings: two edge-disjoint ones when both sides are >= 3 and of one parity", "[rings]") {
    for (int x = 1; x <= 40; ++x)
        for (int y = 1; y <= 40; ++y) {
            if (x * y < 2) continue;
            auto rings = torus_rings(x, y);
            UndirectedGraph g = torus(x, y);
            bool two = x >= 3 && y >= 3 && x % 2 == y % 2;
            INFO(x << "x" << y);
            REQUIRE(rings.size() == (two ? 2u : 1u));
            for (const auto &r : rings) REQUIRE(hamiltonian_in(g, r));
            REQUIRE(edge_disjoint(rings));
        }
}

TEST_CASE("grid snake: a Hamiltonian ring of every even grid", "[rings]") {
    for (int w = 1; w <= 12; ++w)
        for (int h = 1; h <= 12; ++h) {
            INFO(w << "x" << h);
            VertexRing r = grid_ring(w, h);
            bool expected = (w >= 2 && h >= 2 && (w * h) % 2 == 0) || w * h <= 2;
            CHECK(!r.empty() == expected);
            if (!r.empty()) CHECK(hamiltonian_in(grid(w, h), r));
        }
}

TEST_CASE("bounded search finds the two rings of the hybrid cube mesh", "[rings]") {
    UndirectedGraph hcm(8);
    for (int q = 0; q < 8; q += 4)
        for (int a = 0; a < 4; ++a)
            for (int b = a + 1; b < 4; ++b) hcm.add_edge(q + a, q + b);
    for (int i = 0; i < 4; ++i) hcm.add_edge(i, i + 4);
    auto rings = find_disjoint_rings(hcm, 2, {});
    REQUIRE(rings.size() == 2);
    for (const auto &r : rings) CHECK(hamiltonian_in(hcm, r));
    CHECK(edge_disjoint(rings));

    // A graph with no Hamiltonian ring at all (a star) gives none, quickly.
    UndirectedGraph star(6);
    for (int i = 1; i < 6; ++i) star.add_edge(0, i);
    CHECK(find_disjoint_rings(star, 1, {}).empty());

    // Mixed-parity tori have two rings the construction misses; the search finds them.
    auto mixed = find_disjoint_rings(torus(4, 3), 2, {});
    CHECK(mixed.size() == 2);
    CHECK(edge_disjoint(mixed));
}

TEST_CASE("find_cycle and the Hamiltonian path fallback", "[rings]") {
    UndirectedGraph g = torus(8, 4);
    for (int k : {4, 6, 8, 10}) {
        VertexRing c = find_cycle(g, k, 0, 100000);
        REQUIRE(c.size() == static_cast<size_t>(k));
        for (size_t i = 0; i < c.size(); ++i) CHECK(g.has_edge(c[i], c[(i + 1) % c.size()]));
    }
    CHECK(find_cycle(g, 5, 0, 100000).empty()); // bipartite: no odd cycle

    UndirectedGraph path(4); // 0-1-2-3
    for (int i = 0; i < 3; ++i) path.add_edge(i, i + 1);
    VertexRing p = find_hamiltonian_path(path, 10000, [](int a, int b) { return std::abs(a - b); }, 1);
    REQUIRE(p.size() == 4);
    CHECK(std::abs(p.front() - p.back()) == 3);
}

TEST_CASE("double binary tree: two spanning binary trees, no rank inner in both", "[trees]") {
    for (int p = 1; p <= 70; ++p) {
        INFO("p = " << p);
        std::vector<int> order; // any permutation: the trees are over positions in it
        for (int i = 0; i < p; ++i) order.push_back(p - 1 - i);
        auto t0 = binary_tree(order, 0), t1 = binary_tree(order, 1);
        REQUIRE(spanning_tree(t0));
        REQUIRE(spanning_tree(t1));
        auto c0 = children_of(t0), c1 = children_of(t1);
        int log2p = 0;
        while ((1 << log2p) < p) ++log2p;
        for (int v = 0; v < p; ++v) {
            CHECK(c0[static_cast<size_t>(v)].size() <= 2);
            CHECK(c1[static_cast<size_t>(v)].size() <= 2);
            CHECK_FALSE((!c0[static_cast<size_t>(v)].empty() && !c1[static_cast<size_t>(v)].empty()));
            for (const auto *tree : {&t0, &t1}) {
                int depth = 0;
                for (int at = v; (*tree)[static_cast<size_t>(at)] >= 0; at = (*tree)[static_cast<size_t>(at)]) ++depth;
                CHECK(depth <= log2p);
            }
        }
    }
}
