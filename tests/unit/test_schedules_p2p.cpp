// The gather, scatter, alltoall and send/recv schedules, run by the
// simulation harness in schedule_sim.hpp: 1 to 8 ranks, empty to large
// counts, roots 0 and p-1, in and out of place, float32 and int8, chunks
// small enough that every transfer pipelines, one and two slots per stream:
// no deadlock, no message left over, every output bit-exact, nothing
// written outside the output. The inputs name their rank and offset
// (check_data.hpp, tagged_pattern), so a block that lands in the wrong
// place is caught; the last tests prove that on deliberately broken
// schedules.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "patterns.hpp"
#include "schedule_sim.hpp"

using namespace nnpccl;
using namespace schedule_sim;

namespace {

const int kRankCounts[] = {1, 2, 3, 4, 5, 6, 7, 8};
const size_t kCounts[] = {0, 1, 97, 1000};
const size_t kChunks[] = {3, 64};
const nnpccl_datatype_t kTypes[] = {NNPCCL_FLOAT32, NNPCCL_INT8};

bool rooted(Collective c) { return c == Collective::Gather || c == Collective::Scatter; }

// Every (ranks, count, root, in place, type, chunk, slots) of the grid
// above; the root is 0 and p-1 where the collective has one.
void check_grid(const char *name, Collective coll, const Builder &build) {
    for (int p : kRankCounts)
        for (size_t count : kCounts)
            for (int root : {0, p - 1}) {
                if (root == p - 1 && (p == 1 || !rooted(coll))) continue; // the same call again
                for (bool in_place : {false, true})
                    for (nnpccl_datatype_t dt : kTypes)
                        for (size_t chunk : kChunks)
                            for (int slots : {1, 2}) {
                                CallShape c = make_shape(coll, p, count, in_place, root, dt, NNPCCL_SUM);
                                INFO(name << " " << collective_name(coll) << " p=" << p << " count=" << count
                                          << " root=" << root << " in_place=" << in_place << " "
                                          << datatype_name(dt) << " chunk=" << chunk << " slots=" << slots);
                                CHECK(simulate(c, build, chunk, slots) == 0);
                            }
            }
}

Schedule build_p2p(const CollectiveArgs &args) {
    return args.collective == Collective::Send ? build_send(args) : build_recv(args);
}

// Rank `from` sends `count` elements to rank `to`; every other rank of the
// p takes no part (a call the p2p builders do not serve: no schedule).
std::vector<CallShape> transfer(int p, int from, int to, size_t count, nnpccl_datatype_t dt) {
    std::vector<CallShape> shapes;
    for (int r = 0; r < p; ++r) {
        CallShape s = make_shape(Collective::Barrier, p, 0, false, -1, dt, NNPCCL_SUM);
        if (r == from) s = make_shape(Collective::Send, p, count, false, to, dt, NNPCCL_SUM);
        if (r == to) s = make_shape(Collective::Recv, p, count, false, from, dt, NNPCCL_SUM);
        shapes.push_back(s);
    }
    return shapes;
}

// The peers of a schedule's sends (or receives), in order.
std::vector<int> peers_of(const Schedule &s, StepFlag which) {
    std::vector<int> peers;
    for (const Step &step : s.channels.at(0))
        if (step.has(which)) peers.push_back(which == kSend ? step.send_peer : step.recv_peer);
    return peers;
}

CollectiveArgs args_for(Collective coll, int p, int rank, size_t count, size_t chunk, int root = 0) {
    CollectiveArgs args;
    args.collective = coll;
    args.nranks = p;
    args.rank = rank;
    args.count = count;
    args.chunk_elems = chunk;
    args.root = root;
    return args;
}

// `build`, with rank `victim`'s schedule passed through `break_it`.
Builder broken(const Builder &build, int victim, std::function<void(std::vector<Step> &)> break_it) {
    return [=](const CollectiveArgs &args) {
        Schedule s = build(args);
        if (args.rank == victim) break_it(s.channels.at(0));
        return s;
    };
}

// Swaps where the first receives from two different peers land.
void swap_two_receives(std::vector<Step> &steps) {
    Step *first = nullptr;
    for (Step &s : steps) {
        if (!s.has(kRecv)) continue;
        if (first == nullptr) first = &s;
        else if (s.recv_peer != first->recv_peer) {
            std::swap(first->dst, s.dst);
            return;
        }
    }
    FAIL("no two receives from different peers");
}

} // namespace

