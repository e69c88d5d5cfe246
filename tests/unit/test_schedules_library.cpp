// The halving-doubling, Swing, double binary tree and 2D torus schedules, the
// Swing binomial trees, and the
// direct allgather and reduce-scatter, run by the simulation harness in
// schedule_sim.hpp: for every collective each one serves, 1 to 8 ranks, in
// and out of place, empty to large counts, float32 sum and avg and int32
// sum, chunks small enough that every transfer pipelines: no deadlock (with
// one slot per stream too), no message left over, every output bit-exact,
// and every rank of an allreduce holding the same bits even where the order
// of a floating-point sum matters.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "patterns.hpp"
#include "registry.hpp"
#include "schedule_sim.hpp"
#include "topology.hpp"
#include "torus_trees.hpp"

using namespace nnpccl;
using namespace schedule_sim;

namespace {

const int kRankCounts[] = {1, 2, 3, 4, 5, 7, 8};
const size_t kCounts[] = {0, 1, 97, 1000};
const size_t kChunks[] = {3, 64};

struct TypedOp {
    nnpccl_datatype_t dt;
    nnpccl_redop_t op;
};
const TypedOp kTypedOps[] = {{NNPCCL_FLOAT32, NNPCCL_SUM}, {NNPCCL_FLOAT32, NNPCCL_AVG}, {NNPCCL_INT32, NNPCCL_SUM}};

// Every (collective, ranks, count, in place, type and op, chunk) of the
// grid above, with the root chosen per rank count.
void check_grid(const char *name, const Builder &build, std::initializer_list<Collective> collectives,
                const std::vector<int> &rank_counts, int (*root_for)(int p)) {
    for (Collective coll : collectives)
        for (int p : rank_counts)
            for (size_t count : kCounts)
                for (bool in_place : {false, true})
                    for (const TypedOp &t : kTypedOps) {
                        // Gathers and broadcasts ignore the op: float sum and int cover them.
                        if (!reduces(coll) && t.op == NNPCCL_AVG) continue;
                        for (size_t chunk : kChunks) {
                            CallShape c = make_shape(coll, p, count, in_place, root_for(p), t.dt, t.op);
                            INFO(name << " " << collective_name(coll) << " p=" << p << " count=" << count
                                      << " in_place=" << in_place << " " << datatype_name(t.dt) << " "
                                      << redop_name(t.op) << " chunk=" << chunk << " root=" << c.root);
                            CHECK(simulate(c, build, chunk) == 0);
                        }
                    }
}

int root_zero(int) { return 0; }
int root_inside(int p) { return p > 1 ? (p * 7 + 3) % p : 0; } // a root other than 0 where there is one
int root_last(int p) { return p - 1; }

Builder torus(int x, int y) {
    return [x, y](const CollectiveArgs &args) { return build_torus2d(args, x, y); };
}

// The 2D torus with its rings run one way, the columns both ways, or all both ways.
Builder torus_rings(int x, int y, Torus2dRings rings, bool scrambled) {
    std::vector<int> grid(static_cast<size_t>(x * y));
    for (size_t i = 0; i < grid.size(); ++i) grid[i] = static_cast<int>(scrambled ? (i * 7 + 3) % grid.size() : i);
    return [x, y, grid, rings](const CollectiveArgs &args) { return build_torus2d(args, x, y, grid, rings); };
}

// The grid a placement on part of a torus can give: ranks in no particular order.
Builder scrambled_torus(int x, int y) {
    std::vector<int> grid(static_cast<size_t>(x * y));
    for (size_t i = 0; i < grid.size(); ++i) grid[i] = static_cast<int>((i * 5 + 3) % grid.size());
    return [x, y, grid](const CollectiveArgs &args) { return build_torus2d(args, x, y, grid); };
}

// torus_relay on an x-by-y grid, ranks in rank order or scrambled as above.
Builder relay(int x, int y, bool scrambled) {
    RankGrid grid{x, y, true, true, {}};
    for (int i = 0; i < x * y; ++i) grid.rank_at.push_back(scrambled ? (i * 5 + 3) % (x * y) : i);
    return [grid](const CollectiveArgs &args) { return build_torus_relay(args, grid); };
}

// Swing on one ring of p ranks (folded to a power of two), `channels` channels.
Builder swing_ring(int channels, bool latency_optimal) {
    return [channels, latency_optimal](const CollectiveArgs &args) {
        SwingShape shape;
        shape.channels = channels;
        return build_swing(args, shape, latency_optimal);
    };
}

// Swing on a torus of `dims` (powers of two), ranks placed at the torus
// indices in rank order or scrambled, two channels per dimension.
Builder swing_torus(std::vector<int> dims, bool scrambled, bool latency_optimal) {
    SwingShape shape;
    int n = 1;
    for (int d : dims) n *= d;
    shape.dims = dims;
    shape.channels = 2 * static_cast<int>(dims.size());
    for (int i = 0; i < n; ++i) shape.rank_at.push_back(scrambled ? (i * 5 + 3) % n : i);
    return [shape, latency_optimal](const CollectiveArgs &args) { return build_swing(args, shape, latency_optimal); };
}

// Floats whose sums round differently in different orders: the same
// spread of magnitudes and signs on every rank, different values.
void write_awkward_floats(int rank, void *send, size_t elems) {
    std::mt19937 gen(static_cast<unsigned>(rank) * 7919u + 17u);
    std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
    std::uniform_int_distribution<int> exponent(-20, 20);
    auto *out = static_cast<float *>(send);
    for (size_t i = 0; i < elems; ++i) out[i] = std::ldexp(mantissa(gen), exponent(gen));
}

void check_same_bits_everywhere(const char *name, const Builder &build, int p, size_t count, bool in_place,
                                nnpccl_redop_t op) {
    CallShape c = make_shape(Collective::Allreduce, p, count, in_place, 0, NNPCCL_FLOAT32, op);
    SimResult result = run(c, build, 7, 2, write_awkward_floats);
    INFO(name << " p=" << p << " count=" << count << " in_place=" << in_place << " " << redop_name(op));
    for (int r = 1; r < p; ++r) CHECK(result.outputs[static_cast<size_t>(r)] == result.outputs[0]);
}

size_t sends_of(const Schedule &s) {
    size_t n = 0;
    for (const auto &channel : s.channels)
        for (const Step &step : channel) n += step.has(kSend) ? 1 : 0;
    return n;
}

} // namespace

