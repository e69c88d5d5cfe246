// A simulated run as a Chrome trace-event file (a JSON array of events; it
// opens in Perfetto or chrome://tracing), in the names and fields real runs
// write with NNPCCL_TRACE (src/trace.hpp), so the two compare in one viewer:
// ranks are processes ("rank N", pid = rank), each rank's operation a
// complete event on the thread "operations" (tid 1000), channels threads
// ("channel C", tid = C), every step one complete event ("ph":"X") from the
// moment it became its channel's next step to its end, named by its parts,
// size and peers ("recv-reduce-send 1.0 MiB from 3 to 5"), with its parts,
// bytes, peers and wait in args, and nested in it the work after the wait
// ("reduce", "copy" or "signal"). An operation beside the first (a
// sendrecv's recv beside its send) takes lane k as real runs do: tid
// 1000 + k, its channels 1000 * (k + 1) + C. Timestamps are µs of virtual
// time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "simulator.hpp"
#include "step_names.hpp"
#include "status.hpp"

namespace nnpccl::sim {

// What the trace calls a rank's operation (one per schedule it runs).
struct TraceOperation {
    std::string name;       // "allreduce #1 (count 65536, float, sum)"
    std::string short_name; // "allreduce #1", each of its steps' args.op
    size_t bytes = 0;
};
using OperationNames = std::function<TraceOperation(int rank, int op)>;

class ChromeTrace final : public TraceSink {
public:
    // Writes to `path` (truncating it). opened() says whether it could.
    ChromeTrace(const std::string &path, std::string algorithm, OperationNames names);
    ~ChromeTrace() override;
    ChromeTrace(const ChromeTrace &) = delete;
    ChromeTrace &operator=(const ChromeTrace &) = delete;

    Status opened() const;
    void begin(int nranks) override;
    void step(const StepEvent &event) override;
    // Writes the operations and the threads' names, ends the array and
    // closes the file; fails when a write did.
    Status finish();
    size_t step_events() const { return steps_; }

private:
    struct Op {
        double end_us = 0;
        size_t steps = 0;
    };
    void event_separator();

    std::string path_;
    std::string algorithm_;
    OperationNames names_;
    std::FILE *out_ = nullptr;
    int open_errno_ = 0;
    bool first_ = true;
    size_t steps_ = 0;
    std::vector<std::vector<Op>> ops_;               // per rank, per schedule
    std::vector<std::vector<int64_t>> channel_tids_; // per rank, the channels' threads used
};

} // namespace nnpccl::sim
