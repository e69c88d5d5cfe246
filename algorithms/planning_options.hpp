// The planner's options as the user set them: the machine (NNPCCL_TOPO,
// NNPCCL_NET), the chunk, the forced algorithms and the tuning file; and
// NNPCCL_TUNE, which lets the runtime's tuner (src/tuner.hpp) measure. Both
// are planning inputs (planning.hpp), declared here, where the runtime and
// ccl-sim both read them.
#pragma once

#include <cstddef>
#include <string>

#include "machine_options.hpp"
#include "nnpccl.h"
#include "status.hpp"

namespace nnpccl {

// The machine's options are the planner's too: it plans on the machine they describe.
struct PlanningOptions : MachineOptions {
    size_t chunk_bytes = 512 * 1024;                // NNPCCL_CHUNK_SIZE: pipelining unit (data per message)
    std::string chunk_source = "NNPCCL_CHUNK_SIZE"; // or config->chunk_bytes, for error messages
    // NNPCCL_ALGO's syntax (algorithms/algo_override.hpp), unparsed: the
    // algorithms layer parses it when the communicator is made. `source`
    // names where it came from, for its error messages.
    std::string algorithms;
    std::string algorithms_source = "NNPCCL_ALGO";
    // NNPCCL_TUNING_FILE: a path (algorithms/tuning_file.hpp); rank 0's counts.
    std::string tuning_file;
};

struct TuningOptions {
    bool enabled = false; // NNPCCL_TUNE=1: measured tuning (src/tuner.hpp); rank 0's counts
};

// From `config` (null, or any size check_config_size() accepts), then the
// environment, then the defaults; a malformed value is an invalid argument
// naming the variable or the config's field.
Status resolve_planning_options(const nnpccl_config_t *config, PlanningOptions *out);
Status resolve_tuning_options(TuningOptions *out);

} // namespace nnpccl