TEST_CASE("linear gather is bit-exact and deadlock-free, rooted anywhere", "[schedules][p2p]") {
    check_grid("direct", Collective::Gather, build_linear_gather);
}

TEST_CASE("linear scatter is bit-exact and deadlock-free, rooted anywhere", "[schedules][p2p]") {
    check_grid("direct", Collective::Scatter, build_linear_scatter);
}

TEST_CASE("pairwise alltoall is bit-exact and deadlock-free, in place too", "[schedules][p2p]") {
    check_grid("pairwise", Collective::Alltoall, build_pairwise_alltoall);
}

TEST_CASE("direct alltoall is bit-exact and deadlock-free, in place too", "[schedules][p2p]") {
    check_grid("direct", Collective::Alltoall, build_direct_alltoall);
}

TEST_CASE("gather and scatter work from every root", "[schedules][p2p]") {
    for (int p : {3, 5, 8})
        for (int root = 0; root < p; ++root)
            for (Collective coll : {Collective::Gather, Collective::Scatter})
                for (bool in_place : {false, true}) {
                    CallShape c = make_shape(coll, p, 61, in_place, root, NNPCCL_BFLOAT16, NNPCCL_SUM);
                    INFO(collective_name(coll) << " p=" << p << " root=" << root << " in_place=" << in_place);
                    CHECK(simulate(c, coll == Collective::Gather ? build_linear_gather : build_linear_scatter, 4, 1) ==
                          0);
                }
}

TEST_CASE("send and recv move a message between every ordered pair of 3 ranks", "[schedules][p2p]") {
    for (int from = 0; from < 3; ++from)
        for (int to = 0; to < 3; ++to) {
            if (from == to) continue;
            for (size_t count : kCounts)
                for (nnpccl_datatype_t dt : kTypes)
                    for (size_t chunk : kChunks)
                        for (int slots : {1, 2}) {
                            INFO(from << " -> " << to << " count=" << count << " " << datatype_name(dt)
                                      << " chunk=" << chunk << " slots=" << slots);
                            CHECK(run_ranks(transfer(3, from, to, count, dt), build_p2p, chunk, slots).wrong == 0);
                        }
        }
}

TEST_CASE("send and recv work for every datatype and across a larger communicator", "[schedules][p2p]") {
    for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d) {
        auto dt = static_cast<nnpccl_datatype_t>(d);
        INFO(datatype_name(dt));
        CHECK(run_ranks(transfer(8, 6, 1, 1000, dt), build_p2p, 7).wrong == 0);
        for (Collective coll : {Collective::Gather, Collective::Scatter, Collective::Alltoall}) {
            CallShape c = make_shape(coll, 5, 37, false, 3, dt, NNPCCL_SUM);
            const Builder build = coll == Collective::Gather    ? Builder(build_linear_gather)
                                  : coll == Collective::Scatter ? Builder(build_linear_scatter)
                                                                : Builder(build_pairwise_alltoall);
            CHECK(simulate(c, build, 5) == 0);
        }
    }
}

TEST_CASE("pairwise alltoall talks to one peer per round: r+k out, r-k in", "[schedules][p2p]") {
    const int p = 5;
    for (int r = 0; r < p; ++r) {
        INFO("rank " << r);
        const Schedule s = build_pairwise_alltoall(args_for(Collective::Alltoall, p, r, 6, 3)); // 2 chunks a block
        std::vector<int> out, in;
        for (int k = 1; k < p; ++k)
            for (int chunk = 0; chunk < 2; ++chunk) {
                out.push_back((r + k) % p);
                in.push_back((r - k + p) % p);
            }
        CHECK(peers_of(s, kSend) == out);
        CHECK(peers_of(s, kRecv) == in);
        CHECK(s.scratch_elems == 0);
    }
}

TEST_CASE("direct alltoall sends a chunk to every peer before it receives one", "[schedules][p2p]") {
    const int p = 4, r = 1;
    const Schedule s = build_direct_alltoall(args_for(Collective::Alltoall, p, r, 6, 3));
    std::vector<int> peers;
    for (const Step &step : s.channels.at(0))
        if (step.has(kSend) || step.has(kRecv)) peers.push_back(step.has(kSend) ? step.send_peer : -1 - step.recv_peer);
    // Per chunk: out to 2, 3, 0; in from 0, 3, 2 (encoded -1 - peer).
    const std::vector<int> round = {2, 3, 0, -1, -4, -3};
    std::vector<int> expected(round);
    expected.insert(expected.end(), round.begin(), round.end());
    CHECK(peers == expected);
}

