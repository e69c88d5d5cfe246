// The selector: on the presets, tiny messages go to a latency algorithm
// and large ones to a bandwidth algorithm, the 2D torus wins on a POD,
// every rank chooses alike, NNPCCL_ALGO forces an algorithm or says why it
// cannot, and every registered schedule the selector may hand out runs
// bit-exact on the channels the transports open.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>

#include "chunk_choice.hpp"
#include "planner.hpp"
#include "presets.hpp"
#include "reduce.hpp"
#include "registry.hpp"
#include "schedule_sim.hpp"
#include "scoped_env.hpp"
#include "selector.hpp"
#include "settings.hpp"
#include "succeeded.hpp"

using namespace nnpccl;
using namespace schedule_sim;

namespace {

constexpr size_t kChunkBytes = 512 * 1024; // the default NNPCCL_CHUNK_SIZE
constexpr size_t kGiB = size_t{1} << 30;

Topology preset(const std::string &spec, int nranks) {
    Topology t;
    std::string error;
    INFO(spec << ": " << error);
    REQUIRE(succeeded(load_topology(spec, nranks, &t), &error));
    return t;
}

// A float32 call of `bytes` (ccl-bench's size) on p ranks.
CollectiveArgs call(Collective c, int p, size_t bytes, int rank = 0) {
    CollectiveArgs args;
    args.collective = c;
    args.nranks = p;
    args.rank = rank;
    args.root = 0;
    args.elem_size = 4;
    args.chunk_elems = kChunkBytes / 4;
    const bool blockwise = c == Collective::ReduceScatter || c == Collective::Allgather;
    args.count = bytes / 4 / (blockwise ? static_cast<size_t>(p) : 1);
    return args;
}

std::string chosen(const CollectiveArgs &args, const Topology &t, const PlanOptions &options = PlanOptions()) {
    const AlgorithmInfo *a = nullptr;
    const Status st = choose_algorithm(args, t, options, &a);
    INFO(st.message());
    REQUIRE(a != nullptr);
    return a->name;
}

const Prediction &prediction_of(const std::vector<Prediction> &all, const std::string &name) {
    for (const Prediction &p : all)
        if (name == p.algorithm->name) return p;
    FAIL("no prediction for " << name);
    return all.front();
}

const std::set<std::string> kLatencyAlgorithms = {"direct", "double_binary_tree", "halving_doubling", "swing_latency",
                                                  "torus_relay"};
const std::set<std::string> kBandwidthAlgorithms = {"ring", "torus2d"};

// `flat` as init plans it when the ranks of the host reach each other over
// a network transport: the host link with a TCP message's α.
Topology network_flat(int nranks) { return Topology::flat(nranks, topology_options(MachineOptions{}, true).host); }

} // namespace

TEST_CASE("tiny allreduces take a latency algorithm, large ones a bandwidth algorithm", "[selector]") {
    struct Case {
        const char *spec;
        int nranks;
    };
    for (const Case &c : {Case{"flat", 4}, Case{"nnpt-hcm8", 8}, Case{"nnpt-pod32", 32}}) {
        const Topology t = preset(c.spec, c.nranks);
        INFO(c.spec);
        for (size_t bytes : {size_t{8}, size_t{256}})
            CHECK(kLatencyAlgorithms.count(chosen(call(Collective::Allreduce, c.nranks, bytes), t)) == 1);
        for (size_t bytes : {size_t{64} << 20, kGiB})
            CHECK(kBandwidthAlgorithms.count(chosen(call(Collective::Allreduce, c.nranks, bytes), t)) == 1);
    }
}

