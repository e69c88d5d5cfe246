// Whether and how the communicator paces its traffic to the topology's
// links (emulated_transport.hpp), as the user set it.
#pragma once

#include "status.hpp"

namespace nnpccl {

struct LinkEmulation {
    bool links = false; // NNPCCL_EMULATE_LINKS=1: pace traffic to the topology's links
    double scale = 1.0; // NNPCCL_EMULATE_SCALE: emulated time runs this many times slower
};

// From the environment; a malformed value is an invalid argument naming the variable.
Status resolve_link_emulation(LinkEmulation *out);

} // namespace nnpccl
