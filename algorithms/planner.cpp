// The planner: which algorithm serves a call. Ring for the data-moving
// collectives, dissemination for the barrier.
#include "builders.hpp"

namespace nnpccl {

std::shared_ptr<const Schedule> plan_schedule(const CollectiveArgs &args, const Topology &topology) {
    if (args.collective == Collective::Barrier)
        return std::make_shared<const Schedule>(build_dissemination_barrier(args, topology.rings().front()));
    return std::make_shared<const Schedule>(build_ring(args, topology.rings()));
}

const char *collective_name(Collective c) {
    switch (c) {
    case Collective::Allreduce: return "allreduce";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::Allgather: return "allgather";
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::Barrier: return "barrier";
    }
    return "?";
}

} // namespace nnpccl