// In place, every chunk goes out from a copy in scratch (alltoall_in_place.hpp
// says why), two sets of them: direct holds 2(p-1) chunks, not the whole call.
TEST_CASE("in-place direct alltoall sends from two sets of chunks in scratch", "[schedules][p2p]") {
    CollectiveArgs args = args_for(Collective::Alltoall, 4, 2, 10, 4);
    args.in_place = true;
    const Schedule s = build_direct_alltoall(args);
    CHECK(s.scratch_elems == 2 * 3 * 4);
    for (const Step &step : s.channels.at(0))
        if (step.has(kSend)) CHECK(step.src.buf == Buf::Scratch);
    args.count = 3; // one chunk a block: one set, of the block's size
    CHECK(build_direct_alltoall(args).scratch_elems == 3 * 3);
}

// In place, pairwise holds two chunks of scratch, not a copy of the call:
// each round a rank swaps one block with one partner, whose partner it is.
TEST_CASE("in-place pairwise alltoall swaps blocks with one partner a round", "[schedules][p2p]") {
    for (int p = 2; p <= 9; ++p) {
        std::vector<std::vector<int>> partners(static_cast<size_t>(p));
        for (int r = 0; r < p; ++r) {
            INFO("p " << p << " rank " << r);
            CollectiveArgs args = args_for(Collective::Alltoall, p, r, 10, 4);
            args.in_place = true;
            const Schedule s = build_pairwise_alltoall(args);
            CHECK(s.scratch_elems == 8); // two chunks of 4: a block of 10 is three
            std::vector<int> &mine = partners[static_cast<size_t>(r)];
            for (const Step &step : s.channels.at(0)) {
                if (step.has(kSend)) {
                    CHECK(step.src.buf == Buf::Scratch);
                    if (mine.empty() || mine.back() != step.send_peer) mine.push_back(step.send_peer);
                }
                if (step.has(kRecv)) CHECK(step.recv_peer == mine.back());
            }
            std::vector<int> sorted = mine, others;
            std::sort(sorted.begin(), sorted.end());
            for (int q = 0; q < p; ++q)
                if (q != r) others.push_back(q);
            CHECK(sorted == others);
        }
        if (p % 2 == 0) // every rank busy every round: round i pairs r with its partner's partner
            for (int r = 0; r < p; ++r)
                for (size_t i = 0; i < partners[static_cast<size_t>(r)].size(); ++i)
                    CHECK(partners[static_cast<size_t>(partners[static_cast<size_t>(r)][i])][i] == r);
    }
}

TEST_CASE("gather and scatter: the root talks to everyone, the others to the root only", "[schedules][p2p]") {
    const int p = 4, root = 2;
    for (int r = 0; r < p; ++r) {
        INFO("rank " << r);
        const Schedule g = build_linear_gather(args_for(Collective::Gather, p, r, 6, 3, root));
        const Schedule s = build_linear_scatter(args_for(Collective::Scatter, p, r, 6, 3, root));
        if (r == root) {
            const std::vector<int> each_chunk = {3, 0, 1, 3, 0, 1}; // root+1, root+2, ... per chunk
            CHECK(peers_of(g, kRecv) == each_chunk);
            CHECK(peers_of(s, kSend) == each_chunk);
            CHECK(peers_of(g, kSend).empty());
            CHECK(peers_of(s, kRecv).empty());
        } else {
            CHECK(peers_of(g, kSend) == std::vector<int>{root, root});
            CHECK(peers_of(s, kRecv) == std::vector<int>{root, root});
            CHECK(peers_of(g, kRecv).empty());
            CHECK(peers_of(s, kSend).empty());
        }
    }
}

