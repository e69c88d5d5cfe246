// ccl-bench's runs on a communicator: the nccl-tests-style sweep of one
// collective over sizes, and --compare, every algorithm of the collective
// against the selector's choice (ccl_bench.cpp parses the options).
#pragma once

#include <cstddef>
#include <string>

#include "nnpccl.h"
#include "nnpccl_inspect.h"
#include "size_sweep.hpp"

namespace nnpccl_bench {

struct CollInfo {
    const char *name;
    nnpccl_collective_t coll; // sendrecv: Send (and its Recv)
    // sendrecv, as nccl-tests's sendrecv_perf: every rank sends to rank+1 and
    // receives from rank-1 at once (an isend and an irecv, then both waits).
    bool exchange = false;
};

struct Options {
    const CollInfo *coll = nullptr;
    nnpccl_tools::SizeSweep sizes; // -b, -e, -f, -i
    int iters = 20;
    int warmup = 5;
    int check = 1;
    nnpccl_datatype_t dt = NNPCCL_FLOAT32;
    nnpccl_redop_t op = NNPCCL_SUM;
    int root = 0;
    int np = 0;
    double soak_seconds = 0;
    uint64_t soak_seed = 0; // 0: from the clock
    std::string json_path;
    bool explain = false; // print the planner's predictions instead of running
    int compare_rounds = 0; // --compare: rounds of every algorithm interleaved, instead of the sweep
    std::string tune_path;  // --tune: where --compare writes the fastest per size
};

// Each returns the exit status: 0, or 1 when a value was wrong or written
// out of bounds. A failed call aborts the communicator and exits.
// The sweep: out-of-place and in-place time, algbw, busbw, #wrong per size.
int run_sweep(const Options &o, nnpccl_comm_t comm, int rank, int nranks);
// --compare: see ccl-bench --help.
int run_compare(const Options &o, nnpccl_comm_t comm, int rank, int nranks);

} // namespace nnpccl_bench
