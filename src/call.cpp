#include "call.hpp"

#include <algorithm>

#include "dtype.hpp"

namespace nnpccl {

namespace {

bool is_in_place(const Call &call, int rank) {
    const size_t block = call.count * datatype_size(call.datatype);
    const size_t mine = static_cast<size_t>(rank) * block;
    switch (call.collective) {
    case Collective::Allreduce:
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::Alltoall: return call.send == call.recv;
    case Collective::ReduceScatter: return call.recv == static_cast<const char *>(call.send) + mine;
    case Collective::Allgather: return call.send == static_cast<const char *>(call.recv) + mine;
    // The other ranks' recv (gather) or send (scatter) may be NULL.
    case Collective::Gather: return rank == call.root && call.send == static_cast<const char *>(call.recv) + mine;
    case Collective::Scatter: return rank == call.root && call.recv == static_cast<const char *>(call.send) + mine;
    case Collective::Send:
    case Collective::Recv:
    case Collective::Barrier: break;
    }
    return false;
}

} // namespace

void complete_call(Call *call, int rank, int nranks, size_t chunk_bytes) {
    const size_t elem = std::max<size_t>(1, datatype_size(call->datatype));
    call->rank = rank;
    call->nranks = nranks;
    call->in_place = is_in_place(*call, rank);
    call->chunk_elems = std::max<size_t>(1, chunk_bytes / elem);
    call->elem_size = elem;
}

} // namespace nnpccl
