// The ring, direct and barrier schedules, run by the simulation harness in
// schedule_sim.hpp: every rank finishes, no message is left over, and every
// output is bit-exact.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <vector>

#include "planner.hpp"
#include "schedule_sim.hpp"
#include "succeeded.hpp"

using namespace nnpccl;
using namespace schedule_sim;

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

// The planner with no NNPCCL_ALGO and the default costs (test_selector.cpp
// tests the choices in depth).
std::shared_ptr<const Schedule> planned(const CollectiveArgs &args, const Topology &topology) {
    std::shared_ptr<const Schedule> schedule;
    std::string error;
    REQUIRE(succeeded(plan_schedule(args, topology, PlanOptions(), &schedule), &error));
    return schedule;
}

TEST_CASE("the planner takes direct for tiny allreduces and the ring for large ones", "[schedules]") {
    CollectiveArgs args;
    args.nranks = 4;
    args.elem_size = 4;
    args.chunk_elems = 1 << 17;
    args.count = 16;
    CHECK(planned(args, Topology::flat(4))->algorithm == "direct");
    args.count = 1 << 20;
    CHECK(planned(args, Topology::flat(4))->algorithm == "ring");
}

TEST_CASE("barrier schedule exchanges zero-byte messages only", "[schedules]") {
    for (int p = 1; p <= 9; ++p) {
        CollectiveArgs args;
        args.collective = Collective::Barrier;
        args.nranks = p;
        args.rank = p - 1;
        auto sched = planned(args, Topology::flat(p));
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
    void *slot = fabric.endpoint(1)->try_acquire_send(0, 0, 12);
    std::memset(slot, 0, 12);
    fabric.endpoint(1)->commit_send(0, 0, 12);
    CollectiveArgs args;
    args.count = 2;
    args.nranks = 2;
    args.rank = 0;
    args.chunk_elems = 16;
    float in[2] = {1, 2}, out[2] = {0, 0};
    Call call;
    static_cast<CollectiveArgs &>(call) = args;
    call.send = in;
    call.recv = out;
    std::vector<unsigned char> scratch(64);
    auto ring = std::make_shared<const Schedule>(build_ring(args, Topology::flat(2).rings()));
    ScheduleRun run(ring, call, nullptr, Announcement{}, route0, scratch.data());
    size_t n = 0;
    Status st = run.advance(&n);
    CHECK(st.code() == NNPCCL_ERR_INVALID_USAGE);
    CHECK_THAT(st.message(), Catch::Contains("rank 1"));
}

// A send in place reads the caller's buffer until the transport is done
// with it (the loop fabric reads it when the receiver takes the message):
// the operation must not finish, and so not hand the buffer back, before.
TEST_CASE("an operation with sends in place finishes only once they are done", "[schedules]") {
    LoopFabric fabric(2, 64 + kDescriptorBytes, 2, LoopFabric::Sends::InPlace);
    std::vector<Transport *> route0(2, fabric.endpoint(0));
    Schedule one_send;
    one_send.algorithm = "test";
    Step send;
    send.flags = kSend;
    send.send_peer = 1;
    send.src = BufRef{Buf::Send, 0};
    send.count = 4;
    one_send.channels.push_back({send});
    float in[4] = {1, 2, 3, 4}, out[4] = {};
    Call call;
    call.send = in;
    call.recv = out;
    call.nranks = 2;
    std::vector<unsigned char> scratch(64);
    ScheduleRun run(std::make_shared<const Schedule>(one_send), call, nullptr, Announcement{}, route0, scratch.data());
    size_t n = 0;
    REQUIRE(run.advance(&n).is_ok());
    CHECK(n == 1);
    CHECK_FALSE(run.finished()); // its one step ran, but the send still reads `in`

    size_t bytes = 0;
    const void *message = fabric.endpoint(1)->try_peek_recv(0, 0, &bytes);
    REQUIRE(message != nullptr);
    REQUIRE(bytes == kDescriptorBytes + sizeof in);
    CHECK(std::memcmp(static_cast<const char *>(message) + kDescriptorBytes, in, sizeof in) == 0);
    CHECK_FALSE(run.finished());
    fabric.endpoint(1)->release_recv(0, 0);
    CHECK(run.finished());
}
