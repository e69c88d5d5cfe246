// Shared-memory transport for ranks on one host.
//
// Every rank owns one shared-memory segment holding its inbound queues:
// one single-producer/single-consumer queue per (sending peer, channel),
// a ring of 64 cells followed by `slots` chunk-sized slots. A message
// takes the cell of its position in the stream: the control words (the
// position once the message is there, and its size), 40 bytes where the
// sender's header rides (header_room()), and 200 bytes that carry a small
// message, its first 8 in the control words' line; a larger one goes in a
// slot. A sender writes its message straight into the receiver's queue,
// then the control words; the receiver polls them and reduces straight
// out of the cell or slot.
// Each side counts its own position, and the sender reads the receiver's
// count of freed messages only when its own copy says the cell or slot may
// still be in use. Cost per message: one copy in, one pass out, and the
// lines of the cell (and slot) changing hands.
//
// Waiting: each segment carries a doorbell word and a count of sleepers. A
// rank going to sleep counts itself, looks at its streams once more, then
// sleeps on the doorbell with a futex; whoever changes something a rank
// may wait for (new data in its queue, a freed slot in a queue it sends
// to) rings that rank's doorbell only when the count says it sleeps (after
// a fence, so the two sides cannot miss each other: a full one, or, where
// membarrier(2) allows, one the sleeper imposes on every running rank). So ranks that
// poll pay nothing for the doorbell, a rank spins briefly and then sleeps
// without missing a wake-up, and 8 ranks on 2 cores still make progress.
//
// Hygiene: segments are anonymous (memfd) and never appear in /dev/shm, so
// nothing can be left there, whenever a rank is killed. Peers map them
// through /proc/<pid>/fd/<fd> while the owner holds them open during setup;
// only processes of the same user that may inspect the owner can, which
// keeps a job's memory private to it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "deadline.hpp"
#include "shm_options.hpp"
#include "transport.hpp"

namespace nnpccl {

class Bootstrap;

class ShmTransport final : public Transport {
public:
    // Collective over the bootstrap (every rank of the communicator calls it).
    // `local_peers` are the ranks on this host (this rank included) that the
    // transport serves.
    static Status create(Bootstrap &bootstrap, const std::vector<int> &local_peers, int channels,
                         const ShmOptions &options, size_t message_bytes, int numa_node, const Deadline &deadline,
                         std::unique_ptr<ShmTransport> *out);
    ~ShmTransport() override;

    // The shared memory one rank holds resident once its queues are in use:
    // the header of each local segment, and its queues to and from each
    // local peer, `channels` each way.
    static size_t resident_bytes(int local_ranks, int channels, int slots, size_t slot_bytes);
    // The slots per queue for this host: options.slots, or fewer so that
    // resident_bytes() fits options.bytes (at least 2; when even 2 do not
    // fit, an error if the user set the bound, else 2).
    static Status fit_slots(int local_ranks, int channels, const ShmOptions &options, size_t slot_bytes, int *slots);

    const char *name() const override { return "shm"; }
    int spin_hint_us() const override { return 20; } // a peer in shared memory answers within microseconds
    bool peer_reads_send_buffers() const override { return true; }
    size_t max_message_bytes() const override { return slot_bytes_; }
    size_t header_room() const override;
    void *try_acquire_send(int peer, int channel, size_t bytes) override;
    void *send_header(int peer, int channel) override;
    const void *recv_header(int peer, int channel) const override;
    void commit_send(int peer, int channel, size_t bytes) override;
    const void *try_peek_recv(int peer, int channel, size_t *bytes) override;
    void release_recv(int peer, int channel) override;
    uint64_t event_count() const override;
    void wait_for_event(uint64_t seen, int timeout_ms) override;
    Status check_peers() override;
    void announce_abort(const Status &why) override;
    std::string silent_peers(std::chrono::milliseconds quiet) const override;
    // Exact at once: a rank marks itself departed after its last message
    // was written into its peers' queues.
    bool has_left(int peer) const override;

    struct Segment;
    struct Queue;
    struct SlotControl;

private:
    ShmTransport() = default;
    Queue *queue(int owner, int sender, int channel) const;
    SlotControl *cell(Queue *q, uint64_t position) const;
    // Where the message at `position` lies: in its cell, or in a slot.
    char *message_at(Queue *q, uint64_t position, bool in_slot) const;
    size_t stream_index(int peer, int channel) const {
        return static_cast<size_t>(peer) * static_cast<size_t>(channels_) + static_cast<size_t>(channel);
    }
    void ring(int rank);
    void ring_if_asleep(int rank);
    bool notice_changes();
    void populate_queues(const std::vector<int> &local_peers);
    // create()'s parts: this rank's segment, made and mapped, its
    // descriptor in *fd; and a local peer's, mapped from its announcement
    // ("PID FD") and checked to be that rank's of this job and layout.
    Status map_own_segment(int numa_node, int *fd);
    Status map_peer_segment(int peer, const std::string &announcement);

    int rank_ = -1;
    int nranks_ = 0;
    int channels_ = 0;
    int slots_ = 0;
    size_t slot_bytes_ = 0;
    size_t queue_stride_ = 0;
    size_t slot_stride_ = 0;
    bool asymmetric_fences_ = false; // see ring_if_asleep()
    // This rank's own view of each stream, by stream_index(peer, channel):
    // messages sent and the slots it last saw given back (outbound);
    // messages received and those it has seen arrive (inbound).
    std::vector<uint64_t> sent_, freed_seen_, received_, arrived_seen_;
    std::vector<uint8_t> sending_in_slot_; // where the buffer try_acquire_send gave last lies
    // Changes this rank noticed itself, which the doorbell (rung only for
    // sleepers) does not count; event_count() adds them.
    std::atomic<uint64_t> local_events_{0};
    // Only the driving thread writes it: a plain increment, not a locked one.
    void count_local_event() {
        local_events_.store(local_events_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    size_t segment_bytes_ = 0;
    std::vector<Segment *> segments_; // by rank; nullptr for ranks not on this host
    std::vector<int> pids_;
};

} // namespace nnpccl
