// Which libfabric provider and NIC the ofi transport uses: the one
// choice that create(), reported_link_gbps() and chosen_provider() share,
// apart so that the endpoint's set-up reads without the scoring.
#pragma once

#include <rdma/fabric.h>

#include <string>

#include "fabric_library.hpp"
#include "status.hpp"

namespace nnpccl {

// Frees fi_info lists on every path out of create().
struct InfoList {
    const FabricLibrary *libfabric = nullptr;
    fi_info *head = nullptr;
    ~InfoList() {
        if (head != nullptr) libfabric->freeinfo(head);
    }
};

// The providers libfabric offers for reliable tagged messages (in
// *found) and the one this rank uses (*chosen, pointing into *found).
Status choose_provider(const std::string &nic_hint, InfoList *found, const fi_info **chosen);

} // namespace nnpccl
