#include "collective.hpp"

#include <algorithm>

namespace nnpccl {

const char *collective_name(Collective c) {
    switch (c) {
    case Collective::Allreduce: return "allreduce";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::Allgather: return "allgather";
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::Barrier: return "barrier";
    case Collective::Gather: return "gather";
    case Collective::Scatter: return "scatter";
    case Collective::Alltoall: return "alltoall";
    case Collective::Send: return "send";
    case Collective::Recv: return "recv";
    }
    return "?";
}

bool collective_from_name(std::string_view name, Collective *out) {
    for (Collective c : kAllCollectives) {
        if (name == collective_name(c)) {
            *out = c;
            return true;
        }
    }
    return false;
}

size_t call_bytes(const CollectiveArgs &args) {
    const size_t bytes = args.count * args.elem_size;
    switch (args.collective) {
    case Collective::ReduceScatter:
    case Collective::Allgather:
    case Collective::Gather:
    case Collective::Scatter:
    case Collective::Alltoall: return bytes * static_cast<size_t>(std::max(1, args.nranks));
    default: return bytes;
    }
}

double bus_bandwidth_factor(Collective c, int nranks) {
    const double p = std::max(1, nranks);
    switch (c) {
    case Collective::Allreduce: return 2 * (p - 1) / p;
    case Collective::ReduceScatter:
    case Collective::Allgather:
    case Collective::Gather:
    case Collective::Scatter:
    case Collective::Alltoall: return (p - 1) / p;
    default: return 1;
    }
}

} // namespace nnpccl
