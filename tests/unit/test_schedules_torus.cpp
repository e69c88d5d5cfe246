// The 2D torus reduce-scatter and allgather, run by the simulation harness
// in schedule_sim.hpp on grids square (2x2, 3x3, 4x4), flat (4x2, 8x4),
// degenerate (1x1, 5x1, 1x3) and not in rank order: counts from empty to
// blocks of many chunks, not multiples of anything, in and out of place,
// float32 sum and avg and int32 prod, two slots per stream: no deadlock, no
// message left over, every output bit-exact (each rank's block of the
// reduction, or every rank's block), nothing written where the call may
// not write. Chunks of 3 to 64 elements so both the packed (small slices)
// and the unpacked (slices of a chunk) paths run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "patterns.hpp"
#include "schedule_sim.hpp"

using namespace nnpccl;
using namespace schedule_sim;

namespace {

struct Grid {
    int x, y;
};
const Grid kGrids[] = {{2, 2}, {4, 2}, {3, 3}, {8, 4}, {4, 4}, {1, 1}, {5, 1}, {1, 3}, {2, 3}};

struct TypedOp {
    nnpccl_datatype_t dt;
    nnpccl_redop_t op;
};
const TypedOp kTypedOps[] = {{NNPCCL_FLOAT32, NNPCCL_SUM}, {NNPCCL_FLOAT32, NNPCCL_AVG}, {NNPCCL_INT32, NNPCCL_PROD}};

Builder torus(int x, int y) {
    return [x, y](const CollectiveArgs &args) { return build_torus2d(args, x, y); };
}

// A placement on part of a torus: ranks in no particular order on the grid.
std::vector<int> scrambled(int p) {
    std::vector<int> grid(static_cast<size_t>(p));
    for (size_t i = 0; i < grid.size(); ++i) grid[i] = static_cast<int>((i * 5 + 3) % grid.size());
    return grid;
}

Builder scrambled_torus(int x, int y) {
    const std::vector<int> grid = scrambled(x * y);
    return [x, y, grid](const CollectiveArgs &args) { return build_torus2d(args, x, y, grid); };
}

// Per block: empty, one element, fewer than the ranks, a few chunks, not a
// multiple of the ranks, the chunk or 8 channels, and many chunks.
const size_t kCounts[] = {0, 1, 3, 17, 97, 1000};

void check(const char *name, const Builder &build, int p, Collective coll, size_t chunk) {
    for (size_t count : kCounts)
        for (bool in_place : {false, true})
            for (const TypedOp &t : kTypedOps) {
                // Allgather moves data: one type covers it.
                if (coll == Collective::Allgather && t.dt != NNPCCL_FLOAT32) continue;
                CallShape c = make_shape(coll, p, count, in_place, 0, t.dt, t.op);
                INFO(name << " " << collective_name(coll) << " p=" << p << " count=" << count
                          << " in_place=" << in_place << " " << datatype_name(t.dt) << " " << redop_name(t.op)
                          << " chunk=" << chunk);
                CHECK(simulate(c, build, chunk) == 0);
            }
}

} // namespace

TEST_CASE("2D torus reduce-scatter and allgather are bit-exact and deadlock-free on every grid",
          "[schedules][torus]") {
    for (const Grid &g : kGrids)
        for (Collective coll : {Collective::ReduceScatter, Collective::Allgather})
            for (size_t chunk : {3, 64}) {
                INFO(g.x << "x" << g.y);
                check("torus2d", torus(g.x, g.y), g.x * g.y, coll, chunk);
            }
}

TEST_CASE("2D torus reduce-scatter and allgather are bit-exact on a grid not in rank order", "[schedules][torus]") {
    for (const Grid &g : {Grid{2, 2}, Grid{4, 2}, Grid{3, 3}, Grid{2, 3}})
        for (Collective coll : {Collective::ReduceScatter, Collective::Allgather}) {
            INFO(g.x << "x" << g.y << " scrambled");
            check("torus2d scrambled", scrambled_torus(g.x, g.y), g.x * g.y, coll, 5);
        }
}

// Every datatype and op the library has, on a grid where both dimensions
// ring (3x2), packed and not.
TEST_CASE("2D torus reduce-scatter is exact for every datatype and op, avg dividing once", "[schedules][torus]") {
    for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d)
        for (nnpccl_redop_t op : {NNPCCL_SUM, NNPCCL_PROD, NNPCCL_MIN, NNPCCL_MAX, NNPCCL_AVG})
            for (size_t chunk : {4, 64}) {
                auto dt = static_cast<nnpccl_datatype_t>(d);
                INFO(datatype_name(dt) << " " << redop_name(op) << " chunk=" << chunk);
                for (bool in_place : {false, true})
                    CHECK(simulate(make_shape(Collective::ReduceScatter, 6, 37, in_place, 0, dt, op), torus(3, 2),
                                   chunk) == 0);
            }
    for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d) {
        auto dt = static_cast<nnpccl_datatype_t>(d);
        INFO(datatype_name(dt));
        CHECK(simulate(make_shape(Collective::Allgather, 6, 37, false, 0, dt, NNPCCL_SUM), torus(3, 2), 4) == 0);
    }
}

