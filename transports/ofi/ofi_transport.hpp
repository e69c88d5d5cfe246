// libfabric transport: reliable-datagram endpoints (FI_EP_RDM) with tagged
// messages, for ranks on other hosts where libfabric offers a fabric that
// is not TCP (or NNPCCL_NET_TRANSPORT=ofi says so; or any rank, with
// NNPCCL_TRANSPORT=ofi). Over TCP nnpccl's own sockets serve them
// (transports/socket).
//
// Each (peer, channel) stream owns `slots` registered send buffers and
// `slots` registered receive buffers. The receive side keeps the next
// `slots` messages of each stream pre-posted, so a stream of chunks
// pipelines like the shared-memory queues do. Cost per message: one copy
// into the send buffer, the provider's transfer, one pass out of the
// receive buffer. Where the provider needs no registration (tcp, net),
// messages from 32 KiB up skip the first copy: the slot holds only the
// operation's descriptor and the provider sends the data from the caller's
// memory (Transport::sends_in_place), one pass over memory fewer per
// message. From 256 KiB such a message goes as a header and a payload,
// and a receiver whose step only stores the payload receives it straight
// into the caller's buffer (Transport::try_peek_recv_into), skipping the
// last pass too (see kSplitBit in ofi_tags.hpp).
//
// Tags: source rank (16 bits) | channel (4 bits) | stream sequence (40
// bits), and above them the kinds of message (signs of life, a split
// message's header or payload). Every message of a stream has its own sequence number, so
// messages of different operations, channels or peers never match each
// other; every communicator has its own endpoint, so communicators cannot
// match each other either.
//
// Memory registration follows what the provider asks for in mr_mode
// (FI_MR_LOCAL: buffers are registered once, at stream creation, which is
// the registration cache; FI_MR_ENDPOINT: bound and enabled; FI_MR_ALLOCATED,
// FI_MR_VIRT_ADDR and FI_MR_PROV_KEY are satisfied because only our own
// allocated buffers are registered and no remote keys are used).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "deadline.hpp"
#include "ofi_options.hpp"
#include "transport.hpp"

namespace nnpccl {

class Bootstrap;

class OfiTransport final : public Transport {
public:
    // Collective over the bootstrap: every rank of the communicator calls it.
    static Status create(Bootstrap &bootstrap, int channels, const OfiOptions &options, size_t message_bytes,
                         const std::string &nic_hint, const Deadline &deadline,
                         std::unique_ptr<OfiTransport> *out);
    ~OfiTransport() override;
    // The link speed (GB/s per direction) libfabric reports for the NIC this
    // rank's transport would use, or 0 where it reports none (the tcp
    // providers report none).
    static double reported_link_gbps(const std::string &nic_hint);
    // The provider create() would use ("net", "verbs;ofi_rxm", ...), or ""
    // where libfabric offers none.
    static std::string chosen_provider(const std::string &nic_hint);

    const char *name() const override { return "ofi"; }
    int spin_hint_us() const override { return 250; } // a small message over tcp takes ~15 µs one way; a round of a collective several times that
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
    bool has_left(int peer) const override;
    Status check_peers() override;
    std::string silent_peers(std::chrono::milliseconds quiet) const override;
    void announce_abort(const Status &) override {}
    Status flush(const Deadline &deadline) override;
    bool has_pending_sends() const override;

    // "tcp;ofi_rxm on eth0", for logs and ccl-bench's header.
    const std::string &description() const;

    struct Impl;

private:
    explicit OfiTransport(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

} // namespace nnpccl
