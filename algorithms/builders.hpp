// The schedule builders, one per algorithm (planner.hpp picks one).
#pragma once

#include <memory>

#include "collective.hpp"
#include "schedule.hpp"
#include "topology.hpp"

namespace nnpccl {

// Ring algorithms on the given rings (one channel per ring): allreduce,
// reduce-scatter, allgather, broadcast, reduce. See ring.cpp for costs.
Schedule build_ring(const CollectiveArgs &args, const std::vector<std::vector<int>> &rings);

// Direct (one-shot) allreduce for small messages: everyone sends everything
// to everyone and folds the contributions in rank order. See direct.cpp.
Schedule build_direct_allreduce(const CollectiveArgs &args);

// Recursive halving-doubling (Rabenseifner): allreduce, reduce-scatter,
// allgather on any number of ranks (the ranks beyond the largest power of
// two fold into a neighbour first). One channel. See halving_doubling.cpp.
// Other collectives get a schedule without channels.
Schedule build_halving_doubling(const CollectiveArgs &args);

// Double binary tree: allreduce (reduce up, broadcast down, overlapped),
// broadcast and reduce (both trees rooted at args.root). Two channels, one
// per tree, each with half the data. See double_binary_tree.cpp. Other
// collectives get a schedule without channels.
Schedule build_double_binary_tree(const CollectiveArgs &args);

// 2D torus allreduce on an x-by-y grid of ranks (rank r at (r % x, r / x)):
// reduce-scatter along X, allreduce along Y, allgather along X. Needs
// x·y == args.nranks; two channels, one per ring direction. See
// torus2d.cpp. Any other collective, or a grid that does not fit, gets a
// schedule without channels.
Schedule build_torus2d(const CollectiveArgs &args, int x, int y);

// Dissemination barrier: ceil(log2 p) rounds of zero-byte messages.
Schedule build_dissemination_barrier(const CollectiveArgs &args, const std::vector<int> &ring);

} // namespace nnpccl
