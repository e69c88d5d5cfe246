// The hierarchical schedules, run by the simulation harness in
// schedule_sim.hpp on ranks grouped into hosts in every shape a job takes:
// even (2x2, 4x2, 2x4), uneven (3+1, 1+3, 2+3+1), one rank per host, and
// hosts whose ranks are not consecutive (a launcher that deals ranks round
// robin). Every collective it serves, in and out of place, empty to large
// counts, roots on the first, last and a middle host, chunks small enough that everything pipelines, two
// slots per stream (the least a transport has): no deadlock, no message
// left over, every output bit-exact, and every rank of an allreduce holding
// the same bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>
#include <vector>

#include "builders.hpp"
#include "schedule_sim.hpp"
#include "topology.hpp"

using namespace nnpccl;
using namespace schedule_sim;

namespace {

using Groups = std::vector<std::vector<int>>;

const Groups kLayouts[] = {
    {{0, 1}, {2, 3}},
    {{0, 1}, {2, 3}, {4, 5}, {6, 7}},
    {{0, 1, 2, 3}, {4, 5, 6, 7}},
    {{0, 1, 2}, {3}},
    {{0}, {1, 2, 3}},
    {{0, 1}, {2, 3, 4}, {5}},
    {{0}, {1}},
    {{0}, {1}, {2}},
    {{0, 2}, {1, 3}},
    {{0, 3, 5}, {1}, {2, 4}},
    // A host of many ranks beside lone ones: a lone rank is the agent of
    // every block of the big host, several messages per pair and hop.
    {{0, 1, 2, 3, 4, 5}, {6}, {7}},
    {{0}, {1}, {2, 3, 4, 5}},
};

// Empty, one element, blocks of a few chunks, and a block of many.
const std::pair<size_t, size_t> kCountsAndChunks[] = {{0, 3}, {1, 3}, {97, 3}, {97, 64}, {1000, 29}};

std::string describe(const Groups &groups) {
    std::ostringstream out;
    for (const auto &g : groups) {
        out << "{";
        for (int r : g) out << r << (r == g.back() ? "" : ",");
        out << "}";
    }
    return out.str();
}

int ranks_in(const Groups &groups) {
    int p = 0;
    for (const auto &g : groups) p += static_cast<int>(g.size());
    return p;
}

// The first rank, the last and one inside: the root's host first, last
// and between in the chain across hosts.
std::vector<int> roots_of(Collective coll, int p) {
    if (!has_root(coll)) return {0};
    std::vector<int> roots = {0, p - 1, (p * 7 + 3) % p};
    std::sort(roots.begin(), roots.end());
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    return roots;
}

Builder hierarchical(const Groups &groups) {
    return [groups](const CollectiveArgs &args) { return build_hierarchical(args, groups); };
}

} // namespace

TEST_CASE("hierarchical schedules are bit-exact and deadlock-free on even, uneven and scattered hosts",
          "[schedules][hierarchical]") {
    const Collective collectives[] = {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather,
                                      Collective::Broadcast, Collective::Reduce};
    struct TypedOp {
        nnpccl_datatype_t dt;
        nnpccl_redop_t op;
    };
    const TypedOp typed_ops[] = {
        {NNPCCL_FLOAT32, NNPCCL_SUM}, {NNPCCL_FLOAT32, NNPCCL_AVG}, {NNPCCL_INT32, NNPCCL_PROD}};
    for (const Groups &groups : kLayouts) {
        const int p = ranks_in(groups);
        for (Collective coll : collectives)
            for (const auto &[count, chunk] : kCountsAndChunks)
                for (bool in_place : {false, true})
                    for (const TypedOp &t : typed_ops)
                        for (int root : roots_of(coll, p)) {
                            if (!reduces(coll) && t.op != NNPCCL_SUM) continue;
                            CallShape c = make_shape(coll, p, count, in_place, root, t.dt, t.op);
                            INFO(describe(groups) << " " << collective_name(coll) << " count=" << count
                                                  << " in_place=" << in_place << " " << datatype_name(t.dt) << " "
                                                  << redop_name(t.op) << " chunk=" << chunk << " root=" << root);
                            CHECK(simulate(c, hierarchical(groups), chunk) == 0);
                        }
    }
}

