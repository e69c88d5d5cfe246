// Runs every rank's schedule of a collective together in one thread over the
// in-process loop transport, with tiny chunks and two slots per stream, and
// checks: every rank finishes (a stuck pass is a deadlock), no message is
// left over, and every output is bit-exact.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "builders.hpp"
#include "check_data.hpp"
#include "dtype.hpp"
#include "executor.hpp"
#include "loop/loop_transport.hpp"

using namespace nnpccl;

namespace {

using nnpccl_check::CallShape;

using Builder = std::function<Schedule(const CollectiveArgs &)>;

// Returns the number of wrong elements over all ranks; fails the test on a deadlock.
size_t simulate(CallShape shape, const Builder &build, size_t chunk_elems) {
    const size_t es = datatype_size(shape.dt);
    const int p = shape.nranks;
    LoopFabric fabric(p, chunk_elems * es + kDescriptorBytes, 2);
    std::vector<std::vector<unsigned char>> send(static_cast<size_t>(p)), recv(static_cast<size_t>(p));
    std::vector<std::vector<Transport *>> routes(static_cast<size_t>(p));
    std::vector<std::vector<unsigned char>> scratches(static_cast<size_t>(p));
    std::vector<std::unique_ptr<ScheduleRun>> runs;
    std::vector<unsigned char> scratch(chunk_elems * es);
    std::vector<CallShape> shapes;
    std::vector<const void *> outputs;
    for (int r = 0; r < p; ++r) {
        auto ur = static_cast<size_t>(r);
        shape.rank = r;
        shapes.push_back(shape);
        send[ur].assign(shape.send_elems() * es + 1, 0);
        recv[ur].assign(shape.total() * es + 1, 0);
        const void *sp = nullptr;
        void *rp = nullptr;
        nnpccl_check::lay_out(shape, send[ur].data(), recv[ur].data(), &sp, &rp);
        outputs.push_back(rp);
        CollectiveArgs args;
        args.collective = shape.collective;
        args.count = shape.count;
        args.root = shape.root;
        args.in_place = shape.in_place;
        args.rank = r;
        args.nranks = p;
        args.chunk_elems = chunk_elems;
        args.elem_size = es;
        auto schedule = std::make_shared<const Schedule>(build(args));
        scratches[ur].resize(schedule->scratch_elems * es);
        OperationBuffers bufs;
        bufs.scratch = scratches[ur].data();
        bufs.send = sp;
        bufs.recv = rp;
        bufs.datatype = shape.dt;
        bufs.op = shape.op;
        bufs.nranks = static_cast<uint32_t>(p);
        routes[ur].assign(static_cast<size_t>(p), fabric.endpoint(r));
        runs.push_back(std::make_unique<ScheduleRun>(schedule, bufs, routes[ur], scratch.data()));
    }
    bool all_done = false;
    while (!all_done) {
        size_t moved = 0;
        all_done = true;
        for (auto &run : runs) {
            size_t n = 0;
            Status st = run->advance(&n);
            REQUIRE(st.is_ok());
            moved += n;
            all_done = all_done && run->finished();
        }
        if (!all_done && moved == 0) {
            for (size_t r = 0; r < runs.size(); ++r)
                if (!runs[r]->finished()) UNSCOPED_INFO("rank " << r << " waits for " << runs[r]->blocked_on());
            FAIL("deadlock: no rank can make progress");
        }
    }
    REQUIRE(fabric.in_flight() == 0);
    size_t wrong = 0;
    for (int r = 0; r < p; ++r) wrong += nnpccl_check::count_wrong(shapes[static_cast<size_t>(r)], outputs[static_cast<size_t>(r)]);
    return wrong;
}

CallShape make_shape(Collective coll, int p, size_t count, bool in_place, int root, nnpccl_datatype_t dt,
                     nnpccl_redop_t op) {
    CallShape s;
    s.collective = coll;
    s.nranks = p;
    s.count = count;
    s.in_place = in_place;
    s.root = root;
    s.dt = dt;
    s.op = op;
    return s;
}

} // namespace

Builder ring_on(const Topology &topology) {
    return [rings = topology.rings()](const CollectiveArgs &args) { return build_ring(args, rings); };
}

