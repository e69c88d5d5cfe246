#include "collective.hpp"

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

} // namespace nnpccl
