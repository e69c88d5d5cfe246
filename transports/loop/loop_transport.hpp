// In-process transport: every rank of a communicator lives in this process
// and streams are bounded in-memory FIFOs. Used by unit tests to run all
// ranks' schedules in one thread (and so to prove builders correct and
// deadlock-free without processes), with the same slot discipline as shm:
// at most `slots` messages in flight per stream. With sends in place, a
// message's data is read from the sender's memory only when the receiver
// takes it, the latest moment a real provider might read it, so a schedule
// that overwrites what it is still sending shows as wrong data.
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
    enum class Sends { Copied, InPlace };
    LoopFabric(int nranks, size_t max_message_bytes, int slots, Sends sends = Sends::Copied);
    // The transport as rank `rank` sees it; owned by the fabric.
    Transport *endpoint(int rank) { return endpoints_[static_cast<size_t>(rank)].get(); }
    int nranks() const { return static_cast<int>(endpoints_.size()); }
    // Messages sent but not yet received, over all streams.
    size_t in_flight() const;

    struct Message {
        std::vector<unsigned char> bytes;
        const unsigned char *in_place = nullptr; // the sender's data, read at delivery
        size_t in_place_bytes = 0;
    };
    struct Stream {
        std::deque<Message> messages;
        uint64_t sent = 0;
        uint64_t delivered = 0;
        std::vector<unsigned char> staging; // the buffer handed out by try_acquire_send
        bool staged = false;
    };
    Stream &stream(int from, int to, int channel) { return streams_[std::make_tuple(from, to, channel)]; }
    size_t max_message_bytes() const { return max_message_bytes_; }
    int slots() const { return slots_; }
    bool sends_in_place() const { return sends_ == Sends::InPlace; }

private:
    size_t max_message_bytes_;
    int slots_;
    Sends sends_;
    std::map<std::tuple<int, int, int>, Stream> streams_;
    std::vector<std::unique_ptr<Transport>> endpoints_;
};

} // namespace nnpccl