// On a host whose ranks outnumber its cores, lockstep rounds take turns on
// each core and the ring's pipeline wins (measured on 4 ranks on 2 cores
// from 256 KiB up; see host_lockstep in cost_model.cpp); with a core per
// rank direct stays the choice for allgather, as its single round carries
// the ring's bytes.
TEST_CASE("a host with more ranks than cores prefers the ring to lockstep rounds", "[selector]") {
    const Topology flat = Topology::flat(4);
    PlanOptions crowded;
    crowded.costs.host_ranks_per_core = 2;
    for (Collective c : {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather, Collective::Broadcast,
                         Collective::Reduce}) {
        INFO(collective_name(c));
        for (size_t bytes : {size_t{256} << 10, size_t{1} << 20, size_t{64} << 20})
            CHECK(chosen(call(c, 4, bytes), flat, crowded) == "ring");
    }
    CHECK(chosen(call(Collective::Allreduce, 4, 64), flat, crowded) == "direct");
    CHECK(chosen(call(Collective::Allgather, 4, size_t{1} << 20), flat) == "direct");
    // Below that the ring's steps, every rank busy in each, take turns on
    // the cores like any lockstep round (measured at 32 KiB: direct and
    // halving-doubling 13-14 us, the ring 17), while a chain's one piece
    // moves a hop at a time and keeps the ring ahead for broadcast.
    CHECK(chosen(call(Collective::Allgather, 4, 32 << 10), flat, crowded) == "direct");
    CHECK(chosen(call(Collective::Broadcast, 4, 64), flat, crowded) == "ring");
    // The term is the host's: an NNP-T preset's chips are not crowded.
    const Topology hcm = preset("nnpt-hcm8", 8);
    PlanOptions crowded_hcm;
    crowded_hcm.costs.host_ranks_per_core = 4;
    CHECK(chosen(call(Collective::Allreduce, 8, 64), hcm, crowded_hcm) == chosen(call(Collective::Allreduce, 8, 64), hcm));
}

// Over a network transport within the host the kernel copies each message
// on both ends' cores, and the ring's pipeline no longer keeps two cores
// busy (measured over loopback TCP on 2 cores: halving-doubling 1.2-2.5x
// faster than the ring from 512 KiB at 4 ranks, 1.3-1.8x at 8;
// docs/performance.md, "The ring over TCP, when ranks share cores"). The
// host link is planned as init plans it there, with a TCP message's α.
TEST_CASE("over a network transport, a crowded host does not prefer the ring", "[selector]") {
    PlanOptions crowded_net;
    crowded_net.costs.host_ranks_per_core = 2;
    crowded_net.costs.host_over_network = true;
    const Topology net4 = network_flat(4);
    for (size_t bytes : {size_t{128} << 10, size_t{512} << 10})
        CHECK(chosen(call(Collective::Allreduce, 4, bytes), net4, crowded_net) == "halving_doubling");
    PlanOptions crowded8_net = crowded_net;
    crowded8_net.costs.host_ranks_per_core = 4;
    const Topology net8 = network_flat(8);
    CHECK(chosen(call(Collective::Allreduce, 8, size_t{2} << 20), net8, crowded8_net) == "halving_doubling");
    // With a core per rank there is no turn to wait for: the ring's
    // pipeline carries large calls, as on shared memory.
    PlanOptions roomy_net;
    roomy_net.costs.host_over_network = true;
    CHECK(chosen(call(Collective::Allreduce, 4, size_t{64} << 20), net4, roomy_net) ==
          chosen(call(Collective::Allreduce, 4, size_t{64} << 20), Topology::flat(4)));
}

