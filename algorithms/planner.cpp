// The planner: which algorithm serves a call. Direct for allreduces of up
// to kDirectMaxBytes (latency bound: one message time instead of 2(p-1)),
// ring for everything else that moves data, dissemination for the barrier.
// The cost-model selector replaces this rule.
#include "planner.hpp"

namespace nnpccl {

namespace {
// Measured on 2 ranks: direct wins over the ring up to a few KiB over tcp,
// and is no slower over shared memory.
constexpr size_t kDirectMaxBytes = 4096;
} // namespace

std::shared_ptr<const Schedule> plan_schedule(const CollectiveArgs &args, const Topology &topology) {
    if (args.collective == Collective::Allreduce && args.nranks > 1 && args.count * args.elem_size <= kDirectMaxBytes)
        return std::make_shared<const Schedule>(build_direct_allreduce(args));
    if (args.collective == Collective::Barrier)
        return std::make_shared<const Schedule>(build_dissemination_barrier(args, topology.rings().front()));
    return std::make_shared<const Schedule>(build_ring(args, topology.rings()));
}

} // namespace nnpccl
