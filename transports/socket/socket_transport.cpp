// The socket transport's progress while the engine waits: poll() and
// wait_for_event(), which sleep in poll(2) on every connection that could
// move and turn what it reports to the pumps and the listener. The rest of
// the transport is in parts: the wire (socket_wire.hpp), its state
// (socket_streams.hpp), connection set-up (socket_connections.cpp), the
// send and receive pumps (socket_send.cpp, socket_receive.cpp) and failure
// detection (socket_liveness.cpp).
#include "socket_transport.hpp"

#include <poll.h>

#include <algorithm>

#include "socket_streams.hpp"

namespace nnpccl {

SocketTransport::SocketTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SocketTransport::~SocketTransport() = default;

size_t SocketTransport::max_message_bytes() const { return impl_->slot_bytes; }
const std::string &SocketTransport::description() const { return impl_->description; }

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

} // namespace nnpccl
