#include "ofi_transport.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <thread>

#include "bootstrap.hpp"
#include "fabric_library.hpp"
#include "log.hpp"
#include "peer_liveness.hpp"

namespace nnpccl {

namespace {

constexpr uint32_t kApiVersion = FI_VERSION(1, 9);
constexpr int kSeqBits = 40;
constexpr int kChannelBits = 4;
constexpr uint64_t kSeqMask = (uint64_t{1} << kSeqBits) - 1;
// Smaller messages are copied into the slot: tracking a send in place
// costs more than copying a few KiB.
constexpr size_t kSendInPlaceMinBytes = 32 * 1024;

uint64_t make_tag(int src_rank, int channel, uint64_t seq) {
    return (static_cast<uint64_t>(src_rank) << (kSeqBits + kChannelBits)) |
           (static_cast<uint64_t>(channel) << kSeqBits) | (seq & kSeqMask);
}

// Signs of life (see check_peers()) are empty messages whose tag has this
// bit, above the 60 bits of a data tag, and the sender's rank where data
// tags have it; so one receive that ignores every other bit takes them from
// every peer, and neither kind of receive can take the other's messages.
constexpr uint64_t kBeatBit = uint64_t{1} << 60;
constexpr uint64_t kBeatIgnore = ~kBeatBit;
// With this bit too, the sign of life is a farewell: the sender destroyed its
// communicator cleanly, and its silence from then on is no fault.
constexpr uint64_t kFarewellBit = uint64_t{1} << 61;
// A message sent in place whose header fits an inject goes as two: the
// header (the slot's bytes, then the payload's length) under the stream's
// tag with kSplitBit, which the receive posted for the stream's next
// message takes whether the bit is there or not, and the payload under the
// same tag with kPayloadBit instead, which nothing takes until the receiver
// posts a receive for it. So the receiver chooses where the payload lands
// once it has the header: straight in the caller's buffer when the step
// only stores it (Transport::try_peek_recv_into), one copy fewer, else in
// the slot behind the header, where a message sent whole would be. Until
// then the payload waits in the socket, and the connection with it, so
// only a header that is its stream's next message waits, at most
// kClaimWindow, for its step to claim the payload; one behind others goes
// to the slot at once, as the step that will take it may be far behind
// (a large allreduce's receiver, reducing). The wait is bounded, so a
// stalled connection never holds up whatever the step itself waits for.
// Splitting costs a few µs a message (an inject more, a turn of progress
// before the payload is read); the copy it saves pays for that from
// kSplitMinBytes (docs/performance.md, "TCP: payloads received in place").
constexpr uint64_t kSplitBit = uint64_t{1} << 62;
constexpr size_t kSplitMinBytes = 256 * 1024;
constexpr uint64_t kPayloadBit = uint64_t{1} << 63;
constexpr auto kClaimWindow = std::chrono::microseconds(100);
constexpr int kBeatReceives = 8;

int beat_sender(uint64_t tag) { return static_cast<int>((tag >> (kSeqBits + kChannelBits)) & 0xffff); }

// Frees fi_info lists on every path out of create().
struct InfoList {
    const FabricLibrary *libfabric = nullptr;
    fi_info *head = nullptr;
    ~InfoList() {
        if (head != nullptr) libfabric->freeinfo(head);
    }
};

bool is_loopback_domain(const fi_info *info) {
    const char *d = info->domain_attr->name;
    return d != nullptr && std::strcmp(d, "lo") == 0;
}

} // namespace

// One slot's operation context. The provider owns `ctx` while the operation
// is in flight (FI_CONTEXT/FI_CONTEXT2 mode), so it comes first.
struct SlotOp {
    fi_context2 ctx;
    struct Stream *stream;
    uint32_t index;
    bool is_send;
    bool busy;      // send: posted and not completed; recv: posted and not completed
    bool complete;  // recv only: holds a message not yet released
    size_t bytes;   // send: length to send from the slot; recv: length received
    uint64_t seq;   // the stream sequence number (and so the tag) of the current operation
    const void *data = nullptr; // send in place: the caller's bytes that follow the slot's
    size_t data_bytes = 0;
    bool beat = false; // a sign of life, not a stream's message: `stream` is null
    bool header_sent = false; // send, split (see kSplitBit): the header has gone, the payload not yet
    // recv, split: the header has come (`split`), and the payload is
    // posted for (`payload_posted`) into the caller's buffer (`landed`) or
    // the slot, behind the header's `header_bytes`.
    bool split = false;
    bool payload_posted = false;
    bool landed = false;
    size_t header_bytes = 0;
    size_t payload_bytes = 0;
    void *payload_to = nullptr;
    Clock::time_point header_at{};
};

struct Stream {
    int peer = 0;
    int channel = 0;
    unsigned char *send_mem = nullptr;
    unsigned char *recv_mem = nullptr;
    fid_mr *send_mr = nullptr;
    fid_mr *recv_mr = nullptr;
    void *send_desc = nullptr;
    void *recv_desc = nullptr;
    std::vector<SlotOp> send_ops;
    std::vector<SlotOp> recv_ops;
    uint64_t send_seq = 0; // next message to send
    uint64_t recv_seq = 0; // next message to hand out
};

struct OfiTransport::Impl {
    int rank = 0;
    int nranks = 0;
    int channels = 1;
    int slots = 8;
    size_t slot_bytes = 0;
    std::string description;
    const FabricLibrary *libfabric = nullptr;
    fid_fabric *fabric = nullptr;
    fid_domain *domain = nullptr;
    fid_cq *cq = nullptr;
    fid_av *av = nullptr;
    fid_ep *ep = nullptr;
    uint64_t mr_mode = 0;
    size_t inject_size = 0; // messages up to this size go with fi_tinject: no completion, buffer free at once
    bool in_place = false;  // the provider may send from unregistered caller memory
    bool recv_in_place = false; // and receive into it
    std::vector<fi_addr_t> addrs;
    std::map<std::pair<int, int>, std::unique_ptr<Stream>> streams;
    std::deque<SlotOp *> unposted; // posts the provider refused with -FI_EAGAIN, in order
    std::vector<SlotOp *> unclaimed; // split headers at their stream's head whose payload has no receive yet
    // Written by one thread at a time, the one that drives (under the
    // engine's drive lock); read without it too (the progress thread's first
    // look in finish_pending_sends), hence atomic, and relaxed: it only says
    // whether anything happened since a look.
    std::atomic<uint64_t> events{0};
    void count_event() { events.store(events.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
    bool cq_can_block = false;
    bool closing = false; // close_endpoint() has begun: cancelled operations are its own
    Status error;
    // The endpoints' addresses, this rank's and its peers', where the
    // provider gives socket addresses (net, tcp): see
    // close_leaked_connections().
    sockaddr_storage own_address{};
    std::vector<sockaddr_storage> peer_addresses;
    Clock::time_point error_at{};
    // Signs of life: the receives that take them, one send per peer (only
    // one in flight, so a stopped peer's unread ones never pile up in the
    // provider), and when each peer was last heard from.
    std::vector<SlotOp> beat_recvs;
    std::vector<SlotOp> beat_sends;
    PeerLiveness liveness;

    // Takes completions: from fi_cq_read, or, with timeout_ms > 0 on a
    // blockable queue, from fi_cq_sread.
    void read_completions(int timeout_ms);

    ~Impl();
    Stream &stream(int peer, int channel);
    bool post_send(SlotOp *op);
    bool post_recv(SlotOp *op);
    void take_header(SlotOp *op, size_t len, Clock::time_point now);
    void receive_payload(SlotOp *op, void *dst);
    void beat();
    void farewell();
    void repost_pending();
    Status register_buffer(void *buf, size_t len, uint64_t access, fid_mr **mr, void **desc);
    void close_endpoint();
    void close_leaked_connections();
    void record_error(const Status &st) {
        if (error.is_ok()) {
            error = st;
            error_at = Clock::now();
            LOG_WARN("%s", st.message().c_str());
        }
    }
};

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
        struct stat info{};
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
    if (!leaked.empty())
        LOG_INFO("ofi: closed %zu connection(s) the provider accepted and left open", leaked.size());
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

bool OfiTransport::Impl::post_send(SlotOp *op) {
    Stream &s = *op->stream;
    if (ep == nullptr) return true; // closed after a failure: dropped
    const fi_addr_t to = addrs[static_cast<size_t>(s.peer)];
    const uint64_t tag = make_tag(rank, s.channel, op->seq);
    unsigned char *slot = s.send_mem + op->index * slot_bytes;
    // False: the provider is busy, post again later. Any other failure ends the communicator.
    auto posted = [&](ssize_t rc) {
        if (rc == -FI_EAGAIN) return false;
        if (rc != 0)
            record_error(remote_error("ofi: sending to rank %d failed: %s", s.peer,
                                      libfabric->message(static_cast<int>(rc)).c_str()));
        return true;
    };
    if (op->data != nullptr && op->data_bytes >= kSplitMinBytes && op->bytes + sizeof(uint64_t) <= inject_size) {
        // Split (see kSplitBit): the header goes first, once, then the payload.
        if (!op->header_sent) {
            const uint64_t payload_bytes = op->data_bytes;
            std::memcpy(slot + op->bytes, &payload_bytes, sizeof payload_bytes);
            ssize_t rc = fi_tinject(ep, slot, op->bytes + sizeof payload_bytes, to, kSplitBit | tag);
            if (rc != 0) return posted(rc);
            op->header_sent = true;
        }
        return posted(fi_tsend(ep, op->data, op->data_bytes, nullptr, to, kPayloadBit | tag, &op->ctx));
    }
    if (op->data != nullptr) {
        // Header from the slot, data from the caller: one message.
        iovec iov[2];
        void *desc[2] = {s.send_desc, nullptr};
        size_t n = 0;
        if (op->bytes > 0) iov[n++] = {slot, op->bytes};
        iov[n++] = {const_cast<void *>(op->data), op->data_bytes};
        return posted(fi_tsendv(ep, iov, op->bytes > 0 ? desc : desc + 1, n, to, tag, &op->ctx));
    }
    // An inject completes at once, so a stream of them is bounded by
    // nothing: to a peer that stopped reading they would queue inside the
    // provider without end (net queues them and never says -FI_EAGAIN),
    // and the sender, never waiting, would never time out. One message a
    // lap of the slot ring is sent for a completion instead (the provider
    // has written it out), and its slot is not free before: the sender
    // runs at most a ring ahead of what the connection took.
    if (op->bytes <= inject_size && op->seq % static_cast<uint64_t>(slots) != 0) {
        if (!posted(fi_tinject(ep, slot, op->bytes, to, tag))) return false;
        op->busy = false; // the provider has copied it
        count_event();
        return true;
    }
    return posted(fi_tsend(ep, slot, op->bytes, s.send_desc, to, tag, &op->ctx));
}

bool OfiTransport::Impl::post_recv(SlotOp *op) {
    if (ep == nullptr) return true; // closed after a failure
    if (op->beat) {
        ssize_t rc = fi_trecv(ep, nullptr, 0, nullptr, FI_ADDR_UNSPEC, kBeatBit, kBeatIgnore, &op->ctx);
        if (rc == -FI_EAGAIN) return false;
        if (rc != 0) op->busy = false; // without signs of life a timeout names no peer; nothing else is lost
        return true;
    }
    Stream &s = *op->stream;
    const uint64_t tag = make_tag(s.peer, s.channel, op->seq);
    ssize_t rc = op->payload_posted
                     ? fi_trecv(ep, op->payload_to, op->payload_bytes, op->landed ? nullptr : s.recv_desc,
                                FI_ADDR_UNSPEC, kPayloadBit | tag, 0, &op->ctx)
                     : fi_trecv(ep, s.recv_mem + op->index * slot_bytes, slot_bytes, s.recv_desc, FI_ADDR_UNSPEC, tag,
                                kSplitBit, &op->ctx);
    if (rc == -FI_EAGAIN) return false;
    if (rc != 0)
        record_error(system_error("ofi: posting a receive from rank %d failed: %s", s.peer,
                                  libfabric->message(static_cast<int>(rc)).c_str()));
    return true;
}

// Signs of life go out at PeerLiveness's pace, never sooner: one may be
// the first message to a peer, and so open a connection, which a wait cut
// short by a failure elsewhere should not do while the job goes down (see
// close_endpoint()).
void OfiTransport::Impl::beat() {
    if (!liveness.beat_due(events.load(std::memory_order_relaxed)) || ep == nullptr || !error.is_ok()) return;
    for (int peer = 0; peer < nranks; ++peer) {
        SlotOp &op = beat_sends[static_cast<size_t>(peer)];
        if (peer == rank || op.busy) continue;
        // A peer that cannot be reached is found dead by the liveness
        // checks, which name it; a failed sign of life says nothing more.
        ssize_t rc = fi_tsend(ep, nullptr, 0, nullptr, addrs[static_cast<size_t>(peer)],
                              kBeatBit | make_tag(rank, 0, 0), &op.ctx);
        op.busy = rc == 0;
    }
}

// Only to the peers this rank has exchanged messages with: their
// connections exist, and one opened now, as its peers close theirs too,
// could be one libfabric leaks (see close_endpoint()). A peer that never
// heard from this rank is not waiting for it either.
void OfiTransport::Impl::farewell() {
    std::set<int> unsent, sent;
    for (auto &entry : streams) unsent.insert(entry.first.first);
    const Deadline until = Deadline::after_seconds(0.1);
    while (ep != nullptr && error.is_ok() && !until.passed()) {
        for (auto it = unsent.begin(); it != unsent.end();) {
            SlotOp &op = beat_sends[static_cast<size_t>(*it)];
            // A sign of life still in flight goes first.
            if (!op.busy && fi_tsend(ep, nullptr, 0, nullptr, addrs[static_cast<size_t>(*it)],
                                     kBeatBit | kFarewellBit | make_tag(rank, 0, 0), &op.ctx) == 0) {
                op.busy = true;
                sent.insert(*it);
                it = unsent.erase(it);
            } else {
                ++it;
            }
        }
        if (unsent.empty() && std::none_of(sent.begin(), sent.end(),
                                           [&](int peer) { return beat_sends[static_cast<size_t>(peer)].busy; }))
            return;
        read_completions(0);
        std::this_thread::yield();
    }
}

void OfiTransport::Impl::repost_pending() {
    while (!unposted.empty()) {
        SlotOp *op = unposted.front();
        bool posted = op->is_send ? post_send(op) : post_recv(op);
        if (!posted) return;
        unposted.pop_front();
    }
}

namespace {

// The providers libfabric offers for reliable tagged messages (in
// *found) and the one this rank uses (*chosen, pointing into *found).
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

} // namespace

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

OfiTransport::OfiTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OfiTransport::~OfiTransport() = default;

size_t OfiTransport::max_message_bytes() const { return impl_->slot_bytes; }
const std::string &OfiTransport::description() const { return impl_->description; }

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

    char name[256];
    size_t name_len = sizeof name;
    rc = fi_getname(&impl->ep->fid, name, &name_len);
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
            return invalid_usage("ofi: rank %d's endpoint name has %zu bytes, this rank's %zu", r, entry.size() - nl - 1,
                                 name_len);
        if (impl->own_address.ss_family != 0 && r != impl->rank) {
            sockaddr_storage peer{};
            std::memcpy(&peer, entry.data() + nl + 1, name_len);
            impl->peer_addresses.push_back(peer);
        }
    }
    impl->addrs.assign(static_cast<size_t>(impl->nranks), FI_ADDR_UNSPEC);
    int inserted = fi_av_insert(impl->av, names.data(), static_cast<size_t>(impl->nranks), impl->addrs.data(), 0, nullptr);
    if (inserted != impl->nranks)
        return system_error("ofi: fi_av_insert took %d of %d addresses", inserted, impl->nranks);
    impl->liveness.start(impl->rank, impl->nranks);
    impl->beat_sends.assign(static_cast<size_t>(impl->nranks), SlotOp{});
    for (SlotOp &op : impl->beat_sends) op.is_send = op.beat = true;
    impl->beat_recvs.assign(kBeatReceives, SlotOp{});
    for (SlotOp &op : impl->beat_recvs) {
        op.beat = op.busy = true;
        if (!impl->post_recv(&op)) impl->unposted.push_back(&op);
    }
    LOG_INFO("ofi transport: %s, %d slots of %zu bytes per stream%s", impl->description.c_str(), impl->slots,
             impl->slot_bytes, impl->in_place ? ", large messages sent in place" : "");
    out->reset(new OfiTransport(std::move(impl)));
    return Status::ok();
}

void *OfiTransport::try_acquire_send(int peer, int channel, size_t /*bytes*/) {
    Stream &s = impl_->stream(peer, channel);
    if (!impl_->error.is_ok() || s.send_mem == nullptr) return nullptr;
    SlotOp &op = s.send_ops[s.send_seq % static_cast<uint64_t>(impl_->slots)];
    if (op.busy) return nullptr;
    return s.send_mem + op.index * impl_->slot_bytes;
}

void OfiTransport::commit_send(int peer, int channel, size_t bytes) { commit_send_in_place(peer, channel, bytes, nullptr, 0); }

bool OfiTransport::sends_in_place(size_t bytes) const { return impl_->in_place && bytes >= kSendInPlaceMinBytes; }

uint64_t OfiTransport::commit_send_in_place(int peer, int channel, size_t header_bytes, const void *data, size_t bytes) {
    Stream &s = impl_->stream(peer, channel);
    SlotOp *op = &s.send_ops[s.send_seq % static_cast<uint64_t>(impl_->slots)];
    op->busy = true;
    op->bytes = header_bytes;
    op->data = data;
    op->data_bytes = data != nullptr ? bytes : 0;
    op->header_sent = false;
    op->seq = s.send_seq++;
    // Keep posts in order: behind earlier refused ones, or retried later.
    if (!impl_->unposted.empty() || !impl_->post_send(op)) impl_->unposted.push_back(op);
    return op->seq + 1;
}

bool OfiTransport::send_done(int peer, int channel, uint64_t ticket) const {
    auto it = impl_->streams.find(std::make_pair(peer, channel));
    if (it == impl_->streams.end() || ticket == 0) return true;
    const SlotOp &op = it->second->send_ops[(ticket - 1) % static_cast<uint64_t>(impl_->slots)];
    return !(op.busy && op.seq == ticket - 1);
}

void OfiTransport::forget_caller_memory() {
    bool using_caller = false;
    for (auto &entry : impl_->streams) {
        for (const SlotOp &op : entry.second->send_ops) using_caller = using_caller || (op.busy && op.data != nullptr);
        for (const SlotOp &op : entry.second->recv_ops) using_caller = using_caller || (op.busy && op.landed);
    }
    if (!using_caller) return;
    // libfabric cannot take back a send, nor a receive it has begun to
    // fill; closing the endpoint drops both.
    if (impl_->error.is_ok()) impl_->error = system_error("ofi: endpoint closed after the communicator failed");
    impl_->close_endpoint();
    for (auto &entry : impl_->streams)
        for (SlotOp &op : entry.second->send_ops) op.busy = false;
}

const void *OfiTransport::try_peek_recv(int peer, int channel, size_t *bytes) {
    bool landed = false;
    return try_peek_recv_into(peer, channel, bytes, 0, nullptr, 0, &landed);
}

const void *OfiTransport::try_peek_recv_into(int peer, int channel, size_t *bytes, size_t header, void *dst,
                                             size_t dst_bytes, bool *landed) {
    Stream &s = impl_->stream(peer, channel);
    SlotOp &op = s.recv_ops[s.recv_seq % static_cast<uint64_t>(impl_->slots)];
    *landed = op.landed;
    if (op.complete) {
        *bytes = op.bytes;
        return s.recv_mem + op.index * impl_->slot_bytes;
    }
    if (op.split && !op.payload_posted) {
        const bool direct = impl_->recv_in_place && dst != nullptr && op.payload_bytes == dst_bytes &&
                            op.header_bytes == header;
        impl_->receive_payload(&op, direct ? dst : nullptr);
    }
    return nullptr;
}

void OfiTransport::release_recv(int peer, int channel) {
    Stream &s = impl_->stream(peer, channel);
    SlotOp *op = &s.recv_ops[s.recv_seq % static_cast<uint64_t>(impl_->slots)];
    op->complete = false;
    op->split = op->payload_posted = op->landed = false;
    op->busy = true;
    op->seq = s.recv_seq + static_cast<uint64_t>(impl_->slots); // the message `slots` further on
    ++s.recv_seq;
    if (!impl_->unposted.empty() || !impl_->post_recv(op)) impl_->unposted.push_back(op);
}

// A split message's header has come (see kSplitBit): what it says of the payload.
void OfiTransport::Impl::take_header(SlotOp *op, size_t len, Clock::time_point now) {
    Stream &s = *op->stream;
    uint64_t payload_bytes = 0;
    if (len < sizeof payload_bytes) {
        record_error(remote_error("ofi: rank %d sent a split message's header of %zu bytes", s.peer, len));
        return;
    }
    std::memcpy(&payload_bytes, s.recv_mem + op->index * slot_bytes + len - sizeof payload_bytes, sizeof payload_bytes);
    const size_t header_bytes = len - sizeof payload_bytes;
    if (payload_bytes > slot_bytes - header_bytes) {
        // Never received: it would overrun the slot. The message stands
        // complete at the size the peer sent, so the step that takes it
        // fails at once naming both sizes (ranks that disagree on
        // NNPCCL_CHUNK_SIZE, which init refuses, or a corrupt peer).
        record_error(remote_error("ofi: rank %d sent a message of %llu bytes, more than the %zu a message holds", s.peer,
                                  static_cast<unsigned long long>(payload_bytes), slot_bytes - header_bytes));
        op->complete = true;
        op->bytes = header_bytes + payload_bytes;
        return;
    }
    op->split = true;
    op->header_bytes = header_bytes;
    op->payload_bytes = payload_bytes;
    op->header_at = now;
    if (op->seq == s.recv_seq) unclaimed.push_back(op);
    else receive_payload(op, nullptr);
}

// Posts the receive of a split message's payload: into `dst`, or the slot behind its header.
void OfiTransport::Impl::receive_payload(SlotOp *op, void *dst) {
    unclaimed.erase(std::remove(unclaimed.begin(), unclaimed.end(), op), unclaimed.end());
    op->payload_posted = true;
    op->landed = dst != nullptr;
    op->payload_to = dst != nullptr ? dst : op->stream->recv_mem + op->index * slot_bytes + op->header_bytes;
    op->busy = true;
    if (!unposted.empty() || !post_recv(op)) unposted.push_back(op);
}

void OfiTransport::Impl::read_completions(int timeout_ms) {
    if (cq == nullptr) return;
    if (!unclaimed.empty()) {
        const Clock::time_point now = Clock::now();
        for (size_t i = 0; i < unclaimed.size();) {
            if (now - unclaimed[i]->header_at >= kClaimWindow) receive_payload(unclaimed[i], nullptr); // leaves the list
            else ++i;
        }
    }
    fi_cq_tagged_entry entries[16];
    // A header still waiting for its step must not wait out a whole sleep
    // slice: its payload holds up the connection, so nothing else may come
    // to wake this rank before then. Until it is claimed or its window
    // ends (kClaimWindow), the waits are polls.
    bool may_block = timeout_ms > 0 && cq_can_block && unclaimed.empty();
    while (true) {
        ssize_t n = may_block ? fi_cq_sread(cq, entries, 16, nullptr, timeout_ms) : fi_cq_read(cq, entries, 16);
        may_block = false;
        if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT || n == -FI_EINTR) break;
        if (n == -FI_EAVAIL) {
            fi_cq_err_entry err{};
            if (fi_cq_readerr(cq, &err, 0) < 0) break;
            auto *op = static_cast<SlotOp *>(err.op_context);
            // Cancelled: what was still posted when the endpoint closed. A
            // send cancelled otherwise (a provider flushing a broken
            // connection) never left, and must not count as done.
            const bool closed_under_it = err.err == FI_ECANCELED && (closing || op == nullptr || !op->is_send);
            if (closed_under_it || (op != nullptr && op->beat)) {
                // A sign of life that failed is no failure of the job's.
                if (op != nullptr) op->busy = false;
                continue;
            }
            char detail[256] = "";
            fi_cq_strerror(cq, err.prov_errno, err.err_data, detail, sizeof detail);
            int peer = op != nullptr ? op->stream->peer : -1;
            record_error(remote_error("ofi (%s): %s rank %d failed: %s (%s)", description.c_str(),
                                      op != nullptr && op->is_send ? "sending to" : "receiving from", peer,
                                      libfabric->message(err.err).c_str(), detail));
            if (op != nullptr) op->busy = false;
            count_event();
            continue;
        }
        if (n < 0) {
            record_error(system_error("ofi: reading completions: %s", libfabric->message(static_cast<int>(n)).c_str()));
            break;
        }
        const Clock::time_point now = Clock::now();
        for (ssize_t i = 0; i < n; ++i) {
            auto *op = static_cast<SlotOp *>(entries[i].op_context);
            op->busy = false;
            if (op->beat) {
                // Not an event: what a rank waits for has not changed, and a
                // wait for a stopped peer must not look like progress.
                if (op->is_send) continue;
                if (const int from = beat_sender(entries[i].tag); from < nranks) {
                    liveness.heard_from(from, now);
                    if (entries[i].tag & kFarewellBit) liveness.left(from);
                }
                op->busy = true;
                if (!post_recv(op)) unposted.push_back(op);
                continue;
            }
            if (!op->is_send) {
                liveness.heard_from(op->stream->peer, now);
                if (op->payload_posted) {
                    op->complete = true;
                    op->bytes = op->header_bytes + entries[i].len;
                } else if (entries[i].tag & kSplitBit) {
                    take_header(op, entries[i].len, now);
                } else {
                    op->complete = true;
                    op->bytes = entries[i].len;
                }
            }
            count_event();
        }
        if (n < 16) break;
    }
    repost_pending();
}

