#include "executor.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "collective.hpp"
#include "copy.hpp"
#include "dtype.hpp"
#include "reduce.hpp"
#include "registry.hpp"

namespace nnpccl {

ScheduleRun::ScheduleRun(std::shared_ptr<const Schedule> schedule, const Call &call, void *scratch,
                         const Announcement &announcement, const std::vector<Transport *> &route,
                         unsigned char *message_scratch, std::shared_ptr<TraceRecorder> trace)
    : schedule_(std::move(schedule)), call_(call), scratch_(scratch), announcement_(announcement),
      elem_size_(datatype_size(call.datatype)), route_(route), cursor_(schedule_->channels.size(), 0),
      recv_missing_(schedule_->channels.size(), 0), message_scratch_(message_scratch),
      announced_(route.size() * schedule_->channels.size(), 0), verified_(route.size() * schedule_->channels.size(), 0),
      trace_(std::move(trace)) {
    code_algorithm(announcement.descriptor.collective);
    stamp_algorithm();
    plan_single();
}

// Looked up once per schedule (construction, restart), not per call.
void ScheduleRun::code_algorithm(uint32_t collective) {
    algorithm_code_ = 0;
    if (!is_point_to_point(static_cast<Collective>(collective)))
        if (const AlgorithmInfo *info = find_algorithm(schedule_->algorithm); info != nullptr)
            algorithm_code_ = static_cast<uint32_t>(info - algorithm_registry().data()) + 1;
}

void ScheduleRun::stamp_algorithm() {
    announcement_.descriptor.algorithm = announcement_.expected.algorithm = algorithm_code_;
}

void ScheduleRun::restart(std::shared_ptr<const Schedule> schedule, const Call &call, void *scratch,
                          const Announcement &announcement) {
    schedule_ = std::move(schedule);
    const size_t channels = schedule_->channels.size();
    cursor_.resize(channels);
    recv_missing_.assign(channels, 0);
    announced_.resize(route_.size() * channels);
    verified_.resize(route_.size() * channels);
    code_algorithm(announcement.descriptor.collective);
    again(call, scratch, announcement);
    plan_single();
}

void ScheduleRun::again(const Call &call, void *scratch, const Announcement &announcement) {
    call_ = call;
    announcement_ = announcement;
    stamp_algorithm();
    elem_size_ = datatype_size(call.datatype);
    again(call, scratch, announcement.descriptor.sequence);
}

void ScheduleRun::again(const Call &call, void *scratch, uint64_t sequence) {
    call_.send = call.send;
    call_.recv = call.recv;
    scratch_ = scratch;
    announcement_.descriptor.sequence = sequence;
    announcement_.expected.sequence = sequence;
    if (single_.active) cursor_[0] = 0;
    else std::fill(cursor_.begin(), cursor_.end(), 0);
    ++run_number_;
    in_flight_.clear();
    traced_.begun = false;
    traced_.ended = false;
    traced_.op = TraceRecorder::kNoOperation;
}

namespace {

// A descriptor's algorithm code as a name, for error messages.
const char *algorithm_name(uint32_t code) {
    const std::vector<AlgorithmInfo> &all = algorithm_registry();
    if (code == 0 || code > all.size()) return "an unknown algorithm";
    return all[code - 1].name;
}

} // namespace

bool ScheduleRun::steps_finished() const {
    for (size_t c = 0; c < cursor_.size(); ++c)
        if (cursor_[c] < schedule_->channels[c].size()) return false;
    const bool done = std::all_of(in_flight_.begin(), in_flight_.end(), [](const InPlaceSend &s) { return s.done(); });
    if (done && trace_ != nullptr && !traced_.ended) {
        const int64_t now = trace_now_ns();
        if (!traced_.begun) trace_begin(now); // a run with nothing to do
        trace_->end_operation(traced_.op, now);
        traced_.ended = true;
    }
    return done;
}

void ScheduleRun::trace_begin(int64_t now_ns) const {
    traced_.begun = true;
    const size_t channels = schedule_->channels.size();
    if (channels > std::size(traced_.few)) traced_.many.resize(channels);
    traced_.ready_ns = channels > std::size(traced_.few) ? traced_.many.data() : traced_.few;
    std::fill(traced_.ready_ns, traced_.ready_ns + channels, now_ns);
    traced_.op = trace_->begin_operation(announcement_.descriptor, schedule_->algorithm, call_bytes(call_),
                                         schedule_->step_count(), now_ns);
}

void ScheduleRun::trace_step(int channel, const Step &step, size_t bytes, int64_t start_ns) {
    const int64_t now = trace_now_ns();
    int64_t &ready = traced_.ready_ns[channel];
    trace_->step(traced_.op, channel, cursor_[static_cast<size_t>(channel)], step, bytes, ready, start_ns, now);
    ready = now;
}

// Whether the descriptor rides beside the message, in room the transport
// keeps for it (Transport::header_room), rather than in front of the data.
bool descriptor_beside(const Transport &t) { return t.header_room() >= sizeof(OperationDescriptor); }

namespace {

// What lies in front of a received payload.
size_t header_bytes(const Transport &rx, bool check_descriptor) {
    return check_descriptor && !descriptor_beside(rx) ? kDescriptorBytes : 0;
}

// Smaller payloads no transport receives in place (ofi does from 256 KiB),
// so a small step does not pay for asking (Transport::try_peek_recv_into).
constexpr size_t kPeekIntoMinBytes = 4096;

// The next message for a step that receives `bytes` (with the descriptor
// in front when `check_descriptor`): where the step only stores the
// payload at `dst`, the transport may receive it there (*landed).
const void *peek(Transport &rx, int peer, int channel, const Step &step, size_t bytes, bool check_descriptor,
                 char *dst, size_t *in_bytes, bool *landed) {
    if (bytes >= kPeekIntoMinBytes && step.has(kStore) && !step.has(kReduce))
        return rx.try_peek_recv_into(peer, channel, in_bytes, header_bytes(rx, check_descriptor), dst, bytes, landed);
    *landed = false;
    return rx.try_peek_recv(peer, channel, in_bytes);
}

} // namespace

bool ScheduleRun::in_flight_overlaps(const char *begin, const char *end) const {
    return std::any_of(in_flight_.begin(), in_flight_.end(),
                       [&](const InPlaceSend &s) { return begin < s.end && s.begin < end && !s.done(); });
}

char *ScheduleRun::address(const BufRef &ref) const {
    switch (ref.buf) {
    case Buf::Send: return const_cast<char *>(static_cast<const char *>(call_.send)) + ref.offset * elem_size_;
    case Buf::Recv: return static_cast<char *>(call_.recv) + ref.offset * elem_size_;
    case Buf::Scratch: return static_cast<char *>(scratch_) + ref.offset * elem_size_;
    case Buf::None: break;
    }
    return nullptr;
}

// Checks a received message: the sender's descriptor (when `check_descriptor`,
// the stream's first message of the run) and its size. On success *header is
// what lies in front of the payload.
bool ScheduleRun::accept(int peer, int channel, bool check_descriptor, const Transport &rx, const void *message,
                         size_t in_bytes, size_t bytes, size_t *header, Status *status) const {
    const bool beside = descriptor_beside(rx);
    *header = check_descriptor && !beside ? kDescriptorBytes : 0; // header_bytes(), without asking rx again
    if (check_descriptor) {
        OperationDescriptor theirs;
        const bool carried = beside || in_bytes >= kDescriptorBytes;
        if (carried) std::memcpy(&theirs, beside ? rx.recv_header(peer, channel) : message, sizeof theirs);
        if (!carried || !(theirs == announcement_.expected)) {
            OperationDescriptor same_algorithm = theirs;
            same_algorithm.algorithm = announcement_.expected.algorithm;
            if (carried && same_algorithm == announcement_.expected) {
                *status = invalid_usage("rank %d ran %s with %s where this rank ran it with %s: every rank must force "
                                        "the same algorithms (NNPCCL_ALGO, config->algorithms, "
                                        "nnpccl_comm_set_algorithms)",
                                        peer, describe(announcement_.descriptor).c_str(),
                                        algorithm_name(theirs.algorithm), algorithm_name(algorithm_code_));
                return false;
            }
            const bool p2p = announcement_.descriptor.collective == static_cast<uint32_t>(Collective::Recv);
            *status = invalid_usage(
                "rank %d called %s where this rank called %s: %s", peer,
                !carried ? "something else" : describe(theirs).c_str(), describe(announcement_.descriptor).c_str(),
                p2p ? "the n-th send to a rank must match that rank's n-th recv from the sender in count and "
                      "datatype"
                    : "every rank must call the same collectives in the same order with the same arguments");
            return false;
        }
    }
    if (in_bytes != bytes + *header) {
        *status = invalid_usage("rank %d sent a message of %zu bytes where %zu were due (channel %d, %s)", peer,
                                in_bytes - *header, bytes, channel, describe(announcement_.descriptor).c_str());
        return false;
    }
    return true;
}

// Writes this rank's descriptor for the message in `slot`: beside it, in
// the room the transport keeps (`beside`), or in front of its data.
void ScheduleRun::announce(Transport &tx, int peer, int channel, bool beside, void *slot) const {
    std::memcpy(beside ? tx.send_header(peer, channel) : slot, &announcement_.descriptor,
                sizeof announcement_.descriptor);
}

// The step's arithmetic, once everything it needs is there: `in` is the
// received payload (null without kRecv), `out` the send slot's (null when
// nothing is copied into one), which a reduction that stores nothing may
// write directly when `reduce_into_out` (Transport::peer_reads_send_buffers).
void ScheduleRun::apply(const Step &step, const void *in, void *out, bool reduce_into_out, char *src, char *dst,
                        size_t bytes, uint32_t divisor) {
    const bool store = step.has(kStore);
    if (step.count == 0) {
        // A zero-byte message (the barrier's signal) carries no data to touch.
    } else if (in != nullptr && step.has(kReduce)) {
        // Reduce into the store target (or a cache-hot scratch), then copy
        // into the send slot: memcpy fills the slot's lines without first
        // fetching them back from the peer that read them, which a reduce
        // loop writing the slot would do for every line. A slot no peer
        // reads in place (`reduce_into_out`) takes the reduction itself.
        // This rank's operand comes first and the received one second, as
        // in the branch without a receive below. In direct's fold in rank
        // order the local operand is the fold so far, so every rank has the
        // same operands in the same places, which the NaN a sum keeps
        // depends on (the other algorithms reduce each element once and
        // pass the result on).
        void *target = store                                 ? static_cast<void *>(dst)
                       : out != nullptr && reduce_into_out ? out
                                                             : static_cast<void *>(message_scratch_);
        reduce(target, src, in, step.count, call_.datatype, call_.op, divisor);
        if (out != nullptr && out != target) copy_bytes(out, target, bytes);
    } else if (in != nullptr) {
        if (store && in != dst) copy_bytes(dst, in, bytes); // in == dst: the transport received it there
        if (out != nullptr) copy_bytes(out, in, bytes);
    } else if (step.has(kReduce)) {
        reduce(dst, dst, src, step.count, call_.datatype, call_.op, divisor);
        if (out != nullptr) copy_bytes(out, dst, bytes);
    } else if (divisor == 1) {
        if (store && dst != src) {
            if (dst + bytes <= src || src + bytes <= dst) copy_bytes(dst, src, bytes);
            else std::memmove(dst, src, bytes); // in place, the caller's buffers may overlap
        }
        if (out != nullptr) copy_bytes(out, src, bytes);
    } else {
        if (store) divide(dst, src, step.count, call_.datatype, divisor);
        if (out != nullptr && store) copy_bytes(out, dst, bytes);
        else if (out != nullptr) divide(out, src, step.count, call_.datatype, divisor);
    }
}

bool ScheduleRun::try_step(int channel, const Step &step, Status *status) {
    const size_t bytes = step.count * elem_size_;
    const void *in = nullptr;
    void *out = nullptr;
    Transport *rx = step.has(kRecv) ? route_[static_cast<size_t>(step.recv_peer)] : nullptr;
    Transport *tx = step.has(kSend) ? route_[static_cast<size_t>(step.send_peer)] : nullptr;
    const bool check_descriptor = rx != nullptr && verified_[stream_index(step.recv_peer, channel)] != run_number_;
    const bool send_descriptor = tx != nullptr && announced_[stream_index(step.send_peer, channel)] != run_number_;
    char *src = address(step.src);
    char *dst = address(step.dst);
    const uint32_t divisor = divisor_of(step);
    const bool writes_dst = step.has(kStore) || (rx == nullptr && step.has(kReduce));
    if (writes_dst && bytes > 0 && in_flight_overlaps(dst, dst + bytes)) {
        recv_missing_[static_cast<size_t>(channel)] = 0;
        return false;
    }
    // Where the value lies once the step has computed it, if the transport
    // can send it from there: the source of a plain copy, else the target.
    const char *send_from = nullptr;
    if (tx != nullptr && bytes > 0 && tx->sends_in_place(bytes)) {
        if (rx == nullptr && !step.has(kReduce) && divisor == 1) send_from = src;
        else if (writes_dst) send_from = dst;
    }
    if (rx != nullptr) {
        size_t in_bytes = 0;
        bool landed = false;
        const void *message =
            peek(*rx, step.recv_peer, channel, step, bytes, check_descriptor, dst, &in_bytes, &landed);
        if (message == nullptr) {
            recv_missing_[static_cast<size_t>(channel)] = 1;
            return false;
        }
        size_t header = 0;
        if (!accept(step.recv_peer, channel, check_descriptor, *rx, message, in_bytes, bytes, &header, status))
            return false;
        in = landed ? dst : static_cast<const char *>(message) + header;
    }
    void *slot = nullptr;
    const bool tx_beside = tx != nullptr && descriptor_beside(*tx);
    const size_t tx_header = send_descriptor && !tx_beside ? kDescriptorBytes : 0;
    if (tx != nullptr) {
        slot = tx->try_acquire_send(step.send_peer, channel, bytes + tx_header);
        if (slot == nullptr) {
            recv_missing_[static_cast<size_t>(channel)] = 0;
            return false;
        }
        if (send_from == nullptr) out = static_cast<char *>(slot) + tx_header;
    }
    // Everything the step needs is here: from now on it runs.
    const int64_t ran_ns = trace_ != nullptr ? trace_now_ns() : 0;
    apply(step, in, out, tx != nullptr && !tx->peer_reads_send_buffers(), src, dst, bytes, divisor);
    if (rx != nullptr) {
        rx->release_recv(step.recv_peer, channel);
        verified_[stream_index(step.recv_peer, channel)] = run_number_;
    }
    if (tx != nullptr) {
        if (send_descriptor)
            announce(*tx, step.send_peer, channel, tx_beside, slot);
        if (send_from != nullptr) {
            const uint64_t ticket = tx->commit_send_in_place(step.send_peer, channel, tx_header, send_from, bytes);
            in_flight_.push_back({tx, step.send_peer, channel, ticket, send_from, send_from + bytes});
        } else {
            tx->commit_send(step.send_peer, channel, bytes + tx_header);
        }
        announced_[stream_index(step.send_peer, channel)] = run_number_;
    }
    if (trace_ != nullptr) trace_step(channel, step, bytes, ran_ns);
    return true;
}

void ScheduleRun::plan_single() {
    single_ = Single{};
    if (trace_ != nullptr || schedule_->channels.size() != 1 || schedule_->channels[0].size() != 1) return;
    const Step &step = schedule_->channels[0][0];
    Single s;
    s.step = &step;
    s.bytes = step.count * elem_size_;
    if (step.has(kRecv)) s.rx = route_[static_cast<size_t>(step.recv_peer)];
    if (step.has(kSend)) {
        s.tx = route_[static_cast<size_t>(step.send_peer)];
        if (s.bytes > 0 && s.tx->sends_in_place(s.bytes)) return;
        s.tx_beside = descriptor_beside(*s.tx);
    }
    s.active = true;
    single_ = s;
}

// try_step for the one step of a single-step schedule: the stream's only
// message of the run, so its descriptor always goes and is always checked,
// and no send is in flight from the caller's buffers.
bool ScheduleRun::try_single(Status *status) {
    const Step &step = *single_.step;
    const size_t bytes = single_.bytes;
    const void *in = nullptr;
    char *dst = address(step.dst);
    if (single_.rx != nullptr) {
        size_t in_bytes = 0;
        bool landed = false;
        const void *message = peek(*single_.rx, step.recv_peer, 0, step, bytes, true, dst, &in_bytes, &landed);
        if (message == nullptr) {
            recv_missing_[0] = 1;
            return false;
        }
        size_t header = 0;
        if (!accept(step.recv_peer, 0, true, *single_.rx, message, in_bytes, bytes, &header, status)) return false;
        in = landed ? dst : static_cast<const char *>(message) + header;
    }
    void *slot = nullptr;
    const size_t tx_header = single_.tx_beside ? 0 : kDescriptorBytes;
    if (single_.tx != nullptr) {
        slot = single_.tx->try_acquire_send(step.send_peer, 0, bytes + tx_header);
        if (slot == nullptr) {
            recv_missing_[0] = 0;
            return false;
        }
    }
    apply(step, in, slot == nullptr ? nullptr : static_cast<char *>(slot) + tx_header,
          single_.tx != nullptr && !single_.tx->peer_reads_send_buffers(), address(step.src), dst, bytes,
          divisor_of(step));
    if (single_.rx != nullptr) single_.rx->release_recv(step.recv_peer, 0);
    if (single_.tx != nullptr) {
        announce(*single_.tx, step.send_peer, 0, single_.tx_beside, slot);
        single_.tx->commit_send(step.send_peer, 0, bytes + tx_header);
    }
    return true;
}

Status ScheduleRun::advance_steps(size_t *progressed) {
    *progressed = 0;
    if (trace_ != nullptr && !traced_.begun) trace_begin(trace_now_ns());
    in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(), [](const InPlaceSend &s) { return s.done(); }),
                     in_flight_.end());
    Status status;
    bool moved = true;
    while (moved) {
        moved = false;
        for (size_t c = 0; c < cursor_.size(); ++c) {
            const std::vector<Step> &steps = schedule_->channels[c];
            while (cursor_[c] < steps.size() && try_step(static_cast<int>(c), steps[cursor_[c]], &status)) {
                ++cursor_[c];
                ++*progressed;
                moved = true;
            }
            if (!status) return status;
        }
    }
    return status;
}