TEST_CASE("hierarchical schedules split large calls over several channels, still bit-exact",
          "[schedules][hierarchical]") {
    const Groups layouts[] = {{{0, 1}, {2, 3}},
                              {{0, 1, 2}, {3}},
                              {{0, 3, 5}, {1}, {2, 4}},
                              {{0, 1, 2, 3, 4, 5}, {6}, {7}},
                              {{3}, {0, 4}, {1, 5, 7}, {2, 6, 8, 9}}};
    for (const Groups &groups : layouts) {
        const int p = ranks_in(groups);
        for (Collective coll : {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather,
                                Collective::Broadcast, Collective::Reduce})
            for (bool in_place : {false, true}) {
                // Just past the split for allreduce, broadcast and reduce; p
                // blocks of it for the block-wise collectives.
                const size_t count = kHierarchicalSplitBytes / 4 + 27;
                CallShape c = make_shape(coll, p, count, in_place, p - 1, NNPCCL_FLOAT32, NNPCCL_SUM);
                CollectiveArgs args;
                args.collective = coll;
                args.count = count;
                args.nranks = p;
                args.root = p - 1;
                args.chunk_elems = 16411;
                INFO(describe(groups) << " " << collective_name(coll) << " in_place=" << in_place);
                CHECK(build_hierarchical(args, groups).channels.size() == kHierarchicalChannels);
                CHECK(simulate(c, hierarchical(groups), 16411) == 0);
            }
    }
}

TEST_CASE("hierarchical allreduce gives every rank the same bits", "[schedules][hierarchical]") {
    for (const Groups &groups : kLayouts) {
        const int p = ranks_in(groups);
        CallShape c = make_shape(Collective::Allreduce, p, 1000, false, 0, NNPCCL_FLOAT32, NNPCCL_SUM);
        SimResult result = run(c, hierarchical(groups), 7);
        INFO(describe(groups));
        for (int r = 1; r < p; ++r) CHECK(result.outputs[static_cast<size_t>(r)] == result.outputs[0]);
    }
}

TEST_CASE("hierarchical allreduce sends each block across the network 2(h-1) times, from every rank",
          "[schedules][hierarchical]") {
    // 2 hosts of 4: each rank's counterpart on the other host is its only
    // peer across the network, and what crosses is its host's share: one
    // block each way per rank (2(h-1)/h of the buffer per host, against
    // the flat ring's 2(p-1)/p).
    const Groups groups = {{0, 1, 2, 3}, {4, 5, 6, 7}};
    const size_t count = 8 * 100;
    for (int rank = 0; rank < 8; ++rank) {
        CollectiveArgs args;
        args.collective = Collective::Allreduce;
        args.nranks = 8;
        args.rank = rank;
        args.count = count;
        args.chunk_elems = 1 << 20;
        const Schedule s = build_hierarchical(args, groups);
        size_t across = 0;
        std::vector<int> peers_across;
        for (const std::vector<Step> &channel : s.channels)
            for (const Step &step : channel)
                if (step.has(kSend) && (step.send_peer < 4) != (rank < 4)) {
                    across += step.count;
                    peers_across.push_back(step.send_peer);
                }
        INFO("rank " << rank);
        CHECK(across == 2 * count / 8);
        std::sort(peers_across.begin(), peers_across.end());
        peers_across.erase(std::unique(peers_across.begin(), peers_across.end()), peers_across.end());
        CHECK(peers_across == std::vector<int>{(rank + 4) % 8});
    }
}

TEST_CASE("hierarchical applies only to ranks on several hosts", "[schedules][hierarchical]") {
    Topology one_host, two_hosts;
    REQUIRE(load_topology("flat", 4, &one_host));
    REQUIRE(load_topology("hosts:2x2", 4, &two_hosts));
    CHECK(one_host.host_groups().size() == 1);
    CHECK_FALSE(one_host.spans_hosts());
    CHECK(two_hosts.spans_hosts());
    CHECK(two_hosts.host_groups() == Groups{{0, 1}, {2, 3}});
    CollectiveArgs args;
    args.nranks = 1;
    CHECK(build_hierarchical(args, Groups{{0}}).channels.empty());
    // What no topology gives, refused rather than read out of bounds.
    args.nranks = 4;
    CHECK(build_hierarchical(args, Groups{{0, 1}, {2, 7}}).channels.empty());
    CHECK(build_hierarchical(args, Groups{{0, 1}, {1, 2, 3}}).channels.empty());
    CHECK(build_hierarchical(args, Groups{{0, 1, 2, 3}, {}}).channels.empty());
    args.collective = Collective::Broadcast;
    args.root = -1;
    CHECK(build_hierarchical(args, Groups{{0, 1}, {2, 3}}).channels.empty());
    args.root = 4;
    CHECK(build_hierarchical(args, Groups{{0, 1}, {2, 3}}).channels.empty());
    // A job whose ranks are dealt round robin is named with its grouping,
    // which the preset reads back.
    Topology dealt;
    REQUIRE(load_topology("hosts:2x2:0,1,0,1", 0, &dealt));
    CHECK(dealt.host_groups() == Groups{{0, 2}, {1, 3}});
    CHECK(dealt.rings().front() == std::vector<int>{0, 2, 1, 3});
    for (const char *wrong : {"hosts:2x2:0,1,1,1", "hosts:2x2:0,1,0", "hosts:2x2:0,1,0,2", "hosts:2x2:0,1,0,x"})
        CHECK_FALSE(load_topology(wrong, 0, &dealt).is_ok());
}
