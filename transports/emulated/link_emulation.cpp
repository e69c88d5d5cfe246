#include "link_emulation.hpp"

#include "config.hpp"

namespace nnpccl {

Status resolve_link_emulation(LinkEmulation *out) {
    LinkEmulation emulation;
    NNPCCL_TRY(env_flag("NNPCCL_EMULATE_LINKS", &emulation.links));
    NNPCCL_TRY(env_number("NNPCCL_EMULATE_SCALE", 1e-3, 1e6, "0.001 to 1e6", &emulation.scale));
    *out = emulation;
    return Status::ok();
}

} // namespace nnpccl
