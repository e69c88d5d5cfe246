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

#include "nnpccl.h"
#include "schedule.hpp"
#include "status.hpp"
#include "transport.hpp"

namespace nnpccl {

struct OperationBuffers {
    const void *send = nullptr;
    void *recv = nullptr;
    void *scratch = nullptr; // schedule->scratch_elems elements
    nnpccl_datatype_t datatype = NNPCCL_FLOAT32;
    nnpccl_redop_t op = NNPCCL_SUM;
    uint32_t nranks = 1; // the divisor of avg
};

class ScheduleRun {
public:
    // `route[peer]` is the transport that reaches peer. `scratch` holds one
    // message (the largest a route carries); runs that are driven one at a
    // time may share it.
    ScheduleRun(std::shared_ptr<const Schedule> schedule, const OperationBuffers &buffers,
                const std::vector<Transport *> &route, unsigned char *scratch);

    // Runs every step that can run now; *progressed counts them. An error
    // (a message of the wrong size, say) ends the run.
    Status advance(size_t *progressed);
    bool finished() const;
    // What the run is waiting for, for timeout messages: "rank 3 (recv, channel 0, step 5 of 40)".
    std::string blocked_on() const;
    // The peers the run is waiting for now (to check their liveness).
    std::vector<int> waiting_peers() const;

private:
    bool try_step(int channel, const Step &step, Status *status);
    char *address(const BufRef &ref) const;

    std::shared_ptr<const Schedule> schedule_;
    OperationBuffers buffers_;
    size_t elem_size_;
    const std::vector<Transport *> &route_;
    std::vector<size_t> cursor_;
    unsigned char *scratch_; // one message: where a reduce lands before it is sent
};

} // namespace nnpccl