TEST_CASE("ring schedules are correct and deadlock-free for 1 to 8 ranks", "[schedules]") {
    const Collective collectives[] = {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather,
                                      Collective::Broadcast, Collective::Reduce};
    const size_t counts[] = {0, 1, 2, 3, 7, 13, 61, 100, 1009};
    for (int p = 1; p <= 8; ++p) {
        Topology topo = Topology::flat(p);
        for (Collective coll : collectives)
            for (size_t count : counts)
                for (bool in_place : {false, true})
                    for (size_t chunk : {size_t{4}, size_t{1000}}) {
                        int root = p > 1 ? (p * 7 + 3) % p : 0; // a root other than 0 where there is one
                        CallShape c = make_shape(coll, p, count, in_place, root, NNPCCL_FLOAT32, NNPCCL_SUM);
                        INFO(collective_name(coll) << " p=" << p << " count=" << count << " in_place=" << in_place
                                                   << " chunk=" << chunk);
                        CHECK(simulate(c, ring_on(topo), chunk) == 0);
                    }
    }
}

TEST_CASE("avg divides once on the last hop, for every datatype", "[schedules]") {
    for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d)
        for (int p : {1, 3, 4}) {
            auto dt = static_cast<nnpccl_datatype_t>(d);
            for (Collective coll : {Collective::Allreduce, Collective::ReduceScatter, Collective::Reduce}) {
                CallShape c = make_shape(coll, p, 37, false, 0, dt, NNPCCL_AVG);
                INFO(collective_name(coll) << " " << datatype_name(dt) << " p=" << p);
                CHECK(simulate(c, ring_on(Topology::flat(p)), 5) == 0);
                if (coll == Collective::Allreduce) CHECK(simulate(c, build_direct_allreduce, 5) == 0);
            }
        }
}

TEST_CASE("direct allreduce is correct, in place too, for 1 to 8 ranks", "[schedules]") {
    for (int p = 1; p <= 8; ++p)
        for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{64}, size_t{1009}})
            for (bool in_place : {false, true})
                for (nnpccl_redop_t op : {NNPCCL_SUM, NNPCCL_PROD, NNPCCL_MIN, NNPCCL_AVG}) {
                    CallShape c = make_shape(Collective::Allreduce, p, count, in_place, 0, NNPCCL_BFLOAT16, op);
                    INFO("p=" << p << " count=" << count << " in_place=" << in_place << " " << redop_name(op));
                    CHECK(simulate(c, build_direct_allreduce, 16) == 0);
                }
}

TEST_CASE("the planner takes direct for tiny allreduces and the ring for large ones", "[schedules]") {
    CollectiveArgs args;
    args.nranks = 4;
    args.elem_size = 4;
    args.chunk_elems = 1 << 17;
    args.count = 16;
    CHECK(plan_schedule(args, Topology::flat(4))->algorithm == "direct");
    args.count = 1 << 20;
    CHECK(plan_schedule(args, Topology::flat(4))->algorithm == "ring");
    args.collective = Collective::Broadcast;
    args.count = 16;
    CHECK(plan_schedule(args, Topology::flat(4))->algorithm == "ring");
}

TEST_CASE("barrier schedule exchanges zero-byte messages only", "[schedules]") {
    for (int p = 1; p <= 9; ++p) {
        CollectiveArgs args;
        args.collective = Collective::Barrier;
        args.nranks = p;
        args.rank = p - 1;
        auto sched = plan_schedule(args, Topology::flat(p));
        int rounds = 0;
        while ((1 << rounds) < p) ++rounds;
        REQUIRE(sched->channels.size() == 1);
        CHECK(sched->channels[0].size() == static_cast<size_t>(2 * rounds));
        for (const Step &s : sched->channels[0]) CHECK(s.count == 0);
    }
}

TEST_CASE("a wrong-size message is reported as a mismatch, not used", "[schedules]") {
    LoopFabric fabric(2, 64 + kDescriptorBytes, 2);
    std::vector<Transport *> route0(2, fabric.endpoint(0));
    // Rank 1 sends 3 floats where rank 0's allreduce of 2 expects 1 per piece.
    void *slot = fabric.endpoint(1)->try_acquire_send(0, 0);
    std::memset(slot, 0, 12);
    fabric.endpoint(1)->commit_send(0, 0, 12);
    CollectiveArgs args;
    args.count = 2;
    args.nranks = 2;
    args.rank = 0;
    args.chunk_elems = 16;
    float in[2] = {1, 2}, out[2] = {0, 0};
    OperationBuffers bufs;
    bufs.send = in;
    bufs.recv = out;
    bufs.nranks = 2;
    std::vector<unsigned char> scratch(64);
    auto ring = std::make_shared<const Schedule>(build_ring(args, Topology::flat(2).rings()));
    ScheduleRun run(ring, bufs, route0, scratch.data());
    size_t n = 0;
    Status st = run.advance(&n);
    CHECK(st.code() == NNPCCL_ERR_INVALID_USAGE);
    CHECK_THAT(st.message(), Catch::Contains("rank 1"));
}
