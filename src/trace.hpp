// The timeline of a real run (NNPCCL_TRACE=FILE; docs/design.md, "Life of
// a call"): every operation and every step of its schedule, per rank,
// with CLOCK_MONOTONIC timestamps, written as Chrome trace-event JSON (an
// array of events; Perfetto and chrome://tracing open it). `ccl-sim --trace`
// writes the same names and fields for a simulated run, so the two open side
// by side in one viewer.
//
// The executor records into a TraceRecorder while it runs (a few fixed-size
// records per step, in memory, at most kMaxEvents), and nothing is
// formatted until the communicator is destroyed or aborted. Then each rank
// takes an flock on FILE and appends its events, so that the file holds one
// JSON array, valid after every rank's write. A communicator without
// NNPCCL_TRACE has no recorder, and the executor's cost is a branch per step.
//
// What the file holds, per rank (pid = the rank):
// - "process_name" "rank N", and a thread name for every thread used.
// - tid 1000, "operations": per operation a complete event named by
//   describe() ("allreduce #12 (count 6, float, sum)"), args {algorithm,
//   bytes (the call's, as ccl-bench counts them), steps}, from when the
//   engine first ran it (it reached the front of the queue) to when its last
//   step and its last send were done; "unfinished": true, ending at the
//   write, for one that never finished (an abort).
// - tid C, "channel C": per step a complete event named by what it does
//   (trace_step_name: "recv-reduce-send 1.0 MiB from 3 to 5"), args {op
//   ("allreduce #12"), step (its index on the channel), bytes (payload),
//   recv_peer, send_peer (where it has one), wait_us}. It spans from when it
//   became the channel's current step (the step before it finished, or the
//   operation began) to when it had finished: wait_us of that is the wait
//   for its message and a free send slot, and a nested complete event named
//   "reduce", "copy" or "signal" (a message of no bytes) spans the rest,
//   the work.
// - Sends and receives that ran side by side would overlap there, so an
//   operation that starts while another runs takes the lowest free further
//   lane k = 1, 2, ...: its event on tid 1000 + k ("operations, lane k+1"),
//   its steps on tid 1000 * (k + 1) + C ("channel C, lane k+1").
// - "trace truncated", an instant event at the moment the cap was reached.
// Timestamps are µs of CLOCK_MONOTONIC, with ns precision.
// A process's second and later traced communicators are pid 1000000 * k +
// rank, "rank N, communicator k+1".
#pragma once

#include <time.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "operation_descriptor.hpp"
#include "schedule.hpp"
#include "status.hpp"
#include "step_names.hpp"

namespace nnpccl {

// Nanoseconds of CLOCK_MONOTONIC, which every process of a host shares.
inline int64_t trace_now_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

class TraceRecorder {
public:
    // Events one rank records at most (56 bytes a step, 72 an operation, in
    // memory); the rest are dropped, and "trace truncated" marks where.
    static constexpr size_t kMaxEvents = 2000000;
    static constexpr uint32_t kNoOperation = UINT32_MAX;

    // Checks that `path` can be written, creating it (empty) where it is
    // missing: an invalid argument naming NNPCCL_TRACE and the path if not.
    static Status open(const std::string &path, int rank, std::shared_ptr<TraceRecorder> *out);
    ~TraceRecorder();
    TraceRecorder(const TraceRecorder &) = delete;
    TraceRecorder &operator=(const TraceRecorder &) = delete;

    // Starts the job's file afresh, as "[]": called at init by each host's
    // lowest rank, before any rank can have written. Only a process's first
    // traced communicator does; later ones append to the same job's file.
    Status start_file();

    // Recording; one thread at a time (the one driving the engine).
    // begin_operation returns the operation's handle, kNoOperation once full.
    uint32_t begin_operation(const OperationDescriptor &descriptor, const std::string &algorithm, uint64_t bytes,
                             size_t steps, int64_t now_ns);
    void end_operation(uint32_t op, int64_t now_ns);
    void step(uint32_t op, int channel, size_t index, const Step &step, size_t bytes, int64_t ready_ns,
              int64_t start_ns, int64_t end_ns);

    // Appends this rank's events to the file, under an flock (once; later
    // calls do nothing). Call with nothing recording any more.
    Status write();
    bool written() const { return written_; }

private:
    friend class TraceFile; // write()'s parts (trace.cpp)
    TraceRecorder(std::string path, int rank, int communicator);
    bool full();

    // Records are kept in blocks that never move: no reallocation, and no
    // copy of what was recorded, in the middle of a run.
    template <class T> class Blocks {
    public:
        size_t size() const { return size_; }
        T &push() {
            if ((size_ >> kShift) == blocks_.size()) blocks_.emplace_back(new T[size_t{1} << kShift]);
            T &slot = (*this)[size_];
            ++size_;
            return slot;
        }
        T &operator[](size_t i) { return blocks_[i >> kShift][i & ((size_t{1} << kShift) - 1)]; }
        const T &operator[](size_t i) const { return blocks_[i >> kShift][i & ((size_t{1} << kShift) - 1)]; }

    private:
        static constexpr unsigned kShift = 14;
        std::vector<std::unique_ptr<T[]>> blocks_;
        size_t size_ = 0;
    };
    struct StepRecord {
        int64_t ready_ns, start_ns, end_ns;
        uint64_t bytes;
        uint32_t op;
        uint32_t index;
        int32_t recv_peer, send_peer;
        uint16_t channel;
        uint8_t flags;
    };
    // An operation: its descriptor's fields and what its event's args say.
    struct OpRecord {
        int64_t start_ns, end_ns; // end -1: not finished
        uint64_t sequence, count, bytes, steps;
        uint32_t collective;
        int32_t datatype, op, root;
        uint32_t algorithm; // in algorithms_
    };
    static_assert(sizeof(StepRecord) == 56 && sizeof(OpRecord) == 72, "kMaxEvents's comment says what they take");

    std::string path_;
    int rank_;
    int communicator_; // this process's k-th traced communicator, from 0
    Blocks<StepRecord> steps_;
    Blocks<OpRecord> ops_;
    std::vector<std::string> algorithms_; // the names operations ran, each once
    int64_t truncated_ns_ = -1;
    bool written_ = false;
};

} // namespace nnpccl
