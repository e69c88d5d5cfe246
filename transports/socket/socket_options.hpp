// nnpccl's TCP transport's options, as the user set them.
#pragma once

#include "config.hpp"
#include "status.hpp"

namespace nnpccl {

struct SocketOptions {
    int slots = kDefaultStreamSlots; // NNPCCL_SHM_SLOTS too: messages in flight per stream, each way
};

// From the environment; a malformed value is an invalid argument naming the variable.
Status resolve_socket_options(SocketOptions *out);

} // namespace nnpccl
