// The ofi transport's failure detection: signs of life while a rank
// waits, the farewell of a rank that leaves cleanly, what check_peers,
// silent_peers and flush report, and letting go of the caller's memory
// once the communicator has failed. Apart from the progress because it
// decides whose fault a failure is, not how messages move.
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <set>
#include <thread>

#include "ofi_streams.hpp"

namespace nnpccl {

// Signs of life go out at PeerLiveness's pace, never sooner: one may be
// the first message to a peer, and so open a connection, which a wait cut
// short by a failure elsewhere should not do while the job goes down (see
// close_endpoint()).
void OfiTransport::Impl::beat() {
    if (!liveness.beat_due(events.load(std::memory_order_relaxed)) || ep == nullptr || !error.is_ok()) return;
    for (int peer = 0; peer < nranks; ++peer) {
        SlotOp &op = beat_sends[static_cast<size_t>(peer)];
        if (peer == rank || op.busy) continue;
        // A peer that cannot be reached is found dead by the liveness
        // checks, which name it; a failed sign of life says nothing more.
        ssize_t rc = fi_tsend(ep, nullptr, 0, nullptr, addrs[static_cast<size_t>(peer)],
                              kBeatBit | make_tag(rank, 0, 0), &op.ctx);
        op.busy = rc == 0;
    }
}

// To every peer, those this rank never exchanged a message with too: such
// a peer may still need this rank (its next call sends to it or receives
// from it), and without the farewell it would wait for it until its
// deadline. A connection the farewell opens as the peer closes its own is
// closed by close_leaked_connections() if libfabric leaves it; a failed
// farewell, like any sign of life, is no failure.
void OfiTransport::Impl::farewell() {
    std::set<int> unsent, sent;
    for (int peer = 0; peer < nranks; ++peer)
        if (peer != rank) unsent.insert(peer);
    const Deadline until = Deadline::after_seconds(0.1);
    while (ep != nullptr && error.is_ok() && !until.passed()) {
        for (auto it = unsent.begin(); it != unsent.end();) {
            SlotOp &op = beat_sends[static_cast<size_t>(*it)];
            // A sign of life still in flight goes first.
            if (!op.busy && fi_tsend(ep, nullptr, 0, nullptr, addrs[static_cast<size_t>(*it)],
                                     kBeatBit | kFarewellBit | make_tag(rank, 0, 0), &op.ctx) == 0) {
                op.busy = true;
                sent.insert(*it);
                it = unsent.erase(it);
            } else {
                ++it;
            }
        }
        if (unsent.empty() && std::none_of(sent.begin(), sent.end(),
                                           [&](int peer) { return beat_sends[static_cast<size_t>(peer)].busy; }))
            return;
        read_completions(0);
        std::this_thread::yield();
    }
}

void OfiTransport::forget_caller_memory() {
    bool using_caller = false;
    for (auto &entry : impl_->streams) {
        for (const SlotOp &op : entry.second->send_ops) using_caller = using_caller || (op.busy && op.data != nullptr);
        for (const SlotOp &op : entry.second->recv_ops) using_caller = using_caller || (op.busy && op.landed);
    }
    if (!using_caller) return;
    // libfabric cannot take back a send, nor a receive it has begun to
    // fill; closing the endpoint drops both.
    if (impl_->error.is_ok()) impl_->error = system_error("ofi: endpoint closed after the communicator failed");
    impl_->close_endpoint();
    for (auto &entry : impl_->streams)
        for (SlotOp &op : entry.second->send_ops) op.busy = false;
}

// Every liveness check while this rank waits says to every peer that it is
// alive, as shm's checks do in shared memory; a peer that has stopped (or
// hangs, or is not calling the library) says nothing.
//
// A connection that broke names the peer at its other end, which is often
// not the rank at fault: a rank that fails because another died closes its
// endpoint, and its peers' messages to it fail. The bootstrap hears every
// rank's failure with its reason, or a death, and the engine asks it after
// the transports; so a broken connection is this rank's failure only when
// the bootstrap has said nothing for PeerLiveness::kErrorGrace.
Status OfiTransport::check_peers() {
    impl_->beat();
    return PeerLiveness::after_grace(impl_->error, impl_->error_at);
}

bool OfiTransport::has_left(int peer) const { return impl_->liveness.left_a_while_ago(peer); }

std::string OfiTransport::silent_peers(std::chrono::milliseconds quiet) const {
    return impl_->liveness.silent(quiet, "ofi", [](int) { return true; });
}

bool OfiTransport::has_pending_sends() const {
    if (!impl_->error.is_ok()) return false;
    for (auto &entry : impl_->streams)
        for (const SlotOp &op : entry.second->send_ops)
            if (op.busy) return true;
    return false;
}

Status OfiTransport::flush(const Deadline &deadline) {
    while (has_pending_sends()) {
        if (deadline.passed()) {
            // Name the peers that have not taken them: a stopped or hung
            // rank, and the message's reader needs to know which.
            std::set<int> late;
            for (auto &entry : impl_->streams)
                for (const SlotOp &op : entry.second->send_ops)
                    if (op.busy) late.insert(entry.first.first);
            return PeerLiveness::unsent_at_deadline("ofi", late, silent_peers(std::chrono::seconds(1)));
        }
        // Its peers may time out meanwhile; this rank is not the one at fault.
        impl_->beat();
        poll();
        std::this_thread::yield();
    }
    // Only a communicator that has not failed is flushed: it is leaving cleanly.
    impl_->farewell();
    return impl_->error;
}

} // namespace nnpccl
