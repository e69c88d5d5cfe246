// Where a local rank runs on its host: NNPCCL_PIN=auto (each local rank on a
// core of its own, spread over packages and NUMA nodes, when there are at
// least as many cores as local ranks; round robin over the cores
// otherwise), off, or a
// CPU list ("0,2,4-5": local rank i takes the i-th CPU). The calling thread
// is pinned, so the progress thread it starts later inherits the core.
#pragma once

#include <string>

#include "status.hpp"

namespace nnpccl {

struct RankPlacement {
    std::string pinned_to; // "core 3 (CPUs 3)", "CPU 4", or "" when not pinned
    int numa_node = -1;    // the rank's NUMA node where known; shm queues prefer it
    int numa_nodes = 1;
    std::string nic;       // the NIC nearest that node ("" when none); ofi prefers it
    int cores = 0;         // usable cores on the host (0 when unknown)
};

Status place_local_rank(const std::string &pin_spec, int local_rank, int local_ranks, RankPlacement *out);

} // namespace nnpccl
