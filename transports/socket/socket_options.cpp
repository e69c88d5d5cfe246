#include "socket_options.hpp"

namespace nnpccl {

Status resolve_socket_options(SocketOptions *out) {
    SocketOptions socket;
    NNPCCL_TRY(resolve_stream_slots(&socket.slots));
    *out = socket;
    return Status::ok();
}

} // namespace nnpccl
