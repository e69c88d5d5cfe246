// Link emulation (NNPCCL_EMULATE_LINKS=1): a decorator over any transport
// that paces the traffic between this rank and each peer to the simulated
// links it would cross, so that a job on one host shows the relative
// behaviour of the simulated accelerator machine (which algorithm wins, how
// a shared link slows two rings down, what a POD's extra hops cost).
//
// Model. Every simulated link is one direction of a wire with a bandwidth and
// a latency. A transfer of b bytes occupies each link of its path for
// b / bandwidth, so transfers that cross one link concurrently share its
// bandwidth. Links forward cut-through (the head moves on after the link's
// latency, the tail follows; a link cannot finish a transfer before it has
// received its tail), and a router buffers a transfer that waits for a busy
// link without holding the links behind it (virtual cut-through).
// Uncontended, a message arrives after the sum of the path's latencies plus
// bytes over the bottleneck bandwidth.
//
// Order of service. A message's path is reserved when its sender commits it
// (see below), hop by hop from the sender: at each link the message takes
// the EARLIEST idle gap, at or after its head reaches the link, that holds
// the whole transfer [start, done) with done = max(start + bytes / bandwidth,
// the tail's arrival from the hop before). So a message that reaches a link
// before an earlier-committed one whose head comes later (from further away)
// goes first when it fits in the idle time before it, as on a network that
// serves a link in the order messages reach it (ccl-sim's model); one that
// does not fit waits after it. What stays different from arrival order: an
// earlier-committed reservation is never pushed back, so a long message that
// arrives first but does not fit before a later-arriving reservation waits
// for it. A stream's messages (one peer, one channel) keep their order on
// every link: a message starts on a link no earlier than the stream's
// previous message finished there, as a sender that sends in order gets.
//
// Link state. Each link keeps a sorted list of its busy intervals
// [start, done), at most EmulationOptions::intervals_per_link of them.
// Intervals that touch are merged (no gap is lost), and intervals that ended
// more than kForgetPastNs (10 ms of host time) before the committing
// sender's clock are dropped: every reservation starts at or after its
// sender's clock at commit, so an interval that old only matters to a rank
// that read the clock that much earlier and has not reserved yet (a
// reservation's head may lie far ahead of the clock; what ends between the
// clock and the head is kept for the ranks whose heads come sooner). When a
// reservation would make the list longer than its bound, the two
// neighbouring intervals with the smallest usable gap between them (the
// part of the gap after the committing sender's clock) are
// merged, and that gap is lost: the link counts as busy across it. That is
// conservative (later messages can only be delayed, never overlap a
// reservation), and gaps already in the past cost nothing to lose.
//
// Scale. EmulationModel::scale dilates emulated time: bandwidths are divided
// by it and latencies multiplied by it, so that host memory can keep up and
// the latency-to-bandwidth ratio (which decides between ring, tree and
// direct algorithms) stays that of the simulated machine. The caller reads
// NNPCCL_EMULATE_SCALE; this file reads no environment.
//
// Where the pacing happens. Ranks are separate processes and a rank only
// knows its own sends, so pacing is on the sending side. commit_send does
// not hand the message to the inner transport: it reserves the links of the
// path (fixing the message's arrival time) and holds the message in a small
// per-(peer, channel) queue of buffers owned here; poll() (which the engine
// calls every pass) hands every held message whose arrival time has come to
// the inner transport, in order, when the inner transport has a free slot.
// try_acquire_send returns nullptr while a stream's queue is full, so memory
// stays bounded and a sender runs at most `held_per_stream` messages ahead of
// its links. The receive side passes straight through. Streams whose path is
// empty (a rank to itself, or a peer the model has no path to) pass through
// untouched.
//
// Approximations (decided, not accidental):
// - Contention between ranks. By default each rank models only the links its
//   own transfers cross: two ranks whose paths share a link each see it free.
//   EmulationOptions::shared_link_table lets the caller put the links' state
//   in memory every rank on the host maps (LinkTimeline::table_bytes: per
//   link a lock word, a count and the interval list); contention between
//   local ranks is then modelled exactly. The communicator sets that memory
//   up for the ranks of each host (src/init.cpp, share_link_table); ranks
//   on other hosts cannot share it.
// - The lock. A link's list is changed under its lock word, an atomic
//   spinlock in the table that holds the holder's pid and an acquisition
//   count. A waiter spins briefly, then yields the core on every try (ranks
//   may outnumber cores, and the holder may be the one descheduled). A rank
//   that dies holding the lock must not hang the others: a waiter that has
//   seen the same holder for kCheckHolderNs checks whether its pid still
//   exists and takes the lock over if not; after kTakeOverNs it takes it
//   over regardless. Either is logged, and the taker repairs the list (sorts
//   it, merges overlaps), since the holder may have died halfway through a
//   change.
// - The reservation is made at commit. A receiver slow to free its inner
//   slots delays delivery, but the link does not get that time back (as a
//   credit-stalled wire loses it).
// - The inner transport's own time (the shm copy, the network) adds to the
//   emulated time; choose a scale at which it is small.
// - Buffering: a stream holds up to `held_per_stream` messages here on top of
//   the inner transport's slots, so more data is in flight than without
//   emulation. Timing, not flow control, is what is emulated.
// - Held messages move only while someone calls in: the engine's passes,
//   or flush() at teardown. An operation ends on this rank when its last
//   send is committed, and if no further operation follows, that message
//   waits for this rank's next call into the communicator.
//   has_pending_sends() is what an engine needs in order to keep polling
//   until the held messages are gone.
//
// Cost. One extra copy of every message on an emulated stream (held buffer
// to inner slot); held_per_stream x max_message_bytes() of memory per stream
// that carries traffic, allocated when first used; per commit one clock read
// and, per hop, one uncontended lock and a walk over the link's interval
// list, O(intervals_per_link); poll() costs nothing while nothing is held,
// else one clock read and a walk over the streams. Shared table:
// table_bytes(links, intervals_per_link), 64 + 16 x intervals_per_link bytes
// per link rounded up to a cache line.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "status.hpp"
#include "transport.hpp"

