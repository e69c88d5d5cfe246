// The planner: which algorithm serves a call on a topology, and its schedule.
#pragma once

#include <memory>

#include "builders.hpp"

namespace nnpccl {

// The schedule this rank runs for `args` on `topology`.
std::shared_ptr<const Schedule> plan_schedule(const CollectiveArgs &args, const Topology &topology);

} // namespace nnpccl