// A message over TCP costs a system call on each side and a wake-up
// (kHostOverNetworkLatencyUs), where shared memory's is a flag. So fewer
// steps pay for longer: a 2-rank allreduce of 32 KiB exchanges whole
// buffers at once rather than run the ring's two steps (measured: direct
// 1.4-1.5x faster). And a rank's p - 1 messages of a direct round are
// system calls one after another: at 4 ranks an allgather of 64 KiB takes
// halving-doubling's two exchanges (1.2-1.4x faster than direct), while
// on shared memory direct's messages are posted at once and it stays.
TEST_CASE("over a network transport, a message's α is the kernel's, paid per message", "[selector]") {
    PlanOptions net;
    net.costs.host_over_network = true;
    const Topology net2 = network_flat(2);
    CHECK(chosen(call(Collective::Allreduce, 2, 32 << 10), net2, net) == "direct");
    CHECK(chosen(call(Collective::Allreduce, 2, 32 << 10), Topology::flat(2)) == "ring");
    PlanOptions crowded_net = net, crowded;
    crowded_net.costs.host_ranks_per_core = 2;
    crowded.costs.host_ranks_per_core = 2;
    const Topology net4 = network_flat(4);
    CHECK(chosen(call(Collective::Allgather, 4, 64 << 10), net4, crowded_net) == "halving_doubling");
    CHECK(chosen(call(Collective::Allgather, 4, 64 << 10), Topology::flat(4), crowded) == "direct");
    // The host link of a job on shared memory keeps its own α.
    CHECK(topology_options(MachineOptions{}, false).host.latency_us < kHostOverNetworkLatencyUs);
}

// From 16 MiB up the ring both ways, two channels on each port, keeps
// every port busy from its first step; the torus's few slices leave ports
// idle at the start and end of each channel.
TEST_CASE("the ring with two channels per port wins on nnpt-pod32 at large sizes", "[selector]") {
    const Topology pod = preset("nnpt-pod32", 32);
    for (size_t bytes : {size_t{512} << 20, kGiB, 4 * kGiB})
        CHECK(chosen(call(Collective::Allreduce, 32, bytes), pod) == "ring");
}

// The allreduce bound is 2(p-1)/p·n / 224 GB/s. The ring runs both
// directions of the two Hamiltonian rings, two channels on every port, so
// one's message crosses while the other waits out α (1 µs) and reduces
// (1.31 µs for a 512 KiB chunk at HBM speed, against its 9.36 µs at 56
// GB/s): the port is busy throughout, and what stays on the path is one
// channel's reductions, 1.31 / 9.36 / 4 of the bound's time (a channel
// carries an eighth of the data, the bound a quarter per port both
// phases). The torus too runs two channels per port, with the X-first
// share set so that X and Y ports carry the same bytes (torus2d.cpp).
TEST_CASE("the choice at 1 GiB on nnpt-pod32 comes within 10% of the allreduce bound", "[selector]") {
    const Topology pod = preset("nnpt-pod32", 32);
    const CollectiveArgs args = call(Collective::Allreduce, 32, kGiB);
    const double bound_busbw = 224.0; // GB/s: 4 ICL ports of 56 GB/s
    CHECK(lower_bound_us(args, pod) == Approx(2.0 * 31 / 32 * static_cast<double>(kGiB) / 224e3));
    const std::vector<Prediction> all = predict_all(args, pod, CostInputs());
    const Prediction &torus = prediction_of(all, "torus2d"), &ring = prediction_of(all, "ring");
    CHECK(torus.busbw_gbps >= 0.9 * bound_busbw);
    CHECK(torus.busbw_gbps <= bound_busbw);
    CHECK(ring.busbw_gbps == Approx(bound_busbw / (1 + 1.31 / 9.36 / 4)).epsilon(0.02));
    CHECK(ring.time_us < torus.time_us);
}

// Both ways round its rings: x/2 rounds along each row twice and y/2 along
// each column twice (one way, 2(x+y-2) steps).
TEST_CASE("the 2D torus pays x+y hops where the ring pays 2(p-1)", "[selector]") {
    const Topology pod = preset("nnpt-pod32", 32); // 1 µs per ICL hop
    const std::vector<Prediction> all = predict_all(call(Collective::Allreduce, 32, 8), pod, CostInputs());
    CHECK(prediction_of(all, "torus2d").time_us == Approx(8 + 4).epsilon(0.01));
    CHECK(prediction_of(all, "ring").time_us == Approx(2 * 31).epsilon(0.01));
}

