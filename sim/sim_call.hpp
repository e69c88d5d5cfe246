// One call as ccl-sim simulates it: the collective, its size and shape as a
// communicator completes them (src/call.hpp), every rank's schedule from the
// algorithm's own builder, and the simulation of all of them together.
//
// Calls too large to simulate message by message in reasonable time (direct
// allreduce on nnpt-pod1024 sends p(p-1) messages per chunk: two billion at
// 1 GiB) are extrapolated from their steady state: a chunked schedule
// repeats one round per chunk (or slice), so the same call cut to u and to
// 2u rounds (the same messages, fewer of them) is simulated exactly, and the
// rest of the call is taken to add what the second u rounds added.
// The result says so, and how far the first rounds' pace was from the last
// ones' (a pipeline still filling, or rounds that run into each other,
// show there).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "collective.hpp"
#include "registry.hpp"
#include "simulator.hpp"

namespace nnpccl::sim {

// ccl-bench's collectives by its names, plus barrier.
struct SimCollective {
    const char *name;
    Collective collective; // Send for sendrecv
    bool exchange = false; // sendrecv: every rank sends to rank+1 and receives from rank-1 at once
};
const SimCollective *find_sim_collective(std::string_view name);
// "allreduce, reduce_scatter, ..." for messages.
std::string sim_collective_names();

struct SimCall {
    SimCollective what{"allreduce", Collective::Allreduce};
    size_t count = 0; // elements, as CollectiveArgs counts them
    size_t elem_size = 4;
    int root = 0;
    bool in_place = false;
    size_t chunk_bytes = 512 * 1024;
};

// The call as rank `rank` of `nranks` plans it (a sendrecv: its send to
// rank+1; rank 0's is the one ccl-bench --explain predicts).
CollectiveArgs collective_args(const SimCall &call, int rank, int nranks);

// What a rank runs under `algorithm`: its schedule (a sendrecv: the send
// and the recv, side by side).
ProgramSource programs(const AlgorithmInfo &algorithm, const SimCall &call, const Topology &topology);

// About how many message-link crossings the call makes: rank 0's times the
// ranks, from at most 64 chunks of it scaled up (how ccl-sim orders its
// work; the budget below is weighed against the whole call's).
uint64_t estimate_hops(const Network &network, const AlgorithmInfo &algorithm, const SimCall &call);

struct Budget {
    // Beyond this many message-link crossings (estimated from rank 0's
    // schedule times the ranks) a call is extrapolated; 0: never.
    uint64_t max_hops = 0;
};

struct Outcome {
    SimResult result; // extrapolated: the figures scaled to the whole call
    bool extrapolated = false;
    size_t counts[2] = {0, 0}; // the counts simulated, when extrapolated: u and 2u units
    double slope_spread = 0;   // |time per element of the second u units - of the first| / the second's
    uint64_t estimated_hops = 0;
};

// Simulates `call` with `algorithm` (which must apply) on the network's
// topology. A trace forces the exact simulation. An extrapolation runs its
// two simulations on two threads.
Status simulate_call(const Network &network, const AlgorithmInfo &algorithm, const SimCall &call,
                     const SimOptions &options, const Budget &budget, Outcome *out, TraceSink *trace = nullptr);

} // namespace nnpccl::sim
