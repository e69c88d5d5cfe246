// The ofi transport's set-up and teardown: the fabric, domain, completion
// queue, address vector and endpoint on the chosen provider, the exchange
// of endpoint names through the bootstrap (create), each stream's
// registered buffers, and the closing that takes back what is still posted
// and the connections libfabric leaves open. Apart from the progress
// because it runs once, and most of it is libfabric's bookkeeping.
#include <dirent.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "bootstrap.hpp"
#include "ofi_provider.hpp"
#include "ofi_streams.hpp"

namespace nnpccl {

void OfiTransport::Impl::close_endpoint() {
    if (ep == nullptr) return;
    closing = true;
    // Take back every operation still posted before the endpoint goes:
    // closing an rxm endpoint with receives outstanding towards a peer
    // that died crashed inside libfabric 1.17.
    for (auto &entry : streams)
        for (auto *ops : {&entry.second->recv_ops, &entry.second->send_ops})
            for (SlotOp &op : *ops)
                if (op.busy) fi_cancel(&ep->fid, &op.ctx);
    for (auto *ops : {&beat_recvs, &beat_sends})
        for (SlotOp &op : *ops)
            if (op.busy) fi_cancel(&ep->fid, &op.ctx);
    // A few turns of progress with nothing left to complete, too: the net
    // provider of libfabric 1.17 never closes a connection it has accepted
    // but whose request it has not read when the endpoint closes (the TODO
    // in xnet_pep_close), so each one a peer opened just before it died,
    // or just before this rank failed, stayed open in this process (the
    // chaos test saw them, in CLOSE_WAIT). A turn accepts what has arrived
    // and reads the request, or the end, of what the turn before accepted.
    Deadline drained = Deadline::after_seconds(0.2);
    fi_cq_tagged_entry entries[16];
    fi_cq_err_entry err{};
    for (int quiet_turns = 0; quiet_turns < 3 && !drained.passed();) {
        ssize_t n = fi_cq_read(cq, entries, 16);
        if (n == -FI_EAVAIL) {
            fi_cq_readerr(cq, &err, 0);
        } else if (n == -FI_EAGAIN) {
            ++quiet_turns;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        } else if (n < 0) {
            break;
        }
    }
    fi_close(&ep->fid);
    ep = nullptr;
    unposted.clear();
}

OfiTransport::Impl::~Impl() {
    close_endpoint();
    for (auto &entry : streams) {
        Stream &s = *entry.second;
        if (s.send_mr != nullptr) fi_close(&s.send_mr->fid);
        if (s.recv_mr != nullptr) fi_close(&s.recv_mr->fid);
        std::free(s.send_mem);
        std::free(s.recv_mem);
    }
    if (av != nullptr) fi_close(&av->fid);
    if (cq != nullptr) fi_close(&cq->fid);
    if (domain != nullptr) fi_close(&domain->fid);
    if (fabric != nullptr) fi_close(&fabric->fid);
    close_leaked_connections();
}

// libfabric 1.17's net provider never closes a connection its passive
// endpoint accepted but whose connection request it has not read (the TODO
// in xnet_pep_close): a peer stopped between its connect and its request
// leaves one socket open in this process for good, which the close turns
// of close_endpoint() cannot help. With the fabric closed, nothing of
// libfabric's uses such sockets any more. They are the connected sockets
// whose local end is this endpoint's address (accepted there) or whose
// far end is a peer's endpoint (this rank's connections to it, should one
// be left the same way), and are closed here.
void OfiTransport::Impl::close_leaked_connections() {
    const int family = own_address.ss_family;
    if (family != AF_INET && family != AF_INET6) return;
    auto port_of = [](const sockaddr_storage &a) {
        return a.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in &>(a).sin_port
                                      : reinterpret_cast<const sockaddr_in6 &>(a).sin6_port;
    };
    auto same_host = [](const sockaddr_storage &a, const sockaddr_storage &b) {
        if (a.ss_family == AF_INET)
            return reinterpret_cast<const sockaddr_in &>(a).sin_addr.s_addr ==
                   reinterpret_cast<const sockaddr_in &>(b).sin_addr.s_addr;
        return std::memcmp(&reinterpret_cast<const sockaddr_in6 &>(a).sin6_addr,
                           &reinterpret_cast<const sockaddr_in6 &>(b).sin6_addr, sizeof(in6_addr)) == 0;
    };
    DIR *dir = opendir("/proc/self/fd");
    if (dir == nullptr) return;
    std::vector<int> leaked;
    while (dirent *e = readdir(dir)) {
        char *end = nullptr;
        long fd = std::strtol(e->d_name, &end, 10);
        struct stat info {};
        if (*end != '\0' || fd == dirfd(dir) || fstat(static_cast<int>(fd), &info) != 0 || !S_ISSOCK(info.st_mode))
            continue;
        sockaddr_storage local{}, peer{};
        socklen_t local_len = sizeof local, peer_len = sizeof peer;
        if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr *>(&local), &local_len) != 0 ||
            local.ss_family != family ||
            getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr *>(&peer), &peer_len) != 0)
            continue;
        auto is = [&](const sockaddr_storage &a, const sockaddr_storage &endpoint) {
            return port_of(a) == port_of(endpoint) && same_host(a, endpoint);
        };
        bool ours = is(local, own_address);
        for (const sockaddr_storage &endpoint : peer_addresses) ours = ours || is(peer, endpoint);
        if (ours) leaked.push_back(static_cast<int>(fd));
    }
    closedir(dir);
    for (int fd : leaked) close(fd);
    if (!leaked.empty()) LOG_INFO("ofi: closed %zu connection(s) the provider accepted and left open", leaked.size());
}

