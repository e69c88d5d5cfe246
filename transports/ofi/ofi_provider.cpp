// The ofi transport's choice of provider and NIC (ofi_provider.hpp).
#include "ofi_provider.hpp"

#include <cstring>

#include "config.hpp"
#include "ofi_transport.hpp"
#include "socket.hpp"

namespace nnpccl {

namespace {

constexpr uint32_t kApiVersion = FI_VERSION(1, 9);

bool is_loopback_domain(const fi_info *info) {
    const char *d = info->domain_attr->name;
    return d != nullptr && std::strcmp(d, "lo") == 0;
}

} // namespace

Status choose_provider(const std::string &nic_hint, InfoList *found, const fi_info **chosen) {
    const FabricLibrary *libfabric = nullptr;
    NNPCCL_TRY(open_fabric_library(&libfabric));
    InfoList hints;
    hints.libfabric = found->libfabric = libfabric;
    hints.head = libfabric->dupinfo(nullptr);
    if (hints.head == nullptr) return system_error("ofi: fi_allocinfo failed");
    fi_info *h = hints.head;
    h->caps = FI_TAGGED | FI_SEND | FI_RECV;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    std::string provider = env_string("NNPCCL_OFI_PROVIDER");
    if (provider.empty()) provider = env_string("FI_PROVIDER");
    if (!provider.empty()) h->fabric_attr->prov_name = strdup(provider.c_str());
    int rc = libfabric->getinfo(kApiVersion, nullptr, nullptr, 0, h, &found->head);
    if (rc != 0 || found->head == nullptr)
        return system_error("ofi: no libfabric provider offers reliable tagged messages%s: %s",
                            provider.empty() ? "" : (" (provider '" + provider + "' was asked for)").c_str(),
                            libfabric->message(rc).c_str());

    // Which one: an interface NNPCCL_SOCKET_IFNAME names, in its prefix,
    // exclusion or exact form as the rendezvous reads it (tcp names its
    // domains after interfaces); else, without a provider request, TCP on a
    // non-loopback interface, which reaches other hosts, preferring the NIC
    // nearest this rank's NUMA node; else the first.
    //
    // Of the two TCP providers libfabric 1.17 offers, "net" comes first: it
    // is the tcp provider's own fork with native RDM endpoints (libfabric
    // 1.18 merged it back as "tcp"), where "tcp;ofi_rxm" layers RDM over
    // connected endpoints with a rendezvous round trip per large message,
    // so net moves large messages faster (docs/performance.md, "TCP").
    // NNPCCL_OFI_PROVIDER=tcp still picks the layered one.
    std::string ifname = env_string("NNPCCL_SOCKET_IFNAME");
    auto score = [&](const fi_info *i) {
        const char *prov = i->fabric_attr->prov_name != nullptr ? i->fabric_attr->prov_name : "";
        const char *dom = i->domain_attr->name != nullptr ? i->domain_attr->name : "";
        int s = 0;
        if (!ifname.empty() && interface_matches(ifname, dom)) s += 8;
        if (ifname.empty() && !nic_hint.empty() && nic_hint == dom) s += 1; // the rank's nearest NIC
        if (provider.empty() && std::strcmp(prov, "net") == 0) s += 5;
        if (provider.empty() && std::strncmp(prov, "tcp", 3) == 0) s += 4;
        if (!is_loopback_domain(i)) s += 2;
        return s;
    };
    *chosen = nullptr;
    for (const fi_info *i = found->head; i != nullptr; i = i->next)
        if (*chosen == nullptr || score(i) > score(*chosen)) *chosen = i;
    return Status::ok();
}

double OfiTransport::reported_link_gbps(const std::string &nic_hint) {
    InfoList found;
    const fi_info *chosen = nullptr;
    if (!choose_provider(nic_hint, &found, &chosen) || chosen->nic == nullptr || chosen->nic->link_attr == nullptr)
        return 0;
    // link_attr->speed is in bits per second; 0 where the NIC does not say.
    return static_cast<double>(chosen->nic->link_attr->speed) / 8e9;
}

std::string OfiTransport::chosen_provider(const std::string &nic_hint) {
    InfoList found;
    const fi_info *chosen = nullptr;
    if (!choose_provider(nic_hint, &found, &chosen) || chosen->fabric_attr->prov_name == nullptr) return "";
    return chosen->fabric_attr->prov_name;
}

} // namespace nnpccl