TEST_CASE("every rank predicts and chooses alike", "[selector]") {
    const Topology pod = preset("nnpt-pod32", 32);
    for (Collective c : {Collective::Allreduce, Collective::Broadcast, Collective::ReduceScatter})
        for (size_t bytes : {size_t{64}, size_t{1} << 20, size_t{256} << 20}) {
            const std::vector<Prediction> first = predict_all(call(c, 32, bytes, 0), pod, CostInputs());
            for (int rank : {1, 17, 31}) {
                const std::vector<Prediction> other = predict_all(call(c, 32, bytes, rank), pod, CostInputs());
                REQUIRE(other.size() == first.size());
                for (size_t i = 0; i < first.size(); ++i) CHECK(other[i].time_us == first[i].time_us);
                CHECK(chosen(call(c, 32, bytes, rank), pod) == chosen(call(c, 32, bytes, 0), pod));
            }
        }
}

TEST_CASE("the other collectives get an algorithm that serves them", "[selector]") {
    const Topology flat = Topology::flat(4);
    CHECK(chosen(call(Collective::Barrier, 4, 0), flat) == "dissemination");
    CHECK(chosen(call(Collective::Gather, 4, 4096), flat) == "direct");
    CollectiveArgs send = call(Collective::Send, 4, 4096);
    send.root = 2;
    CHECK(chosen(send, flat) == "p2p");
    const std::string alltoall = chosen(call(Collective::Alltoall, 4, 1 << 20), flat);
    CHECK((alltoall == "pairwise" || alltoall == "direct"));
    for (Collective c : {Collective::ReduceScatter, Collective::Allgather, Collective::Broadcast, Collective::Reduce})
        CHECK(find_algorithm(chosen(call(c, 4, 1 << 20), flat))->serves_collective(c));
}

TEST_CASE("NNPCCL_ALGO forces an algorithm for its collective and sizes", "[selector][algo]") {
    const Topology pod = preset("nnpt-pod32", 32);
    PlanOptions options;
    std::string error;
    REQUIRE(succeeded(options.algo_override.parse("allreduce:halving_doubling:0-1M,ring:1M-max"), &error));
    CHECK(chosen(call(Collective::Allreduce, 32, 8), pod, options) == "halving_doubling");
    CHECK(chosen(call(Collective::Allreduce, 32, (1 << 20) - 4), pod, options) == "halving_doubling");
    CHECK(chosen(call(Collective::Allreduce, 32, 1 << 20), pod, options) == "ring");
    CHECK(chosen(call(Collective::Allreduce, 32, kGiB), pod, options) == "ring");
    CHECK(chosen(call(Collective::Broadcast, 32, kGiB), pod, options) == chosen(call(Collective::Broadcast, 32, kGiB), pod));

    // Sizes are ccl-bench's: p blocks for reduce-scatter.
    REQUIRE(succeeded(options.algo_override.parse("reduce_scatter:halving_doubling:0-64K"), &error));
    CHECK(chosen(call(Collective::ReduceScatter, 32, 32 * 1024), pod, options) == "halving_doubling");

    std::vector<Prediction> considered(1);
    const AlgorithmInfo *forced = nullptr;
    REQUIRE(succeeded(
        choose_algorithm(call(Collective::ReduceScatter, 32, 32 * 1024), pod, options, &forced, &considered), &error));
    CHECK(considered.empty()); // forced: nothing was weighed
}

