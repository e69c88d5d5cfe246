// The libfabric transport's options, as the user set them. Which provider
// and interface it uses (NNPCCL_OFI_PROVIDER, FI_PROVIDER,
// NNPCCL_SOCKET_IFNAME) is read where the provider is chosen
// (ofi_provider.cpp).
#pragma once

#include "config.hpp"
#include "status.hpp"

namespace nnpccl {

struct OfiOptions {
    int slots = kDefaultStreamSlots; // NNPCCL_SHM_SLOTS too: receives posted per stream
    bool send_in_place = true;       // NNPCCL_OFI_SEND_IN_PLACE=0: every message through registered slots, both ways
};

// From the environment; a malformed value is an invalid argument naming the variable.
Status resolve_ofi_options(OfiOptions *out);

} // namespace nnpccl
