// The trees embedded in a torus (torus_trees.cpp): their shape on grids of
// one to three dimensions, with and without wrap-around, and their
// broadcast, reduce and allreduce run by the simulation harness
// (schedule_sim.hpp) bit for bit over 1-8 ranks, every root, in and out of
// place, float32 sum and avg and int32 sum.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "registry.hpp"
#include "schedule_sim.hpp"
#include "topology.hpp"
#include "torus_trees.hpp"

using namespace nnpccl;
using namespace schedule_sim;

namespace {

TorusGrid grid_of(std::vector<int> dims, std::vector<bool> wrap, bool scrambled) {
    TorusGrid grid;
    int n = 1;
    for (int d : dims) n *= d;
    grid.dims = std::move(dims);
    grid.wrap = std::move(wrap);
    // 5 is coprime with every grid size below but 5: (5i + 3) mod n is a permutation.
    for (int i = 0; i < n; ++i) grid.rank_at.push_back(scrambled && n % 5 != 0 ? (i * 5 + 3) % n : i);
    return grid;
}

struct GridCase {
    std::vector<int> dims;
    std::vector<bool> wrap;
};

const GridCase kGrids[] = {
    {{}, {}},
    {{2}, {true}},
    {{3}, {true}},
    {{4}, {false}},
    {{5}, {true}},
    {{7}, {true}},
    {{2, 2}, {true, true}},
    {{3, 2}, {true, true}},
    {{3, 2}, {false, true}},
    {{4, 2}, {true, false}},
    {{2, 4}, {true, true}},
    {{2, 3}, {false, false}},
    {{2, 2, 2}, {true, true, true}},
};

// Whether every grid index reaches the root through its parents, each a
// neighbour one hop away along one dimension, and children() is parent()'s
// inverse.
void check_tree_shape(const TorusGrid &grid, int root, int channel) {
    const TorusTree tree(grid, root, channel);
    const int n = static_cast<int>(grid.rank_at.size());
    REQUIRE(tree.parent(root) == -1);
    std::vector<int> child_count(static_cast<size_t>(n), 0);
    for (int i = 0; i < n; ++i) {
        if (i == root) continue;
        const int up = tree.parent(i);
        REQUIRE(up >= 0);
        REQUIRE(up < n);
        const std::vector<int> below = tree.children(up);
        CHECK(std::count(below.begin(), below.end(), i) == 1);
        // One hop: the indices differ in one coordinate, by one along it or around its wrap.
        int differing = 0, a = i, b = up;
        for (size_t d = 0; d < grid.dims.size(); ++d) {
            const int x = a % grid.dims[d], y = b % grid.dims[d], size = grid.dims[d];
            a /= size;
            b /= size;
            if (x == y) continue;
            ++differing;
            const bool adjacent = std::abs(x - y) == 1 || (grid.wrap[d] && std::abs(x - y) == size - 1);
            CHECK(adjacent);
        }
        CHECK(differing == 1);
        CHECK(tree.depth(i) == tree.depth(up) + 1);
    }
    for (int i = 0; i < n; ++i)
        for (int c : tree.children(i)) ++child_count[static_cast<size_t>(c)];
    for (int i = 0; i < n; ++i) CHECK(child_count[static_cast<size_t>(i)] == (i == root ? 0 : 1));
}

} // namespace

TEST_CASE("torus trees: every rank hangs one link from its parent, on every grid and from every root",
          "[schedules][torus_trees]") {
    for (const GridCase &g : kGrids) {
        const TorusGrid grid = grid_of(g.dims, g.wrap, false);
        const int n = static_cast<int>(grid.rank_at.size());
        for (int root = 0; root < n; ++root)
            for (int channel = 0; channel < std::max<int>(1, static_cast<int>(g.dims.size())); ++channel) {
                INFO("grid of " << n << " dims " << g.dims.size() << " root " << root << " channel " << channel);
                check_tree_shape(grid, root, channel);
            }
    }
}

TEST_CASE("torus trees: the root sends along its channel's dimension only, and a torus's depth is its radius + 1",
          "[schedules][torus_trees]") {
    const TorusGrid grid = grid_of({8, 4}, {true, true}, false);
    for (int channel = 0; channel < 2; ++channel) {
        const TorusTree tree(grid, 0, channel);
        const std::vector<int> below = tree.children(0);
        CHECK(below.size() == 2); // both ways along one dimension
        for (int c : below) CHECK((channel == 0 ? c % 8 != 0 : c % 8 == 0));
        int deepest = 0;
        for (int i = 0; i < 32; ++i) deepest = std::max(deepest, tree.depth(i));
        CHECK(deepest == 4 + 2); // the radius: the hop around the root lies off the deepest way
    }
    // On a 2D torus the two channels' trees never use a link in the same direction.
    std::vector<std::pair<int, int>> used;
    for (int channel = 0; channel < 2; ++channel) {
        const TorusTree tree(grid, 5, channel);
        for (int i = 0; i < 32; ++i)
            if (tree.parent(i) >= 0) used.emplace_back(tree.parent(i), i);
    }
    std::sort(used.begin(), used.end());
    const auto twice = std::adjacent_find(used.begin(), used.end());
    INFO("link " << (twice == used.end() ? -1 : twice->first) << " -> " << (twice == used.end() ? -1 : twice->second));
    CHECK(twice == used.end());
}

