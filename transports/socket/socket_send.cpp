// The socket transport's send side: the calls that hand it a message
// (try_acquire_send, commit_send, commit_send_in_place) and the pump that
// writes streams' frames as the kernel takes them, in order, control
// frames between messages. Apart from the receive side: the two share
// only the connection, and a failure under a send is judged here.
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstring>

#include "copy.hpp"
#include "socket_streams.hpp"

namespace nnpccl {

void *SocketTransport::try_acquire_send(int peer, int channel, size_t /*bytes*/) {
    SendStream &s = impl_->send_stream(peer, channel);
    if (s.fd < 0) impl_->ensure_connection(peer, channel);
    if (s.dead && impl_->error.is_ok())
        impl_->record_error(
            remote_error("socket: this rank has a message for rank %d, whose connection is gone%s", peer,
                         impl_->liveness.has_left(peer) ? " (it destroyed its communicator)"
                                                        : " (it died, aborted, or its host stopped answering)"));
    if (!impl_->error.is_ok() || s.send_seq - s.sent_seq >= static_cast<uint64_t>(impl_->slots)) return nullptr;
    return s.slots.at(s.send_seq % static_cast<uint64_t>(impl_->slots));
}

void SocketTransport::commit_send(int peer, int channel, size_t bytes) {
    commit_send_in_place(peer, channel, bytes, nullptr, 0);
}

bool SocketTransport::sends_in_place(size_t bytes) const { return bytes >= kSendInPlaceMinBytes; }

uint64_t SocketTransport::commit_send_in_place(int peer, int channel, size_t header_bytes, const void *data,
                                               size_t bytes) {
    SendStream &s = impl_->send_stream(peer, channel);
    const size_t index = s.send_seq % static_cast<uint64_t>(impl_->slots);
    if (data != nullptr && !user_aligned(data)) { // see "Frames"
        copy_bytes(s.slots.at(index) + header_bytes, data, bytes);
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
        add(s.slots.at(index), op.header_bytes);
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
        s.slots.give_back(index);
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

} // namespace nnpccl
