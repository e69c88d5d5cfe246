// The simulator's arithmetic on cases solvable by hand: one link, a two-hop
// route (cut-through), two flows sharing a link, a host's shared port,
// stream slots, a ring allreduce of 4 against its closed form, and the
// schedules that do not fit together; then a steady-state extrapolation
// against the exact simulation it stands for.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "builders.hpp"
#include "cost_terms.hpp"
#include "registry.hpp"
#include "run_simulation.hpp"
#include "sim_call.hpp"
#include "simulator.hpp"

using namespace nnpccl;
using namespace nnpccl::sim;

namespace {

constexpr double kBytesPerUsPerGbps = 1e3;

// A machine of `chips` chips and the given duplex links, one rank per chip.
struct Wire {
    int a, b;
    double gbps, latency_us;
};
Topology machine_of(int chips, const std::vector<Wire> &wires) {
    Machine m("test", Shape::Graph);
    for (int c = 0; c < chips; ++c) m.add_chip();
    for (const Wire &w : wires) REQUIRE(m.add_duplex_link(w.a, w.b, LinkParams{w.gbps, w.latency_us}).is_ok());
    Topology t;
    REQUIRE(Topology::create(std::move(m), {}, 0, &t).is_ok());
    return t;
}

Step send_to(int peer, size_t count) {
    Step s;
    s.flags = kSend;
    s.send_peer = peer;
    s.count = count;
    return s;
}
Step recv_from(int peer, size_t count, uint8_t more = 0) {
    Step s;
    s.flags = static_cast<uint8_t>(kRecv | more);
    s.recv_peer = peer;
    s.count = count;
    return s;
}

// Schedules of one channel each, given per rank.
ProgramSource one_channel(const std::vector<std::vector<Step>> &steps) {
    return [steps](int rank, RankProgram *out) {
        Schedule s;
        s.algorithm = "test";
        s.channels.push_back(steps[static_cast<size_t>(rank)]);
        out->push_back(s);
    };
}

SimResult run(const Topology &t, const ProgramSource &source, const SimOptions &options = {}) {
    return test::run_simulation(t, source, options);
}

// Elements of 4 bytes: 250000 make 1 MB, 100 µs at 10 GB/s.
constexpr size_t kMegabyte = 250000;

} // namespace

TEST_CASE("one message over one link: its latency plus its bytes over the bandwidth") {
    const Topology t = machine_of(2, {{0, 1, 10, 2}});
    const SimResult r = run(t, one_channel({{send_to(1, kMegabyte)}, {recv_from(0, kMegabyte)}}));
    CHECK(r.time_us == Approx(2 + 1e6 / (10 * kBytesPerUsPerGbps)));
    CHECK(r.messages == 1);
    CHECK(r.hops == 1);
    const int link = t.machine().link_index(0, 1);
    CHECK(r.busy_us[static_cast<size_t>(link)] == Approx(100));
    CHECK(r.busy_us[static_cast<size_t>(t.machine().link_index(1, 0))] == 0);
}

TEST_CASE("a two-hop route is cut-through: both latencies plus the bytes over the slower link") {
    // 0 - 1 - 2 with no cable 0 - 2: rank 0's message to rank 2 crosses 1.
    for (const auto &[first, second] : {std::pair{10.0, 5.0}, std::pair{5.0, 10.0}}) {
        const Topology t = machine_of(3, {{0, 1, first, 2}, {1, 2, second, 3}});
        const SimResult r = run(t, one_channel({{send_to(2, kMegabyte)}, {}, {recv_from(0, kMegabyte)}}));
        INFO("links at " << first << " then " << second << " GB/s");
        CHECK(r.hops == 2);
        // Store-and-forward would take 2 + 3 + 1e6/10e3 + 1e6/5e3 = 305 µs.
        CHECK(r.time_us == Approx(2 + 3 + 1e6 / (5 * kBytesPerUsPerGbps)));
    }
}

TEST_CASE("two flows sharing a link take twice as long on it") {
    // Chips 0 and 1 both reach chip 3 through chip 2: the link 2 -> 3 is shared.
    const Topology t = machine_of(4, {{0, 2, 10, 1}, {1, 2, 10, 1}, {2, 3, 10, 1}});
    const double alpha = 2, n_over_b = 1e6 / (10 * kBytesPerUsPerGbps);
    const SimResult one = run(t, one_channel({{send_to(3, kMegabyte)}, {}, {}, {recv_from(0, kMegabyte)}}));
    CHECK(one.time_us == Approx(alpha + n_over_b));
    // Rank 3 takes rank 0's message on channel 0 and rank 1's on channel 1.
    const ProgramSource two = [](int rank, RankProgram *out) {
        Schedule s;
        s.algorithm = "test";
        s.channels.resize(2);
        if (rank == 0) s.channels[0] = {send_to(3, kMegabyte)};
        if (rank == 1) s.channels[1] = {send_to(3, kMegabyte)};
        if (rank == 3) s.channels = {{recv_from(0, kMegabyte)}, {recv_from(1, kMegabyte)}};
        out->push_back(s);
    };
    const SimResult both = run(t, two);
    CHECK(both.time_us == Approx(alpha + 2 * n_over_b));
    CHECK(both.time_us - alpha == Approx(2 * (one.time_us - alpha)));
    CHECK(both.busy_us[static_cast<size_t>(t.machine().link_index(2, 3))] == Approx(2 * n_over_b));
}

