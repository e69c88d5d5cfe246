// The shared-memory transport's options, as the user set them
// (NNPCCL_SHM_SLOTS, NNPCCL_SHM_BYTES).
#pragma once

#include <cstddef>

#include "config.hpp"
#include "status.hpp"

namespace nnpccl {

struct ShmOptions {
    int slots = kDefaultStreamSlots; // NNPCCL_SHM_SLOTS: slots per queue (pipelining depth), at most
    // NNPCCL_SHM_BYTES: the shared memory one rank's queues may hold
    // resident (its inbound queues and its outbound ones in its local
    // peers' segments). The transport gives each queue as many slots as fit,
    // up to `slots`; many local ranks get fewer.
    size_t bytes = kDefaultShmBytes;
    // Whether the user set `bytes`: then it is a bound, and a job that needs
    // more than it allows (2 slots per queue) fails at init. The default
    // yields to those 2 slots on hosts of more than 30 ranks (at the default
    // chunk). It gives up to 8 local ranks the full 8 slots (8 ranks' queues
    // take 113 MiB), so that with the few MiB the rest of the library holds
    // a rank stays within 128 MiB resident (docs/performance.md,
    // "Footprint"); 8 slots is what 8 ranks on 2 cores need to run at full
    // speed at 16-64 MiB.
    bool bytes_set = false;
    static constexpr size_t kDefaultShmBytes = size_t{120} << 20;
};

// From the environment; a malformed value is an invalid argument naming the variable.
Status resolve_shm_options(ShmOptions *out);

} // namespace nnpccl