namespace nnpccl {

// One direction of a simulated wire.
struct EmulatedLink {
    double gbytes_per_sec; // 1e9 bytes per second
    double latency_us;
};

// The simulated machine as the emulation needs it; independent of the
// topology engine, which builds it.
struct EmulationModel {
    std::vector<EmulatedLink> links;                 // every simulated link (one direction)
    std::vector<std::vector<std::vector<int>>> path; // path[src_rank][dst_rank] = link ids crossed, in order
    double scale = 1.0;                              // time dilation: rates / scale, latencies x scale
};

// Checks that `model` describes a job of `nranks` ranks: positive finite
// bandwidths and scale, non-negative latencies, an nranks x nranks path table
// whose link ids exist. The message names the offending link or path.
Status validate_emulation_model(const EmulationModel &model, int nranks);

// Knobs of the emulation itself, not of the simulated machine.
struct EmulationOptions {
    // Messages a (peer, channel) stream may hold before try_acquire_send says
    // no. A link streams at full rate when this is at least
    // 1 + latency / (message bytes / bandwidth).
    int held_per_stream = 8;
    // Busy intervals a link remembers (see "Link state" above); at least 2.
    // Every rank that shares a table must use the same figure.
    int intervals_per_link = 32;
    // Optional: LinkTimeline::table_bytes(model.links.size(),
    // intervals_per_link) zero-filled bytes, aligned to 64, that every rank
    // on the host maps: the links' busy intervals (ns of the host's steady
    // clock, CLOCK_MONOTONIC, common to all processes). nullptr keeps the
    // links' state private to this rank.
    void *shared_link_table = nullptr;
};

// The host's steady clock in nanoseconds: the time base of the emulation.
int64_t emulation_now_ns();

// The links with their busy intervals, and the arithmetic that reserves a
// path for one transfer. Separate from the transport so that the model can be
// checked with exact times. One thread at a time may call reserve() on one
// LinkTimeline; several LinkTimelines (in any processes) may share a table.
class LinkTimeline {
public:
    // Intervals that ended this long before a reservation's head are dropped.
    static constexpr int64_t kForgetPastNs = 10000000;
    // A waiter that has seen one holder of a link's lock this long checks
    // that the holder's process still exists, and takes the lock if not ...
    static constexpr int64_t kCheckHolderNs = 100000000;
    // ... and after this long takes it whoever holds it.
    static constexpr int64_t kTakeOverNs = 2000000000;

    // Bytes of a shared table for `links` links of `intervals_per_link`
    // intervals each (zero-filled, it is a table of idle links).
    static size_t table_bytes(size_t links, int intervals_per_link);

    // `shared_table` as EmulationOptions::shared_link_table; nullptr makes a
    // private one. `intervals_per_link` below 2 is taken as 2.
    LinkTimeline(const EmulationModel &model, void *shared_table, int intervals_per_link = 32);

    // Reserves each link of `path` in turn for a transfer of `bytes` that can
    // leave at `ready_ns`, and returns when its last byte arrives. An empty
    // path arrives at `ready_ns`. With `stream_done` (one entry per hop, 0
    // at first), the transfer starts on each link no earlier than the entry,
    // which is then set to when it is done there: a stream's transfers keep
    // their order on every link.
    int64_t reserve(const std::vector<int> &path, size_t bytes, int64_t ready_ns,
                    std::vector<int64_t> *stream_done = nullptr);

