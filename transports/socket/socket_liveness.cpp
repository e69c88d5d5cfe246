// The socket transport's failure detection: signs of life while a rank
// waits, the farewell of a rank that leaves cleanly, what a broken
// connection says of its peer, what check_peers, silent_peers and flush
// report, and letting go of the caller's memory once the communicator has
// failed. Apart from the pumps because it decides whose fault a failure
// is, not how bytes move.
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>

#include "socket_streams.hpp"

namespace nnpccl {

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

// On every connection this rank has, each of which its peer reads in
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
    // A connection a lower rank opened that this rank has not taken yet is
    // a peer waiting for it: taken now, it hears the farewell rather than
    // a reset, which would read as this rank's death.
    accept_pending();
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
    return impl_->liveness.silent(quiet, "sockets", [this](int peer) { return impl_->connected(peer); });
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
