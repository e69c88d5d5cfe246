// TCP transport on sockets nnpccl drives itself, for ranks on other hosts
// when no faster fabric is there (or any rank, with
// NNPCCL_TRANSPORT=socket). It does over TCP what the ofi transport does
// through libfabric's tcp providers, with the few system calls a message
// needs and nothing else: where libfabric's net provider makes about 100
// calls per 512 KiB allreduce and rank (74 of them epoll_wait from
// polling its completion queue), this makes one send per message and a
// receive per arriving piece, about 58 in all, most of them the spinning
// wait's (docs/performance.md, "TCP on nnpccl's own sockets").
//
// Every pair of ranks has a connection per channel, which carries that
// channel's streams both ways (so each side's acknowledgements ride on its
// own messages), and the kernel's socket buffers are its flow control: a
// stream whose receiver is slow to take its messages holds back nothing on
// other channels or peers. The lower rank opens it, when it first sends to
// the peer or waits for it, and names itself (rank, channel, and the token
// the peer's listener announced through the bootstrap, so strays are
// refused); the higher rank's messages wait in their slots until then.
//
// On the wire a stream is frames: an 8-byte head (length, kind) and the
// message. A message up to max_message_bytes() lands in one of `slots`
// receive slots, where the executor reads it in place; one whose step
// only stores its payload is received straight into the caller's buffer
// (Transport::try_peek_recv_into). A sender copies messages below 32 KiB
// into a slot and sends larger ones from the caller's memory, which is
// free again once the kernel has taken it. Signs of life and a farewell
// (see socket_liveness.cpp) are frames too. The parts: socket_wire.hpp
// (frames), socket_connections.cpp (set-up), socket_send.cpp and
// socket_receive.cpp (the pumps), socket_liveness.cpp (failure detection),
// socket_transport.cpp (waiting).
#pragma once

#include <memory>
#include <string>

#include "deadline.hpp"
#include "socket_options.hpp"
#include "transport.hpp"

namespace nnpccl {

class Bootstrap;

class SocketTransport final : public Transport {
public:
    // Collective over the bootstrap: every rank of the communicator calls it.
    static Status create(Bootstrap &bootstrap, int channels, const SocketOptions &options, size_t message_bytes,
                         const Deadline &deadline, std::unique_ptr<SocketTransport> *out);
    ~SocketTransport() override;

    const char *name() const override { return "socket"; }
    int spin_hint_us() const override { return 250; } // as ofi's: a round over TCP between hosts takes tens of µs
    size_t max_message_bytes() const override;
    void *try_acquire_send(int peer, int channel, size_t bytes) override;
    void commit_send(int peer, int channel, size_t bytes) override;
    bool sends_in_place(size_t bytes) const override;
    uint64_t commit_send_in_place(int peer, int channel, size_t header_bytes, const void *data, size_t bytes) override;
    bool send_done(int peer, int channel, uint64_t ticket) const override;
    void forget_caller_memory() override;
    const void *try_peek_recv(int peer, int channel, size_t *bytes) override;
    const void *try_peek_recv_into(int peer, int channel, size_t *bytes, size_t header, void *dst, size_t dst_bytes,
                                   bool *landed) override;
    void release_recv(int peer, int channel) override;
    void poll() override;
    uint64_t event_count() const override;
    void wait_for_event(uint64_t seen, int timeout_ms) override;
    Status check_peers() override;
    std::string silent_peers(std::chrono::milliseconds quiet) const override;
    void announce_abort(const Status &) override {}
    Status flush(const Deadline &deadline) override;
    bool has_pending_sends() const override;

    // "sockets on 10.0.0.2:41234", for logs.
    const std::string &description() const;

    struct Impl;

private:
    explicit SocketTransport(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

} // namespace nnpccl