// The point of the torus: a call whose slices fit a message crosses
// x-1 + y-1 hops per channel, where the ring crosses p-1. Counting the
// sends of a rank's channels: (x-1) + (y-1) in each, on every rank.
TEST_CASE("2D torus reduce-scatter and allgather send x+y-2 messages per channel when small",
          "[schedules][torus]") {
    for (const Grid &g : {Grid{2, 2}, Grid{4, 2}, Grid{3, 3}, Grid{8, 4}, Grid{4, 4}})
        for (Collective coll : {Collective::ReduceScatter, Collective::Allgather}) {
            CollectiveArgs args;
            args.collective = coll;
            args.nranks = g.x * g.y;
            // Every channel has at least one element of each block: 8 channels,
            // the smallest share (X first on 4x2) 1/24 of the block.
            args.count = 48;
            args.chunk_elems = 1 << 20;
            for (int r = 0; r < args.nranks; ++r) {
                args.rank = r;
                INFO(collective_name(coll) << " " << g.x << "x" << g.y << " rank=" << r);
                const Schedule s = build_torus2d(args, g.x, g.y);
                REQUIRE(s.channels.size() == kTorus2dChannels);
                for (const auto &channel : s.channels) {
                    size_t sends = 0;
                    for (const Step &step : channel) sends += step.has(kSend) ? 1 : 0;
                    CHECK(sends == static_cast<size_t>(g.x + g.y - 2));
                }
            }
        }
}

// Slices of a chunk are not packed: no copy of the send buffer, each
// block's chunks its own messages. The lead slice of half a chunk (the
// second channel of each pair) is: its p blocks' parts go in b messages
// of a chunk instead of 2b of half one.
TEST_CASE("2D torus reduce-scatter packs only slices smaller than a chunk", "[schedules][torus]") {
    CollectiveArgs args;
    args.collective = Collective::ReduceScatter;
    args.nranks = 8;
    args.chunk_elems = 16;
    auto local_copies = [&](size_t count) {
        args.count = count;
        size_t copies = 0;
        for (const auto &channel : build_torus2d(args, 4, 2).channels)
            for (const Step &step : channel) copies += step.flags == kStore ? 1 : 0;
        return copies;
    };
    CHECK(local_copies(8) > 0);            // one element per block and channel: packed
    // Four channels have a lead slice, each copying its part of the 8 blocks.
    CHECK(local_copies(8 * 16 * 10) == 4 * 8);
}

// The share of X-first channels balances the ports for reduce-scatter
// too: each channel's bytes on X and Y ports, summed, are the same on
// both within rounding.
TEST_CASE("2D torus block layout covers every element once with balanced ports", "[schedules][torus]") {
    for (const Grid &g : {Grid{8, 4}, Grid{4, 4}, Grid{4, 2}, Grid{32, 32}}) {
        const int x = g.x, y = g.y;
        const size_t chunk = 16, count = 100 * chunk + 5;
        const std::vector<Torus2dChannel> layout = torus2d_block_layout(count, x, y, chunk);
        INFO(x << "x" << y);
        REQUIRE(layout.size() == kTorus2dChannels);
        size_t next = 0;
        double on_x = 0, on_y = 0;
        for (size_t c = 0; c < layout.size(); ++c) {
            CHECK(layout[c].begin == next);
            next += layout[c].count;
            CHECK(layout[c].lead == (c % 2 == 1 && layout[c].count > chunk ? chunk / 2 : 0));
            // Reduce-scatter along a then b: (a-1)·b blocks' parts on the first ports, (b-1) on the second.
            const double m = static_cast<double>(layout[c].count);
            const double first = (layout[c].x_first ? x - 1.0 : y - 1.0) * (layout[c].x_first ? y : x) * m;
            const double second = (layout[c].x_first ? y - 1.0 : x - 1.0) * m;
            (layout[c].x_first ? on_x : on_y) += first;
            (layout[c].x_first ? on_y : on_x) += second;
        }
        CHECK(next == count);
        CHECK(on_x == Approx(on_y).epsilon(0.01));
        // Together, every rank sends p-1 blocks' worth.
        CHECK(on_x + on_y == Approx((x * y - 1.0) * static_cast<double>(count)).epsilon(1e-9));
    }
}
