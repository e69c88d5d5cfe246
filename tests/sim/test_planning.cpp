// The simulator's planning figures on cases solvable by hand: bytes and
// queues per link, the critical path's parts, the credits fidelity mode's
// held link and per-message overhead; then ccl-sim's what-if rebuild of a
// machine (failed cables and chips, changed link figures).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "run_simulation.hpp"
#include "simulator.hpp"
#include "what_if.hpp"

using namespace nnpccl;
using namespace nnpccl::sim;

namespace {

constexpr size_t kMegabyte = 250000; // elements of 4 B: 100 µs at 10 GB/s

Step step(uint8_t flags, int recv_peer, int send_peer, size_t count) {
    Step s;
    s.flags = flags;
    s.recv_peer = recv_peer;
    s.send_peer = send_peer;
    s.count = count;
    return s;
}

// Chips 0 - 1 - 2 and 3 - 1, 10 GB/s; the cable 3 - 1 has half the latency,
// so that rank 3's message X (to rank 2) takes the link 1 -> 2 before rank
// 0's message Y does. Rank 0 then sends Z to rank 1 once rank 1's tiny
// message came back, after Y found 1 -> 2 busy.
Topology four_chips() {
    Machine m("test", Shape::Graph);
    for (int c = 0; c < 4; ++c) m.add_chip();
    REQUIRE(m.add_duplex_link(0, 1, LinkParams{10, 1}).is_ok());
    REQUIRE(m.add_duplex_link(1, 2, LinkParams{10, 1}).is_ok());
    REQUIRE(m.add_duplex_link(3, 1, LinkParams{10, 0.5}).is_ok());
    Topology t;
    REQUIRE(Topology::create(std::move(m), {}, 0, &t).is_ok());
    return t;
}

ProgramSource held_link_programs() {
    return [](int rank, RankProgram *out) {
        Schedule s;
        s.algorithm = "test";
        s.channels.resize(2);
        if (rank == 0) s.channels[0] = {step(kSend, -1, 2, kMegabyte), step(kRecv | kSend, 1, 1, kMegabyte)};
        if (rank == 1) s.channels[0] = {step(kSend, -1, 0, 1), step(kRecv, 0, -1, kMegabyte)};
        if (rank == 2) s.channels = {{step(kRecv, 0, -1, kMegabyte)}, {step(kRecv, 3, -1, kMegabyte)}};
        if (rank == 3) s.channels[1] = {step(kSend, -1, 2, kMegabyte)};
        out->push_back(s);
    };
}

SimResult run(const Topology &t, const ProgramSource &source, const SimOptions &options = {}) {
    return test::run_simulation(t, source, options);
}

size_t link(const Topology &t, int from, int to) { return static_cast<size_t>(t.machine().link_index(from, to)); }

} // namespace

TEST_CASE("per link: the bytes it carried and the most queued ahead of a message") {
    const Topology t = four_chips();
    const SimResult r = run(t, held_link_programs(), {});
    // X and Y cross 1 -> 2; Y and Z cross 0 -> 1; the tiny one 1 -> 0.
    CHECK(r.bytes[link(t, 1, 2)] == 2e6);
    CHECK(r.bytes[link(t, 0, 1)] == 2e6);
    CHECK(r.bytes[link(t, 1, 0)] == 4);
    CHECK(r.bytes[link(t, 3, 1)] == 1e6);
    CHECK(r.bytes[link(t, 2, 1)] == 0);
    // Y reached 1 -> 2 at 1 µs, X holding it until 100.5: 99.5 µs of X ahead.
    CHECK(r.peak_queue_bytes[link(t, 1, 2)] == Approx(99.5 * 1e4));
    // Z found 0 -> 1 busy with Y until 100 µs.
    CHECK(r.peak_queue_bytes[link(t, 0, 1)] == Approx((100 - 1.0004) * 1e4));
}

TEST_CASE("the critical path: the chain that ends last, its parts adding up to the call's time") {
    const Topology t = four_chips();
    SimOptions options;
    options.critical_path = true;
    const SimResult r = run(t, held_link_programs(), options);
    // Y ends last: sent at 0, 2 µs of latency, 100 of data, 99.5 behind X.
    CHECK(r.time_us == Approx(201.5));
    const CriticalPath &p = r.critical_path;
    REQUIRE(p.recorded);
    REQUIRE(p.messages.size() == 1);
    CHECK(p.messages[0].from_rank == 0);
    CHECK(p.messages[0].to_rank == 2);
    CHECK(p.messages[0].servers.size() == 2);
    CHECK(p.latency_us == Approx(2));
    CHECK(p.data_us == Approx(100));
    CHECK(p.link_wait_us == Approx(99.5));
    CHECK(p.steps == 2);
    CHECK(p.latency_us + p.data_us + p.link_wait_us + p.reduce_us + p.reducer_wait_us + p.overhead_us ==
          Approx(r.time_us));
}

