// The executor: runs one rank's schedule of one operation over the
// transports. Each channel's steps run in order; channels interleave. A step
// runs only when everything it needs is there at once (the message it
// receives and a free buffer for what it sends), so nothing ever blocks
// half-way and one thread can drive every channel of every operation.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "call.hpp"
#include "nnpccl.h"
#include "operation_descriptor.hpp"
#include "schedule.hpp"
#include "status.hpp"
#include "trace.hpp"
#include "transport.hpp"

namespace nnpccl {

struct Announcement {
    OperationDescriptor descriptor; // what this rank announces
    // What the peers' first messages must announce: the same descriptor for
    // a collective; for a recv, the matching send's (whose peer is this rank).
    OperationDescriptor expected;
};

class ScheduleRun {
public:
    // `scratch` holds the schedule's scratch_elems elements. `route[peer]`
    // is the transport that reaches peer. `message_scratch` holds one
    // message (the largest a route carries); runs that are driven one at a
    // time may share it. With `trace` (NNPCCL_TRACE) the run records the
    // operation and each step as it runs (src/trace.hpp).
    ScheduleRun(std::shared_ptr<const Schedule> schedule, const Call &call, void *scratch,
                const Announcement &announcement, const std::vector<Transport *> &route, unsigned char *message_scratch,
                std::shared_ptr<TraceRecorder> trace = nullptr);

    // Makes this run the start of another operation over the same route,
    // message scratch and trace, keeping what its buffers have allocated:
    // a communicator reuses one run for its blocking calls.
    void restart(std::shared_ptr<const Schedule> schedule, const Call &call, void *scratch,
                 const Announcement &announcement);
    // The same, keeping the schedule: a call of the same shape.
    void again(const Call &call, void *scratch, const Announcement &announcement);
    // The same, keeping the announcement too but for the sequence number:
    // the next collective of the same shape, datatype and op, of which
    // only the buffers change.
    void again(const Call &call, void *scratch, uint64_t sequence);
    const Schedule &schedule() const { return *schedule_; }
    const Call &call() const { return call_; }

    // Runs every step that can run now; *progressed counts them. An error
    // (a message of the wrong size, say) ends the run.
    Status advance(size_t *progressed) {
        if (!single_.active) return advance_steps(progressed);
        Status status;
        *progressed = cursor_[0] == 0 && try_single(&status) ? 1 : 0;
        cursor_[0] += *progressed;
        return status;
    }
    // With a trace, the first call that sees the run finished ends its
    // operation's event.
    bool finished() const { return single_.active ? cursor_[0] != 0 : steps_finished(); }
    // What the run is waiting for, for timeout messages: "rank 3 (recv, channel 0, step 5 of 40)".
    std::string blocked_on() const;
    // The peers the run is waiting for now (to check their liveness).
    std::vector<int> waiting_peers() const;
    // A peer that has left cleanly (Transport::has_left) and that the run
    // still waits on, or -1: a step that sends to it (it finished every
    // call it made, so it never takes this message), a receive from it
    // that found nothing at its last try, or a send from the caller's
    // buffer it has not taken. Asked by the engine's liveness checks only.
    int waiting_on_departed() const;

private:
    Status advance_steps(size_t *progressed);
    bool steps_finished() const;
    bool try_step(int channel, const Step &step, Status *status);
    bool accept(int peer, int channel, bool check_descriptor, const Transport &rx, const void *message,
                size_t in_bytes, size_t bytes, size_t *header, Status *status) const;
    void announce(Transport &tx, int peer, int channel, bool beside, void *slot) const;
    void apply(const Step &step, const void *in, void *out, bool reduce_into_out, char *src, char *dst, size_t bytes,
               uint32_t divisor);
    uint32_t divisor_of(const Step &step) const {
        return step.finalize && call_.op == NNPCCL_AVG ? static_cast<uint32_t>(call_.nranks) : 1;
    }
    // A schedule of one step, run without a trace and with its send (if
    // any) copied into the transport's buffer, takes a shorter way than
    // try_step's (a 2-rank broadcast or reduce, any call on one rank):
    // what try_step works out per step is worked out once per schedule
    // (plan_single, at construction and restart); advance and finished
    // look at cursor_[0] alone.
    struct Single {
        bool active = false;
        const Step *step = nullptr;
        size_t bytes = 0;
        Transport *rx = nullptr;
        Transport *tx = nullptr;
        bool tx_beside = false; // the descriptor rides beside the message
    };
    Single single_;
    void plan_single();
    bool try_single(Status *status);
    size_t stream_index(int peer, int channel) const {
        return static_cast<size_t>(peer) * schedule_->channels.size() + static_cast<size_t>(channel);
    }
    char *address(const BufRef &ref) const;

    std::shared_ptr<const Schedule> schedule_;
    uint32_t algorithm_code_ = 0; // the schedule's, as descriptors carry it
    void code_algorithm(uint32_t collective);
    void stamp_algorithm(); // into the announcement
    Call call_;
    void *scratch_; // the schedule's
    Announcement announcement_;
    size_t elem_size_;
    const std::vector<Transport *> &route_;
    std::vector<size_t> cursor_;
    // Per channel: whether its step's last try found no message to receive
    // (written only when a try fails, for waiting_on_departed()).
    std::vector<char> recv_missing_;
    unsigned char *message_scratch_; // one message: where a reduce lands before it is sent
    // Per (peer, channel): the number of the run (run_number_, one per
    // start or again()) whose descriptor went out / came in last, so that
    // starting again clears nothing.
    uint64_t run_number_ = 1;
    std::vector<uint64_t> announced_;
    std::vector<uint64_t> verified_;
    // Sends in place (Transport::sends_in_place) not yet done: no step may
    // write the bytes they read, and the run is not finished, until they are.
    struct InPlaceSend {
        Transport *transport;
        int peer;
        int channel;
        uint64_t ticket;
        const char *begin;
        const char *end;
        bool done() const { return transport->send_done(peer, channel, ticket); }
    };
    std::vector<InPlaceSend> in_flight_;
    bool in_flight_overlaps(const char *begin, const char *end) const;

    // The timeline, when NNPCCL_TRACE asks for one (null otherwise: a branch
    // per step is all it costs then). The operation's event begins at the
    // first advance (or finished) and ends when finished() first holds; a
    // step is ready when the one before it on its channel ended, runs once
    // all it needs is there, and ends when its send is committed.
    std::shared_ptr<TraceRecorder> trace_;
    struct Traced {
        bool begun = false;
        bool ended = false;
        uint32_t op = TraceRecorder::kNoOperation;
        int64_t *ready_ns = nullptr; // per channel: in `few`, or in `many` for more channels
        int64_t few[8];
        std::vector<int64_t> many;
    };
    mutable Traced traced_;
    void trace_begin(int64_t now_ns) const;
    void trace_step(int channel, const Step &step, size_t bytes, int64_t start_ns);
};

} // namespace nnpccl
