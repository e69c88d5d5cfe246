// The schedule builders, one per algorithm, and the planner that picks one
// for a call on a topology.
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

// Dissemination barrier: ceil(log2 p) rounds of zero-byte messages.
Schedule build_dissemination_barrier(const CollectiveArgs &args, const std::vector<int> &ring);

// The schedule this rank runs for `args` on `topology`.
std::shared_ptr<const Schedule> plan_schedule(const CollectiveArgs &args, const Topology &topology);

} // namespace nnpccl