void OfiTransport::poll() { impl_->read_completions(0); }

uint64_t OfiTransport::event_count() const { return impl_->events.load(std::memory_order_relaxed); }

void OfiTransport::wait_for_event(uint64_t seen, int timeout_ms) {
    // Completions only arrive while the provider is called (manual
    // progress): block in it where it can, else poll with short naps.
    Deadline until = Deadline::after_seconds(timeout_ms / 1000.0);
    while (impl_->events.load(std::memory_order_relaxed) == seen && !until.passed()) {
        impl_->read_completions(impl_->cq_can_block ? std::max(1, until.ms_left()) : 0);
        if (!impl_->cq_can_block && impl_->events.load(std::memory_order_relaxed) == seen) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

// Every liveness check while this rank waits says to every peer that it is
// alive, as shm's checks do in shared memory; a peer that has stopped (or
// hangs, or is not calling the library) says nothing.
//
// A connection that broke names the peer at its other end, which is often
// not the rank at fault: a rank that fails because another died closes its
// endpoint, and its peers' messages to it fail. The bootstrap hears every
// rank's failure with its reason, or a death, and the engine asks it after
// the transports; so a broken connection is this rank's failure only when
// the bootstrap has said nothing for PeerLiveness::kErrorGrace.
Status OfiTransport::check_peers() {
    impl_->beat();
    return PeerLiveness::after_grace(impl_->error, impl_->error_at);
}

bool OfiTransport::has_left(int peer) const { return impl_->liveness.left_a_while_ago(peer); }

std::string OfiTransport::silent_peers(std::chrono::milliseconds quiet) const {
    return impl_->liveness.silent(quiet, "ofi", [](int) { return true; });
}

bool OfiTransport::has_pending_sends() const {
    if (!impl_->error.is_ok()) return false;
    for (auto &entry : impl_->streams)
        for (const SlotOp &op : entry.second->send_ops)
            if (op.busy) return true;
    return false;
}

Status OfiTransport::flush(const Deadline &deadline) {
    while (has_pending_sends()) {
        if (deadline.passed()) {
            // Name the peers that have not taken them: a stopped or hung
            // rank, and the message's reader needs to know which.
            std::set<int> late;
            for (auto &entry : impl_->streams)
                for (const SlotOp &op : entry.second->send_ops)
                    if (op.busy) late.insert(entry.first.first);
            return PeerLiveness::unsent_at_deadline("ofi", late, silent_peers(std::chrono::seconds(1)));
        }
        // Its peers may time out meanwhile; this rank is not the one at fault.
        impl_->beat();
        poll();
        std::this_thread::yield();
    }
    // Only a communicator that has not failed is flushed: it is leaving cleanly.
    impl_->farewell();
    return impl_->error;
}

} // namespace nnpccl