TEST_CASE("halving-doubling is bit-exact and deadlock-free on any rank count", "[schedules][library]") {
    const std::vector<int> ranks(std::begin(kRankCounts), std::end(kRankCounts));
    check_grid("halving_doubling", build_halving_doubling,
               {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather}, ranks, root_zero);
}

TEST_CASE("swing is bit-exact and deadlock-free on any rank count, one channel or two", "[schedules][library]") {
    const std::vector<int> ranks(std::begin(kRankCounts), std::end(kRankCounts));
    for (int channels : {1, 2}) {
        check_grid("swing", swing_ring(channels, false),
                   {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather}, ranks, root_zero);
        check_grid("swing_latency", swing_ring(channels, true), {Collective::Allreduce}, ranks, root_zero);
    }
}

TEST_CASE("swing is bit-exact on 2D and 3D tori, in rank order or not", "[schedules][library]") {
    const std::vector<std::vector<int>> shapes = {{2, 2}, {4, 2}, {2, 4}, {2, 2, 2}};
    for (const auto &dims : shapes)
        for (bool scrambled : {false, true}) {
            const int n = dims[0] * dims[1] * (dims.size() > 2 ? dims[2] : 1);
            check_grid("swing torus", swing_torus(dims, scrambled, false),
                       {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather}, {n}, root_zero);
            check_grid("swing_latency torus", swing_torus(dims, scrambled, true), {Collective::Allreduce}, {n},
                       root_zero);
        }
}

// The registry's Swing entries as the selector builds them on a 3D torus
// preset: its three dimensions, each rank at its chip.
TEST_CASE("swing takes a 3D torus preset's dimensions and is bit-exact there", "[schedules][library]") {
    Topology t;
    REQUIRE(load_topology("torus:4x2x2", 16, &t).is_ok());
    CHECK(swing_shape(t, 16).dims == std::vector<int>{4, 2, 2});
    CHECK(swing_shape(t, 16).rank_at.size() == 16);
    // The grid on the smallest one (16 ranks take 4x as long).
    REQUIRE(load_topology("torus:2x2x2", 8, &t).is_ok());
    CHECK(swing_shape(t, 8).dims == std::vector<int>{2, 2, 2});
    for (const char *name : {"swing", "swing_latency", "swing_binomial"}) {
        const AlgorithmInfo *a = find_algorithm(name);
        REQUIRE(a != nullptr);
        for (Collective c : a->serves)
            check_grid(
                name, [a, &t](const CollectiveArgs &args) { return a->build(args, t); }, {c}, {8}, root_inside);
    }
}

