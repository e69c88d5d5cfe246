// One call, in the one shape every part of the runtime passes around: the
// collective as the planner sees it (CollectiveArgs: what every rank must
// agree on, and this rank's place in it) and the buffers and element type
// it runs on. The C API fills in what the caller gave; the communicator
// completes the rest (rank, ranks, chunk, element size, in place) before it
// plans or runs it. On the wire an operation is announced by its
// OperationDescriptor (executor.hpp), a fixed-size header, not by this.
#pragma once

#include <cstddef>

#include "collective.hpp"
#include "nnpccl.h"

namespace nnpccl {

struct Call : CollectiveArgs {
    const void *send = nullptr;
    void *recv = nullptr;
    nnpccl_datatype_t datatype = NNPCCL_FLOAT32;
    nnpccl_redop_t op = NNPCCL_SUM;
};

// Fills in what the caller's arguments leave to the communicator: `rank`
// of `nranks`, the chunk in elements, the element size, and whether the
// call is in place, by pointer equality as NCCL lays it out (the rank's
// part of the output is its input; for gather and scatter only the root's
// pointers count).
void complete_call(Call *call, int rank, int nranks, size_t chunk_bytes);

} // namespace nnpccl
