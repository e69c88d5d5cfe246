// peer_bench.hpp — what mpi-bench, gloo-bench and socket-bench share: the
// nccl-tests command line (peer_options.hpp), the collectives and datatypes
// (peer_types.hpp), the buffer layout of each collective and the test
// pattern that makes every reduction exact in any order (peer_check.hpp),
// and the nccl-tests report format (peer_report.hpp).
//
// Nothing here talks to MPI or Gloo, so the peers print rows that line up
// column for column with each other and with ccl-bench (docs/design.md,
// "Benchmark output"). Neither links the library under test: the command
// line and the numbers come from the tools' own library (tools/common/).
#pragma once

#include "peer_check.hpp"
#include "peer_options.hpp"
#include "peer_report.hpp"
#include "peer_types.hpp"

namespace peer_bench {

// The row of `bytes` on this rank, as every peer runs it.
inline Case case_for(const Options &opts, int rank, int nranks, size_t bytes) {
    return Case{opts.collective,
                opts.op,
                opts.dtype,
                rank,
                nranks,
                opts.root,
                layout_for(opts.collective, bytes, info(opts.dtype).size, nranks)};
}

} // namespace peer_bench
