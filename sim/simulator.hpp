// A discrete-event simulator of schedules (algorithms/schedule.hpp) on a
// topology's machine, in virtual time: every rank's schedule of one call runs
// at once, as the executor would run it, with no processes and no data.
//
// What is modelled, and why this way:
//
// - Links. Every directed link of the machine (Machine::links()) is a FIFO
//   server with its bandwidth and latency, the figures the cost model and
//   the link emulation (transports/emulated/) read. A message of b bytes
//   holds a link for b / bandwidth. Links are served in the order messages'
//   heads reach them (an event per hop), so traffic that meets on a link
//   waits its turn there.
// - Routes. A message follows its route (Machine::routes_from, the
//   least-latency path the cost model traces), link by link, virtual
//   cut-through: its head moves on after a link's latency, its tail follows,
//   and a link cannot finish a message before the link before it delivered
//   the tail. Uncontended, a message takes the route's summed latency plus
//   its bytes over the slowest hop: the cost model's α and β of a route,
//   and the emulation's arithmetic (LinkTimeline::reserve). Not
//   store-and-forward, which would charge the bytes once per hop: neither
//   the model nor the emulation does, and ICL switches forward a packet's
//   head before its tail is in.
// - Chip ports. A chip whose injection bandwidth is given apart from its
//   links (Chip::injection_gbps; `flat`'s host, where every link shares one
//   memory system) also sends through one egress and receives through one
//   ingress server of that bandwidth and no latency, so a rank's traffic
//   to all its peers together gets no more than that: the busiest-port term
//   of the cost model's concurrent(). Elsewhere the links bound it already.
// - Steps, as the executor (src/executor.cpp) runs them. A channel's steps
//   run in order; a step starts once its message has arrived and its send
//   has a free slot; it then reduces, if it does, and only then sends: what
//   a step sends leaves when its receive and reduce are done. Channels run
//   side by side. A receive slot is freed when the step that read it ends.
// - Slots. A (sender, receiver, channel) stream holds at most `slots`
//   messages its receiver has not finished with (NNPCCL_SHM_SLOTS for shm,
//   the receives ofi posts per stream); a send waits for one.
// - Reduction. Each chip reduces at `reduce_us_per_byte` of output (γ, the
//   cost model's figure for the chip kind: the host's on `flat`, HBM speed on
//   NNP-T), one reduction at a time per chip: channels and ranks on one chip
//   take turns.
//
// What is not: copies (a store, a receive into the output, filling a send
// slot) take no time; a message carries no descriptor header; a rank's
// thread, the cores of a host and ranks sharing a core (the cost model's
// host_lockstep), the engine's polling and wake-ups, and the transports'
// own time are not modelled. The result is the schedule on the machine
// model, not on this host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "schedule.hpp"
#include "status.hpp"
#include "topology.hpp"

namespace nnpccl::sim {

// The servers of a topology's machine (its links, then the chips' ports)
// and the routes between chips as server lists, found when a stream first
// asks for them and kept: on a torus or ring each pair's in closed form
// (Machine::closed_form_routes), so memory grows with the streams that
// exist; elsewhere every route from a source chip in one search, the
// first time a message leaves it. Shared by simulations of the same
// topology, also from several threads.
class Network {
public:
    explicit Network(const Topology &topology);

    struct Server {
        double us_per_byte = 0; // 1 / bandwidth; 1 GB/s is 1e3 bytes per µs
        double latency_us = 0;
    };

    const Topology &topology() const { return topology_; }
    const std::vector<Server> &servers() const { return servers_; }
    // Servers 0 .. link_count()-1 are Machine::links(), in order.
    size_t link_count() const { return link_count_; }
    // The servers a message from `from_chip` to `to_chip` crosses, in order
    // (empty between ranks of one chip); nullptr where no route exists.
    const std::vector<uint32_t> *path(int from_chip, int to_chip) const;
    // How many chip pairs' routes have been found so far.
    size_t routes_found() const;

private:
    void fill_path(const Route &route, int from_chip, int to_chip, std::vector<uint32_t> *out) const;