std::string ScheduleRun::blocked_on() const {
    for (size_t c = 0; c < cursor_.size(); ++c) {
        const std::vector<Step> &steps = schedule_->channels[c];
        if (cursor_[c] >= steps.size()) continue;
        const Step &s = steps[cursor_[c]];
        std::string what = s.has(kRecv) ? format("a message from rank %d", s.recv_peer)
                                        : format("a free send buffer towards rank %d", s.send_peer);
        if (s.has(kRecv) && s.has(kSend)) what += format(" and a free send buffer towards rank %d", s.send_peer);
        return format("%s (%s, channel %zu, step %zu of %zu)", what.c_str(), schedule_->algorithm.c_str(), c,
                      cursor_[c] + 1, steps.size());
    }
    // Every step ran: what remains are sends that leave straight from the
    // caller's buffer, which the receivers have not finished reading.
    return "the receivers to finish reading its last messages (sent from the caller's buffer)";
}

int ScheduleRun::waiting_on_departed() const {
    auto left = [this](int peer) { return route_[static_cast<size_t>(peer)]->has_left(peer); };
    for (size_t c = 0; c < cursor_.size(); ++c) {
        const std::vector<Step> &steps = schedule_->channels[c];
        if (cursor_[c] >= steps.size()) continue;
        const Step &s = steps[cursor_[c]];
        if (s.has(kSend) && left(s.send_peer)) return s.send_peer;
        if (s.has(kRecv) && recv_missing_[c] != 0 && left(s.recv_peer)) return s.recv_peer;
    }
    for (const InPlaceSend &sent : in_flight_)
        if (!sent.done() && left(sent.peer)) return sent.peer;
    return -1;
}

std::vector<int> ScheduleRun::waiting_peers() const {
    std::vector<int> peers;
    for (size_t c = 0; c < cursor_.size(); ++c) {
        const std::vector<Step> &steps = schedule_->channels[c];
        if (cursor_[c] >= steps.size()) continue;
        const Step &s = steps[cursor_[c]];
        if (s.has(kRecv)) peers.push_back(s.recv_peer);
        if (s.has(kSend)) peers.push_back(s.send_peer);
    }
    return peers;
}

} // namespace nnpccl
