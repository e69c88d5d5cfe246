#include "ofi_options.hpp"

namespace nnpccl {

Status resolve_ofi_options(OfiOptions *out) {
    OfiOptions ofi;
    NNPCCL_TRY(resolve_stream_slots(&ofi.slots));
    NNPCCL_TRY(env_flag("NNPCCL_OFI_SEND_IN_PLACE", &ofi.send_in_place));
    *out = ofi;
    return Status::ok();
}

} // namespace nnpccl
