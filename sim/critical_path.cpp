#include "critical_path.hpp"

#include <algorithm>

namespace nnpccl::sim {

namespace {

// Below this a message's wait is the rounding of its times' sums.
constexpr double kRoundingUs = 1e-9;

} // namespace

void PathRecorder::build(size_t steps, size_t streams,
                         const std::function<void(size_t, uint32_t *, uint32_t *)> &step_streams) {
    info_.assign(steps, StepInfo{});
    offsets_.assign(streams + 1, 0);
    for (size_t i = 0; i < steps; ++i) {
        uint32_t recv, send;
        step_streams(i, &recv, &send);
        if (send != kNoStream) ++offsets_[send + 1];
    }
    for (size_t s = 0; s < streams; ++s) offsets_[s + 1] += offsets_[s];
    sends_.assign(offsets_[streams], kNoStep);
    // A stream has one sending channel, whose steps are in order: filling
    // in step order lists each stream's sends in the order they are sent.
    std::vector<uint64_t> filled(streams, 0), received(streams, 0);
    for (size_t i = 0; i < steps; ++i) {
        uint32_t recv, send;
        step_streams(i, &recv, &send);
        if (send != kNoStream) sends_[offsets_[send] + filled[send]++] = i;
    }
    for (size_t i = 0; i < steps; ++i) {
        uint32_t recv, send;
        step_streams(i, &recv, &send);
        if (recv == kNoStream) continue;
        const uint64_t from = sends_[offsets_[recv] + received[recv]++];
        info_[i].from_send = from;
        info_[from].to_recv = i;
    }
}

void PathRecorder::start(uint64_t step, double now, double ready, uint64_t previous, bool recv, uint32_t send_stream,
                         uint32_t send_seq, int slots) {
    StepInfo &s = info_[step];
    s.start = now;
    // The latest of what it waited for; a tie goes to the message, then
    // the slot, so that the chain follows the traffic.
    double latest = ready;
    s.pred = previous;
    s.cause = previous == kNoStep ? kFirst : kChannel;
    if (send_stream != kNoStream && slots > 0 && send_seq >= static_cast<uint32_t>(slots)) {
        const uint64_t earlier = sends_[offsets_[send_stream] + send_seq - static_cast<uint32_t>(slots)];
        const uint64_t release = info_[earlier].to_recv;
        if (release != kNoStep && info_[release].end >= latest) {
            latest = info_[release].end;
            s.pred = release;
            s.cause = kSlot;
        }
    }
    if (recv && info_[s.from_send].arrive >= latest) {
        s.pred = s.from_send;
        s.cause = kMessage;
    }
}

void PathRecorder::sent(uint32_t message, uint64_t step) {
    if (message >= sender_.size()) sender_.resize(message + 1, kNoStep);
    sender_[message] = step;
}

CriticalPath PathRecorder::walk_back(const std::function<StepFacts(uint64_t)> &facts, const Network::Server *costs,
                                     double overhead_us) const {
    CriticalPath path;
    path.recorded = true;
    if (info_.empty()) return path;
    uint64_t at = 0;
    for (uint64_t i = 1; i < info_.size(); ++i)
        if (info_[i].end > info_[at].end) at = i;
    while (at != kNoStep) {
        const StepInfo &s = info_[at];
        ++path.steps;
        const double reduce = facts(at).reduce_us;
        path.reduce_us += reduce;
        path.reducer_wait_us += std::max(0.0, s.end - s.start - reduce);
        if (s.cause == kSlot) ++path.slot_waits;
        if (s.cause == kMessage) {
            const StepFacts f = facts(s.pred);
            const StepInfo &sender = info_[s.pred];
            PathMessage m;
            m.from_rank = f.from_rank;
            m.to_rank = f.to_rank;
            m.bytes = f.bytes;
            m.sent_us = sender.end;
            m.arrived_us = sender.arrive;
            double slowest = 0;
            for (uint32_t h = 0; h < f.length; ++h) {
                m.latency_us += costs[f.servers[h]].latency_us;
                slowest = std::max(slowest, costs[f.servers[h]].us_per_byte);
                m.servers.push_back(f.servers[h]);
            }
            m.data_us = static_cast<double>(f.bytes) * slowest;
            m.overhead_us = f.length > 0 ? overhead_us : 0;
            m.waiting_us = m.arrived_us - m.sent_us - m.latency_us - m.data_us - m.overhead_us;
            if (m.waiting_us < kRoundingUs) m.waiting_us = 0; // none but the sums' rounding
            path.latency_us += m.latency_us;
            path.data_us += m.data_us;
            path.overhead_us += m.overhead_us;
            path.link_wait_us += m.waiting_us;
            path.messages.push_back(std::move(m));
        }
        at = s.cause == kFirst ? kNoStep : s.pred;
    }
    std::reverse(path.messages.begin(), path.messages.end());
    return path;
}

} // namespace nnpccl::sim
