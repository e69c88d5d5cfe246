// ccl-bench --soak SECONDS: a random mix of collectives, sizes, datatypes,
// ops and placements, every result checked bit for bit, for a while; then a
// report of operations, bytes, wrong values and the process's memory and
// file-descriptor counts before and after, to catch leaks and corruption
// that a sweep of one collective does not.
#pragma once

#include <cstdint>

#include "nnpccl.h"

// Returns the exit status: 0 when every value was right and nothing grew.
// `seed` (rank 0's counts) picks the mix; 0 takes one from the clock.
int run_soak(nnpccl_comm_t comm, int rank, int nranks, double seconds, size_t max_bytes, uint64_t seed);
