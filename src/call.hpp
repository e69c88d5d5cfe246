// One call, in the one shape every part of the runtime passes around: the
// collective as the planner sees it (CollectiveArgs: what every rank must
// agree on, and this rank's place in it) and the buffers and element type
// it runs on. The C API fills in what the caller gave; the communicator
// completes the rest (rank, ranks, chunk, element size, in place) before it
// plans or runs it. On the wire an operation is announced by its
// OperationDescriptor (executor.hpp), a fixed-size header, not by this.
#pragma once

#include <algorithm>
#include <cstddef>

#include "collective.hpp"
#include "dtype.hpp"
#include "nnpccl.h"

namespace nnpccl {

struct Call : CollectiveArgs {
    const void *send = nullptr;
    void *recv = nullptr;
    nnpccl_datatype_t datatype = NNPCCL_FLOAT32;
    nnpccl_redop_t op = NNPCCL_SUM;
};

// Whether the call is in place, by pointer equality as NCCL lays it out
// (the rank's part of the output is its input; for gather and scatter only
// the root's pointers count).
inline bool is_in_place(const Call &call, int rank) {
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

// Fills in what the caller's arguments leave to the communicator: `rank`
// of `nranks`, the chunk in elements, the element size, and whether the
// call is in place. Inline: every call asks.
inline void complete_call(Call *call, int rank, int nranks, size_t chunk_bytes) {
    const size_t elem = std::max<size_t>(1, datatype_size(call->datatype));
    call->rank = rank;
    call->nranks = nranks;
    call->in_place = is_in_place(*call, rank);
    // Element sizes are powers of two: a shift, not a division.
    call->chunk_elems = std::max<size_t>(1, chunk_bytes >> __builtin_ctzll(elem));
    call->elem_size = elem;
}

} // namespace nnpccl