TEST_CASE("swing binomial trees are bit-exact and deadlock-free from every root, on a ring or a torus",
          "[schedules][library]") {
    const std::vector<int> ranks(std::begin(kRankCounts), std::end(kRankCounts));
    auto ring_tree = [](int channels) {
        return [channels](const CollectiveArgs &args) {
            SwingShape shape;
            shape.channels = channels;
            return build_swing_binomial(args, shape);
        };
    };
    for (auto root_for : {root_zero, root_inside, root_last}) {
        check_grid("swing_binomial", ring_tree(2), {Collective::Broadcast, Collective::Reduce}, ranks, root_for);
        for (const auto &dims : std::vector<std::vector<int>>{{4, 2}, {2, 2, 2}}) {
            SwingShape shape;
            shape.dims = dims;
            shape.channels = 2 * static_cast<int>(dims.size());
            for (int i = 0; i < 8; ++i) shape.rank_at.push_back((i * 5 + 3) % 8);
            check_grid(
                "swing_binomial torus",
                [shape](const CollectiveArgs &args) { return build_swing_binomial(args, shape); },
                {Collective::Broadcast, Collective::Reduce}, {8}, root_for);
        }
    }
    for (int p : {3, 5, 6, 7})
        for (int root = 0; root < p; ++root)
            for (Collective coll : {Collective::Broadcast, Collective::Reduce}) {
                INFO(collective_name(coll) << " p=" << p << " root=" << root);
                CHECK(simulate(make_shape(coll, p, 61, false, root, NNPCCL_FLOAT32, NNPCCL_AVG), ring_tree(1), 4) == 0);
            }
}

TEST_CASE("torus trees are bit-exact and deadlock-free from every root, on grids of one to three dimensions",
          "[schedules][library]") {
    // A grid for p ranks: 2x2x2 for 8, 2 x p/2 for other even counts, else a ring of p.
    const Builder on_grid = [](const CollectiveArgs &args) {
        const int p = args.nranks;
        TorusGrid grid;
        grid.dims = p == 8                ? std::vector<int>{2, 2, 2}
                    : p > 2 && p % 2 == 0 ? std::vector<int>{2, p / 2}
                    : p > 1               ? std::vector<int>{p}
                                          : std::vector<int>{};
        grid.wrap.assign(grid.dims.size(), true);
        for (int i = 0; i < p; ++i) grid.rank_at.push_back(p - 1 - i); // not in rank order
        return build_torus_trees(args, grid);
    };
    const std::vector<int> ranks(std::begin(kRankCounts), std::end(kRankCounts));
    check_grid("torus_trees", on_grid, {Collective::Allreduce}, ranks, root_zero);
    for (auto root_for : {root_zero, root_inside, root_last})
        check_grid("torus_trees", on_grid, {Collective::Broadcast, Collective::Reduce}, ranks, root_for);
}

TEST_CASE("direct allgather and reduce-scatter are bit-exact and deadlock-free on any rank count",
          "[schedules][library]") {
    const std::vector<int> ranks(std::begin(kRankCounts), std::end(kRankCounts));
    check_grid("direct", build_direct_allgather, {Collective::Allgather}, ranks, root_zero);
    check_grid("direct", build_direct_reduce_scatter, {Collective::ReduceScatter}, ranks, root_zero);
}

TEST_CASE("double binary tree is bit-exact and deadlock-free, rooted anywhere", "[schedules][library]") {
    const std::vector<int> ranks(std::begin(kRankCounts), std::end(kRankCounts));
    check_grid("double_binary_tree", build_double_binary_tree, {Collective::Allreduce}, ranks, root_zero);
    for (auto root_for : {root_inside, root_last})
        check_grid("double_binary_tree", build_double_binary_tree, {Collective::Broadcast, Collective::Reduce}, ranks,
                   root_for);
}

