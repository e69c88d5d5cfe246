#include "registry.hpp"

#include <algorithm>
#include <string>

#include "builders.hpp"

namespace nnpccl {

namespace {

using C = Collective;

// The root (or the peer of send and recv) is a rank, and a peer not this one.
bool valid_root(const CollectiveArgs &args, std::string *why_not) {
    const bool peer = is_point_to_point(args.collective);
    if (!has_root(args.collective) && !peer) return true;
    if (args.root >= 0 && args.root < args.nranks && !(peer && args.root == args.rank)) return true;
    if (why_not != nullptr)
        *why_not = std::string(peer ? "the peer " : "the root ") + std::to_string(args.root) +
                   (peer && args.root == args.rank ? " is the rank itself" : " is not a rank of " + std::to_string(args.nranks));
    return false;
}

bool always(const CollectiveArgs &args, const Topology &, std::string *why_not) { return valid_root(args, why_not); }

bool torus2d_applies(const CollectiveArgs &args, const Topology &t, std::string *why_not) {
    const RankGrid *grid = t.torus();
    if (grid != nullptr && grid->x * grid->y == args.nranks) return true;
    if (why_not != nullptr)
        *why_not = grid == nullptr ? "needs ranks that fill a 2D torus or a block of one; topology '" + t.name() +
                                         "' has no torus grid"
                                   : "the ranks' grid is " + std::to_string(grid->x) + "x" + std::to_string(grid->y) +
                                         ", not " + std::to_string(args.nranks) + " ranks";
    return false;
}

Schedule build_ring_on(const CollectiveArgs &args, const Topology &t) { return build_ring(args, t.ring_channels()); }

Schedule build_direct_on(const CollectiveArgs &args, const Topology &) {
    switch (args.collective) {
    case C::Gather: return build_linear_gather(args);
    case C::Scatter: return build_linear_scatter(args);
    case C::Alltoall: return build_direct_alltoall(args);
    case C::Allgather: return build_direct_allgather(args);
    case C::ReduceScatter: return build_direct_reduce_scatter(args);
    default: return build_direct_allreduce(args);
    }
}

Schedule build_halving_doubling_on(const CollectiveArgs &args, const Topology &) {
    return build_halving_doubling(args);
}

Schedule build_double_binary_tree_on(const CollectiveArgs &args, const Topology &) {
    return build_double_binary_tree(args);
}

Schedule build_torus2d_on(const CollectiveArgs &args, const Topology &t) {
    const RankGrid *grid = t.torus();
    return build_torus2d(args, grid->x, grid->y, grid->rank_at);
}

Schedule build_pairwise_on(const CollectiveArgs &args, const Topology &) { return build_pairwise_alltoall(args); }

Schedule build_p2p_on(const CollectiveArgs &args, const Topology &) {
    return args.collective == C::Send ? build_send(args) : build_recv(args);
}

Schedule build_dissemination_on(const CollectiveArgs &args, const Topology &t) {
    return build_dissemination_barrier(args, t.rings().front());
}

int one_channel(const Topology &) { return 1; }
int ring_channel_count(const Topology &t) { return static_cast<int>(t.ring_channels().size()); }
int two_trees(const Topology &) { return 2; }
int torus2d_channels(const Topology &t) { return t.torus() != nullptr ? static_cast<int>(kTorus2dChannels) : 0; }

} // namespace

bool AlgorithmInfo::serves_collective(Collective c) const {
    return std::find(serves.begin(), serves.end(), c) != serves.end();
}

// In order of preference when predictions tie.
const std::vector<AlgorithmInfo> &algorithm_registry() {
    static const std::vector<AlgorithmInfo> registry = {
        {"ring", "pipelined ring on each edge-disjoint Hamiltonian ring of the topology, both directions of each "
                 "where that adds bandwidth (not on flat), one channel per ring and direction, data split across them",
         "", {C::Allreduce, C::ReduceScatter, C::Allgather, C::Broadcast, C::Reduce},
         build_ring_on, always, predict_ring_us, ring_channel_count},
        {"torus2d", "rings along X, then Y, then X, and along Y, X, Y on the transposed grid, both directions, "
                    "two channels each (eight): 2(x+y-2) steps instead of the ring's 2(p-1)",
         "a 2D torus whose rank grid x*y holds every rank (torus:XxY, nnpt-pod32, nnpt-pod1024)", {C::Allreduce},
         build_torus2d_on, torus2d_applies, predict_torus2d_us, torus2d_channels},
        {"double_binary_tree", "two binary trees, no rank inner in both, half the data each, chunks pipelined "
                               "up and down",
         "", {C::Allreduce, C::Broadcast, C::Reduce},
         build_double_binary_tree_on, always, predict_double_binary_tree_us, two_trees},
        {"halving_doubling", "recursive halving then doubling (Rabenseifner): log2 p exchanges per phase; ranks "
                             "beyond a power of two fold into a neighbour",
         "", {C::Allreduce, C::ReduceScatter, C::Allgather},
         build_halving_doubling_on, always, predict_halving_doubling_us, one_channel},
        {"direct", "one round: every rank sends straight to every rank that needs its data (allreduce: its whole "
                   "buffer to all; allgather: its block to all; reduce-scatter: block j to rank j; gather, "
                   "scatter: to or from the root; alltoall: every block at once)",
         "", {C::Allreduce, C::ReduceScatter, C::Allgather, C::Gather, C::Scatter, C::Alltoall},
         build_direct_on, always, predict_direct_us, one_channel},
        {"pairwise", "p-1 rounds; in round k every rank sends to rank+k and receives from rank-k", "", {C::Alltoall},
         build_pairwise_on, always, predict_pairwise_us, one_channel},
        {"p2p", "one chunked stream from the sender to the receiver", "the peer is another rank", {C::Send, C::Recv},
         build_p2p_on, always, predict_p2p_us, one_channel},
        {"dissemination", "ceil(log2 p) rounds of zero-byte messages", "", {C::Barrier},
         build_dissemination_on, always, predict_dissemination_us, one_channel},
    };
    return registry;
}

const AlgorithmInfo *find_algorithm(std::string_view name) {
    for (const AlgorithmInfo &a : algorithm_registry())
        if (name == a.name) return &a;
    return nullptr;
}

std::string algorithm_names_for(Collective c) {
    std::string names;
    for (const AlgorithmInfo &a : algorithm_registry()) {
        if (!a.serves_collective(c)) continue;
        if (!names.empty()) names += ", ";
        names += a.name;
    }
    return names;
}

int max_schedule_channels(const Topology &topology) {
    int most = 1;
    for (const AlgorithmInfo &a : algorithm_registry()) most = std::max(most, a.channels(topology));
    return most;
}

} // namespace nnpccl