TEST_CASE("on flat, a rank's messages to different peers share its port") {
    Topology t;
    REQUIRE(load_topology("flat", 3, &t).is_ok());
    const double alpha = 1.5, n_over_b = 1e6 / (10 * kBytesPerUsPerGbps); // the host's figures
    const SimResult r = run(
        t, one_channel(
               {{send_to(1, kMegabyte), send_to(2, kMegabyte)}, {recv_from(0, kMegabyte)}, {recv_from(0, kMegabyte)}}));
    CHECK(r.time_us == Approx(alpha + 2 * n_over_b));
}

TEST_CASE("a send waits for a free slot: one slot serialises a stream, eight pipeline it") {
    const Topology t = machine_of(2, {{0, 1, 10, 5}});
    const size_t chunk = kMegabyte / 4; // 25 µs each
    std::vector<Step> sends, recvs;
    for (int i = 0; i < 4; ++i) {
        sends.push_back(send_to(1, chunk));
        recvs.push_back(recv_from(0, chunk));
    }
    SimOptions one_slot;
    one_slot.slots = 1;
    CHECK(run(t, one_channel({sends, recvs}), one_slot).time_us == Approx(4 * (5 + 25)));
    CHECK(run(t, one_channel({sends, recvs})).time_us == Approx(5 + 4 * 25));
}

TEST_CASE("ring allreduce of 4 matches 2(p-1)/p n/B + 2(p-1) alpha plus the reductions") {
    Topology t;
    REQUIRE(load_topology("ring:4", 0, &t).is_ok());
    const int p = 4;
    CollectiveArgs args;
    args.collective = Collective::Allreduce;
    args.nranks = p;
    args.chunk_elems = 65536;
    args.count = static_cast<size_t>(p) * args.chunk_elems; // one slice: p pieces of a chunk
    const std::vector<int> ring = t.rings().front();
    const ProgramSource source = [&](int rank, RankProgram *out) {
        CollectiveArgs a = args;
        a.rank = rank;
        out->push_back(build_ring(a, {ring}));
    };
    SimOptions options;
    options.reduce_us_per_byte = with_reduction(t, CostInputs{}, 4, 0.0, 1.0); // NNP-T's γ
    REQUIRE(options.reduce_us_per_byte > 0);
    const double n = static_cast<double>(args.count * 4), alpha = 1, b = 56 * kBytesPerUsPerGbps;
    const double closed =
        2.0 * (p - 1) / p * n / b + 2 * (p - 1) * alpha + (p - 1.0) / p * n * options.reduce_us_per_byte;
    const SimResult r = run(t, source, options);
    CHECK(r.time_us == Approx(closed).epsilon(1e-12));
    CHECK(r.messages == static_cast<uint64_t>(p * 2 * (p - 1)));
}

TEST_CASE("schedules that do not fit together are reported, not run") {
    const Topology t = machine_of(2, {{0, 1, 10, 1}});
    Network network(t);
    SimResult r;
    // Each waits for the other's message before sending its own.
    Status s =
        simulate(network, one_channel({{recv_from(1, 1), send_to(1, 1)}, {recv_from(0, 1), send_to(0, 1)}}), {}, &r);
    CHECK(s.code() == NNPCCL_ERR_INTERNAL);
    CHECK_THAT(s.message(), Catch::Contains("deadlocks") && Catch::Contains("a message from rank"));
    s = simulate(network, one_channel({{send_to(1, 1), send_to(1, 1)}, {recv_from(0, 1)}}), {}, &r);
    CHECK_THAT(s.message(), Catch::Contains("sends 2 messages to rank 1") && Catch::Contains("receives 1"));
}

TEST_CASE("a steady-state extrapolation stays close to the exact simulation") {
    Topology t;
    REQUIRE(load_topology("nnpt-hcm8", 0, &t).is_ok());
    Network network(t);
    const AlgorithmInfo *direct = find_algorithm("direct");
    REQUIRE(direct != nullptr);
    SimCall call;
    call.chunk_bytes = 64 * 1024;
    call.count = 64 * call.chunk_bytes / 4; // 64 chunk rounds
    SimOptions options;
    options.reduce_us_per_byte = with_reduction(t, CostInputs{}, 4, 0.0, 1.0);
    Outcome exact, guessed;
    REQUIRE(simulate_call(network, *direct, call, options, Budget{}, &exact).is_ok());
    CHECK_FALSE(exact.extrapolated);
    Budget small;
    // Direct's rounds on hcm8 differ a little, in a cycle of four: a quarter
    // of the call's crossings leaves a few rounds to take the pace from.
    small.max_hops = exact.estimated_hops / 4;
    REQUIRE(simulate_call(network, *direct, call, options, small, &guessed).is_ok());
    REQUIRE(guessed.extrapolated);
    CHECK(guessed.counts[1] == guessed.counts[0] * 2);
    CHECK(guessed.counts[1] < call.count);
    CHECK(guessed.result.time_us == Approx(exact.result.time_us).epsilon(0.02));
    CHECK(guessed.result.messages == exact.result.messages);
}

TEST_CASE("a torus's routes are found per stream, not for every pair") {
    Topology t;
    REQUIRE(load_topology("torus:128x128", 0, &t).is_ok());
    const Network network(t);
    CHECK(network.routes_found() == 0);
    const std::vector<uint32_t> *far = network.path(0, 64 + 64 * 128);
    REQUIRE(far != nullptr);
    const Route route = t.machine().route(0, 64 + 64 * 128);
    CHECK(far->size() == 128);
    CHECK(std::equal(far->begin(), far->end(), route.links.begin()));
    CHECK(network.path(5, 6)->size() == 1);
    CHECK(network.path(0, 64 + 64 * 128) == far);
    CHECK(network.routes_found() == 2);
}
