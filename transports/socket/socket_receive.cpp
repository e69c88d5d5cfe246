// The socket transport's receive side: the calls that hand a message out
// (try_peek_recv, try_peek_recv_into, release_recv) and the pump that reads
// frames into free slots, or a claimed message straight into the caller's
// buffer, one step of a frame at a time (its head, its payload, its end).
// Apart from the send side: the two share only the connection.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "copy.hpp"
#include "socket_streams.hpp"

namespace nnpccl {

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
                copy_bytes(dst, r.slots.at(r.fill_seq % static_cast<uint64_t>(impl_->slots)) + header,
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
    return r.slots.at(index);
}

void SocketTransport::release_recv(int peer, int channel) {
    RecvStream &r = impl_->recv_stream(peer, channel);
    const size_t index = r.recv_seq % static_cast<uint64_t>(impl_->slots);
    r.landed[index] = 0;
    r.slots.give_back(index);
    ++r.recv_seq;
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
    unsigned char *slot = r.slots.at(r.fill_seq % static_cast<uint64_t>(slots));
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
    if (r.connecting && r.fd >= 0 && !connect_completed(r)) return;
    while (r.fd >= 0) {
        if (!r.in_payload) {
            const ReadOn head = read_frame_head(r);
            if (head == ReadOn::Stop) return;
            if (head == ReadOn::Again) continue;
            if (!start_message(r, claim)) return;
        }
        const ReadOn payload = read_payload(r, defer);
        if (payload == ReadOn::Stop) return;
        if (payload == ReadOn::Again) continue;
        finish_message(r);
    }
}

// Whether this rank's connect has completed (see RecvStream::connecting);
// false while it is under way, or when it failed (the stream is closed).
bool SocketTransport::Impl::connect_completed(RecvStream &r) {
    pollfd p{r.fd, POLLIN | POLLOUT, 0};
    if (::poll(&p, 1, 0) == 0) return false;
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(r.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
        if (!liveness.has_left(r.peer))
            record_error(remote_error("socket: connecting to rank %d at %s failed: %s", r.peer,
                                      addresses[static_cast<size_t>(r.peer)].to_string().c_str(),
                                      broken_because(r.peer, err).c_str()));
        close_recv(r);
        return false;
    }
    r.connecting = false;
    return true;
}

// Receives what the socket holds, up to kCarryBytes, into the empty carry
// buffer; false when nothing came (the socket is empty for now, or the
// connection ended, which closes the stream).
bool SocketTransport::Impl::refill_carry(RecvStream &r) {
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
        return false;
    }
    if (n < 0) {
        if (!would_block(errno)) {
            record_error(remote_error("socket: receiving from rank %d failed: %s", r.peer,
                                      broken_because(r.peer, errno).c_str()));
            close_recv(r);
        }
        return false;
    }
    r.carry_at = at;
    r.carry_len = static_cast<size_t>(n);
    r.received += static_cast<uint64_t>(n);
    return true;
}

// Takes the next frame's head out of the carry: Done once a data frame's
// head is whole; signs of life and farewells are taken here whole (they
// carry no payload), and the next frame is read Again.
ReadOn SocketTransport::Impl::read_frame_head(RecvStream &r) {
    const size_t head_end = r.tail + kHeadBytes;
    if (r.head_got < head_end) {
        if (r.carry_len == 0 && !refill_carry(r)) return ReadOn::Stop;
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
        if (r.head_got < head_end) return ReadOn::Again;
    }
    if (r.head.kind == kBeat || r.head.kind == kFarewell) {
        liveness.heard_from(r.peer, Clock::now());
        if (r.head.kind == kFarewell) liveness.left(r.peer);
        r.head_got = 0;
        r.tail = 0; // they carry no payload
        return ReadOn::Again;
    }
    return ReadOn::Done;
}

// A data frame's head is whole: its message takes the next free slot, and
// the caller's buffer when `claim` fits it at the head of the stream.
// False when it cannot be taken now (no free slot) or at all (a frame no
// message can be, which closes the stream).
bool SocketTransport::Impl::start_message(RecvStream &r, const Claim *claim) {
    if (r.head.kind != kData || r.head.bytes > slot_bytes) {
        record_error(remote_error("socket: rank %d sent a frame of kind %u and %u bytes, where messages hold "
                                  "at most %zu (ranks that disagree on NNPCCL_CHUNK_SIZE, or not nnpccl)",
                                  r.peer, r.head.kind, r.head.bytes, slot_bytes));
        close_recv(r);
        return false;
    }
    if (!r.slot_free()) {
        if (r.carry_len > 0) recv_attention = true; // for poll() once a slot is released
        return false;
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
    return true;
}

// Moves the current message's payload from the carry, then from the
// socket, to where it lands: Done once it is whole. With `defer`, a large
// one no step has claimed yet waits out its kClaimWindow first.
ReadOn SocketTransport::Impl::read_payload(RecvStream &r, bool defer) {
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
                return ReadOn::Stop;
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
            return ReadOn::Stop;
        }
        r.payload_got += static_cast<size_t>(n);
        r.received += static_cast<uint64_t>(n);
        if (r.payload_got < r.head.bytes) {
            if (static_cast<size_t>(n) < room) return ReadOn::Stop; // the socket is empty for now
            return ReadOn::Again;
        }
    }
    return ReadOn::Done;
}

// The current message is whole: it is handed out in its turn, and the
// next frame's head follows its tail.
void SocketTransport::Impl::finish_message(RecvStream &r) {
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

void SocketTransport::Impl::pump_all_recvs() {
    for (auto &r : recvs)
        if (r && r->fd >= 0) pump_recv(*r, nullptr, true);
}

} // namespace nnpccl