Status OfiTransport::Impl::register_buffer(void *buf, size_t len, uint64_t access, fid_mr **mr, void **desc) {
    *desc = nullptr;
    if (!(mr_mode & FI_MR_LOCAL)) return Status::ok();
    int rc = fi_mr_reg(domain, buf, len, access, 0, 0, 0, mr, nullptr);
    if (rc != 0) return system_error("ofi: fi_mr_reg of %zu bytes: %s", len, libfabric->message(rc).c_str());
    if (mr_mode & FI_MR_ENDPOINT) {
        rc = fi_mr_bind(*mr, &ep->fid, 0);
        if (rc == 0) rc = fi_mr_enable(*mr);
        if (rc != 0) return system_error("ofi: binding a memory region: %s", libfabric->message(rc).c_str());
    }
    *desc = fi_mr_desc(*mr);
    return Status::ok();
}

Stream &OfiTransport::Impl::stream(int peer, int channel) {
    auto key = std::make_pair(peer, channel);
    auto it = streams.find(key);
    if (it != streams.end()) return *it->second;
    auto s = std::make_unique<Stream>();
    s->peer = peer;
    s->channel = channel;
    // aligned_alloc wants a multiple of the alignment; page-aligned buffers
    // suit providers that register whole pages.
    const size_t bytes = (static_cast<size_t>(slots) * slot_bytes + 4095) & ~size_t{4095};
    s->send_mem = static_cast<unsigned char *>(std::aligned_alloc(4096, bytes));
    s->recv_mem = static_cast<unsigned char *>(std::aligned_alloc(4096, bytes));
    if (s->send_mem == nullptr || s->recv_mem == nullptr) {
        record_error(system_error("ofi: cannot allocate %zu bytes of buffers for rank %d", 2 * bytes, peer));
    } else {
        Status st = register_buffer(s->send_mem, bytes, FI_SEND, &s->send_mr, &s->send_desc);
        if (st) st = register_buffer(s->recv_mem, bytes, FI_RECV, &s->recv_mr, &s->recv_desc);
        if (!st) record_error(st);
    }
    s->send_ops.resize(static_cast<size_t>(slots));
    s->recv_ops.resize(static_cast<size_t>(slots));
    for (int i = 0; i < slots; ++i) {
        auto ui = static_cast<size_t>(i);
        s->send_ops[ui] = SlotOp{{}, s.get(), static_cast<uint32_t>(i), true, false, false, 0, 0};
        s->recv_ops[ui] = SlotOp{{}, s.get(), static_cast<uint32_t>(i), false, false, false, 0, ui};
    }
    Stream &ref = *s;
    streams.emplace(key, std::move(s));
    if (error.is_ok())
        for (int i = 0; i < slots; ++i) {
            SlotOp *op = &ref.recv_ops[static_cast<size_t>(i)];
            op->busy = true;
            if (!post_recv(op)) unposted.push_back(op);
        }
    return ref;
}

