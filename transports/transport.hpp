// The transport interface. A transport moves ordered messages between this
// rank and its peers: for every (peer, channel) there is one stream in each
// direction, and messages arrive in the order they were sent. The executor
// never copies through a private buffer: it writes straight into the
// transport's send buffer and reduces straight out of its receive buffer.
//
// All calls are made by the one thread that drives the communicator's
// progress; implementations need no locking of their own for them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "deadline.hpp"
#include "status.hpp"

namespace nnpccl {

class Transport {
public:
    virtual ~Transport() = default;

    virtual const char *name() const = 0;
    // The largest message a stream carries; schedules are cut into chunks no larger.
    virtual size_t max_message_bytes() const = 0;

    // Bytes the transport keeps beside every message, which travel with
    // it: a sender's fixed-size header that fits goes there rather than in
    // front of the data (shm keeps it in the line it signals the message
    // with, so the receiver gets both in one cache line). 0: headers go in
    // the message. send_header() is the room of the buffer
    // try_acquire_send() gave last; recv_header() that of the message
    // try_peek_recv() gave.
    virtual size_t header_room() const { return 0; }
    virtual void *send_header(int /*peer*/, int /*channel*/) { return nullptr; }
    virtual const void *recv_header(int /*peer*/, int /*channel*/) const { return nullptr; }

    // A buffer for the next message to `peer`, of `bytes` (what the
    // message will be, at most max_message_bytes(); it may be committed
    // shorter), or nullptr while the buffers are still in flight. Asking
    // again for as many bytes without a commit returns the same buffer. (A
    // transport may keep small messages apart from large ones.)
    virtual void *try_acquire_send(int peer, int channel, size_t bytes) = 0;
    // Sends the first `bytes` of the acquired buffer.
    virtual void commit_send(int peer, int channel, size_t bytes) = 0;
    // Whether the receiver reads a send buffer where it lies (shared
    // memory). The executor then reduces into a cache-hot scratch and
    // copies the result in, since a reduce loop writing the buffer would
    // first fetch each line back from the peer that read it last. Where the
    // buffer is this process's own (the kernel or a provider copies it
    // out), it reduces straight into it and saves that copy. Only speed
    // depends on it.
    virtual bool peer_reads_send_buffers() const { return false; }

    // Sends in place, for transports that can send straight out of the
    // caller's memory (a libfabric provider that needs no registration):
    // the message is the first `header_bytes` of the acquired buffer
    // followed by `data`, which is not copied and must stay unchanged until
    // send_done(ticket). Saves the copy into the send buffer. Whether a
    // message of `bytes` is better sent so:
    virtual bool sends_in_place(size_t /*bytes*/) const { return false; }
    virtual uint64_t commit_send_in_place(int /*peer*/, int /*channel*/, size_t /*header_bytes*/,
                                          const void * /*data*/, size_t /*bytes*/) {
        return 0;
    }
    virtual bool send_done(int /*peer*/, int /*channel*/, uint64_t /*ticket*/) const { return true; }
    // The communicator has failed: stop reading the caller's memory (sends
    // in place still in flight are dropped), so the caller may free it once
    // the failed operation returns.
    virtual void forget_caller_memory() {}

    // The next message from `peer`, or nullptr while none has arrived. It
    // stays valid and in place until release_recv.
    virtual const void *try_peek_recv(int peer, int channel, size_t *bytes) = 0;
    virtual void release_recv(int peer, int channel) = 0;
    // try_peek_recv for a step that only stores the payload (what follows
    // the message's first `header` bytes) at `dst`, `dst_bytes` long: a
    // transport that can receive the payload there itself (ofi's messages
    // sent in place) does so when its length is `dst_bytes` and sets
    // *landed; the message then holds the header alone, though *bytes
    // counts both. It may write `dst` before the header has been checked:
    // a call that fails leaves its output undefined.
    virtual const void *try_peek_recv_into(int peer, int channel, size_t *bytes, size_t /*header*/, void * /*dst*/,
                                           size_t /*dst_bytes*/, bool *landed) {
        *landed = false;
        return try_peek_recv(peer, channel, bytes);
    }

    // How long a waiting rank should spin (polling) before it sleeps, when it
    // has a core of its own: about the time a typical answer takes to come
    // back over this transport. Waking from a sleep costs tens of µs.
    virtual int spin_hint_us() const { return 0; }

    // Drives completions for transports whose hardware or library needs it.
    virtual void poll() {}

    // A counter that changes whenever something this rank may be waiting for
    // has changed; wait_for_event sleeps until it differs from `seen` or the
    // timeout passes.
    virtual uint64_t event_count() const = 0;
    virtual void wait_for_event(uint64_t seen, int timeout_ms) = 0;

    // NNPCCL_ERR_REMOTE naming the peer when a peer has died or aborted.
    // The engine calls it only while it waits, and every call is also this
    // rank's sign of life for the peers' silent_peers().
    virtual Status check_peers() = 0;
    // Peers that have given no sign of life (no check_peers() call) for
    // `quiet` or longer, for a timeout's message: a stopped or hung process,
    // or one that has not called the library; "" when none, or where the
    // transport cannot tell.
    virtual std::string silent_peers(std::chrono::milliseconds /*quiet*/) const { return ""; }
    // Whether `peer` has left cleanly (destroyed its communicator) and
    // everything it sent before leaving has reached this rank, so that a
    // step still waiting on it, for a message or for room in its queue,
    // waits for nothing that will come (Engine::idle_wait then fails the
    // call naming it). False where the transport cannot tell; a transport
    // that reports it here must not report it sooner than that.
    virtual bool has_left(int /*peer*/) const { return false; }
    // Tells every peer this rank is failing, and why (its result and, where
    // the transport can carry it, its message), so they stop waiting for it
    // and fail alike.
    virtual void announce_abort(const Status &why) = 0;

    // True while committed messages still need this rank's progress calls
    // to leave (a provider with manual progress, messages held back by link
    // emulation). The engine keeps polling until it is false, so a peer is
    // never left waiting for this rank's next call.
    virtual bool has_pending_sends() const { return false; }

    // Waits until every committed message has left this rank's hands, so
    // the transport can be torn down without losing the last of them.
    virtual Status flush(const Deadline &) { return Status::ok(); }
};

} // namespace nnpccl