TEST_CASE("a forced algorithm that does not apply is an error naming it and why", "[selector][algo]") {
    PlanOptions options;
    std::string error;
    REQUIRE(succeeded(options.algo_override.parse("allreduce:torus2d"), &error));
    std::shared_ptr<const Schedule> schedule;
    CHECK_FALSE(
        succeeded(plan_schedule(call(Collective::Allreduce, 4, 4096), Topology::flat(4), options, &schedule), &error));
    CHECK(schedule == nullptr);
    CHECK_THAT(error, Catch::Contains("NNPCCL_ALGO forces torus2d"));
    CHECK_THAT(error, Catch::Contains("does not apply"));
    CHECK_THAT(error, Catch::Contains("no torus grid"));
    // On a torus it applies.
    REQUIRE(succeeded(
        plan_schedule(call(Collective::Allreduce, 32, 4096), preset("nnpt-pod32", 32), options, &schedule), &error));
    CHECK(schedule->algorithm == "torus2d");
    CHECK(schedule->channels.size() == kTorus2dChannels);
    // The message names where the rules came from.
    REQUIRE(succeeded(options.algo_override.parse("allreduce:torus2d", "nnpccl_comm_set_algorithms"), &error));
    CHECK_FALSE(
        succeeded(plan_schedule(call(Collective::Allreduce, 4, 4096), Topology::flat(4), options, &schedule), &error));
    CHECK_THAT(error, Catch::StartsWith("nnpccl_comm_set_algorithms forces torus2d"));
}

TEST_CASE("a call of no elements is planned by the model whatever is forced", "[selector][algo]") {
    // It moves nothing, and the C API returns from most such calls without
    // planning them: a nonblocking one must not fail where a blocking one
    // succeeds.
    PlanOptions options;
    std::string error;
    REQUIRE(succeeded(options.algo_override.parse("allreduce:torus2d"), &error));
    std::shared_ptr<const Schedule> schedule;
    REQUIRE(succeeded(plan_schedule(call(Collective::Allreduce, 4, 0), Topology::flat(4), options, &schedule), &error));
    CHECK(schedule->algorithm == chosen(call(Collective::Allreduce, 4, 0), Topology::flat(4)));
}

// What init does with the settings' forced algorithms.
Status forced_by(const nnpccl_config_t *config, std::shared_ptr<const AlgoOverride> *rules) {
    Settings s;
    NNPCCL_TRY(resolve_settings(config, &s));
    return parse_forced_algorithms(s.planning, rules);
}

TEST_CASE("NNPCCL_ALGO is parsed at init: a bad token is an invalid argument naming it", "[selector][algo][config]") {
    std::shared_ptr<const AlgoOverride> rules;
    {
        ScopedEnv algo("NNPCCL_ALGO", "allreduce:ring;broadcast:torus2d");
        const Status st = forced_by(nullptr, &rules);
        CHECK(st.code() == NNPCCL_ERR_INVALID_ARGUMENT);
        CHECK_THAT(st.message(), Catch::Contains("'torus2d' at character 26 does not serve broadcast"));
    }
    {
        ScopedEnv algo("NNPCCL_ALGO", "allreduce:direct:0-8K");
        REQUIRE(forced_by(nullptr, &rules).is_ok());
        REQUIRE(rules != nullptr);
        CHECK(*rules->pick(Collective::Allreduce, 100) == "direct");
    }
    REQUIRE(forced_by(nullptr, &rules).is_ok());
    CHECK(rules == nullptr);
}