OfiTransport::OfiTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OfiTransport::~OfiTransport() = default;

size_t OfiTransport::max_message_bytes() const { return impl_->slot_bytes; }
const std::string &OfiTransport::description() const { return impl_->description; }

namespace {

// Receives posted for signs of life, from any peer; each is posted again
// as it completes.
constexpr int kBeatReceives = 8;

// The fabric, domain, completion queue, address vector and endpoint, on
// the provider `chosen`.
Status open_endpoint(OfiTransport::Impl *impl, const fi_info *chosen) {
    int rc = impl->libfabric->fabric(chosen->fabric_attr, &impl->fabric, nullptr);
    if (rc == 0) rc = fi_domain(impl->fabric, const_cast<fi_info *>(chosen), &impl->domain, nullptr);
    if (rc != 0)
        return system_error("ofi: opening %s: %s", impl->description.c_str(), impl->libfabric->message(rc).c_str());
    // A completion queue we can block on, so a waiting rank sleeps inside
    // the provider (which then progresses the transfer) instead of napping
    // between polls; providers without wait objects get a polled one. Only
    // a wait on descriptors, whose waits end at their timeout, as every wait
    // here must: what FI_WAIT_UNSPEC gives may not (libfabric 1.17's shm
    // provider makes it FI_WAIT_YIELD, whose fi_cq_sread ignores its timeout
    // and spins until a completion comes, so a rank waiting on a stopped or
    // dead peer never reached its deadline). net's own choice is POLLFD.
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    for (fi_wait_obj wait : {FI_WAIT_POLLFD, FI_WAIT_FD}) {
        cq_attr.wait_obj = wait;
        rc = fi_cq_open(impl->domain, &cq_attr, &impl->cq, nullptr);
        if (rc == 0) break;
    }
    impl->cq_can_block = rc == 0;
    if (rc != 0) {
        cq_attr.wait_obj = FI_WAIT_NONE;
        rc = fi_cq_open(impl->domain, &cq_attr, &impl->cq, nullptr);
    }
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    if (rc == 0) rc = fi_av_open(impl->domain, &av_attr, &impl->av, nullptr);
    if (rc == 0) rc = fi_endpoint(impl->domain, const_cast<fi_info *>(chosen), &impl->ep, nullptr);
    if (rc == 0) rc = fi_ep_bind(impl->ep, &impl->cq->fid, FI_TRANSMIT | FI_RECV);
    if (rc == 0) rc = fi_ep_bind(impl->ep, &impl->av->fid, 0);
    if (rc == 0) rc = fi_enable(impl->ep);
    if (rc != 0)
        return system_error("ofi: setting up an endpoint on %s: %s", impl->description.c_str(),
                            impl->libfabric->message(rc).c_str());
    return Status::ok();
}

// Every rank's endpoint name, through the bootstrap, into the address
// vector; every rank must use the same provider.
Status exchange_names(OfiTransport::Impl *impl, Bootstrap &bootstrap, const fi_info *chosen, const Deadline &deadline) {
    char name[256];
    size_t name_len = sizeof name;
    int rc = fi_getname(&impl->ep->fid, name, &name_len);
    if (rc != 0) return system_error("ofi: fi_getname: %s", impl->libfabric->message(rc).c_str());
    if ((chosen->addr_format == FI_SOCKADDR_IN || chosen->addr_format == FI_SOCKADDR_IN6 ||
         chosen->addr_format == FI_SOCKADDR) &&
        name_len <= sizeof impl->own_address)
        std::memcpy(&impl->own_address, name, name_len);
    std::string mine = impl->description + '\n' + std::string(name, name_len);
    std::vector<std::string> all;
    NNPCCL_TRY(bootstrap.allgather(mine, deadline, &all));
    std::string names;
    for (int r = 0; r < impl->nranks; ++r) {
        const std::string &entry = all[static_cast<size_t>(r)];
        size_t nl = entry.find('\n');
        std::string provider_of_r = entry.substr(0, nl);
        // Compare providers, not interfaces: the same provider on different hosts' NICs is fine.
        auto prov_part = [](const std::string &d) { return d.substr(0, d.find(" on ")); };
        if (nl == std::string::npos || prov_part(provider_of_r) != prov_part(impl->description))
            return invalid_usage("ofi: rank %d uses %s but rank %d uses %s; set NNPCCL_OFI_PROVIDER on every rank",
                                 impl->rank, impl->description.c_str(), r, provider_of_r.c_str());
        names += entry.substr(nl + 1);
        if (entry.size() - nl - 1 != name_len)
            return invalid_usage("ofi: rank %d's endpoint name has %zu bytes, this rank's %zu", r,
                                 entry.size() - nl - 1, name_len);
        if (impl->own_address.ss_family != 0 && r != impl->rank) {
            sockaddr_storage peer{};
            std::memcpy(&peer, entry.data() + nl + 1, name_len);
            impl->peer_addresses.push_back(peer);
        }
    }
    impl->addrs.assign(static_cast<size_t>(impl->nranks), FI_ADDR_UNSPEC);
    int inserted =
        fi_av_insert(impl->av, names.data(), static_cast<size_t>(impl->nranks), impl->addrs.data(), 0, nullptr);
    if (inserted != impl->nranks)
        return system_error("ofi: fi_av_insert took %d of %d addresses", inserted, impl->nranks);
    return Status::ok();
}

// Signs of life from now on: every peer counts as heard from, and the
// receives that take theirs are posted.
void start_signs_of_life(OfiTransport::Impl *impl) {
    impl->liveness.start(impl->rank, impl->nranks);
    impl->beat_sends.assign(static_cast<size_t>(impl->nranks), SlotOp{});
    for (SlotOp &op : impl->beat_sends) op.is_send = op.beat = true;
    impl->beat_recvs.assign(kBeatReceives, SlotOp{});
    for (SlotOp &op : impl->beat_recvs) {
        op.beat = op.busy = true;
        if (!impl->post_recv(&op)) impl->unposted.push_back(&op);
    }
}

} // namespace

