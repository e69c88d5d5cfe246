// One call, in the one shape every part of the runtime passes around: the
// collective as the planner sees it (CollectiveArgs: what every rank must
// agree on, and this rank's place in it) and the buffers and element type
// it runs on. The C API fills in what the caller gave; the communicator
// completes the rest (rank, ranks, chunk, element size, in place) before it
// plans or runs it. On the wire an operation is announced by its
// OperationDescriptor (executor.hpp), a fixed-size header, not by this.
#pragma once

#include "collective.hpp"
#include "nnpccl.h"

namespace nnpccl {

struct Call : CollectiveArgs {
    const void *send = nullptr;
    void *recv = nullptr;
    nnpccl_datatype_t datatype = NNPCCL_FLOAT32;
    nnpccl_redop_t op = NNPCCL_SUM;
};

} // namespace nnpccl
