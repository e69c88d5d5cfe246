// The socket transport's state, shared by its parts: the streams to and
// from each peer, the connections that carry them, and SocketTransport::Impl,
// whose members the parts define (socket_connections.cpp: set-up;
// socket_send.cpp, socket_receive.cpp: the pumps; socket_liveness.cpp:
// signs of life, farewells and failures; socket_transport.cpp: waiting).
// Internal to transports/socket.
#pragma once

#include <atomic>
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "log.hpp"
#include "peer_liveness.hpp"
#include "socket.hpp"
#include "socket_transport.hpp"
#include "socket_wire.hpp"

namespace nnpccl {

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

inline bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

// Why a connection to `peer` broke, as its error says (socket_liveness.cpp).
std::string broken_because(int peer, int err);

// A stream's slots, each big enough for its largest message, lent to the
// messages in flight most recently returned first: while ranks run in
// step only one or two are in use, so the same memory stays in cache and
// the rest is never touched. A ring that turned through all of them
// touched every slot anew on its first laps at each larger size, a page
// fault per page (docs/performance.md, "TCP: slots reused").
struct SlotPool {
    unsigned char *mem = nullptr;
    std::vector<unsigned char *> lent; // by ring index (seq % slots), while its message is in flight
    std::vector<unsigned char *> idle; // most recently returned last

    SlotPool() = default;
    SlotPool(const SlotPool &) = delete;
    SlotPool &operator=(const SlotPool &) = delete;
    bool allocate(int slots, size_t slot_bytes);
    ~SlotPool();
    // The slot of the message at ring `index`, lent on first asking.
    unsigned char *at(size_t index) {
        unsigned char *&slot = lent[index];
        if (slot == nullptr) {
            slot = idle.back();
            idle.pop_back();
        }
        return slot;
    }
    void give_back(size_t index) {
        if (lent[index] == nullptr) return; // a message of no bytes that nobody looked at
        idle.push_back(lent[index]);
        lent[index] = nullptr;
    }
};

// One message of a SendStream's ring, as it goes on the wire.
struct SendOp {
    unsigned char head[kHeadBytes] = {}; // a FrameHead, then zeros
    size_t header_bytes = 0;             // from the slot
    const void *data = nullptr;          // sent in place: the caller's bytes after the slot's
    size_t data_bytes = 0;
    size_t total() const { return frame_bytes(header_bytes + data_bytes); }
};

// This rank's messages to one peer on one channel.
struct SendStream {
    int peer = 0;
    int channel = 0;
    int fd = -1;
    bool dead = false;   // the connection failed, or was closed after a failure: nothing more goes
    bool listed = false; // in Impl::pending
    SlotPool slots;
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
    SlotPool slots;
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

// Where pump_recv goes on from a step of reading a frame: it stops (the
// socket is empty for now, the stream has closed, or no slot is free), it
// reads again, or the step is done.
enum class ReadOn { Stop, Again, Done };

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
    bool connect_completed(RecvStream &r);
    bool refill_carry(RecvStream &r);
    ReadOn read_frame_head(RecvStream &r);
    bool start_message(RecvStream &r, const Claim *claim);
    ReadOn read_payload(RecvStream &r, bool defer);
    void finish_message(RecvStream &r);
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

} // namespace nnpccl
