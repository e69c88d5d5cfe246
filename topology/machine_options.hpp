// The machine a communicator is planned on, as the user describes it:
// NNPCCL_TOPO and NNPCCL_NET. The planner's options extend these
// (algorithms/planning_options.hpp); topology_options() (presets.hpp) turns
// them into the links' figures.
#pragma once

#include <string>

#include "status.hpp"

namespace nnpccl {

struct MachineOptions {
    std::string topology; // NNPCCL_TOPO: a preset name or a topology file; empty = flat
    // NNPCCL_NET=GBPS[,LATENCY_US]: the network between hosts of a job on
    // several hosts (and of hosts:... presets); 0 = the default (presets.hpp).
    double network_gbps = 0;
    double network_latency_us = -1;
};

// From the environment; a malformed NNPCCL_NET is an invalid argument naming it.
Status resolve_machine_options(MachineOptions *out);

} // namespace nnpccl