TEST_CASE("double binary tree reduce and broadcast work from every root", "[schedules][library]") {
    for (int p : {3, 5, 7, 8})
        for (int root = 0; root < p; ++root)
            for (Collective coll : {Collective::Broadcast, Collective::Reduce})
                for (bool in_place : {false, true}) {
                    CallShape c = make_shape(coll, p, 61, in_place, root, NNPCCL_FLOAT32, NNPCCL_AVG);
                    INFO(collective_name(coll) << " p=" << p << " root=" << root << " in_place=" << in_place);
                    CHECK(simulate(c, build_double_binary_tree, 4) == 0);
                }
}

TEST_CASE("2D torus allreduce is bit-exact and deadlock-free on square, flat and degenerate grids",
          "[schedules][library]") {
    const int grids[][2] = {{2, 2}, {4, 2}, {2, 4}, {3, 3}, {1, 1}, {1, 3}, {3, 1}, {5, 1}, {1, 7}};
    for (const auto &g : grids)
        check_grid("torus2d", torus(g[0], g[1]), {Collective::Allreduce}, {g[0] * g[1]}, root_zero);
}

TEST_CASE("2D torus allreduce is bit-exact with its rings one way, both ways on the columns, or both ways",
          "[schedules][library]") {
    const int grids[][2] = {{2, 2}, {4, 2}, {2, 4}, {3, 3}, {1, 3}, {3, 1}};
    for (Torus2dRings rings : {Torus2dRings::OneWay, Torus2dRings::ColumnsBothWays, Torus2dRings::BothWays})
        for (const auto &g : grids) {
            INFO("rings " << static_cast<int>(rings) << " on " << g[0] << "x" << g[1]);
            check_grid("torus2d", torus_rings(g[0], g[1], rings, false), {Collective::Allreduce}, {g[0] * g[1]},
                       root_zero);
        }
    // 7 is coprime with 4, 6, 9 and 15: (7i + 3) mod p is a permutation.
    for (Torus2dRings rings : {Torus2dRings::OneWay, Torus2dRings::ColumnsBothWays})
        for (const auto &g : {std::pair<int, int>{3, 2}, {5, 3}})
            check_grid("torus2d scrambled", torus_rings(g.first, g.second, rings, true), {Collective::Allreduce},
                       {g.first * g.second}, root_zero);
}

TEST_CASE("2D torus allreduce is bit-exact on a grid that is not in rank order", "[schedules][library]") {
    // 5 is coprime with 4, 6 and 8: (5i + 3) mod p is a permutation.
    for (const auto &g : {std::pair<int, int>{2, 2}, {3, 2}, {4, 2}})
        check_grid("torus2d scrambled", scrambled_torus(g.first, g.second), {Collective::Allreduce},
                   {g.first * g.second}, root_zero);
}

TEST_CASE("torus relay allreduce is bit-exact and deadlock-free on every grid, in rank order or not",
          "[schedules][library]") {
    const int grids[][2] = {{2, 2}, {4, 2}, {2, 4}, {3, 3}, {1, 1}, {1, 3}, {3, 1}, {5, 1}, {1, 7}};
    for (const auto &g : grids)
        for (bool scrambled : {false, true}) {
            if (scrambled && (g[0] * g[1]) % 5 == 0) continue; // (5i + 3) mod p is then no permutation
            check_grid(scrambled ? "torus_relay scrambled" : "torus_relay", relay(g[0], g[1], scrambled),
                       {Collective::Allreduce}, {g[0] * g[1]}, root_zero);
        }
}

