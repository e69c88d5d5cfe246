// The schedule builders, one per algorithm (planner.hpp picks one).
#pragma once

#include <memory>

#include "collective.hpp"
#include "patterns.hpp"
#include "schedule.hpp"
#include "topology.hpp"

namespace nnpccl {

// Ring algorithms on the given rings (one channel per ring): allreduce,
// reduce-scatter, allgather, broadcast, reduce. See ring.cpp for costs.
Schedule build_ring(const CollectiveArgs &args, const std::vector<std::vector<int>> &rings);

// Direct (one-shot) schedules for small messages, one channel, one round;
// see direct.cpp. Allreduce: everyone sends everything to everyone and
// folds the contributions in rank order. Allgather: everyone sends its
// block to everyone. Reduce-scatter: everyone sends block j to rank j,
// which folds the contributions in rank order. The allgather and
// reduce-scatter builders give another collective a schedule without
// channels.
Schedule build_direct_allreduce(const CollectiveArgs &args);
Schedule build_direct_allgather(const CollectiveArgs &args);
Schedule build_direct_reduce_scatter(const CollectiveArgs &args);

// Recursive halving-doubling (Rabenseifner): allreduce, reduce-scatter,
// allgather on any number of ranks (the ranks beyond the largest power of
// two fold into a neighbour first). One channel. See halving_doubling.cpp.
// Other collectives get a schedule without channels.
Schedule build_halving_doubling(const CollectiveArgs &args);

// Swing (swing.cpp): the butterfly of halving_doubling with Swing's
// partners. On a torus whose ranks fill it and whose dimensions are powers
// of two, `dims` are its dimensions (those larger than 1) and rank_at the
// rank at each torus index (first dimension fastest); without dims the
// ranks are one ring in rank order, folded to a power of two. `channels`
// channels (2 per dimension, or 1 on the host, times `lanes` channels per
// pairing), each a piece of the data. Allreduce (bandwidth- or
// latency-optimal), reduce-scatter and allgather (bandwidth-optimal only);
// other collectives get no channels.
struct SwingShape {
    std::vector<int> dims;
    std::vector<int> rank_at;
    int channels = 2;
    int lanes = 1;
};
SwingShape swing_shape(const Topology &topology, int nranks);
Schedule build_swing(const CollectiveArgs &args, const SwingShape &shape, bool latency_optimal);
// Channel c's butterfly for `rank`: its label and its partner per step.
HalvingDoublingPattern swing_pattern(const SwingShape &shape, int nranks, int rank, int channel);
// Broadcast and reduce down (up) binomial trees of Swing's partners, one
// per channel (swing_binomial.cpp); other collectives, or a root outside
// 0..p-1, get no channels.
Schedule build_swing_binomial(const CollectiveArgs &args, const SwingShape &shape);

// Double binary tree: allreduce (reduce up, broadcast down, overlapped),
// broadcast and reduce (both trees rooted at args.root). Two channels, one
// per tree, each with half the data. See double_binary_tree.cpp. Other
// collectives get a schedule without channels.
Schedule build_double_binary_tree(const CollectiveArgs &args);

// 2D torus allreduce, reduce-scatter and allgather on an x-by-y grid of
// ranks, grid[i + j*x] at (i, j) (rank r at (r % x, r / x) without a
// grid). Allreduce: reduce-scatter along X, allreduce along Y, allgather
// along X; reduce-scatter: along X, then Y; allgather: along Y, then X;
// and the same with Y and X swapped, each both ways round the rings, on
// the channels torus2d_layout() (torus2d_block_layout()) gives. Needs
// x*y == args.nranks and a grid holding every rank once. See torus2d.cpp.
// Any other collective, or a grid that does not fit, gets a schedule
// without channels.
// Allreduce's rings run one way round, or both ways (half the pieces'
// partial sums forward, half backward: about half the steps) on the
// columns only or on the rows too; the model picks (torus2d.cpp).
constexpr size_t kTorus2dChannels = 8;
enum class Torus2dRings { OneWay, ColumnsBothWays, BothWays };
Schedule build_torus2d(const CollectiveArgs &args, int x, int y);
Schedule build_torus2d(const CollectiveArgs &args, int x, int y, const std::vector<int> &grid,
                       Torus2dRings rings = Torus2dRings::BothWays);

// Allreduce on the rank grid of a torus by relaying every vector along
// rows, then row sums along columns, summed in coordinate order on every
// rank (torus_relay.cpp). Other collectives get a schedule without channels.
Schedule build_torus_relay(const CollectiveArgs &args, const RankGrid &grid);

// One channel of the 2D torus: which dimension it goes along first, which
// way round, its elements, and how many elements its first slice holds
// when that slice is short (0: every slice is full but for rounding).
struct Torus2dChannel {
    bool x_first = true;
    bool reversed = false;
    size_t begin = 0;
    size_t count = 0;
    size_t lead = 0;
};
// The kTorus2dChannels channels of an allreduce of `count` elements on an
// x-by-y grid in slices of up to x*y*chunk elements: the builder runs them
// and the cost model times them, so both read the same layout.
std::vector<Torus2dChannel> torus2d_layout(size_t count, int x, int y, size_t chunk);
// The same for reduce-scatter and allgather, whose `count` is one block's
// and whose slices are of up to `chunk` elements of each block.
std::vector<Torus2dChannel> torus2d_block_layout(size_t count, int x, int y, size_t chunk);

// Hierarchical (two-level) schedules for ranks on several hosts, given as
// the ranks of each host (Topology::host_groups(), at least two hosts):
// allreduce, reduce-scatter, allgather, broadcast, reduce, on
// hierarchical_channels() channels. See hierarchical.cpp. Other
// collectives, fewer than two hosts, groups that are not a partition of
// the ranks, or a root outside 0..p-1 get a schedule without channels.
// Calls of kHierarchicalSplitBytes and more take kHierarchicalChannels
// channels, so that one's exchanges within a host overlap another's
// across the network; smaller ones one, whose messages are fewer and
// larger (docs/performance.md, "Several hosts", has what set the figures).
constexpr size_t kHierarchicalChannels = 4;
constexpr size_t kHierarchicalSplitBytes = 512 * 1024;
size_t hierarchical_channels(const CollectiveArgs &args);
Schedule build_hierarchical(const CollectiveArgs &args, const std::vector<std::vector<int>> &host_groups);

// Dissemination barrier: ceil(log2 p) rounds of zero-byte messages.
Schedule build_dissemination_barrier(const CollectiveArgs &args, const std::vector<int> &ring);

// Linear gather and scatter (algorithm "direct"): the root receives every
// rank's block (gather) or sends every rank its block (scatter) itself,
// chunk by chunk, one rank after another per chunk. One channel. See
// direct.cpp. Another collective, or a root outside 0..p-1, gets a schedule
// without channels.
Schedule build_linear_gather(const CollectiveArgs &args);
Schedule build_linear_scatter(const CollectiveArgs &args);

// Alltoall, in place or not (see CollectiveArgs), one channel; see
// pairwise.cpp and direct.cpp for costs. Pairwise exchange ("pairwise"): p-1 rounds, in
// round k rank r sends to r+k and receives from r-k. Direct ("direct"):
// every chunk goes to all peers at once, then comes in from all of them;
// for small blocks. Other collectives get a schedule without channels.
Schedule build_pairwise_alltoall(const CollectiveArgs &args);
Schedule build_direct_alltoall(const CollectiveArgs &args);

// Point-to-point ("p2p"): one chunked stream to (send) or from (recv) the
// peer args.root, one channel. See p2p.cpp. A peer outside 0..p-1 or equal
// to args.rank, or another collective, gets a schedule without channels.
Schedule build_send(const CollectiveArgs &args);
Schedule build_recv(const CollectiveArgs &args);

} // namespace nnpccl
