// ccl-bench's views of the planner, which start no ranks: --list-algos
// prints the algorithm registry, --explain the planner's predictions for a
// sweep of sizes on a topology loaded in this process.
#pragma once

#include <cstddef>
#include <string>

#include "nnpccl.h"
#include "nnpccl_inspect.h"
#include "size_sweep.hpp"

namespace nnpccl_bench {

// `ccl-bench --list-algos`: every algorithm with the collectives it
// serves, when it applies and what it does, on stdout.
void print_algorithm_list();

// Whether `name` is an algorithm serving `collective`; if not, *error says
// so and which algorithms do.
bool check_algorithm_name(nnpccl_collective_t collective, const std::string &name, std::string *error);

struct ExplainRequest {
    nnpccl_collective_t collective = NNPCCL_COLL_ALLREDUCE;
    std::string topology; // a preset or a topology file; empty = flat
    int nranks = 0;       // 0: one rank per chip of the topology
    nnpccl_tools::SizeSweep sizes; // as ccl-bench's -b, -e, -f and -i
    nnpccl_datatype_t datatype = NNPCCL_FLOAT32;
    int root = 0;
};

// `ccl-bench COLLECTIVE --explain`: for each size of the sweep (rounded as
// the benchmark rounds it), every candidate's predicted time and bus
// bandwidth, the choice marked, and the lower bound. The planner's inputs
// are the ranks' own: NNPCCL_CHUNK_SIZE, NNPCCL_ALGO, this host's reduction
// speed. Returns the exit status: 0, or 2 when the topology does not load,
// the environment is malformed or a forced algorithm does not apply.
int explain_plans(const ExplainRequest &request);

} // namespace nnpccl_bench