// Transports keep at least two slots per stream (NNPCCL_SHM_SLOTS >= 2),
// which the rings need: a ring step receives and sends at once. The
// exchanges and the trees need only one.
TEST_CASE("halving-doubling, the trees and direct progress with a single slot per stream", "[schedules][library]") {
    for (int p : kRankCounts)
        for (bool in_place : {false, true}) {
            INFO("p=" << p << " in_place=" << in_place);
            for (Collective coll : {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather})
                CHECK(simulate(make_shape(coll, p, 97, in_place, 0, NNPCCL_INT32, NNPCCL_SUM), build_halving_doubling,
                               3, 1) == 0);
            // Swing sends a message ahead of each receive: two slots.
            for (Collective coll : {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather})
                CHECK(simulate(make_shape(coll, p, 97, in_place, 0, NNPCCL_INT32, NNPCCL_SUM), swing_ring(2, false), 3,
                               2) == 0);
            CHECK(simulate(make_shape(Collective::Allreduce, p, 97, in_place, 0, NNPCCL_INT32, NNPCCL_SUM),
                           swing_ring(2, true), 3, 1) == 0);
            for (Collective coll : {Collective::Broadcast, Collective::Reduce}) {
                SwingShape shape;
                shape.channels = 2;
                CHECK(simulate(
                          make_shape(coll, p, 97, in_place, root_last(p), NNPCCL_INT32, NNPCCL_SUM),
                          [shape](const CollectiveArgs &args) { return build_swing_binomial(args, shape); }, 3,
                          1) == 0);
            }
            for (Collective coll : {Collective::Allreduce, Collective::Broadcast, Collective::Reduce})
                CHECK(simulate(make_shape(coll, p, 97, in_place, root_last(p), NNPCCL_INT32, NNPCCL_SUM),
                               build_double_binary_tree, 3, 1) == 0);
            // Direct: a chunk's sends wait for the previous chunk's receives.
            CHECK(simulate(make_shape(Collective::Allgather, p, 97, in_place, 0, NNPCCL_INT32, NNPCCL_SUM),
                           build_direct_allgather, 3, 1) == 0);
            CHECK(simulate(make_shape(Collective::ReduceScatter, p, 97, in_place, 0, NNPCCL_INT32, NNPCCL_SUM),
                           build_direct_reduce_scatter, 3, 1) == 0);
        }
    // The torus is rings: two slots, the least a transport has.
    for (const auto &g : {std::pair<int, int>{2, 2}, {4, 2}, {3, 3}})
        CHECK(simulate(make_shape(Collective::Allreduce, g.first * g.second, 1000, false, 0, NNPCCL_INT32, NNPCCL_SUM),
                       torus(g.first, g.second), 5, 2) == 0);
}

TEST_CASE("the awkward floats do sum to different bits in different orders", "[schedules][library]") {
    const int p = 5;
    const size_t n = 1000;
    std::vector<std::vector<float>> inputs(p, std::vector<float>(n));
    for (int r = 0; r < p; ++r) write_awkward_floats(r, inputs[static_cast<size_t>(r)].data(), n);
    size_t differ = 0;
    for (size_t i = 0; i < n; ++i) {
        float up = 0, down = 0;
        for (int r = 0; r < p; ++r) up += inputs[static_cast<size_t>(r)][i];
        for (int r = p - 1; r >= 0; --r) down += inputs[static_cast<size_t>(r)][i];
        differ += up != down ? 1 : 0;
    }
    CHECK(differ > n / 10);
}

TEST_CASE("every rank of an allreduce gets the same bits when the order of a float sum matters",
          "[schedules][library]") {
    for (int p : {2, 3, 5, 6, 7, 8})
        for (size_t count : {size_t{1}, size_t{97}, size_t{1000}})
            for (nnpccl_redop_t op : {NNPCCL_SUM, NNPCCL_AVG})
                for (bool in_place : {false, true}) {
                    check_same_bits_everywhere("halving_doubling", build_halving_doubling, p, count, in_place, op);
                    check_same_bits_everywhere("double_binary_tree", build_double_binary_tree, p, count, in_place, op);
                    check_same_bits_everywhere("swing", swing_ring(2, false), p, count, in_place, op);
                    check_same_bits_everywhere("swing_latency", swing_ring(2, true), p, count, in_place, op);
                }
    for (bool in_place : {false, true}) {
        check_same_bits_everywhere("swing torus", swing_torus({4, 2}, true, false), 8, 1000, in_place, NNPCCL_SUM);
        check_same_bits_everywhere("swing_latency torus", swing_torus({2, 4}, true, true), 8, 1000, in_place,
                                   NNPCCL_SUM);
    }
    for (const auto &g : {std::pair<int, int>{2, 2}, {4, 2}, {3, 3}})
        for (bool in_place : {false, true}) {
            for (Torus2dRings rings : {Torus2dRings::OneWay, Torus2dRings::ColumnsBothWays, Torus2dRings::BothWays})
                check_same_bits_everywhere("torus2d", torus_rings(g.first, g.second, rings, true), g.first * g.second,
                                           1000, in_place, NNPCCL_SUM);
            check_same_bits_everywhere("torus_relay", relay(g.first, g.second, true), g.first * g.second, 1000,
                                       in_place, NNPCCL_AVG);
        }
}

