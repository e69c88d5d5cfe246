// In-process transport: every rank of a communicator lives in this process
// and streams are bounded in-memory FIFOs. Used by unit tests to run all
// ranks' schedules in one thread (and so to prove builders correct and
// deadlock-free without processes), with the same slot discipline as shm:
// at most `slots` messages in flight per stream.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "transport.hpp"

namespace nnpccl {

class LoopFabric {
public:
    LoopFabric(int nranks, size_t max_message_bytes, int slots);
    // The transport as rank `rank` sees it; owned by the fabric.
    Transport *endpoint(int rank) { return endpoints_[static_cast<size_t>(rank)].get(); }
    int nranks() const { return static_cast<int>(endpoints_.size()); }
    // Messages sent but not yet received, over all streams.
    size_t in_flight() const;

    struct Stream {
        std::deque<std::vector<unsigned char>> messages;
        std::vector<unsigned char> staging; // the buffer handed out by try_acquire_send
        bool staged = false;
    };
    Stream &stream(int from, int to, int channel) { return streams_[std::make_tuple(from, to, channel)]; }
    size_t max_message_bytes() const { return max_message_bytes_; }
    int slots() const { return slots_; }

private:
    size_t max_message_bytes_;
    int slots_;
    std::map<std::tuple<int, int, int>, Stream> streams_;
    std::vector<std::unique_ptr<Transport>> endpoints_;
};

} // namespace nnpccl
