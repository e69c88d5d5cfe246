// The ofi transport's progress: the Transport calls that hand it messages
// and hand them out, the posts of sends and receives (a refused post waits
// its turn), the completions that finish them, and a split message's two
// halves (see kSplitBit). The rest is in parts: the wire (ofi_tags.hpp),
// its state (ofi_streams.hpp), the provider's choice (ofi_provider.cpp),
// set-up and teardown (ofi_endpoint.cpp) and failure detection
// (ofi_liveness.cpp).
#include "ofi_transport.hpp"

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "ofi_streams.hpp"

namespace nnpccl {

void *OfiTransport::try_acquire_send(int peer, int channel, size_t /*bytes*/) {
    Stream &s = impl_->stream(peer, channel);
    if (!impl_->error.is_ok() || s.send_mem == nullptr) return nullptr;
    SlotOp &op = s.send_ops[s.send_seq % static_cast<uint64_t>(impl_->slots)];
    if (op.busy) return nullptr;
    return s.send_mem + op.index * impl_->slot_bytes;
}

void OfiTransport::commit_send(int peer, int channel, size_t bytes) {
    commit_send_in_place(peer, channel, bytes, nullptr, 0);
}

bool OfiTransport::sends_in_place(size_t bytes) const { return impl_->in_place && bytes >= kSendInPlaceMinBytes; }

uint64_t OfiTransport::commit_send_in_place(int peer, int channel, size_t header_bytes, const void *data,
                                            size_t bytes) {
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
        const bool direct =
            impl_->recv_in_place && dst != nullptr && op.payload_bytes == dst_bytes && op.header_bytes == header;
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

void OfiTransport::Impl::repost_pending() {
    while (!unposted.empty()) {
        SlotOp *op = unposted.front();
        bool posted = op->is_send ? post_send(op) : post_recv(op);
        if (!posted) return;
        unposted.pop_front();
    }
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

} // namespace nnpccl