// Direct reduce-scatter folds in rank order, as direct allreduce does: its
// blocks hold the bits of the allreduce of the same inputs, in place too.
TEST_CASE("direct reduce-scatter gives the bits of direct allreduce when the order of a float sum matters",
          "[schedules][library]") {
    for (int p : {2, 3, 5, 7, 8})
        for (size_t count : {size_t{1}, size_t{97}, size_t{1000}})
            for (nnpccl_redop_t op : {NNPCCL_SUM, NNPCCL_AVG})
                for (bool in_place : {false, true}) {
                    const size_t total = static_cast<size_t>(p) * count;
                    const SimResult all = run(make_shape(Collective::Allreduce, p, total, false, 0, NNPCCL_FLOAT32, op),
                                              build_direct_allreduce, 7, 2, write_awkward_floats);
                    const SimResult scattered =
                        run(make_shape(Collective::ReduceScatter, p, count, in_place, 0, NNPCCL_FLOAT32, op),
                            build_direct_reduce_scatter, 7, 2, write_awkward_floats);
                    INFO("p=" << p << " count=" << count << " in_place=" << in_place << " " << redop_name(op));
                    for (int r = 0; r < p; ++r) {
                        const auto &block = scattered.outputs[static_cast<size_t>(r)];
                        const auto first = all.outputs[0].begin() + static_cast<std::ptrdiff_t>(block.size()) * r;
                        CHECK(std::equal(block.begin(), block.end(), first));
                    }
                }
}

TEST_CASE("direct allgather and reduce-scatter send p-1 messages when a block fits in one chunk",
          "[schedules][library]") {
    CollectiveArgs args;
    args.count = 64;
    args.chunk_elems = 64;
    for (int p : {1, 2, 5, 8}) {
        args.nranks = p;
        for (int r = 0; r < p; ++r) {
            args.rank = r;
            INFO("p=" << p << " rank=" << r);
            args.collective = Collective::Allgather;
            CHECK(sends_of(build_direct_allgather(args)) == static_cast<size_t>(p - 1));
            args.collective = Collective::ReduceScatter;
            CHECK(sends_of(build_direct_reduce_scatter(args)) == static_cast<size_t>(p - 1));
        }
    }
}

TEST_CASE("halving-doubling sends log2 p messages per phase when the data fits in one chunk", "[schedules][library]") {
    CollectiveArgs args;
    args.count = 64;
    args.chunk_elems = 1 << 20;
    for (int p : {2, 4, 8, 16}) {
        args.nranks = p;
        const auto rounds = static_cast<size_t>(ceil_log2(p));
        for (int r = 0; r < p; ++r) {
            args.rank = r;
            INFO("p=" << p << " rank=" << r);
            args.collective = Collective::Allreduce;
            CHECK(sends_of(build_halving_doubling(args)) == 2 * rounds);
            args.collective = Collective::ReduceScatter;
            CHECK(sends_of(build_halving_doubling(args)) == rounds);
            args.collective = Collective::Allgather;
            CHECK(sends_of(build_halving_doubling(args)) == rounds);
        }
    }
}

TEST_CASE("halving-doubling folds the ranks beyond a power of two into their neighbours", "[schedules][library]") {
    // 6 ranks: 4 active, ranks 0 and 2 fold into 1 and 3.
    HalvingDoublingPattern extra(6, 2), active(6, 3), alone(6, 5);
    CHECK(extra.active_count() == 4);
    CHECK(extra.rounds() == 2);
    CHECK(extra.is_extra());
    CHECK(extra.fold_partner() == 3);
    CHECK_FALSE(active.is_extra());
    CHECK(active.fold_partner() == 2);
    CHECK(active.virtual_rank() == 1);
    CHECK(alone.fold_partner() == -1);
    CHECK(alone.virtual_rank() == 3);
    CHECK(alone.exchange_partner(2) == 3); // virtual 3 ^ 2 = 1, which is rank 3
    CHECK(alone.exchange_partner(1) == 4);
    CHECK(active.first_rank_of(4) == 6);
}