    const Topology &topology_;
    std::vector<Server> servers_;
    size_t link_count_ = 0;
    std::vector<int> egress_, ingress_; // per chip; -1 without a port server
    struct Row {
        std::once_flag once;
        std::vector<std::vector<uint32_t>> to; // per destination chip
        std::vector<bool> reachable;
    };
    std::unique_ptr<Row[]> rows_; // per source chip, without closed-form routes
    bool closed_form_ = false;
    mutable std::mutex pairs_mutex_;
    mutable std::unordered_map<uint64_t, std::vector<uint32_t>> pairs_; // with them, per (from, to)
    mutable size_t rows_found_ = 0;                                     // under pairs_mutex_
};

// One rank's part of the simulated call: schedules that run side by side
// (one for a collective; a send and a recv for ccl-bench's sendrecv). A
// channel's streams are named by the channel's index in its schedule, as
// the transports name them.
using RankProgram = std::vector<Schedule>;
using ProgramSource = std::function<void(int rank, RankProgram *out)>;

// A step as it ran, for a trace. Times are µs of virtual time.
struct StepEvent {
    int rank = 0;
    int op = 0;          // which of the rank's schedules
    int channel = 0;     // its channel's index in that schedule
    size_t step = 0;     // its place in its channel
    double ready_us = 0; // the step became its channel's next (the one before ended)
    double start_us = 0; // its message was there and its send had a slot
    double end_us = 0;   // its reduce was done and its message sent
    uint8_t flags = 0;
    size_t bytes = 0;
    int recv_peer = -1;
    int send_peer = -1;
};

class TraceSink {
public:
    virtual ~TraceSink() = default;
    // Before the run: how many ranks there are.
    virtual void begin(int nranks) = 0;
    // Every step, as it ends (in order of virtual time).
    virtual void step(const StepEvent &event) = 0;
};

// The credits fidelity mode (ccl-sim --fidelity credits), off by default:
// - Finite link buffers. Each link's receiving end holds `credit_bytes`;
//   a message whose head finds its next link busy waits in that buffer,
//   and once the buffer is full the link it came over stops too, until the
//   next link has drained all but `credit_bytes` of it: the link before is
//   held (its free time moved on), so traffic behind the message on that
//   link waits as well (head-of-line blocking). Held time is not busy time.
//   Only the link a message came over is held, not the whole chain behind
//   it, and messages already committed to that link keep their times.
// - A per-message overhead: a chip starts its messages one at a time, each
//   `message_overhead_us` after the previous one (descriptor, doorbell,
//   the DMA engine's setup), before its first byte leaves.
struct Fidelity {
    double credit_bytes = 0;        // per link; 0: unbounded buffers (the default model)
    double message_overhead_us = 0; // per message, at the sending chip
};

struct SimOptions {
    int slots = 8;                 // per stream; 0 = unlimited
    double reduce_us_per_byte = 0; // γ of every chip, µs per byte of output
    size_t elem_size = 4;          // bytes per element of the steps' counts
    Fidelity fidelity;
    bool critical_path = false; // record what each step waited for, and find the chain that ends last
};

// A message on the critical path: when it left and arrived, and how that
// time splits.
struct PathMessage {
    int from_rank = 0;
    int to_rank = 0;
    size_t bytes = 0;
    double sent_us = 0;            // its step ended: it was handed to the network
    double arrived_us = 0;         // its tail reached the receiver
    double latency_us = 0;         // the route's summed link latencies
    double data_us = 0;            // its bytes over the route's slowest server
    double overhead_us = 0;        // the per-message overhead (fidelity mode)
    double waiting_us = 0;         // the rest: behind other traffic, or held by full buffers
    std::vector<uint32_t> servers; // the Network's servers it crossed
};

// The chain of dependent steps and messages that ends last: from the last
// step back, each step's start is tied to whatever it waited for last (its
// message, a free slot, the step before it on its channel). Its parts sum
// to the call's time.
struct CriticalPath {
    bool recorded = false;
    double latency_us = 0, data_us = 0, overhead_us = 0, link_wait_us = 0; // over its messages
    double reduce_us = 0;                                                  // reductions on it
    double reducer_wait_us = 0;        // reductions waiting for their chip's reducer
    uint64_t steps = 0;                // steps on it
    uint64_t slot_waits = 0;           // steps on it that waited for a free slot
    std::vector<PathMessage> messages; // in order of time
};

struct SimResult {
    double time_us = 0;          // the last step's end (or last message's arrival)
    std::vector<double> busy_us; // per server of the Network: time it moved bytes
    std::vector<double> bytes;   // per server: bytes it moved
    // Per server: the most bytes queued ahead of an arriving message (the
    // server's backlog at its bandwidth).
    std::vector<double> peak_queue_bytes;
    uint64_t steps = 0;
    uint64_t messages = 0;
    uint64_t bytes_sent = 0;
    uint64_t hops = 0; // message-link crossings: the event loop's work
    CriticalPath critical_path; // with SimOptions::critical_path
};

// Runs the programs `source` gives for ranks 0 .. topology.nranks()-1
// (each rank's built when compiling, then dropped, so one rank's
// schedules are in memory at a time besides the compact form). Fails,
// naming the rank, channel and step, when the schedules do not fit together:
// a message nobody receives, a receive nobody sends, a deadlock.
Status simulate(const Network &network, const ProgramSource &source, const SimOptions &options, SimResult *out,
                TraceSink *trace = nullptr);

} // namespace nnpccl::sim