Status OfiTransport::create(Bootstrap &bootstrap, int channels, const OfiOptions &options, size_t message_bytes,
                            const std::string &nic_hint, const Deadline &deadline, std::unique_ptr<OfiTransport> *out) {
    auto impl = std::make_unique<Impl>();
    impl->rank = bootstrap.rank();
    impl->nranks = bootstrap.nranks();
    impl->channels = channels;
    impl->slots = options.slots;
    impl->slot_bytes = message_bytes;
    if (impl->nranks >= (1 << 16) || channels > (1 << kChannelBits))
        return invalid_usage("ofi: tags hold at most 65535 ranks and 16 channels");

    InfoList found;
    const fi_info *chosen = nullptr;
    NNPCCL_TRY(choose_provider(nic_hint, &found, &chosen));
    impl->libfabric = found.libfabric;
    // Every rank must speak the same provider.
    impl->description = format("%s on %s", chosen->fabric_attr->prov_name, chosen->domain_attr->name);
    if (std::strncmp(chosen->fabric_attr->prov_name, "shm", 3) == 0)
        LOG_WARN("ofi: libfabric's shm provider can block for good in a send to a dead or stopped peer (it spins on "
                 "that peer's lock), where no deadline can end the wait; nnpccl's own shared memory "
                 "(NNPCCL_TRANSPORT=auto or shm) serves ranks on one host and notices such a peer");
    impl->mr_mode = chosen->domain_attr->mr_mode;
    impl->inject_size = chosen->tx_attr != nullptr ? chosen->tx_attr->inject_size : 0;
    impl->in_place = options.send_in_place && !(impl->mr_mode & FI_MR_LOCAL) && chosen->tx_attr != nullptr &&
                     chosen->tx_attr->iov_limit >= 2;
    impl->recv_in_place = options.send_in_place && !(impl->mr_mode & FI_MR_LOCAL);

    NNPCCL_TRY(open_endpoint(impl.get(), chosen));
    NNPCCL_TRY(exchange_names(impl.get(), bootstrap, chosen, deadline));
    start_signs_of_life(impl.get());
    LOG_INFO("ofi transport: %s, %d slots of %zu bytes per stream%s", impl->description.c_str(), impl->slots,
             impl->slot_bytes, impl->in_place ? ", large messages sent in place" : "");
    out->reset(new OfiTransport(std::move(impl)));
    return Status::ok();
}

} // namespace nnpccl