TEST_CASE("the two trees of a double binary tree span every rank and share no inner rank", "[schedules][library]") {
    for (int p = 1; p <= 40; ++p)
        for (int root : {-1, 0, p / 2, p - 1}) {
            INFO("p=" << p << " root=" << root);
            std::set<int> inner[2];
            for (int which = 0; which < 2; ++which) {
                int tops = 0, height = -1;
                for (int r = 0; r < p; ++r) {
                    DoubleTreePattern node(p, root, which, r);
                    if (height < 0) height = node.height();
                    CHECK(node.height() == height);
                    if (node.parent() < 0) {
                        ++tops;
                        if (root >= 0) CHECK(r == root);
                    } else {
                        DoubleTreePattern up(p, root, which, node.parent());
                        CHECK(std::count(up.children().begin(), up.children().end(), r) == 1);
                    }
                    CHECK(node.children().size() <= 2);
                    if (!node.children().empty() && r != root) inner[which].insert(r);
                }
                CHECK(tops == 1);
                CHECK(height <= ceil_log2(p) + 1);
            }
            // The root of a rooted pair is inner in both by design; no other rank is.
            size_t shared = 0;
            for (int r : inner[0]) shared += inner[1].count(r);
            CHECK(shared == 0);
        }
}

TEST_CASE("the library's builders give no schedule for what they do not serve", "[schedules][library]") {
    CollectiveArgs args;
    args.nranks = 4;
    args.count = 8;
    args.collective = Collective::Broadcast;
    CHECK(build_halving_doubling(args).channels.empty());
    CHECK(build_torus2d(args, 2, 2).channels.empty());
    args.collective = Collective::Allgather;
    CHECK(build_double_binary_tree(args).channels.empty());
    args.collective = Collective::Allreduce;
    CHECK(build_torus2d(args, 3, 2).channels.empty());
    CHECK(build_torus2d(args, 2, 2, {0, 1, 2, 2}).channels.empty()); // rank 3 missing
    CHECK(build_torus2d(args, 2, 2, {0, 1, 2}).channels.empty());
    CHECK(build_torus2d(args, 2, 2).channels.size() == kTorus2dChannels);
    CHECK(build_direct_allgather(args).channels.empty());
    CHECK(build_direct_reduce_scatter(args).channels.empty());
    args.collective = Collective::ReduceScatter;
    CHECK(build_direct_allgather(args).channels.empty());
    args.collective = Collective::Allgather;
    CHECK(build_direct_reduce_scatter(args).channels.empty());
}

TEST_CASE("2D torus sends 2(x+y-2) messages per channel when a slice fits the rows", "[schedules][library]") {
    for (const auto &g : {std::pair<int, int>{2, 2}, {4, 2}, {3, 3}, {8, 4}}) {
        const int x = g.first, y = g.second;
        CollectiveArgs args;
        args.nranks = x * y;
        // Every piece of every channel non-empty: the smallest channel, an
        // X-first one on 4x2, has 1/24 of the data (torus2d_layout()).
        args.count = static_cast<size_t>(32 * x * y);
        args.chunk_elems = 1 << 20;
        for (int r = 0; r < args.nranks; ++r) {
            args.rank = r;
            INFO(x << "x" << y << " rank=" << r);
            const Schedule s = build_torus2d(args, x, y);
            REQUIRE(s.channels.size() == kTorus2dChannels);
            for (const auto &channel : s.channels) {
                size_t sends = 0;
                for (const Step &step : channel) sends += step.has(kSend) ? 1 : 0;
                CHECK(sends == static_cast<size_t>(2 * (x + y - 2)));
            }
        }
    }
}

// Channels 0-3 go X first (their first messages travel along a row), 4-7
// Y first (along a column); of each four, the first two forward and the
// last two backward: so each of a rank's four neighbours gets the first
// message of two channels.
TEST_CASE("2D torus channels start on all four ports", "[schedules][library]") {
    const int x = 4, y = 3;
    CollectiveArgs args;
    args.nranks = x * y;
    args.count = 1000;
    args.chunk_elems = 64;
    for (int r = 0; r < args.nranks; ++r) {
        args.rank = r;
        const int i = r % x, j = r / x;
        const int right = (i + 1) % x + j * x, left = (i + x - 1) % x + j * x;
        const int down = i + (j + 1) % y * x, up = i + (j + y - 1) % y * x;
        const Schedule s = build_torus2d(args, x, y);
        REQUIRE(s.channels.size() == 8);
        INFO("rank " << r);
        for (size_t copy : {0, 1}) {
            CHECK(s.channels[0 + copy].front().send_peer == right);
            CHECK(s.channels[2 + copy].front().send_peer == left);
            CHECK(s.channels[4 + copy].front().send_peer == down);
            CHECK(s.channels[6 + copy].front().send_peer == up);
        }
    }
}

