// Recording the critical path of a simulation (SimOptions::critical_path):
// the engine (simulator.cpp) tells the recorder when each step starts and
// ends, which message each step sent and when it arrived; the recorder
// keeps, per step, what its start waited for last, and walks that chain
// back from the step that ends last. 56 bytes per step, on top of the
// engine's 16: only when asked for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "event_queue.hpp"
#include "simulator.hpp"

namespace nnpccl::sim {

class PathRecorder {
public:
    static constexpr uint64_t kNoStep = UINT64_MAX;
    static constexpr uint32_t kNoStream = UINT32_MAX;

    // What step i receives and sends on (a stream number, or kNoStream),
    // for every step in the engine's order: each stream's messages are
    // matched, the k-th send with the k-th receive.
    void build(size_t steps, size_t streams, const std::function<void(size_t, uint32_t *, uint32_t *)> &step_streams);

    // Step `step` starts at `now`. `ready`: when its channel's step before
    // it (`previous`, or kNoStep for the first) ended. `recv`: it receives.
    // `send_stream`/`send_seq`: the stream it sends on and the message's
    // number there (kNoStream: it sends nothing); with `slots` > 0 the send
    // waited for the receive of message send_seq - slots to end.
    void start(uint64_t step, double now, double ready, uint64_t previous, bool recv, uint32_t send_stream,
               uint32_t send_seq, int slots);
    void finish(uint64_t step, double now) { info_[step].end = now; }
    // Message `message` (an engine's id, reused once delivered) was sent by `step`.
    void sent(uint32_t message, uint64_t step);
    void arrived(uint32_t message, double now) { info_[sender_[message]].arrive = now; }

    // How the walk back reads a step of the engine.
    struct StepFacts {
        int from_rank = 0, to_rank = 0; // of the message it sends
        size_t bytes = 0;
        const uint32_t *servers = nullptr; // its route
        uint32_t length = 0;
        double reduce_us = 0; // its reduction's own time (0: none)
    };
    // The chain that ends last, over `costs` (the Network's servers).
    CriticalPath walk_back(const std::function<StepFacts(uint64_t)> &facts, const Network::Server *costs,
                           double overhead_us) const;

private:
    enum Cause : uint8_t { kFirst, kChannel, kMessage, kSlot };
    struct StepInfo {
        double start = 0, end = 0;
        double arrive = 0;            // its message's arrival, when it sends
        uint64_t pred = kNoStep;      // the step whose end (or message) it waited for last
        uint64_t from_send = kNoStep; // the step that sent what it receives
        uint64_t to_recv = kNoStep;   // the step that receives what it sends
        Cause cause = kFirst;
    };
    BigVector<StepInfo> info_;
    BigVector<uint64_t> sends_;     // per stream, its send steps in order (offsets_)
    std::vector<uint64_t> offsets_; // per stream, into sends_
    std::vector<uint64_t> sender_;  // per message id in flight
};

} // namespace nnpccl::sim