TEST_CASE("torus trees: broadcast, reduce and allreduce are bit-exact and deadlock-free on every grid",
          "[schedules][library][torus_trees]") {
    const size_t counts[] = {0, 1, 97, 1000};
    struct TypedOp {
        nnpccl_datatype_t dt;
        nnpccl_redop_t op;
    };
    const TypedOp ops[] = {{NNPCCL_FLOAT32, NNPCCL_SUM}, {NNPCCL_FLOAT32, NNPCCL_AVG}, {NNPCCL_INT32, NNPCCL_SUM}};
    for (const GridCase &g : kGrids)
        for (bool scrambled : {false, true}) {
            const TorusGrid grid = grid_of(g.dims, g.wrap, scrambled);
            const int p = static_cast<int>(grid.rank_at.size());
            const Builder build = [grid](const CollectiveArgs &args) { return build_torus_trees(args, grid); };
            // Every root in rank order; scrambled, the first, a middle and the
            // last (the tree's shape from every root is checked above).
            std::vector<int> roots;
            for (int root = 0; root < p; ++root)
                if (!scrambled || root == 0 || root == p / 2 || root == p - 1) roots.push_back(root);
            for (Collective coll : {Collective::Broadcast, Collective::Reduce, Collective::Allreduce})
                for (int root : roots)
                    for (size_t count : counts) {
                        if (coll == Collective::Allreduce && root != 0) continue;
                        for (bool in_place : {false, true})
                            for (const TypedOp &t : ops) {
                                if (!reduces(coll) && t.op == NNPCCL_AVG) continue;
                                for (size_t chunk : {3, 64}) {
                                    CallShape c = make_shape(coll, p, count, in_place, root, t.dt, t.op);
                                    INFO(collective_name(coll)
                                         << " dims " << g.dims.size() << " p=" << p << " scrambled=" << scrambled
                                         << " root=" << root << " count=" << count << " in_place=" << in_place
                                         << " chunk=" << chunk);
                                    CHECK(simulate(c, build, chunk) == 0);
                                    if (coll != Collective::Allreduce) CHECK(simulate(c, build, chunk, 1) == 0);
                                }
                            }
                    }
        }
}

TEST_CASE("torus trees apply on 2D and 3D tori the ranks fill, not elsewhere", "[schedules][torus_trees]") {
    const AlgorithmInfo *tree = find_algorithm("torus_trees");
    REQUIRE(tree != nullptr);
    struct Case {
        const char *topo;
        int nranks;
        bool applies;
        int channels;
    };
    for (const Case &c :
         {Case{"torus:4x4", 16, true, 2}, Case{"nnpt-pod32", 32, true, 2}, Case{"torus:4x4x4", 64, true, 3},
          Case{"torus:4x4", 8, true, 2}, Case{"torus:4x4x4", 8, false, 1}, Case{"nnpt-ring8", 8, false, 1},
          Case{"flat", 4, false, 1}}) {
        Topology t;
        REQUIRE(load_topology(c.topo, c.nranks, &t).is_ok());
        CollectiveArgs args;
        args.collective = Collective::Broadcast;
        args.nranks = c.nranks;
        args.count = 1024;
        args.elem_size = 4;
        args.chunk_elems = 1024;
        args.root = 0;
        args.rank = 0;
        std::string why;
        const bool applies = tree->applies(args, t, &why);
        INFO(c.topo << " with " << c.nranks << " ranks: " << why);
        CHECK(applies == c.applies);
        CHECK(tree->channels(t) == c.channels);
        if (!c.applies) CHECK(!why.empty());
        if (c.applies) {
            const Schedule s = tree->build(args, t);
            CHECK(s.channels.size() == static_cast<size_t>(c.channels));
            CHECK(tree->predict_us(args, t, CostInputs{}) > 0);
        }
    }
}

TEST_CASE("torus relay allreduce is bit-exact and deadlock-free on grids of one to three dimensions",
          "[schedules][library][torus_trees]") {
    for (const GridCase &g : kGrids)
        for (bool scrambled : {false, true}) {
            const TorusGrid grid = grid_of(g.dims, g.wrap, scrambled);
            const int p = static_cast<int>(grid.rank_at.size());
            const Builder build = [grid](const CollectiveArgs &args) { return build_torus_relay(args, grid); };
            for (size_t count : {0, 1, 97, 1000})
                for (bool in_place : {false, true})
                    for (nnpccl_redop_t op : {NNPCCL_SUM, NNPCCL_AVG}) {
                        INFO("dims " << g.dims.size() << " p=" << p << " scrambled=" << scrambled << " count=" << count
                                     << " in_place=" << in_place);
                        CHECK(simulate(make_shape(Collective::Allreduce, p, count, in_place, 0, NNPCCL_FLOAT32, op),
                                       build, 64) == 0);
                    }
        }
}