    // The busy intervals link `link` holds now, in order (for tests and
    // diagnostics; takes the link's lock).
    std::vector<std::pair<int64_t, int64_t>> busy_intervals(int link);

private:
    struct LinkCost {
        double ns_per_byte; // scaled
        int64_t latency_ns; // scaled
    };
    struct Interval {
        int64_t start, done;
    };
    struct Record; // one link's lock, count and intervals in the table

    Record &record(int link) const;
    static Interval *intervals(Record &r);
    // The lock word this acquisition wrote, for unlock.
    uint64_t lock(Record &r, int link);
    void unlock(Record &r, int link, uint64_t mine);
    // Sorts the record's intervals and merges overlaps: after taking over
    // the lock of a holder that may have died halfway through a change.
    void repair(Record &r);

    std::vector<LinkCost> cost_;
    size_t capacity_;  // intervals per link
    size_t stride_;    // bytes per link record
    std::unique_ptr<unsigned char[]> own_table_; // when not shared
    unsigned char *table_;
    std::vector<Interval> scratch_; // capacity_ + 1
};

class EmulatedTransport final : public Transport {
public:
    // `inner` is not owned and must outlive this. `model` must pass
    // validate_emulation_model for the communicator's size.
    EmulatedTransport(Transport *inner, int rank, EmulationModel model, EmulationOptions options = {});
    ~EmulatedTransport() override;
    EmulatedTransport(const EmulatedTransport &) = delete;
    EmulatedTransport &operator=(const EmulatedTransport &) = delete;

    const char *name() const override { return name_.c_str(); }
    size_t max_message_bytes() const override { return inner_->max_message_bytes(); }

    // A held buffer of an emulated stream (nullptr while the stream holds
    // held_per_stream messages), or the inner buffer of a pass-through one.
    void *try_acquire_send(int peer, int channel, size_t bytes) override;
    // Reserves the path and holds the message until it is due.
    void commit_send(int peer, int channel, size_t bytes) override;

    const void *try_peek_recv(int peer, int channel, size_t *bytes) override {
        return inner_->try_peek_recv(peer, channel, bytes);
    }
    void release_recv(int peer, int channel) override { inner_->release_recv(peer, channel); }

    // Hands due messages to the inner transport, then polls it.
    void poll() override;

    // The inner count plus the number of messages handed over so far (a
    // hand-over frees a held buffer the executor may be waiting for).
    uint64_t event_count() const override;
    // Never sleeps past the arrival time of the earliest held message.
    void wait_for_event(uint64_t seen, int timeout_ms) override;

    Status check_peers() override { return inner_->check_peers(); }
    bool has_left(int peer) const override { return inner_->has_left(peer); }
    std::string silent_peers(std::chrono::milliseconds quiet) const override { return inner_->silent_peers(quiet); }
    void announce_abort(const Status &why) override { inner_->announce_abort(why); }
    // Emulated waits end at a due time and sleep precisely; spinning is for
    // what the inner transport answers quickly.
    int spin_hint_us() const override { return inner_->spin_hint_us(); }
    // Passed-through streams send from the inner transport's buffers.
    bool peer_reads_send_buffers() const override { return inner_->peer_reads_send_buffers(); }
    // Hands every held message over as it falls due (sleeping in between),
    // then flushes the inner transport.
    Status flush(const Deadline &deadline) override;

    // Whether committed messages are still held here.
    bool has_pending_sends() const override { return held_total_ > 0; }
    // How many.
    size_t held_messages() const { return held_total_; }

private:
    struct HeldMessage {
        std::unique_ptr<unsigned char[]> buffer; // max_message_bytes(), allocated on first use
        size_t bytes = 0;
        int64_t due_ns = 0;
    };
    // One (peer, channel) stream towards a peer: a ring of held messages.
    struct Stream {
        const std::vector<int> *path = nullptr; // nullptr: pass through
        std::vector<int64_t> hop_done;          // per hop: when its last message is done there
        std::vector<HeldMessage> ring;
        size_t first = 0; // oldest held message
        size_t count = 0;
    };

    Stream &stream(int peer, int channel);
    // Hands the stream's due messages over in order; returns how many.
    size_t deliver_due(int peer, int channel, Stream &s, int64_t now_ns);
    size_t deliver_all_due(int64_t now_ns);

    Transport *inner_;
    int rank_;
    EmulationModel model_;
    EmulationOptions options_;
    LinkTimeline timeline_;
    std::string name_;
    std::vector<std::vector<Stream>> streams_; // [peer][channel], grown on first use
    size_t held_total_ = 0;
    // Read by event_count(), which any thread may call while one drives.
    std::atomic<uint64_t> handed_over_{0};
};

} // namespace nnpccl