TEST_CASE("the p2p builders give no schedule for what they do not serve", "[schedules][p2p]") {
    CHECK(build_linear_gather(args_for(Collective::Scatter, 4, 0, 8, 4)).channels.empty());
    CHECK(build_linear_scatter(args_for(Collective::Gather, 4, 0, 8, 4)).channels.empty());
    CHECK(build_linear_gather(args_for(Collective::Gather, 4, 0, 8, 4, 4)).channels.empty());
    CHECK(build_linear_scatter(args_for(Collective::Scatter, 4, 0, 8, 4, -1)).channels.empty());
    CHECK(build_pairwise_alltoall(args_for(Collective::Allgather, 4, 0, 8, 4)).channels.empty());
    CHECK(build_direct_alltoall(args_for(Collective::Allgather, 4, 0, 8, 4)).channels.empty());
    CHECK(build_send(args_for(Collective::Recv, 4, 0, 8, 4, 1)).channels.empty());
    CHECK(build_recv(args_for(Collective::Send, 4, 0, 8, 4, 1)).channels.empty());
    CHECK(build_send(args_for(Collective::Send, 4, 1, 8, 4, 1)).channels.empty()); // to itself
    CHECK(build_recv(args_for(Collective::Recv, 4, 1, 8, 4, 4)).channels.empty());
    CHECK(build_send(args_for(Collective::Send, 4, 1, 8, 4, 0)).channels.size() == 1);
    // An empty message still pairs a send with its recv (it carries the descriptor).
    for (const Schedule &s : {build_send(args_for(Collective::Send, 4, 1, 0, 4, 0)),
                              build_recv(args_for(Collective::Recv, 4, 0, 0, 4, 1))}) {
        REQUIRE(s.step_count() == 1);
        CHECK(s.channels[0][0].count == 0);
    }
    CHECK(build_ring(args_for(Collective::Alltoall, 4, 0, 8, 4), {{0, 1, 2, 3}}).step_count() == 0);
}

TEST_CASE("the tagged inputs tell every block of every rank apart", "[schedules][p2p]") {
    for (nnpccl_datatype_t dt : {NNPCCL_INT8, NNPCCL_UINT8, NNPCCL_BFLOAT16, NNPCCL_FLOAT16, NNPCCL_FLOAT32})
        for (size_t count : {size_t{1}, size_t{97}, size_t{1000}}) {
            const int p = 8;
            const size_t es = datatype_size(dt);
            std::set<std::vector<unsigned char>> blocks;
            for (int r = 0; r < p; ++r) {
                std::vector<unsigned char> send(static_cast<size_t>(p) * count * es);
                nnpccl_check::tagged_pattern(dt, r).fill(send.data(), 0, static_cast<size_t>(p) * count);
                for (size_t b = 0; b < static_cast<size_t>(p); ++b)
                    blocks.emplace(send.begin() + static_cast<std::ptrdiff_t>(b * count * es),
                                   send.begin() + static_cast<std::ptrdiff_t>((b + 1) * count * es));
            }
            INFO(datatype_name(dt) << " count=" << count);
            CHECK(blocks.size() == static_cast<size_t>(p * p));
        }
}

TEST_CASE("a block that lands in the wrong place is caught", "[schedules][p2p]") {
    for (nnpccl_datatype_t dt : kTypes)
        for (size_t count : {size_t{1}, size_t{97}}) {
            INFO(datatype_name(dt) << " count=" << count);
            const CallShape alltoall = make_shape(Collective::Alltoall, 4, count, false, 0, dt, NNPCCL_SUM);
            CHECK(simulate(alltoall, broken(build_pairwise_alltoall, 1, swap_two_receives), 128) == 2 * count);
            CHECK(simulate(alltoall, broken(build_direct_alltoall, 3, swap_two_receives), 128) == 2 * count);
            const CallShape gather = make_shape(Collective::Gather, 4, count, false, 2, dt, NNPCCL_SUM);
            CHECK(simulate(gather, broken(build_linear_gather, 2, swap_two_receives), 128) == 2 * count);
            // The root sends rank 3 the block of rank 0.
            const CallShape scatter = make_shape(Collective::Scatter, 4, count, false, 2, dt, NNPCCL_SUM);
            auto misaddress = [count](std::vector<Step> &steps) {
                for (Step &s : steps)
                    if (s.has(kSend) && s.send_peer == 3) s.src.offset -= 3 * count;
            };
            CHECK(simulate(scatter, broken(build_linear_scatter, 2, misaddress), 64) == count);
            // Rank 0 sends its block 1 where block 2 was due: right rank, wrong offset.
            auto wrong_block = [count](std::vector<Step> &steps) {
                for (Step &s : steps)
                    if (s.has(kSend) && s.send_peer == 2) s.src.offset -= count;
            };
            CHECK(simulate(alltoall, broken(build_pairwise_alltoall, 0, wrong_block), 64) == count);
        }
}