TEST_CASE("config->algorithms forces algorithms for one communicator, over NNPCCL_ALGO", "[selector][algo][config]") {
    std::shared_ptr<const AlgoOverride> rules;
    ScopedEnv algo("NNPCCL_ALGO", "allreduce:direct");
    nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
    REQUIRE(forced_by(&cfg, &rules).is_ok()); // NULL: the environment's
    REQUIRE(rules != nullptr);
    CHECK(*rules->pick(Collective::Allreduce, 100) == "direct");
    cfg.algorithms = "allreduce:ring:0-8K";
    REQUIRE(forced_by(&cfg, &rules).is_ok());
    CHECK(*rules->pick(Collective::Allreduce, 100) == "ring");
    CHECK(rules->pick(Collective::Allreduce, 8192) == nullptr);
    cfg.algorithms = ""; // nothing forced, whatever the environment says
    REQUIRE(forced_by(&cfg, &rules).is_ok());
    CHECK(rules == nullptr);
    cfg.algorithms = "allreduce:rnig";
    const Status st = forced_by(&cfg, &rules);
    CHECK(st.code() == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK_THAT(st.message(), Catch::StartsWith("config->algorithms: unknown algorithm 'rnig'"));
}

TEST_CASE("the host's reduction speed is measured", "[selector]") {
    const HostReduceSpeed &speed = host_reduce_speed();
    for (double us_per_byte : speed.us_per_byte) {
        CHECK(us_per_byte > 0);
        // Orders of magnitude apart from a real kernel (about 1e-4 here, 6e-2
        // under ThreadSanitizer) means the measurement is broken.
        CHECK(us_per_byte < 1.0); // faster than 1 MB/s
    }
    CHECK(&host_reduce_speed() == &speed); // once per process
}

TEST_CASE("the transports open as many channels as any algorithm uses", "[selector]") {
    CHECK(max_schedule_channels(Topology::flat(4)) == 2);                 // the double binary tree (one ring, one way)
    CHECK(max_schedule_channels(preset("nnpt-hcm8", 8)) == 8);            // two rings both ways, two channels each
    // Swing's allreduce: two pairings per dimension, three channels each.
    CHECK(max_schedule_channels(preset("nnpt-pod32", 32)) == 12);
    CHECK(max_schedule_channels(preset("torus:4x4x4", 64)) == 18);
}

// What the selector may hand out, run together over the loop transport:
// every registered algorithm for every collective it serves that applies
// (send and recv, whose ranks run different calls, are tested in
// test_schedules_p2p.cpp), within the channels the transports open.
TEST_CASE("every registered schedule that applies runs bit-exact", "[selector]") {
    struct Case {
        const char *spec;
        int nranks;
    };
    for (const Case &c : {Case{"flat", 4}, Case{"nnpt-hcm8", 8}, Case{"torus:3x2", 6}}) {
        const Topology t = preset(c.spec, c.nranks);
        const int channels = max_schedule_channels(t);
        for (const AlgorithmInfo &a : algorithm_registry())
            for (Collective coll : a.serves) {
                if (coll == Collective::Send || coll == Collective::Recv) continue;
                for (size_t count : {size_t{1}, size_t{100}}) {
                    CallShape shape = make_shape(coll, c.nranks, count, false, c.nranks - 1, NNPCCL_INT32, NNPCCL_SUM);
                    CollectiveArgs args;
                    args.collective = coll;
                    args.nranks = c.nranks;
                    args.root = shape.root;
                    if (!a.applies(args, t, nullptr)) continue;
                    INFO(c.spec << " " << a.name << " " << collective_name(coll) << " count=" << count);
                    const Builder build = [&a, &t, channels](const CollectiveArgs &call_args) {
                        Schedule s = a.build(call_args, t);
                        CHECK(static_cast<int>(s.channels.size()) <= channels);
                        return s;
                    };
                    CHECK(simulate(shape, build, 7) == 0);
                }
            }
    }
}

TEST_CASE("a collective of no elements plans no messages, whichever algorithm runs it", "[selector]") {
    // The C API returns from such a call without planning it (it only takes
    // its sequence number), so no rank may expect a message from one: every
    // algorithm that applies must plan none, on every rank, or a rank
    // planning one would wait for a peer that never sends.
    const std::vector<std::string> specs = {"flat", "hosts:2x4", "torus:2x4", "nnpt-hcm8"};
    for (const std::string &spec : specs)
        for (const AlgorithmInfo &algorithm : algorithm_registry())
            for (Collective c : algorithm.serves) {
                if (is_point_to_point(c) || c == Collective::Barrier) continue;
                const Topology t = preset(spec, 8);
                for (int rank = 0; rank < 8; ++rank)
                    for (bool in_place : {false, true}) {
                        CollectiveArgs args = call(c, 8, 0, rank);
                        args.in_place = in_place;
                        if (!algorithm.applies(args, t, nullptr)) continue;
                        const Schedule schedule = algorithm.build(args, t);
                        size_t messages = 0;
                        for (const auto &channel : schedule.channels)
                            for (const Step &step : channel) messages += step.has(kSend) || step.has(kRecv) ? 1 : 0;
                        INFO(spec << " " << algorithm.name << " " << collective_name(c) << " rank " << rank
                                  << (in_place ? " in place" : ""));
                        CHECK(messages == 0);
                    }
            }
}

// On a machine of links the model picks each algorithm's message size with
// it (chunk_choice.hpp): the 2D torus on nnpt-pod32 at 64 MiB has few
// slices per channel at 512 KiB, and fills its pipeline sooner in smaller
// messages. On the host the configured chunk stays.
TEST_CASE("on a machine of links each algorithm runs in the message size the model picks for it", "[selector]") {
    const Topology pod = preset("nnpt-pod32", 32);
    const CollectiveArgs args = call(Collective::Allreduce, 32, size_t{64} << 20);
    const std::vector<Prediction> all = predict_all(args, pod, CostInputs());
    const Prediction &torus = prediction_of(all, "torus2d");
    const AlgorithmInfo &a = *torus.algorithm;
    CHECK(torus.chunk_elems < args.chunk_elems);
    CHECK(torus.chunk_elems * args.elem_size >= kLeastPlannedChunkBytes);
    CHECK(torus.chunk_elems == a.message_elems(args, pod));
    CHECK(torus.time_us < a.predict_us(args, pod, CostInputs()));
    for (int rank : {0, 5, 31}) {
        CollectiveArgs mine = args;
        mine.rank = rank;
        CHECK(a.message_elems(mine, pod) == torus.chunk_elems);
        size_t largest = 0;
        for (const auto &channel : a.build_planned(mine, pod).channels)
            for (const Step &step : channel) largest = std::max(largest, step.count);
        CHECK(largest <= torus.chunk_elems);
    }
    // A call no larger than the least candidate, and every call on the host, keep the chunk.
    for (const Prediction &p : predict_all(call(Collective::Allreduce, 32, kLeastPlannedChunkBytes), pod, CostInputs()))
        if (p.applies) CHECK(p.chunk_elems == args.chunk_elems);
    const Topology flat = preset("flat", 8);
    for (const Prediction &p : predict_all(call(Collective::Allreduce, 8, size_t{64} << 20), flat, CostInputs()))
        if (p.applies) CHECK(p.chunk_elems == args.chunk_elems);
}

// Every algorithm's planned schedule on a torus runs to the right result,
// with a chunk large enough for the model to cut its messages smaller.
TEST_CASE("schedules in planned message sizes give the right results", "[selector]") {
    const Topology t = preset("torus:4x2", 8);
    const int channels = max_schedule_channels(t);
    const size_t chunk = 16 * 1024; // int32 elements: 64 KiB, so 32, 16 and 8 KiB are candidates too
    for (const AlgorithmInfo &a : algorithm_registry())
        for (Collective coll : a.serves) {
            if (coll == Collective::Send || coll == Collective::Recv || coll == Collective::Barrier) continue;
            CallShape shape = make_shape(coll, 8, 3 * chunk + 5, false, 3, NNPCCL_INT32, NNPCCL_SUM);
            CollectiveArgs args;
            args.collective = coll;
            args.nranks = 8;
            args.root = shape.root;
            if (!a.applies(args, t, nullptr)) continue;
            INFO(a.name << " " << collective_name(coll));
            const Builder build = [&a, &t, channels](const CollectiveArgs &call_args) {
                Schedule s = a.build_planned(call_args, t);
                CHECK(static_cast<int>(s.channels.size()) <= channels);
                return s;
            };
            CHECK(simulate(shape, build, chunk) == 0);
        }
}
