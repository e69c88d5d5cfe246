// The schedule IR: what one rank does for one collective, as data. Per
// channel, an ordered list of steps; the executor runs each channel's steps
// in order and the channels side by side. A step may receive a message,
// combine it with local data, store the result, and send it on, so the
// classic ring primitives (send, recv, recv-reduce, recv-reduce-send,
// recv-copy-send, copy) are all one shape. Buffers are named, not pointed
// to, so a schedule is reusable across calls (the communicator caches them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nnpccl {

// Scratch is per operation, schedule.scratch_elems long.
enum class Buf : uint8_t { None, Send, Recv, Scratch };

// An element offset into one of the operation's buffers.
struct BufRef {
    Buf buf = Buf::None;
    size_t offset = 0;
};

enum StepFlag : uint8_t {
    kRecv = 1,   // take the next message from recv_peer
    kReduce = 2, // combine the received message with src (without kRecv: dst = dst (op) src)
    kSend = 4,   // send the value to send_peer
    kStore = 8,  // write the value to dst
};

struct Step {
    uint8_t flags = 0;
    bool finalize = false; // the last combine of an avg: divide by nranks here
    int recv_peer = -1;
    int send_peer = -1;
    BufRef src; // the value when nothing is received; the local operand of a reduce
    BufRef dst;
    size_t count = 0; // elements

    bool has(StepFlag f) const { return (flags & f) != 0; }
};

struct Schedule {
    std::string algorithm;
    std::vector<std::vector<Step>> channels;
    size_t scratch_elems = 0;

    size_t step_count() const {
        size_t n = 0;
        for (const auto &c : channels) n += c.size();
        return n;
    }
};

} // namespace nnpccl
