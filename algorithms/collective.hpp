// What a builder is asked to plan: one collective call as seen by one rank.
#pragma once

#include <cstddef>
#include <string_view>

namespace nnpccl {

enum class Collective { Allreduce, ReduceScatter, Allgather, Broadcast, Reduce, Barrier };

constexpr Collective kAllCollectives[] = {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather,
                                          Collective::Broadcast, Collective::Reduce, Collective::Barrier};

const char *collective_name(Collective c);
// The collective whose collective_name() is `name`; false when none is.
bool collective_from_name(std::string_view name, Collective *out);

struct CollectiveArgs {
    Collective collective = Collective::Allreduce;
    // Elements: allreduce/broadcast/reduce the buffer; reduce-scatter the
    // per-rank block (recvcount); allgather the per-rank block (sendcount).
    size_t count = 0;
    int root = -1;
    bool in_place = false;
    int rank = 0;
    int nranks = 1;
    size_t chunk_elems = 1; // the most elements one message may carry
    size_t elem_size = 4;   // bytes per element (the planner weighs bytes, not elements)
};

} // namespace nnpccl
