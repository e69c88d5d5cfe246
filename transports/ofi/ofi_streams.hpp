// The ofi transport's state, shared by its parts: each stream's slots
// and the operation of each, and OfiTransport::Impl, whose members the
// parts define (ofi_endpoint.cpp: set-up and teardown; ofi_transport.cpp:
// posts and completions; ofi_liveness.cpp: signs of life, farewells and
// failures). Internal to transports/ofi.
#pragma once

#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <sys/socket.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fabric_library.hpp"
#include "log.hpp"
#include "ofi_tags.hpp"
#include "ofi_transport.hpp"
#include "peer_liveness.hpp"

namespace nnpccl {

// Smaller messages are copied into the slot: tracking a send in place
// costs more than copying a few KiB.
constexpr size_t kSendInPlaceMinBytes = 32 * 1024;

// One slot's operation context. The provider owns `ctx` while the operation
// is in flight (FI_CONTEXT/FI_CONTEXT2 mode), so it comes first.
struct SlotOp {
    fi_context2 ctx;
    struct Stream *stream;
    uint32_t index;
    bool is_send;
    bool busy;                  // send: posted and not completed; recv: posted and not completed
    bool complete;              // recv only: holds a message not yet released
    size_t bytes;               // send: length to send from the slot; recv: length received
    uint64_t seq;               // the stream sequence number (and so the tag) of the current operation
    const void *data = nullptr; // send in place: the caller's bytes that follow the slot's
    size_t data_bytes = 0;
    bool beat = false;        // a sign of life, not a stream's message: `stream` is null
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
    size_t inject_size = 0;     // messages up to this size go with fi_tinject: no completion, buffer free at once
    bool in_place = false;      // the provider may send from unregistered caller memory
    bool recv_in_place = false; // and receive into it
    std::vector<fi_addr_t> addrs;
    std::map<std::pair<int, int>, std::unique_ptr<Stream>> streams;
    std::deque<SlotOp *> unposted;   // posts the provider refused with -FI_EAGAIN, in order
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

} // namespace nnpccl
