// The socket transport's connection set-up: the listener and the address
// and token every rank announces through the bootstrap (create), the lower
// rank's connect and the higher rank's accept, the hello that names a
// connection, and each stream's buffers. Apart from the pumps because it
// runs once per pair and channel, and its failures are this process's
// (descriptors, memory) or a peer that never answers.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "bootstrap.hpp"
#include "socket_streams.hpp"

namespace nnpccl {

namespace {

// This process, not its peer, lacks what a new connection needs
// (out_of_resources()): the communicator cannot go on.
Status out_of_resources_error(const char *what, int err) {
    return system_error("socket: %s: %s (this process is out of file descriptors or kernel memory; raise its limit "
                        "of open files, ulimit -n)",
                        what, std::strerror(err));
}

// TCP_NODELAY, and keepalive probes on an idle connection (a host gone
// silent then fails it). Not the bootstrap's TCP_USER_TIMEOUT
// (watch_for_silent_host): the kernel's buffers are this transport's flow
// control, so a receiver that is seconds late holds the window at zero,
// and a user timeout would abort a connection whose peer answers every
// probe. Hosts that vanish are the bootstrap's to notice.
//
// And a fixed receive buffer, where `receive_buffer` is not 0 (see
// receive_buffer_bytes()).
void prepare_connection(int fd, int receive_buffer) {
    if (receive_buffer > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    int one = 1, idle = 2, interval = 1, count = 3;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

// The receive buffer a connection between two ranks on one host asks
// for: room for a stream's whole ring of slots (`ring_bytes`), so the
// window never holds back part of a message. Autotuning starts the window
// small and grows it with what it measures; while it is smaller than a
// message, the message's rest leaves only as the receiver acknowledges,
// and on one host the kernel sends it from the receiver's core, which then
// does both ranks' work (docs/performance.md, "Receive buffers"). Between
// hosts autotuning stays: it sizes the window to the path, and a fixed
// large one was slower over capped links. As much of that as the system
// lets a process ask for (net.core.rmem_max; the kernel doubles it for
// its own overhead), where that is at least two messages, `message_bytes`
// (a 2-rank allreduce sends two back to back): a smaller fixed buffer
// would do worse than autotuning, which may grow past that limit. 0:
// autotuning.
int receive_buffer_bytes(size_t ring_bytes, size_t message_bytes) {
    long long allowed = 0;
    std::ifstream("/proc/sys/net/core/rmem_max") >> allowed;
    if (allowed <= 0) return 0;
    const size_t asked = std::min({ring_bytes, static_cast<size_t>(allowed), static_cast<size_t>(INT_MAX / 2)});
    return asked >= 2 * message_bytes ? static_cast<int>(asked) : 0;
}

// Whether two socket addresses name the same IP address: the ends of a
// connection within one host (loopback, or one interface's address).
bool same_address(const sockaddr_storage &a, const sockaddr_storage &b) {
    if (a.ss_family != b.ss_family) return false;
    if (a.ss_family == AF_INET)
        return reinterpret_cast<const sockaddr_in &>(a).sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in &>(b).sin_addr.s_addr;
    if (a.ss_family == AF_INET6)
        return std::memcmp(&reinterpret_cast<const sockaddr_in6 &>(a).sin6_addr,
                           &reinterpret_cast<const sockaddr_in6 &>(b).sin6_addr, sizeof(in6_addr)) == 0;
    return false;
}

// Whether an accepted connection comes from this host.
bool from_this_host(int fd) {
    sockaddr_storage mine{}, theirs{};
    socklen_t mine_length = sizeof mine, theirs_length = sizeof theirs;
    return getsockname(fd, reinterpret_cast<sockaddr *>(&mine), &mine_length) == 0 &&
           getpeername(fd, reinterpret_cast<sockaddr *>(&theirs), &theirs_length) == 0 && same_address(mine, theirs);
}

} // namespace

bool SlotPool::allocate(int slots, size_t slot_bytes) {
    // aligned_alloc wants a multiple of the alignment.
    const size_t bytes = (static_cast<size_t>(slots) * slot_bytes + 4095) & ~size_t{4095};
    mem = static_cast<unsigned char *>(std::aligned_alloc(4096, bytes));
    if (mem == nullptr) return false;
    lent.assign(static_cast<size_t>(slots), nullptr);
    // The first slot lent first.
    for (int i = slots - 1; i >= 0; --i) idle.push_back(mem + static_cast<size_t>(i) * slot_bytes);
    return true;
}

SlotPool::~SlotPool() { std::free(mem); }

SocketTransport::Impl::~Impl() {
    close_fd(listener);
    for (Accepted &a : accepted) close_fd(a.fd);
    for (int peer = 0; peer < nranks; ++peer)
        for (int channel = 0; channel < channels; ++channel) close_connection(peer, channel);
    for (auto &r : recvs)
        if (r) std::free(r->carry);
}

SendStream &SocketTransport::Impl::send_stream(int peer, int channel) {
    std::unique_ptr<SendStream> &slot = sends[static_cast<size_t>(peer * channels + channel)];
    if (slot) return *slot;
    slot = std::make_unique<SendStream>();
    SendStream &s = *slot;
    s.peer = peer;
    s.channel = channel;
    s.ops.resize(static_cast<size_t>(slots));
    if (!s.slots.allocate(slots, slot_bytes)) {
        s.dead = true;
        record_error(system_error("socket: cannot allocate %zu bytes of send buffers for rank %d",
                                  static_cast<size_t>(slots) * slot_bytes, peer));
        return s;
    }
    return s;
}

RecvStream &SocketTransport::Impl::recv_stream(int peer, int channel) {
    std::unique_ptr<RecvStream> &slot = recvs[static_cast<size_t>(peer * channels + channel)];
    if (slot) return *slot;
    slot = std::make_unique<RecvStream>();
    RecvStream &r = *slot;
    r.peer = peer;
    r.channel = channel;
    r.bytes.assign(static_cast<size_t>(slots), 0);
    r.landed.assign(static_cast<size_t>(slots), 0);
    const bool allocated = r.slots.allocate(slots, slot_bytes);
    r.carry = static_cast<unsigned char *>(std::aligned_alloc(kFrameAlign, kCarryBytes + kFrameAlign));
    if (!allocated || r.carry == nullptr) {
        r.closed = true;
        record_error(system_error("socket: cannot allocate %zu bytes of receive buffers for rank %d",
                                  static_cast<size_t>(slots) * slot_bytes, peer));
    }
    return r;
}

// The connection a pair of ranks shares on a channel, both ways: the
// lower rank opens it, when it first sends to the peer or waits for the
// peer's message, without waiting for it to be up (its hello and first
// messages queue in the kernel once it is, and a send before then says
// EAGAIN); the higher rank takes it from its listener (accept_pending), its
// messages waiting in their slots until then, as they would in a shared
// memory queue the receiver had not yet looked at. One connection both
// ways, rather than one each way, lets each side's acknowledgements ride
// on its own messages: a 2-rank exchange of 8 bytes took 3.2 against 4.8
// µs over loopback (docs/performance.md).
void SocketTransport::Impl::ensure_connection(int peer, int channel) {
    SendStream &s = send_stream(peer, channel);
    RecvStream &r = recv_stream(peer, channel);
    if (s.fd >= 0 || s.dead || r.closed) return;
    if (rank > peer) {
        accept_pending();
        return;
    }
    const SockAddr &to = addresses[static_cast<size_t>(peer)];
    int fd = socket(to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) prepare_connection(fd, same_address(to.storage, bound.storage) ? receive_buffer : 0);
    if (fd < 0 ||
        (connect(fd, reinterpret_cast<const sockaddr *>(&to.storage), to.length) != 0 && errno != EINPROGRESS)) {
        const int err = errno;
        close_fd(fd);
        s.dead = r.closed = true;
        if (out_of_resources(err))
            record_error(out_of_resources_error(format("connecting to rank %d", peer).c_str(), err));
        else if (!liveness.has_left(peer))
            record_error(remote_error("socket: connecting to rank %d at %s failed: %s", peer, to.to_string().c_str(),
                                      broken_because(peer, err).c_str()));
        count_event();
        return;
    }
    s.fd = r.fd = fd;
    r.connecting = true;
    const StreamHello hello{tokens[static_cast<size_t>(peer)], static_cast<uint32_t>(rank),
                            static_cast<uint32_t>(channel)};
    append_frame(&s.control, kHello, &hello, sizeof hello);
    list_pending(s);
}

// Closes a pair's connection, both streams' end of it.
void SocketTransport::Impl::close_connection(int peer, int channel) {
    const size_t i = static_cast<size_t>(peer * channels + channel);
    int fd = -1;
    if (sends[i]) std::swap(fd, sends[i]->fd);
    if (recvs[i]) {
        if (fd < 0) fd = recvs[i]->fd;
        recvs[i]->fd = -1;
    }
    close_fd(fd);
}

void SocketTransport::Impl::accept_pending() {
    while (listener >= 0 && !listener_starved) {
        const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && out_of_resources(errno)) {
            // The peer's connection stays queued, unanswered, until this
            // rank's failure reaches it through the bootstrap.
            listener_starved = true;
            record_error(out_of_resources_error("taking a peer's connection", errno));
        }
        if (fd < 0) break; // none waiting, or one that gave up before it was taken
        prepare_connection(fd, from_this_host(fd) ? receive_buffer : 0);
        accepted.push_back(Accepted{fd, {}, 0, Clock::now()});
    }
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < accepted.size();) {
        Accepted &a = accepted[i];
        const ssize_t n = recv(a.fd, a.hello + a.got, sizeof a.hello - a.got, MSG_DONTWAIT);
        if (n > 0) a.got += static_cast<size_t>(n);
        const bool gone = n == 0 || (n < 0 && !would_block(errno)) || now - a.since > kHelloPatience;
        if (a.got == sizeof a.hello)
            attach(a);
        else if (gone)
            close_fd(a.fd);
        if (a.fd < 0) {
            accepted[i] = accepted.back();
            accepted.pop_back();
        } else {
            ++i;
        }
    }
}

// An accepted connection has named itself: it becomes that peer's stream,
// or is refused as a stray.
void SocketTransport::Impl::attach(Accepted &a) {
    FrameHead head;
    StreamHello hello;
    std::memcpy(&head, a.hello, sizeof head);
    std::memcpy(&hello, a.hello + kHeadBytes, sizeof hello);
    const bool valid = head.kind == kHello && head.bytes == sizeof hello && hello.token == token &&
                       static_cast<int>(hello.rank) < rank && hello.channel < static_cast<uint32_t>(channels);
    if (!valid) {
        LOG_WARN("socket: refused a connection that is not from a rank of this communicator");
        close_fd(a.fd);
        return;
    }
    RecvStream &r = recv_stream(static_cast<int>(hello.rank), static_cast<int>(hello.channel));
    SendStream &s = send_stream(static_cast<int>(hello.rank), static_cast<int>(hello.channel));
    if (r.fd >= 0 || r.closed || s.dead) {
        LOG_WARN("socket: refused a second connection from rank %u on channel %u", hello.rank, hello.channel);
        close_fd(a.fd);
        return;
    }
    r.fd = s.fd = a.fd;
    a.fd = -1;
    if (!s.drained()) list_pending(s); // messages that waited for it
    liveness.heard_from(r.peer, Clock::now());
    count_event();
}

Status SocketTransport::create(Bootstrap &bootstrap, int channels, const SocketOptions &options, size_t message_bytes,
                               const Deadline &deadline, std::unique_ptr<SocketTransport> *out) {
    auto impl = std::make_unique<Impl>();
    impl->rank = bootstrap.rank();
    impl->nranks = bootstrap.nranks();
    impl->channels = channels;
    impl->slots = options.slots;
    impl->slot_bytes = message_bytes;
    // Before any return: ~Impl closes every stream's connection.
    const size_t streams = static_cast<size_t>(impl->nranks) * static_cast<size_t>(channels);
    impl->sends.resize(streams);
    impl->recvs.resize(streams);
    // A chunk is a whole number of cache lines (config.cpp), and so is the
    // descriptor in front of it.
    if (message_bytes % kFrameAlign != 0)
        return internal_error("socket: messages of %zu bytes are not whole %zu-byte lines", message_bytes, kFrameAlign);
    if (message_bytes > UINT32_MAX)
        return invalid_usage("socket: messages of %zu bytes do not fit a frame", message_bytes);

    SockAddr local;
    NNPCCL_TRY(pick_local_address(&local));
    local.set_port(0);
    NNPCCL_TRY(listen_tcp(local, &impl->listener, &impl->bound));
    const SockAddr &bound = impl->bound;
    impl->receive_buffer =
        receive_buffer_bytes(static_cast<size_t>(impl->slots) * frame_bytes(message_bytes), frame_bytes(message_bytes));
    if (fcntl(impl->listener, F_SETFL, fcntl(impl->listener, F_GETFL) | O_NONBLOCK) != 0)
        return errno_error("socket: making the listener nonblocking");
    std::random_device entropy;
    impl->token = (static_cast<uint64_t>(entropy()) << 32) ^ entropy() ^
                  static_cast<uint64_t>(Clock::now().time_since_epoch().count());
    impl->description = "sockets on " + bound.to_string();

    std::vector<std::string> all;
    NNPCCL_TRY(bootstrap.allgather(
        format("%s %llx", bound.to_string().c_str(), static_cast<unsigned long long>(impl->token)), deadline, &all));
    impl->addresses.resize(static_cast<size_t>(impl->nranks));
    impl->tokens.resize(static_cast<size_t>(impl->nranks));
    for (int r = 0; r < impl->nranks; ++r) {
        const std::string &entry = all[static_cast<size_t>(r)];
        const size_t space = entry.rfind(' ');
        if (space == std::string::npos)
            return invalid_usage("socket: rank %d announced '%s', not an address and a token", r, entry.c_str());
        NNPCCL_TRY(parse_host_port(entry.substr(0, space), &impl->addresses[static_cast<size_t>(r)]));
        impl->tokens[static_cast<size_t>(r)] = std::strtoull(entry.c_str() + space + 1, nullptr, 16);
    }
    impl->liveness.start(impl->rank, impl->nranks);
    LOG_INFO("socket transport: %s, %d slots of %zu bytes per stream, receive buffers %s", impl->description.c_str(),
             impl->slots, impl->slot_bytes,
             impl->receive_buffer > 0 ? format("of %d bytes within this host", impl->receive_buffer).c_str()
                                      : "autotuned (net.core.rmem_max is below two messages)");
    out->reset(new SocketTransport(std::move(impl)));
    return Status::ok();
}

} // namespace nnpccl