// X-first channels take the share that loads X and Y ports alike, and the
// second channel of each pair starts with half a slice.
TEST_CASE("2D torus layout: balanced ports, every element once, pairs out of step", "[schedules][library]") {
    for (const auto &g : {std::pair<int, int>{8, 4}, {4, 4}, {4, 2}, {5, 1}, {1, 1}}) {
        const int x = g.first, y = g.second;
        const size_t chunk = 16, slice = chunk * static_cast<size_t>(x * y), count = 10 * slice + 3;
        const std::vector<Torus2dChannel> layout = torus2d_layout(count, x, y, chunk);
        INFO(x << "x" << y);
        REQUIRE(layout.size() == kTorus2dChannels);
        size_t next = 0, x_first = 0;
        for (size_t c = 0; c < layout.size(); ++c) {
            CHECK(layout[c].begin == next);
            next += layout[c].count;
            x_first += layout[c].x_first ? layout[c].count : 0;
            CHECK(layout[c].reversed == (c % 4 >= 2));
            CHECK(layout[c].lead == (c % 2 == 1 && layout[c].count > slice ? slice / 2 : 0));
        }
        CHECK(next == count);
        // Bytes per element on X ports and on Y ports, X-first share f:
        // f·2(x-1)/x + (1-f)·2(x-1)/(xy) against f·2(y-1)/(xy) + (1-f)·2(y-1)/y.
        const double f = static_cast<double>(x_first) / static_cast<double>(count);
        if (x > 1 && y > 1) {
            const double on_x = f * 2 * (x - 1) / x + (1 - f) * 2 * (x - 1) / (x * y);
            const double on_y = f * 2 * (y - 1) / (x * y) + (1 - f) * 2 * (y - 1) / y;
            CHECK(on_x == Approx(on_y).epsilon(0.01));
        } else {
            CHECK(f == Approx(0.5).epsilon(0.01));
        }
    }
    CHECK(torus2d_layout(42 * 4 * 32, 8, 4, 1000)[0].count == 17 * 32); // 17/42 go X first, a quarter each
}

TEST_CASE("the library's reductions are exact for every datatype and op, avg dividing once", "[schedules][library]") {
    for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d)
        for (nnpccl_redop_t op : {NNPCCL_SUM, NNPCCL_PROD, NNPCCL_MIN, NNPCCL_MAX, NNPCCL_AVG})
            for (int p : {3, 4, 6}) {
                auto dt = static_cast<nnpccl_datatype_t>(d);
                INFO(datatype_name(dt) << " " << redop_name(op) << " p=" << p);
                for (Collective coll : {Collective::Allreduce, Collective::ReduceScatter})
                    CHECK(simulate(make_shape(coll, p, 37, false, 0, dt, op), build_halving_doubling, 5) == 0);
                for (bool in_place : {false, true})
                    CHECK(simulate(make_shape(Collective::ReduceScatter, p, 37, in_place, 0, dt, op),
                                   build_direct_reduce_scatter, 5) == 0);
                if (op == NNPCCL_SUM) // allgather moves data only: one op covers it
                    for (bool in_place : {false, true})
                        CHECK(simulate(make_shape(Collective::Allgather, p, 37, in_place, 0, dt, op),
                                       build_direct_allgather, 5) == 0);
                for (Collective coll : {Collective::Allreduce, Collective::Reduce})
                    CHECK(simulate(make_shape(coll, p, 37, false, p - 1, dt, op), build_double_binary_tree, 5) == 0);
                const int x = p == 4 ? 2 : 3; // grids 3x1, 2x2, 3x2
                CHECK(simulate(make_shape(Collective::Allreduce, p, 37, false, 0, dt, op), torus(x, p / x), 5) == 0);
            }
}
