#include "shm_options.hpp"

namespace nnpccl {

Status resolve_shm_options(ShmOptions *out) {
    constexpr size_t kMinShmBytes = size_t{1} << 20;
    constexpr size_t kMaxShmBytes = size_t{1} << 40;
    ShmOptions shm;
    NNPCCL_TRY(resolve_stream_slots(&shm.slots));
    NNPCCL_TRY(env_size("NNPCCL_SHM_BYTES", kMinShmBytes, kMaxShmBytes,
                        "1M to 1024G (the shared memory each rank's queues may hold; e.g. 64M)", &shm.bytes,
                        &shm.bytes_set));
    *out = shm;
    return Status::ok();
}

} // namespace nnpccl
