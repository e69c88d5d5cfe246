// How the builders append steps to a channel.
#pragma once

#include <vector>

#include "schedule.hpp"

namespace nnpccl {

// One channel's steps, appended in the order the rank runs them. An empty
// step is left out: it moves nothing, and the two ends of a message compute
// the same count, so both leave it out alike.
class StepList {
public:
    explicit StepList(std::vector<Step> &out) : out_(out) {}

    void add(uint8_t flags, int recv_peer, int send_peer, BufRef src, BufRef dst, size_t count,
             bool finalize = false) {
        if (count == 0) return;
        Step s;
        s.flags = flags;
        s.finalize = finalize;
        s.recv_peer = (flags & kRecv) ? recv_peer : -1;
        s.send_peer = (flags & kSend) ? send_peer : -1;
        s.src = src;
        s.dst = dst;
        s.count = count;
        out_.push_back(s);
    }

private:
    std::vector<Step> &out_;
};

} // namespace nnpccl