TEST_CASE("credits: a message waiting at a busy link holds the link it came over") {
    const Topology t = four_chips();
    const SimResult free_flow = run(t, held_link_programs(), {});
    // Without buffers' limits Z follows Y on 0 -> 1 at 100 µs: there at 201.
    CHECK(free_flow.time_us == Approx(201.5));
    SimOptions options;
    options.fidelity.credit_bytes = 1e5;
    const SimResult held = run(t, held_link_programs(), options);
    // Y waits at 1 -> 2 from 1 to 100.5 µs, and 0 -> 1 cannot pass it all
    // on until 1 -> 2 took all but 100 kB: 100.5 + 90 µs. Z then: 100 µs
    // of data and 1 of latency.
    CHECK(held.time_us == Approx(100.5 + 90 + 100 + 1));
    // Held is not busy: the link moved the same bytes in the same time.
    CHECK(held.busy_us[link(t, 0, 1)] == Approx(free_flow.busy_us[link(t, 0, 1)]));
    // A buffer as large as the message: nothing is held.
    options.fidelity.credit_bytes = 1e6;
    CHECK(run(t, held_link_programs(), options).time_us == Approx(201.5));
}

TEST_CASE("a per-message overhead: a chip starts its messages one at a time") {
    Machine m("test", Shape::Graph);
    for (int c = 0; c < 2; ++c) m.add_chip();
    REQUIRE(m.add_duplex_link(0, 1, LinkParams{10, 2}).is_ok());
    Topology t;
    REQUIRE(Topology::create(std::move(m), {}, 0, &t).is_ok());
    const ProgramSource two = [](int rank, RankProgram *out) {
        Schedule s;
        s.algorithm = "test";
        s.channels.resize(2);
        for (int c = 0; c < 2; ++c)
            s.channels[static_cast<size_t>(c)] = {rank == 0 ? step(kSend, -1, 1, kMegabyte)
                                                            : step(kRecv, 0, -1, kMegabyte)};
        out->push_back(s);
    };
    // Without: 0-100 and 100-200 µs on the link, the second there at 202.
    CHECK(run(t, two, {}).time_us == Approx(202));
    // With 5 µs each: the first leaves at 5 (on the link to 105), the
    // second is ready at 10 and follows it: 105-205, there at 207.
    SimOptions options;
    options.fidelity.message_overhead_us = 5;
    CHECK(run(t, two, options).time_us == Approx(207));
}

TEST_CASE("what-if: a failed cable carries nothing and routes go around it") {
    Topology t;
    REQUIRE(load_topology("torus:4x4", 0, &t).is_ok());
    WhatIf w;
    w.failed_links = {{0, 1}};
    std::string summary;
    REQUIRE(apply_what_if(w, &t, &summary).is_ok());
    CHECK(summary.find("cable 0-1 down") != std::string::npos);
    CHECK(t.nranks() == 16);
    CHECK_FALSE(t.machine().has_link(0, 1));
    CHECK_FALSE(t.machine().has_link(1, 0));
    const Route r = t.machine().route(0, 1);
    REQUIRE(r.reachable);
    CHECK(r.hops == 3);
}

TEST_CASE("what-if: a failed chip's rank goes, the rest run; what cannot run says why") {
    Topology t;
    REQUIRE(load_topology("nnpt-ring8", 0, &t).is_ok());
    WhatIf w;
    w.failed_chips = {3};
    std::string summary;
    REQUIRE(apply_what_if(w, &t, &summary).is_ok());
    CHECK(t.nranks() == 7);
    for (int r = 0; r < t.nranks(); ++r) CHECK(t.chip_of(r) != 3);
    CHECK(summary.find("7 ranks on the other chips (of 8)") != std::string::npos);
    // A second chip gone cuts the ring in two.
    w.failed_chips = {6};
    const Status cut = apply_what_if(w, &t, &summary);
    CHECK_FALSE(cut.is_ok());
    CHECK(cut.message().find("cannot run the job") != std::string::npos);
    // A cable that is not there, a chip that is not there.
    Topology ring;
    REQUIRE(load_topology("nnpt-ring8", 0, &ring).is_ok());
    WhatIf bad;
    bad.failed_links = {{0, 4}};
    CHECK(apply_what_if(bad, &ring, &summary).message().find("are not cabled") != std::string::npos);
    bad.failed_links.clear();
    bad.failed_chips = {8};
    CHECK(apply_what_if(bad, &ring, &summary).message().find("has chips 0-7") != std::string::npos);
}

TEST_CASE("what-if: every link's bandwidth and latency") {
    Topology t;
    REQUIRE(load_topology("torus:4x4", 0, &t).is_ok());
    WhatIf w;
    w.link_gbps = 28;
    w.link_latency_us = 2.5;
    std::string summary;
    REQUIRE(apply_what_if(w, &t, &summary).is_ok());
    for (const Link &l : t.machine().links()) {
        CHECK(l.gbps == 28);
        CHECK(l.latency_us == 2.5);
    }
    // Still a whole torus: routes in closed form, the torus grid kept.
    CHECK(t.machine().closed_form_routes());
    CHECK(t.torus() != nullptr);
}
