#include "socket_transport.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "bootstrap.hpp"
#include "copy.hpp"
#include "log.hpp"
#include "peer_liveness.hpp"
#include "socket.hpp"

namespace nnpccl {

namespace {

// What a frame carries. Signs of life and the farewell mean what they mean
// in the ofi transport (see check_peers() and flush()); the hello is a
// connection's first frame.
enum FrameKind : uint32_t { kData = 0, kBeat = 1, kFarewell = 2, kHello = 3 };
struct FrameHead {
    uint32_t bytes; // of payload
    uint32_t kind;
};
static_assert(sizeof(FrameHead) == 8, "a frame head is 8 bytes on the wire");
struct StreamHello {
    uint64_t token; // the receiver's listener's, as the bootstrap gave it
    uint32_t rank;
    uint32_t channel;
};

// Frames: each starts at a multiple of kFrameAlign bytes into its stream.
// Its head, zero-filled, takes kFrameAlign bytes, and zeros after the
// payload fill it up to the next multiple. The kernel copies what is sent
// into its buffers in stream order, starting each page afresh at offset
// 0, so a payload starts 64-byte aligned there; its copies to and from
// 16-byte aligned user memory then never run at the distances where `rep
// movsb` (which the kernel copies with) crawls (common/copy.hpp; the
// 8-byte heads before did, docs/performance.md, "Copy distances").
// Memory that is not 16-byte aligned goes through the slots, whose copies
// avoid those distances themselves.
constexpr size_t kFrameAlign = 64;
constexpr size_t kHeadBytes = kFrameAlign;
static_assert(sizeof(FrameHead) <= kHeadBytes, "a frame head fits its padded place");
constexpr size_t tail_bytes(size_t payload) { return (kFrameAlign - payload % kFrameAlign) % kFrameAlign; }
constexpr size_t frame_bytes(size_t payload) { return kHeadBytes + payload + tail_bytes(payload); }
constexpr size_t kHelloFrameBytes = frame_bytes(sizeof(StreamHello));
constexpr unsigned char kZeros[kFrameAlign] = {};
bool user_aligned(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Smaller messages are copied into the slot: a copy of a few KiB costs less
// than keeping the caller's memory in use until the kernel has taken it.
constexpr size_t kSendInPlaceMinBytes = 32 * 1024;
// A receive between frames reads up to this much into a carry buffer, so
// a run of small messages costs one system call, not two a message; a
// large message's bytes beyond it are received where they belong.
constexpr size_t kCarryBytes = 16 * 1024;
// A message at the head of its stream, with at least this much still in
// the socket, is left there for a while when no step has asked for it
// yet, so that the step (which will ask) can receive it straight into the
// caller's buffer; after kClaimWindow it goes to its slot, so a step
// waiting on something else never waits on it.
constexpr size_t kDeferMinBytes = 32 * 1024;
constexpr auto kClaimWindow = std::chrono::microseconds(100);
// An accepted connection that has not named itself by then is a stray.
constexpr auto kHelloPatience = std::chrono::seconds(10);

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

// This process, not its peer, lacks what a new connection needs
// (out_of_resources()): the communicator cannot go on.
Status out_of_resources_error(const char *what, int err) {
    return system_error("socket: %s: %s (this process is out of file descriptors or kernel memory; raise its limit "
                        "of open files, ulimit -n)",
                        what, std::strerror(err));
}

// Why a connection to `peer` broke, as its error says: a host gone
// silent (the network between cut, or the host powered off: the kernel
// gave up on it) or a process that died.
std::string broken_because(int peer, int err) {
    switch (err) {
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EHOSTDOWN:
    case ENETDOWN:
        return format("rank %d went silent: %s (its host stopped answering: powered off, or the network between cut)",
                      peer, std::strerror(err));
    default: return format("%s (rank %d died or aborted)", std::strerror(err), peer);
    }
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

struct SendOp {
    unsigned char head[kHeadBytes] = {}; // a FrameHead, then zeros
    size_t header_bytes = 0; // from the slot
    const void *data = nullptr; // sent in place: the caller's bytes after the slot's
    size_t data_bytes = 0;
    size_t total() const { return frame_bytes(header_bytes + data_bytes); }
};

} // namespace

// This rank's messages to one peer on one channel.
struct SendStream {
    int peer = 0;
    int channel = 0;
    int fd = -1;
    bool dead = false;   // the connection failed, or was closed after a failure: nothing more goes
    bool listed = false; // in Impl::pending
    unsigned char *mem = nullptr;
    std::vector<SendOp> ops;
    uint64_t send_seq = 0; // the next message to commit
    uint64_t sent_seq = 0; // the next message to finish writing
    size_t written = 0;    // of ops[sent_seq], its frame head included
    std::string control;   // whole frames (hello, signs of life, farewell), written between messages
    size_t control_written = 0;
    bool drained() const { return sent_seq == send_seq && control.empty(); }
};

// One peer's messages to this rank on one channel.
struct RecvStream {
    int peer = 0;
    int channel = 0;
    int fd = -1;
    bool closed = false; // the peer closed the connection
    // This rank's connect may not have completed: no receive is made
    // before poll(2) says the socket is readable or writable (receives
    // read as closed across hosts before; readable too, so a full send
    // buffer never keeps this rank from reading).
    bool connecting = false;
    unsigned char *mem = nullptr;
    std::vector<size_t> bytes;
    std::vector<char> landed;
    uint64_t recv_seq = 0; // the next message to hand out
    uint64_t fill_seq = 0; // the next message to receive; those before it are whole
    // The frame being read. Its head's place is read after the last
    // frame's tail (`tail` bytes of zeros): head_got counts both.
    FrameHead head{};
    size_t tail = 0;
    size_t head_got = 0;
    bool in_payload = false;
    size_t payload_got = 0;
    void *land_to = nullptr; // the payload beyond the first land_header bytes goes here
    size_t land_header = 0;
    Clock::time_point deferred_since{}; // the head's payload waits for its step's claim (kClaimWindow)
    bool deferral_over = false;         // and has waited its window out
    // Received at the offset in it that matches the stream's modulo
    // kFrameAlign, so its bytes lie as the kernel's did (see "Frames").
    unsigned char *carry = nullptr;
    size_t carry_at = 0;
    size_t carry_len = 0;
    uint64_t received = 0; // bytes read from the connection
    bool slot_free() const { return fill_seq - recv_seq < bytes.size(); }
};

// An accepted connection that has not yet sent its hello.
struct Accepted {
    int fd;
    unsigned char hello[kHelloFrameBytes];
    size_t got;
    Clock::time_point since;
};

// What a step that only stores the payload offers to receive it into.
struct Claim {
    size_t header;
    void *dst;
    size_t dst_bytes;
};

struct SocketTransport::Impl {
    int rank = 0;
    int nranks = 0;
    int channels = 1;
    int slots = 8;
    size_t slot_bytes = 0; // the largest message, a multiple of kFrameAlign: every slot is aligned as the stream is
    std::string description;
    int listener = -1;
    // accept() failed for want of descriptors: the listener is no longer
    // watched (it would stay readable, and every wait would spin on it).
    bool listener_starved = false;
    int receive_buffer = 0; // receive_buffer_bytes(), for connections within this host
    SockAddr bound;         // the listener's address
    uint64_t token = 0;
    std::vector<SockAddr> addresses;
    std::vector<uint64_t> tokens;
    std::vector<std::unique_ptr<SendStream>> sends; // by peer * channels + channel
    std::vector<std::unique_ptr<RecvStream>> recvs;
    std::vector<Accepted> accepted;
    std::vector<SendStream *> pending; // streams with bytes still to write
    // Some receive stream has carried bytes or a deferred payload, which
    // poll() must take on once they can move (no step may ask for them).
    bool recv_attention = false;
    // Written by the driving thread only, read without the drive lock too
    // (the progress thread's first look), hence atomic and relaxed.
    std::atomic<uint64_t> events{0};
    void count_event() { events.store(events.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
    Status error;
    Clock::time_point error_at{};
    PeerLiveness liveness;

    ~Impl();
    SendStream &send_stream(int peer, int channel);
    RecvStream &recv_stream(int peer, int channel);
    void ensure_connection(int peer, int channel);
    void close_connection(int peer, int channel);
    void pump_send(SendStream &s);
    void list_pending(SendStream &s);
    void pump_pending();
    void fail_send(SendStream &s, int err);
    void accept_pending();
    void attach(Accepted &a);
    void pump_recv(RecvStream &r, const Claim *claim, bool defer);
    bool store(RecvStream &r, const unsigned char *from, size_t len);
    unsigned char *region(RecvStream &r, size_t *len);
    void close_recv(RecvStream &r);
    void pump_all_recvs();
    void beat();
    bool partner(int peer) const;
    bool connected(int peer) const; // on some channel, now or before: its signs of life can reach this rank
    void farewell(const Deadline &deadline);
    void record_error(const Status &st) {
        if (error.is_ok()) {
            error = st;
            error_at = Clock::now();
            LOG_WARN("%s", st.message().c_str());
        }
        count_event();
    }
};

SocketTransport::Impl::~Impl() {
    close_fd(listener);
    for (Accepted &a : accepted) close_fd(a.fd);
    for (int peer = 0; peer < nranks; ++peer)
        for (int channel = 0; channel < channels; ++channel) close_connection(peer, channel);
    for (auto &s : sends)
        if (s) std::free(s->mem);
    for (auto &r : recvs)
        if (r) {
            std::free(r->mem);
            std::free(r->carry);
        }
}

namespace {

unsigned char *allocate_slots(int slots, size_t slot_bytes) {
    // aligned_alloc wants a multiple of the alignment.
    const size_t bytes = (static_cast<size_t>(slots) * slot_bytes + 4095) & ~size_t{4095};
    return static_cast<unsigned char *>(std::aligned_alloc(4096, bytes));
}

void append_frame(std::string *to, FrameKind kind, const void *payload, uint32_t bytes) {
    const FrameHead head{bytes, kind};
    to->append(reinterpret_cast<const char *>(&head), sizeof head);
    to->append(kHeadBytes - sizeof head, '\0');
    if (bytes > 0) to->append(static_cast<const char *>(payload), bytes);
    to->append(tail_bytes(bytes), '\0');
}

} // namespace

SendStream &SocketTransport::Impl::send_stream(int peer, int channel) {
    std::unique_ptr<SendStream> &slot = sends[static_cast<size_t>(peer * channels + channel)];
    if (slot) return *slot;
    slot = std::make_unique<SendStream>();
    SendStream &s = *slot;
    s.peer = peer;
    s.channel = channel;
    s.ops.resize(static_cast<size_t>(slots));
    s.mem = allocate_slots(slots, slot_bytes);
    if (s.mem == nullptr) {
        s.dead = true;
        record_error(system_error("socket: cannot allocate %zu bytes of send buffers for rank %d",
                                  static_cast<size_t>(slots) * slot_bytes, peer));
        return s;
    }
    return s;
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

void SocketTransport::Impl::list_pending(SendStream &s) {
    if (!s.listed && !s.dead) {
        s.listed = true;
        pending.push_back(&s);
    }
}

void SocketTransport::Impl::pump_pending() {
    bool accepted_once = false;
    for (size_t i = 0; i < pending.size();) {
        SendStream &s = *pending[i];
        if (s.fd < 0 && !s.dead && (rank < s.peer || !accepted_once)) {
            accepted_once = accepted_once || rank > s.peer;
            ensure_connection(s.peer, s.channel);
        }
        pump_send(s);
        if (s.dead || s.drained()) {
            s.listed = false;
            pending[i] = pending.back();
            pending.pop_back();
        } else {
            ++i;
        }
    }
}

// Writes what the kernel takes: control frames only between messages,
// then messages in order, each a frame head, the slot's bytes and, sent
// in place, the caller's.
void SocketTransport::Impl::pump_send(SendStream &s) {
    while (!s.dead && s.fd >= 0) {
        if (!s.control.empty() && s.written == 0) {
            const ssize_t n = ::send(s.fd, s.control.data() + s.control_written, s.control.size() - s.control_written,
                                     MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0) {
                if (!would_block(errno)) fail_send(s, errno);
                return;
            }
            s.control_written += static_cast<size_t>(n);
            if (s.control_written == s.control.size()) {
                s.control.clear();
                s.control_written = 0;
            }
            continue;
        }
        if (s.sent_seq == s.send_seq) return;
        const size_t index = s.sent_seq % static_cast<uint64_t>(slots);
        SendOp &op = s.ops[index];
        iovec iov[4];
        int count = 0;
        size_t skip = s.written;
        auto add = [&](const void *p, size_t len) {
            if (skip >= len) {
                skip -= len;
                return;
            }
            iov[count++] = {const_cast<unsigned char *>(static_cast<const unsigned char *>(p)) + skip, len - skip};
            skip = 0;
        };
        add(op.head, sizeof op.head);
        add(s.mem + index * slot_bytes, op.header_bytes);
        if (op.data != nullptr) add(op.data, op.data_bytes);
        add(kZeros, tail_bytes(op.header_bytes + op.data_bytes));
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = static_cast<size_t>(count);
        const ssize_t n = sendmsg(s.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (!would_block(errno)) fail_send(s, errno);
            return;
        }
        s.written += static_cast<size_t>(n);
        if (s.written < op.total()) return; // the kernel's buffer is full
        s.written = 0;
        ++s.sent_seq;
        count_event();
    }
}

// A connection that failed under a send: the peer died, aborted or went
// silent, unless it left cleanly (its farewell may still be unread on its
// own connections to this rank, so they are read first) or nothing but a
// hello or a sign of life was on its way.
void SocketTransport::Impl::fail_send(SendStream &s, int err) {
    s.dead = true;
    const bool unsent = s.sent_seq != s.send_seq;
    // The pair's other channels first: this one's own end may be what
    // reading it finds, and its farewell may have gone on another.
    for (int k = 1; k <= channels; ++k) // s.channel last
        if (auto &r = recvs[static_cast<size_t>(s.peer * channels + (s.channel + k) % channels)]; r && r->fd >= 0)
            pump_recv(*r, nullptr, false);
    if (auto &r = recvs[static_cast<size_t>(s.peer * channels + s.channel)]) r->closed = true;
    close_connection(s.peer, s.channel);
    if (liveness.has_left(s.peer) || !unsent) {
        // It has gone and wants nothing more, or only a sign of life or a
        // hello failed, which says nothing of the job: a message this rank
        // has for that peer later fails in try_acquire_send.
        s.sent_seq = s.send_seq;
        count_event();
        return;
    }
    record_error(remote_error("socket: sending to rank %d at %s failed: %s", s.peer,
                              addresses[static_cast<size_t>(s.peer)].to_string().c_str(),
                              broken_because(s.peer, err).c_str()));
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
    r.mem = allocate_slots(slots, slot_bytes);
    r.carry = static_cast<unsigned char *>(std::aligned_alloc(kFrameAlign, kCarryBytes + kFrameAlign));
    if (r.mem == nullptr || r.carry == nullptr) {
        r.closed = true;
        record_error(system_error("socket: cannot allocate %zu bytes of receive buffers for rank %d",
                                  static_cast<size_t>(slots) * slot_bytes, peer));
    }
    return r;
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
        if (a.got == sizeof a.hello) attach(a);
        else if (gone) close_fd(a.fd);
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
                       static_cast<int>(hello.rank) < rank &&
                       hello.channel < static_cast<uint32_t>(channels);
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

// The connection ended or broke: nothing more comes, and nothing more
// goes (a failure to say so is the caller's).
void SocketTransport::Impl::close_recv(RecvStream &r) {
    r.closed = true;
    if (auto &s = sends[static_cast<size_t>(r.peer * channels + r.channel)]) {
        s->dead = true;
        s->sent_seq = s->send_seq;
    }
    close_connection(r.peer, r.channel);
    count_event();
}

// Where the current frame's next bytes go (*len: how many fit there
// before the next place): its slot, or with a claim the caller's buffer
// past the header.
unsigned char *SocketTransport::Impl::region(RecvStream &r, size_t *len) {
    unsigned char *slot = r.mem + (r.fill_seq % static_cast<uint64_t>(slots)) * slot_bytes;
    const size_t at = r.payload_got;
    if (r.land_to == nullptr || at < r.land_header) {
        *len = (r.land_to != nullptr ? r.land_header : r.head.bytes) - at;
        return slot + at;
    }
    *len = r.head.bytes - at;
    return static_cast<unsigned char *>(r.land_to) + (at - r.land_header);
}

// Copies carried bytes into the current frame; true once it is whole.
bool SocketTransport::Impl::store(RecvStream &r, const unsigned char *from, size_t len) {
    while (len > 0) {
        size_t room = 0;
        unsigned char *to = region(r, &room);
        const size_t n = std::min(room, len);
        copy_bytes(to, from, n);
        r.payload_got += n;
        from += n;
        len -= n;
    }
    return r.payload_got == r.head.bytes;
}

// Reads what has arrived on the stream into free slots (or, for the
// head of the stream with a matching claim, the caller's buffer), frame
// by frame, until the socket is empty or every slot holds a message.
void SocketTransport::Impl::pump_recv(RecvStream &r, const Claim *claim, bool defer) {
    if (r.connecting && r.fd >= 0) {
        pollfd p{r.fd, POLLIN | POLLOUT, 0};
        if (::poll(&p, 1, 0) == 0) return;
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(r.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
            if (!liveness.has_left(r.peer))
                record_error(remote_error("socket: connecting to rank %d at %s failed: %s", r.peer,
                                          addresses[static_cast<size_t>(r.peer)].to_string().c_str(),
                                          broken_because(r.peer, err).c_str()));
            close_recv(r);
            return;
        }
        r.connecting = false;
    }
    while (r.fd >= 0) {
        if (!r.in_payload) {
            const size_t head_end = r.tail + kHeadBytes;
            if (r.head_got < head_end) {
                if (r.carry_len == 0) {
                    const size_t at = r.received % kFrameAlign;
                    const ssize_t n = recv(r.fd, r.carry + at, kCarryBytes, MSG_DONTWAIT);
                    if (n == 0) {
                        if (r.head_got != r.tail && !liveness.has_left(r.peer))
                            record_error(remote_error("socket: rank %d closed its connection mid-frame", r.peer));
                        else if (!liveness.has_left(r.peer))
                            record_error(remote_error("socket: rank %d closed its connection without a farewell: it "
                                                      "died or aborted",
                                                      r.peer));
                        close_recv(r);
                        return;
                    }
                    if (n < 0) {
                        if (!would_block(errno)) {
                            record_error(remote_error("socket: receiving from rank %d failed: %s", r.peer,
                                                      broken_because(r.peer, errno).c_str()));
                            close_recv(r);
                        }
                        return;
                    }
                    r.carry_at = at;
                    r.carry_len = static_cast<size_t>(n);
                    r.received += static_cast<uint64_t>(n);
                }
                // The last frame's tail, then the head's place, of which
                // the FrameHead is the front.
                const size_t take = std::min(head_end - r.head_got, r.carry_len);
                const size_t head_from = std::max(r.head_got, r.tail);
                const size_t head_to = std::min(r.head_got + take, r.tail + sizeof r.head);
                if (head_from < head_to)
                    std::memcpy(reinterpret_cast<unsigned char *>(&r.head) + (head_from - r.tail),
                                r.carry + r.carry_at + (head_from - r.head_got), head_to - head_from);
                r.head_got += take;
                r.carry_at += take;
                r.carry_len -= take;
                if (r.head_got < head_end) continue;
            }
            if (r.head.kind == kBeat || r.head.kind == kFarewell) {
                liveness.heard_from(r.peer, Clock::now());
                if (r.head.kind == kFarewell) liveness.left(r.peer);
                r.head_got = 0;
                r.tail = 0; // they carry no payload
                continue;
            }
            if (r.head.kind != kData || r.head.bytes > slot_bytes) {
                record_error(remote_error("socket: rank %d sent a frame of kind %u and %u bytes, where messages hold "
                                          "at most %zu (ranks that disagree on NNPCCL_CHUNK_SIZE, or not nnpccl)",
                                          r.peer, r.head.kind, r.head.bytes, slot_bytes));
                close_recv(r);
                return;
            }
            if (!r.slot_free()) {
                if (r.carry_len > 0) recv_attention = true; // for poll() once a slot is released
                return;
            }
            r.in_payload = true;
            r.payload_got = 0;
            r.land_to = nullptr;
            const bool at_head = r.fill_seq == r.recv_seq;
            r.landed[r.fill_seq % static_cast<uint64_t>(slots)] = 0;
            if (at_head && claim != nullptr && r.head.bytes == claim->header + claim->dst_bytes) {
                r.land_to = claim->dst;
                r.land_header = claim->header;
                r.landed[r.fill_seq % static_cast<uint64_t>(slots)] = 1;
            }
        }
        if (r.carry_len > 0) {
            const size_t take = std::min(r.carry_len, r.head.bytes - r.payload_got);
            store(r, r.carry + r.carry_at, take);
            r.carry_at += take;
            r.carry_len -= take;
        }
        if (r.payload_got < r.head.bytes) {
            if (defer && !r.deferral_over && r.land_to == nullptr && r.fill_seq == r.recv_seq &&
                r.head.bytes - r.payload_got >= kDeferMinBytes) {
                const Clock::time_point now = Clock::now();
                if (r.deferred_since == Clock::time_point{}) {
                    r.deferred_since = now;
                    count_event(); // wakes a waiting engine to claim it
                }
                if (now - r.deferred_since < kClaimWindow) {
                    recv_attention = true;
                    return;
                }
                r.deferred_since = Clock::time_point{};
                r.deferral_over = true;
            }
            size_t room = 0;
            unsigned char *to = region(r, &room);
            const ssize_t n = recv(r.fd, to, room, MSG_DONTWAIT);
            if (n <= 0) {
                if (n == 0 || !would_block(errno)) {
                    record_error(remote_error("socket: rank %d's connection broke mid-message: %s", r.peer,
                                              n == 0 ? format("closed (rank %d died or aborted)", r.peer).c_str()
                                                     : broken_because(r.peer, errno).c_str()));
                    close_recv(r);
                }
                return;
            }
            r.payload_got += static_cast<size_t>(n);
            r.received += static_cast<uint64_t>(n);
            if (r.payload_got < r.head.bytes) {
                if (static_cast<size_t>(n) < room) return; // the socket is empty for now
                continue;
            }
        }
        r.bytes[r.fill_seq % static_cast<uint64_t>(slots)] = r.head.bytes;
        ++r.fill_seq;
        r.in_payload = false;
        r.tail = tail_bytes(r.head.bytes);
        r.head_got = 0;
        r.land_to = nullptr;
        r.deferred_since = Clock::time_point{};
        r.deferral_over = false;
        liveness.heard_from(r.peer, Clock::now());
        count_event();
    }
}

void SocketTransport::Impl::pump_all_recvs() {
    for (auto &r : recvs)
        if (r && r->fd >= 0) pump_recv(*r, nullptr, true);
}

void SocketTransport::Impl::beat() {
    if (!liveness.beat_due(events.load(std::memory_order_relaxed)) || !error.is_ok()) return;
    for (int peer = 0; peer < nranks; ++peer) {
        if (peer == rank || !partner(peer)) continue;
        SendStream *s = nullptr;
        for (int channel = 0; channel < channels; ++channel) // a connected one, if any
            if (SendStream *c = sends[static_cast<size_t>(peer * channels + channel)].get();
                c != nullptr && (s == nullptr || (s->fd < 0 && c->fd >= 0)))
                s = c;
        if (s == nullptr) s = &send_stream(peer, 0); // a peer that sends to this rank may wait on it
        // One at a time: a stopped peer's unread ones never pile up.
        if (s->dead || !s->control.empty()) continue;
        append_frame(&s->control, kBeat, nullptr, 0);
        list_pending(*s);
        pump_send(*s);
    }
}

// Whether this rank and `peer` exchange messages (a stream either way):
// the peers signs of life go to and timeouts may name.
bool SocketTransport::Impl::partner(int peer) const {
    for (int channel = 0; channel < channels; ++channel) {
        const size_t i = static_cast<size_t>(peer * channels + channel);
        if (sends[i] || (recvs[i] && (recvs[i]->fd >= 0 || recvs[i]->closed))) return true;
    }
    return false;
}

bool SocketTransport::Impl::connected(int peer) const {
    for (int channel = 0; channel < channels; ++channel) {
        const size_t i = static_cast<size_t>(peer * channels + channel);
        if (recvs[i] && (recvs[i]->fd >= 0 || recvs[i]->closed)) return true;
    }
    return false;
}

// On every connection this rank opened, each of which its peer reads in
// order: so a peer that reads a closed connection without a farewell in
// front of the end knows this rank died. A peer this rank never sent to is
// not waiting for it either.
//
// Then each connection's end is half closed, and this rank waits (at most
// a second, and never past `deadline`) until its peers' kernels have
// acknowledged all it sent: closing a socket whose peer has written what
// this rank has not read (a sign of life) resets the connection, which
// would drop whatever of this rank's was still unsent.
void SocketTransport::Impl::farewell(const Deadline &deadline) {
    for (auto &s : sends)
        if (s && !s->dead && s->fd >= 0) {
            append_frame(&s->control, kFarewell, nullptr, 0);
            list_pending(*s);
        }
    // Streams whose connection never came up (the lower rank never
    // needed it) have nothing anyone waits for.
    auto writing = [&] {
        for (const SendStream *p : pending)
            if (p->fd >= 0 && !p->dead && !p->drained()) return true;
        return false;
    };
    Deadline until = Deadline::after_seconds(0.1);
    while (writing() && !until.passed()) {
        pump_pending();
        std::this_thread::yield();
    }
    for (auto &s : sends)
        if (s && !s->dead && s->fd >= 0 && s->drained()) shutdown(s->fd, SHUT_WR);
    until = Deadline(std::min(deadline.at(), Clock::now() + std::chrono::seconds(1)));
    auto unacknowledged = [&] {
        for (auto &s : sends) {
            int queued = 0;
            if (s && !s->dead && s->fd >= 0 && ioctl(s->fd, SIOCOUTQ, &queued) == 0 && queued > 0) return true;
        }
        return false;
    };
    while (unacknowledged() && !until.passed()) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

SocketTransport::SocketTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SocketTransport::~SocketTransport() = default;

size_t SocketTransport::max_message_bytes() const { return impl_->slot_bytes; }
const std::string &SocketTransport::description() const { return impl_->description; }

Status SocketTransport::create(Bootstrap &bootstrap, int channels, const OfiOptions &options, size_t message_bytes,
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
    if (message_bytes > UINT32_MAX) return invalid_usage("socket: messages of %zu bytes do not fit a frame", message_bytes);

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
    NNPCCL_TRY(bootstrap.allgather(format("%s %llx", bound.to_string().c_str(),
                                          static_cast<unsigned long long>(impl->token)),
                                   deadline, &all));
    impl->addresses.resize(static_cast<size_t>(impl->nranks));
    impl->tokens.resize(static_cast<size_t>(impl->nranks));
    for (int r = 0; r < impl->nranks; ++r) {
        const std::string &entry = all[static_cast<size_t>(r)];
        const size_t space = entry.rfind(' ');
        if (space == std::string::npos) return invalid_usage("socket: rank %d announced '%s', not an address and a token", r, entry.c_str());
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

void *SocketTransport::try_acquire_send(int peer, int channel, size_t /*bytes*/) {
    SendStream &s = impl_->send_stream(peer, channel);
    if (s.fd < 0) impl_->ensure_connection(peer, channel);
    if (s.dead && impl_->error.is_ok())
        impl_->record_error(remote_error("socket: this rank has a message for rank %d, whose connection is gone%s",
                                         peer,
                                         impl_->liveness.has_left(peer)
                                             ? " (it destroyed its communicator)"
                                             : " (it died, aborted, or its host stopped answering)"));
    if (!impl_->error.is_ok() || s.send_seq - s.sent_seq >= static_cast<uint64_t>(impl_->slots)) return nullptr;
    return s.mem + (s.send_seq % static_cast<uint64_t>(impl_->slots)) * impl_->slot_bytes;
}

void SocketTransport::commit_send(int peer, int channel, size_t bytes) { commit_send_in_place(peer, channel, bytes, nullptr, 0); }

bool SocketTransport::sends_in_place(size_t bytes) const { return bytes >= kSendInPlaceMinBytes; }

uint64_t SocketTransport::commit_send_in_place(int peer, int channel, size_t header_bytes, const void *data,
                                               size_t bytes) {
    SendStream &s = impl_->send_stream(peer, channel);
    const size_t index = s.send_seq % static_cast<uint64_t>(impl_->slots);
    if (data != nullptr && !user_aligned(data)) { // see "Frames"
        copy_bytes(s.mem + index * impl_->slot_bytes + header_bytes, data, bytes);
        header_bytes += bytes;
        data = nullptr;
    }
    SendOp &op = s.ops[index];
    op.header_bytes = header_bytes;
    op.data = data;
    op.data_bytes = data != nullptr ? bytes : 0;
    const FrameHead head{static_cast<uint32_t>(header_bytes + op.data_bytes), kData};
    std::memcpy(op.head, &head, sizeof head);
    const uint64_t ticket = ++s.send_seq;
    impl_->pump_send(s);
    if (!s.drained()) impl_->list_pending(s);
    return ticket;
}

bool SocketTransport::send_done(int peer, int channel, uint64_t ticket) const {
    const auto &s = impl_->sends[static_cast<size_t>(peer * impl_->channels + channel)];
    return !s || s->dead || s->sent_seq >= ticket;
}

void SocketTransport::forget_caller_memory() {
    bool using_caller = false;
    for (auto &s : impl_->sends)
        if (s && !s->dead)
            for (uint64_t seq = s->sent_seq; seq < s->send_seq; ++seq)
                using_caller = using_caller || s->ops[seq % static_cast<uint64_t>(impl_->slots)].data != nullptr;
    for (auto &r : impl_->recvs) using_caller = using_caller || (r && r->in_payload && r->land_to != nullptr);
    if (!using_caller) return;
    // The kernel holds no reference to what it has taken; what it has not
    // is simply never written, and a receive into the caller's buffer is
    // cut off with its connection.
    if (impl_->error.is_ok()) impl_->error = system_error("socket: connections closed after the communicator failed");
    for (int peer = 0; peer < impl_->nranks; ++peer)
        for (int channel = 0; channel < impl_->channels; ++channel) {
            const size_t i = static_cast<size_t>(peer * impl_->channels + channel);
            if (auto &s = impl_->sends[i]) s->dead = true;
            if (auto &r = impl_->recvs[i]) r->closed = true;
            impl_->close_connection(peer, channel);
        }
}

const void *SocketTransport::try_peek_recv(int peer, int channel, size_t *bytes) {
    bool landed = false;
    return try_peek_recv_into(peer, channel, bytes, 0, nullptr, 0, &landed);
}

const void *SocketTransport::try_peek_recv_into(int peer, int channel, size_t *bytes, size_t header, void *dst,
                                                size_t dst_bytes, bool *landed) {
    RecvStream &r = impl_->recv_stream(peer, channel);
    if (r.recv_seq == r.fill_seq) {
        if (r.fd < 0 && !r.closed) impl_->ensure_connection(peer, channel);
        const Claim claim{header, dst, dst_bytes};
        // The kernel copies straight into aligned memory only (see "Frames").
        const bool claims = dst != nullptr && dst_bytes > 0 && user_aligned(dst);
        if (claims && r.in_payload && r.land_to == nullptr && r.head.bytes == header + dst_bytes) {
            // Begun into the slot while no step had asked: the rest goes to
            // the caller's buffer, and what came already follows it there.
            if (r.payload_got > header)
                copy_bytes(dst, r.mem + (r.fill_seq % static_cast<uint64_t>(impl_->slots)) * impl_->slot_bytes + header,
                            r.payload_got - header);
            r.land_to = dst;
            r.land_header = header;
            r.landed[r.fill_seq % static_cast<uint64_t>(impl_->slots)] = 1;
            r.deferred_since = Clock::time_point{};
        }
        impl_->pump_recv(r, claims ? &claim : nullptr, false);
        if (r.recv_seq == r.fill_seq) {
            if (r.closed && impl_->error.is_ok())
                impl_->record_error(remote_error("socket: rank %d has left (it destroyed its communicator) before "
                                                 "sending what this rank waits for",
                                                 peer));
            return nullptr;
        }
    }
    const size_t index = r.recv_seq % static_cast<uint64_t>(impl_->slots);
    *landed = r.landed[index] != 0;
    *bytes = r.bytes[index];
    return r.mem + index * impl_->slot_bytes;
}

void SocketTransport::release_recv(int peer, int channel) {
    RecvStream &r = impl_->recv_stream(peer, channel);
    r.landed[r.recv_seq % static_cast<uint64_t>(impl_->slots)] = 0;
    ++r.recv_seq;
}

void SocketTransport::poll() {
    Impl &im = *impl_;
    if (!im.pending.empty()) im.pump_pending();
    if (!im.recv_attention) return;
    im.recv_attention = false;
    for (auto &r : im.recvs)
        if (r && r->fd >= 0 && (r->deferred_since != Clock::time_point{} || (r->carry_len > 0 && r->slot_free())))
            im.pump_recv(*r, nullptr, true);
}

uint64_t SocketTransport::event_count() const { return impl_->events.load(std::memory_order_relaxed); }

// Sleeps in poll(2) on every connection that could move: the listener and
// connections still to name themselves, streams with a free slot, streams
// with bytes to write. A message left for its step to claim (kClaimWindow)
// keeps the sleeps short until it is claimed or taken.
void SocketTransport::wait_for_event(uint64_t seen, int timeout_ms) {
    Impl &im = *impl_;
    const Deadline until = Deadline::after_seconds(timeout_ms / 1000.0);
    std::vector<pollfd> fds;
    std::vector<void *> owners; // RecvStream*, SendStream* or nullptr (listener, accepted)
    std::vector<char> is_send;
    while (im.events.load(std::memory_order_relaxed) == seen && !until.passed()) {
        fds.clear();
        owners.clear();
        is_send.clear();
        bool deferred = false;
        auto watch = [&](int fd, short what, void *owner, bool send) {
            fds.push_back(pollfd{fd, what, 0});
            owners.push_back(owner);
            is_send.push_back(send);
        };
        if (im.listener >= 0 && !im.listener_starved) watch(im.listener, POLLIN, nullptr, false);
        for (Accepted &a : im.accepted) watch(a.fd, POLLIN, nullptr, false);
        for (auto &r : im.recvs) {
            if (!r || r->fd < 0) continue;
            if (r->carry_len > 0 && r->slot_free()) im.pump_recv(*r, nullptr, true);
            if (r->fd < 0 || !r->slot_free()) continue;
            if (r->deferred_since != Clock::time_point{}) deferred = true;
            else watch(r->fd, POLLIN, r.get(), false);
        }
        for (SendStream *s : im.pending) watch(s->fd, POLLOUT, s, true);
        if (im.events.load(std::memory_order_relaxed) != seen) return;
        const int ms = deferred ? std::min(1, until.ms_left()) : until.ms_left();
        const int ready = ::poll(fds.data(), fds.size(), ms);
        if (deferred)
            for (auto &r : im.recvs)
                if (r && r->fd >= 0 && r->deferred_since != Clock::time_point{}) im.pump_recv(*r, nullptr, true);
        if (ready <= 0) continue;
        bool accept = false;
        for (size_t i = 0; i < fds.size(); ++i) {
            if (fds[i].revents == 0) continue;
            if (owners[i] == nullptr) accept = true;
            else if (is_send[i]) im.pump_send(*static_cast<SendStream *>(owners[i]));
            else im.pump_recv(*static_cast<RecvStream *>(owners[i]), nullptr, true);
        }
        if (accept) im.accept_pending();
        im.pump_pending();
    }
}

// Every liveness check while this rank waits says to every peer that it is
// alive (see beat()), reads what its connections hold (signs of life, a
// farewell, a closed connection), and finishes what waits to be written.
// A broken connection is this rank's failure only when the bootstrap has
// said nothing for kErrorGrace: as over ofi, the peer at its other end is
// often not the rank at fault.
Status SocketTransport::check_peers() {
    impl_->beat();
    impl_->accept_pending();
    impl_->pump_all_recvs();
    impl_->pump_pending();
    return PeerLiveness::after_grace(impl_->error, impl_->error_at);
}

// Signs of life go to partners only (see beat()), and only once they are
// connected: the lower rank opens a connection when it first has something
// for the higher one, so a higher rank waiting on a lower one that has not
// yet had anything to send it (in a job's first call, say) hears nothing
// from it, however alive. Only connected partners are named.
std::string SocketTransport::silent_peers(std::chrono::milliseconds quiet) const {
    return impl_->liveness.silent(quiet, "sockets",
                                  [this](int peer) { return impl_->connected(peer); });
}

bool SocketTransport::has_pending_sends() const {
    if (!impl_->error.is_ok()) return false;
    for (const SendStream *s : impl_->pending)
        if (!s->dead && s->sent_seq != s->send_seq) return true;
    return false;
}

Status SocketTransport::flush(const Deadline &deadline) {
    while (has_pending_sends()) {
        if (deadline.passed()) {
            std::set<int> late;
            for (const SendStream *s : impl_->pending)
                if (!s->dead && s->sent_seq != s->send_seq) late.insert(s->peer);
            return PeerLiveness::unsent_at_deadline("socket", late, silent_peers(std::chrono::seconds(1)));
        }
        // Its peers may time out meanwhile; this rank is not the one at fault.
        impl_->beat();
        poll();
        std::this_thread::yield();
    }
    // Only a communicator that has not failed says farewell: it is leaving
    // cleanly, with every message written.
    if (!impl_->error.is_ok()) return impl_->error;
    impl_->farewell(deadline);
    return impl_->error;
}

} // namespace nnpccl
