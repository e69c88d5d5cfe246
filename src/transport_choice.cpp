// The table of transports, the choice of what reaches other hosts, and the
// routes (transport_choice.hpp).
#include "transport_choice.hpp"

#include <iterator>

#include "init_wire.hpp"
#include "log.hpp"
#include "ofi/ofi_transport.hpp"
#include "registry.hpp"
#include "shm/shm_transport.hpp"
#include "socket/socket_transport.hpp"

namespace nnpccl {

namespace {

// Whether libfabric's provider runs over TCP (or IP, or within the host),
// where nnpccl's own sockets do the same job with fewer system calls
// (docs/performance.md, "TCP on nnpccl's own sockets").
bool runs_over_tcp(const std::string &provider) {
    const std::string core = provider.substr(0, provider.find(';'));
    return core == "tcp" || core == "net" || core == "sockets" || core == "udp" || core == "shm";
}

// What reaches ranks on other hosts: NNPCCL_NET_TRANSPORT's choice, or
// with auto libfabric where its provider is a fabric of its own (verbs,
// efa, psm3, ...) on every rank, else the sockets. Collective: the ranks
// must agree, and an explicit choice that differs between ranks is an error.
Status choose_network(const TransportSetup &setup, TransportMode *out) {
    const NetTransport asked = setup.settings.net_transport;
    std::string mine = "socket";
    std::string why = "NNPCCL_NET_TRANSPORT";
    if (asked == NetTransport::Ofi) {
        mine = "ofi";
    } else if (asked == NetTransport::Auto) {
        const bool provider_asked = !env_string("NNPCCL_OFI_PROVIDER").empty() || !env_string("FI_PROVIDER").empty();
        const std::string provider = OfiTransport::chosen_provider(setup.nic_hint);
        if (provider_asked && !provider.empty()) {
            mine = "ofi";
            why = "a libfabric provider was asked for (NNPCCL_OFI_PROVIDER or FI_PROVIDER)";
        } else if (!provider.empty() && !runs_over_tcp(provider)) {
            mine = "ofi";
            why = "libfabric's provider here is " + provider;
        } else {
            why = provider.empty() ? "libfabric offers no provider here"
                                   : "libfabric's provider here (" + provider + ") runs over TCP";
        }
    }
    using Network = NetworkChoiceRecord::Network;
    const NetworkChoiceRecord said{mine == "ofi" ? Network::Ofi : Network::Socket, asked != NetTransport::Auto};
    std::vector<std::string> all;
    NNPCCL_TRY(setup.bootstrap.allgather(encode_network_choice_record(said), setup.deadline, &all));
    bool any_asked = false;
    int differs = -1; // the first rank whose choice is not this rank's
    Network theirs = said.network;
    for (int r = 0; r < setup.nranks; ++r) {
        NetworkChoiceRecord choice;
        if (Status decoded = decode_network_choice_record(all[static_cast<size_t>(r)], &choice); !decoded)
            return Status(decoded.code(), format("rank %d's %s", r, decoded.message().c_str()));
        any_asked = any_asked || choice.asked;
        if (choice.network != said.network && differs < 0) {
            differs = r;
            theirs = choice.network;
        }
    }
    if (differs >= 0 && any_asked)
        return invalid_usage("NNPCCL_NET_TRANSPORT: rank %d reaches other hosts over %s, rank %d over %s; set it alike "
                             "on every rank",
                             setup.rank, mine.c_str(), differs, network_name(theirs));
    if (differs >= 0) {
        mine = "socket";
        why = "the ranks' libfabric providers differ";
    }
    *out = mine == "ofi" ? TransportMode::Ofi : TransportMode::Socket;
    if (setup.rank == 0) LOG_INFO("ranks on other hosts are reached over %s (%s)", mine.c_str(), why.c_str());
    return Status::ok();
}

// What decides which transport serves a pair of ranks, the same on every
// rank: where the ranks run, NNPCCL_TRANSPORT, and what reaches other hosts.
struct Reach {
    const JobHosts &hosts;
    bool all_over_network; // NNPCCL_TRANSPORT=ofi or socket: ranks of one host too
    TransportMode network; // Socket or Ofi; any other where no rank needs the network
    bool same_host(int a, int b) const {
        return hosts.host[static_cast<size_t>(a)] == hosts.host[static_cast<size_t>(b)];
    }
};

// One transport nnpccl has. The table's order is its preference: a peer
// goes over the first transport that can reach it.
struct TransportEntry {
    const char *name;
    bool over_network; // reaches other hosts, so waits for choose_network()
    // Whether it carries the messages between ranks `a` and `b`.
    bool (*can_reach)(const Reach &reach, int a, int b);
    // Whether NNPCCL_TRANSPORT names it as the one for every peer: it is
    // opened then even where no pair needs it (a job of one rank), so a
    // setting that cannot work fails whatever the job's size.
    bool (*named)(const Reach &reach);
    // Opens it (collective over the bootstrap); *description, where not
    // empty, says over what, for the log.
    Status (*create)(const TransportSetup &args, std::unique_ptr<Transport> *out, std::string *description);
};

Status open_shm(const TransportSetup &args, std::unique_ptr<Transport> *out, std::string * /*description*/) {
    std::unique_ptr<ShmTransport> made;
    NNPCCL_TRY(ShmTransport::create(args.bootstrap, args.hosts.local, args.channels, args.settings.shm,
                                    args.message_bytes, args.numa_node, args.deadline, &made));
    *out = std::move(made);
    return Status::ok();
}

Status open_socket(const TransportSetup &args, std::unique_ptr<Transport> *out, std::string *description) {
    std::unique_ptr<SocketTransport> made;
    NNPCCL_TRY(SocketTransport::create(args.bootstrap, args.channels, args.settings.socket, args.message_bytes,
                                       args.deadline, &made));
    *description = made->description();
    *out = std::move(made);
    return Status::ok();
}

Status open_ofi(const TransportSetup &args, std::unique_ptr<Transport> *out, std::string *description) {
    std::unique_ptr<OfiTransport> made;
    NNPCCL_TRY(OfiTransport::create(args.bootstrap, args.channels, args.settings.ofi, args.message_bytes, args.nic_hint,
                                    args.deadline, &made));
    *description = made->description();
    *out = std::move(made);
    return Status::ok();
}

// The network transport `mode` reaches ranks on other hosts, and with
// NNPCCL_TRANSPORT=ofi or socket those of this host too.
template <TransportMode mode> bool network_reaches(const Reach &reach, int a, int b) {
    return reach.network == mode && (reach.all_over_network || !reach.same_host(a, b));
}
template <TransportMode mode> bool network_named(const Reach &reach) {
    return reach.all_over_network && reach.network == mode;
}

// Shared memory first: within a host it is the fastest way there is.
const TransportEntry kTransports[] = {
    {"shm", false, [](const Reach &reach, int a, int b) { return !reach.all_over_network && reach.same_host(a, b); },
     [](const Reach &) { return false; }, open_shm},
    {"socket", true, network_reaches<TransportMode::Socket>, network_named<TransportMode::Socket>, open_socket},
    {"ofi", true, network_reaches<TransportMode::Ofi>, network_named<TransportMode::Ofi>, open_ofi},
};
constexpr size_t kTransportCount = std::size(kTransports);

// The table entry that serves the pair `a`, `b`; kTransportCount for none.
size_t serving(const Reach &reach, int a, int b) {
    for (size_t i = 0; i < kTransportCount; ++i)
        if (kTransports[i].can_reach(reach, a, b)) return i;
    return kTransportCount;
}

// Whether every rank opens entry `i`: some pair of ranks goes over it.
bool needed(const Reach &reach, size_t i, int nranks) {
    if (kTransports[i].named(reach)) return true;
    for (int a = 0; a < nranks; ++a)
        for (int b = a + 1; b < nranks; ++b)
            if (serving(reach, a, b) == i) return true;
    return false;
}

// The routes: each peer over the transport of the table that serves it,
// `opened` holding what each entry opened (null where none was).
std::vector<Transport *> routes(const TransportSetup &setup, const Reach &reach, Transport *const *opened,
                                const std::string *labels) {
    std::vector<Transport *> route(static_cast<size_t>(setup.nranks), nullptr);
    std::string peers[kTransportCount];
    for (int r = 0; r < setup.nranks; ++r) {
        if (r == setup.rank) continue;
        const size_t i = serving(reach, setup.rank, r);
        if (i == kTransportCount) continue;
        route[static_cast<size_t>(r)] = opened[i];
        peers[i] += (peers[i].empty() ? "" : ",") + std::to_string(r);
    }
    for (size_t i = 0; i < kTransportCount; ++i)
        if (!peers[i].empty())
            LOG_INFO("rank %d reaches rank(s) %s over %s", setup.rank, peers[i].c_str(), labels[i].c_str());
    return route;
}

} // namespace

Status open_transports(const TransportSetup &setup, Links *links) {
    Reach reach{setup.hosts, network_only(setup.settings.transport), setup.settings.transport};
    bool network_chosen = false;
    Transport *opened[kTransportCount] = {};
    std::string labels[kTransportCount];
    for (size_t i = 0; i < kTransportCount; ++i) {
        if (kTransports[i].over_network && !network_chosen) {
            network_chosen = true;
            if (!reach.all_over_network && setup.hosts.any_remote) NNPCCL_TRY(choose_network(setup, &reach.network));
        }
        if (!needed(reach, i, setup.nranks)) continue;
        std::unique_ptr<Transport> made;
        std::string description;
        NNPCCL_TRY(kTransports[i].create(setup, &made, &description));
        labels[i] = kTransports[i].name + (description.empty() ? "" : " (" + description + ")");
        opened[i] = links->add(std::move(made));
    }
    links->set_routes(routes(setup, reach, opened, labels));
    return Status::ok();
}

} // namespace nnpccl
