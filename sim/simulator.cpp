#include "simulator.hpp"

#include <algorithm>
#include <unordered_map>

#include "critical_path.hpp"
#include "event_queue.hpp"

namespace nnpccl::sim {

namespace {

constexpr uint32_t kNone = UINT32_MAX;
constexpr int kFlagShift = 56;
constexpr uint64_t kBytesMask = (uint64_t{1} << kFlagShift) - 1;

// A step reduced to what timing needs: 16 bytes instead of a Step's 56.
struct CompactStep {
    uint64_t bytes_flags; // bytes, flags in the top byte
    uint32_t recv;        // stream it receives from, or kNone
    uint32_t send;        // stream it sends on, or kNone

    size_t bytes() const { return static_cast<size_t>(bytes_flags & kBytesMask); }
    uint8_t flags() const { return static_cast<uint8_t>(bytes_flags >> kFlagShift); }
};

// Messages from one rank to another on one channel, in order.
struct Stream {
    const uint32_t *path = nullptr; // servers crossed, path_length of them
    uint32_t path_length = 0;
    int src = 0;
    int dst = 0;
    int wire = 0;    // the channel's index in its schedule
    int sender = -1; // the channels (Engine::channels_) at either end
    int receiver = -1;
    uint32_t sent = 0;     // slots taken by the sender
    uint32_t released = 0; // slots the receiver is done with
    uint32_t arrived = 0;
    uint32_t consumed = 0;
    bool sender_waiting = false;   // for a slot
    bool receiver_waiting = false; // for a message
};

struct Channel {
    size_t cursor = 0; // into Engine::steps_
    size_t begin = 0;
    size_t end = 0;
    int op = 0;   // the rank's schedule it is of
    int wire = 0; // its index in that schedule
    int rank = 0;
    int local = 0; // the channel's number on its rank
    int chip = 0;
    double ready = 0;  // when the current step became the next
    double start = 0;  // when the current step started
    bool busy = false; // reducing
};

// A message in flight carries what its hops need, its path included, so
// that a hop touches the message and its next server only: with a
// million messages in flight (direct on nnpt-pod1024) the routes no longer
// fit in any cache, and reading each hop's server from the stream's route
// was a second cache miss per hop. Two cache lines; routes of more than
// kNear servers, or server numbers beyond 16 bits, are read from the
// stream's route instead.
constexpr size_t kNear = 48;
struct alignas(64) Message {
    double tail = 0; // when its last byte leaves the previous server
    double bytes = 0;
    const uint32_t *far = nullptr; // the route, when not in `near`
    uint32_t stream = 0;
    uint16_t hop = 0;
    uint16_t length = 0;
    uint16_t near[kNear];
};
static_assert(sizeof(Message) == 128, "a message is two cache lines");

std::string step_name(uint8_t flags) {
    std::string name;
    auto add = [&](StepFlag f, const char *word) {
        if ((flags & f) == 0) return;
        if (!name.empty()) name += "-";
        name += word;
    };
    add(kRecv, "recv");
    add(kReduce, "reduce");
    add(kStore, "copy");
    add(kSend, "send");
    return name.empty() ? "nothing" : name;
}

class Engine {
public:
    Engine(const Network &network, const SimOptions &options, TraceSink *trace)
        : net_(network), options_(options), trace_(trace) {}

    // Every rank's program as steps in one array, the streams between
    // channels numbered as they appear, then each stream's route.
    Status compile(const ProgramSource &source) {
        const Topology &t = net_.topology();
        RankProgram program;
        for (int r = 0; r < t.nranks(); ++r) {
            program.clear();
            source(r, &program);
            int local = 0, op = 0;
            for (const Schedule &schedule : program) {
                for (size_t wire = 0; wire < schedule.channels.size(); ++wire, ++local) {
                    if (wire >= (1u << 16))
                        return internal_error("%s has %zu channels; the simulator takes up to 65536",
                                              schedule.algorithm.c_str(), schedule.channels.size());
                    NNPCCL_TRY(compile_channel(schedule, static_cast<int>(wire), r, local, op));
                }
                ++op;
            }
            if (!program.empty()) algorithm_ = program.front().algorithm;
        }
        stream_ids_ = {};
        NNPCCL_TRY(route_streams());
        if (trace_ != nullptr) trace_->begin(t.nranks());
        return Status::ok();
    }

    Status run(SimResult *out) {
        servers_.assign(net_.servers().size(), ServerState{});
        costs_ = net_.servers().data();
        near_ok_ = net_.servers().size() <= UINT16_MAX;
        reducer_free_.assign(static_cast<size_t>(net_.topology().machine().num_chips()), 0.0);
        sender_free_.assign(reducer_free_.size(), 0.0);
        credit_bytes_ = options_.fidelity.credit_bytes;
        overhead_us_ = options_.fidelity.message_overhead_us;
        if (options_.critical_path)
            recorder_.build(steps_.size(), streams_.size(), [this](size_t i, uint32_t *recv, uint32_t *send) {
                *recv = steps_[i].recv == kNone ? PathRecorder::kNoStream : steps_[i].recv;
                *send = steps_[i].send == kNone ? PathRecorder::kNoStream : steps_[i].send;
            });
        for (size_t c = 0; c < channels_.size(); ++c) work_.push_back(static_cast<uint32_t>(c));
        drain(0.0);
        while (!events_.empty()) {
            const EventQueue::Item e = events_.pop();
            const double now = e.time();
            switch (e.kind) {
            case kHop: hop(e.id, now); break;
            case kDeliver: deliver(e.id, now); break;
            case kStepDone:
                finish(e.id, now);
                work_.push_back(e.id);
                break;
            }
            drain(now);
        }
        if (!events_.in_order()) return internal_error("the simulator's events went out of order");
        for (const Channel &ch : channels_)
            if (ch.cursor < ch.end) return stuck(ch);
        out->time_us = end_;
        out->busy_us.resize(servers_.size());
        out->bytes.resize(servers_.size());
        out->peak_queue_bytes.resize(servers_.size());
        for (size_t s = 0; s < servers_.size(); ++s) {
            out->busy_us[s] = servers_[s].busy;
            out->bytes[s] = servers_[s].bytes;
            out->peak_queue_bytes[s] =
                costs_[s].us_per_byte > 0 ? servers_[s].peak_backlog_us / costs_[s].us_per_byte : 0;
        }
        out->steps = steps_.size();
        out->messages = messages_;
        out->bytes_sent = bytes_sent_;
        out->hops = hops_;
        if (options_.critical_path)
            out->critical_path = recorder_.walk_back([this](uint64_t i) { return facts(i); }, costs_, overhead_us_);
        return Status::ok();
    }

private:
    struct ServerState {
        double free_at = 0;
        double busy = 0;
        double bytes = 0;
        double peak_backlog_us = 0; // the longest a message waited for it to be free
    };

    // The stream from `src` to `dst` on channel `wire`, numbered at first sight.
    uint32_t stream_of(int src, int dst, int wire) {
        const uint64_t key =
            (static_cast<uint64_t>(src) << 40) | (static_cast<uint64_t>(dst) << 16) | static_cast<uint64_t>(wire);
        auto [it, added] = stream_ids_.emplace(key, static_cast<uint32_t>(streams_.size()));
        if (added) {
            Stream s;
            s.src = src;
            s.dst = dst;
            s.wire = wire;
            streams_.push_back(s);
        }
        return it->second;
    }

    // One channel of rank r's op-th schedule: its steps, and the streams
    // it sends and receives on (each stream has one channel at each end).
    Status compile_channel(const Schedule &schedule, int wire, int r, int local, int op) {
        const Topology &t = net_.topology();
        const int p = t.nranks();
        const int id = static_cast<int>(channels_.size());
        Channel ch;
        ch.rank = r;
        ch.local = local;
        ch.chip = t.chip_of(r);
        ch.cursor = ch.begin = steps_.size();
        ch.op = op;
        ch.wire = wire;
        // Ring-like channels talk to the same peers step after step:
        // remember the last streams rather than hash again.
        int last_recv_peer = -1, last_send_peer = -1;
        uint32_t last_recv = kNone, last_send = kNone;
        for (const Step &s : schedule.channels[static_cast<size_t>(wire)]) {
            CompactStep c{(static_cast<uint64_t>(s.flags) << kFlagShift) |
                              static_cast<uint64_t>(s.count * options_.elem_size),
                          kNone, kNone};
            if (s.count * options_.elem_size > kBytesMask)
                return internal_error("a step of %zu bytes is beyond the simulator's 2^56",
                                      s.count * options_.elem_size);
            if (s.has(kRecv)) {
                if (s.recv_peer < 0 || s.recv_peer >= p || s.recv_peer == r)
                    return bad_peer(schedule, r, local, s.recv_peer, "receives from");
                if (s.recv_peer != last_recv_peer) {
                    last_recv = stream_of(s.recv_peer, r, wire);
                    last_recv_peer = s.recv_peer;
                }
                Stream &in = streams_[last_recv];
                if (in.receiver >= 0 && in.receiver != id) return two_channels(schedule, in, "receives from");
                in.receiver = id;
                ++in.consumed;
                c.recv = last_recv;
            }
            if (s.has(kSend)) {
                if (s.send_peer < 0 || s.send_peer >= p || s.send_peer == r)
                    return bad_peer(schedule, r, local, s.send_peer, "sends to");
                if (s.send_peer != last_send_peer) {
                    last_send = stream_of(r, s.send_peer, wire);
                    last_send_peer = s.send_peer;
                }
                Stream &out = streams_[last_send];
                if (out.sender >= 0 && out.sender != id) return two_channels(schedule, out, "sends to");
                out.sender = id;
                ++out.sent;
                c.send = last_send;
            }
            steps_.push_back(c);
        }
        ch.end = steps_.size();
        channels_.push_back(ch);
        return Status::ok();
    }

    // Checks that every stream's two ends count the same messages, and
    // lays the streams' routes next to each other in stream order (the
    // Network's rows hold every route of the machine, scattered).
    Status route_streams() {
        const Topology &t = net_.topology();
        std::vector<const std::vector<uint32_t> *> routes(streams_.size());
        size_t pooled = 0;
        for (size_t i = 0; i < streams_.size(); ++i) {
            Stream &s = streams_[i];
            if (s.sent != s.consumed)
                return Status(NNPCCL_ERR_INTERNAL, algorithm_ + ": rank " + std::to_string(s.src) + " sends " +
                                                       std::to_string(s.sent) + " messages to rank " +
                                                       std::to_string(s.dst) + " on channel " + std::to_string(s.wire) +
                                                       ", which receives " + std::to_string(s.consumed));
            const std::vector<uint32_t> *path = net_.path(t.chip_of(s.src), t.chip_of(s.dst));
            if (path == nullptr)
                return Status(NNPCCL_ERR_INVALID_ARGUMENT, "no route from rank " + std::to_string(s.src) + " (chip " +
                                                               std::to_string(t.chip_of(s.src)) + ") to rank " +
                                                               std::to_string(s.dst) + " (chip " +
                                                               std::to_string(t.chip_of(s.dst)) + ")");
            routes[i] = path;
            pooled += path->size();
            s.sent = s.consumed = 0;
        }
        paths_.resize(pooled);
        pooled = 0;
        for (size_t i = 0; i < streams_.size(); ++i) {
            std::copy(routes[i]->begin(), routes[i]->end(), paths_.begin() + static_cast<std::ptrdiff_t>(pooled));
            streams_[i].path = paths_.data() + pooled;
            streams_[i].path_length = static_cast<uint32_t>(routes[i]->size());
            pooled += routes[i]->size();
        }
        return Status::ok();
    }

    Status bad_peer(const Schedule &s, int rank, int channel, int peer, const char *what) const {
        return internal_error("%s: rank %d channel %d %s rank %d, not another rank of %d", s.algorithm.c_str(), rank,
                              channel, what, peer, net_.topology().nranks());
    }
    Status two_channels(const Schedule &s, const Stream &st, const char *what) const {
        return internal_error("%s: rank %d %s rank %d from two channels of the same number %d", s.algorithm.c_str(),
                              st.src, what, st.dst, st.wire);
    }
    Status stuck(const Channel &ch) const {
        const CompactStep &s = steps_[ch.cursor];
        std::string waits;
        if (s.recv != kNone && streams_[s.recv].arrived == streams_[s.recv].consumed)
            waits = "a message from rank " + std::to_string(streams_[s.recv].src);
        else if (s.send != kNone)
            waits = "a free slot towards rank " + std::to_string(streams_[s.send].dst);
        return Status(NNPCCL_ERR_INTERNAL, algorithm_ + " deadlocks: rank " + std::to_string(ch.rank) + " channel " +
                                               std::to_string(ch.local) + " waits at its step " + step_name(s.flags()) +
                                               " for " + waits);
    }

    void push(double time, EventKind kind, uint32_t id) { events_.push(time, kind, id); }

    // The current step of `ch` starts at `now`: what it waited for, before
    // its stream counters move.
    void record_start(const Channel &ch, double now) {
        const CompactStep &s = steps_[ch.cursor];
        const uint64_t previous = ch.cursor > ch.begin ? ch.cursor - 1 : PathRecorder::kNoStep;
        const uint32_t send = s.send != kNone ? s.send : PathRecorder::kNoStream;
        const uint32_t seq = s.send != kNone ? streams_[s.send].sent : 0;
        recorder_.start(ch.cursor, now, ch.ready, previous, s.recv != kNone, send, seq, options_.slots);
    }
    PathRecorder::StepFacts facts(uint64_t step) const {
        const CompactStep &s = steps_[step];
        PathRecorder::StepFacts f;
        f.bytes = s.bytes();
        if (s.flags() & kReduce) f.reduce_us = static_cast<double>(s.bytes()) * options_.reduce_us_per_byte;
        if (s.send != kNone) {
            const Stream &st = streams_[s.send];
            f.from_rank = st.src;
            f.to_rank = st.dst;
            f.servers = st.path;
            f.length = st.path_length;
        }
        return f;
    }

    void drain(double now) {
        while (!work_.empty()) {
            const uint32_t c = work_.back();
            work_.pop_back();
            advance(c, now);
        }
    }

    // Runs channel c's steps from `now` until one must wait.
    void advance(uint32_t c, double now) {
        Channel &ch = channels_[c];
        while (ch.cursor < ch.end && !ch.busy) {
            const CompactStep &s = steps_[ch.cursor];
            if (s.recv != kNone) {
                Stream &in = streams_[s.recv];
                if (in.arrived == in.consumed) {
                    in.receiver_waiting = true;
                    return;
                }
            }
            if (s.send != kNone && options_.slots > 0) {
                Stream &out = streams_[s.send];
                if (out.sent - out.released >= static_cast<uint32_t>(options_.slots)) {
                    out.sender_waiting = true;
                    return;
                }
            }
            if (options_.critical_path) record_start(ch, now);
            if (s.recv != kNone) ++streams_[s.recv].consumed;
            if (s.send != kNone) ++streams_[s.send].sent;
            ch.start = now;
            if (s.flags() & kReduce) {
                double &free = reducer_free_[static_cast<size_t>(ch.chip)];
                const double done = std::max(now, free) + static_cast<double>(s.bytes()) * options_.reduce_us_per_byte;
                free = done;
                if (done > now) {
                    ch.busy = true;
                    push(done, kStepDone, c);
                    return;
                }
            }
            finish(c, now);
        }
    }

    // Channel c's current step ends at `now`: its receive slot is freed, its
    // message leaves.
    void finish(uint32_t c, double now) {
        Channel &ch = channels_[c];
        const CompactStep &s = steps_[ch.cursor];
        if (s.recv != kNone) {
            Stream &in = streams_[s.recv];
            ++in.released;
            if (in.sender_waiting) {
                in.sender_waiting = false;
                work_.push_back(static_cast<uint32_t>(in.sender));
            }
        }
        if (options_.critical_path) recorder_.finish(ch.cursor, now);
        if (s.send != kNone) send(s.send, s.bytes(), now, ch.cursor);
        if (trace_ != nullptr) {
            StepEvent e;
            e.rank = ch.rank;
            e.op = ch.op;
            e.channel = ch.wire;
            e.step = ch.cursor - ch.begin;
            e.ready_us = ch.ready;
            e.start_us = ch.start;
            e.end_us = now;
            e.flags = s.flags();
            e.bytes = s.bytes();
            e.recv_peer = s.recv != kNone ? streams_[s.recv].src : -1;
            e.send_peer = s.send != kNone ? streams_[s.send].dst : -1;
            trace_->step(e);
        }
        ch.ready = now;
        ch.busy = false;
        ++ch.cursor;
        end_ = std::max(end_, now);
    }

    void send(uint32_t stream, size_t bytes, double now, size_t step) {
        ++messages_;
        bytes_sent_ += bytes;
        uint32_t id;
        if (!free_messages_.empty()) {
            id = free_messages_.back();
            free_messages_.pop_back();
        } else {
            id = static_cast<uint32_t>(messages_in_flight_.size());
            messages_in_flight_.emplace_back();
        }
        const Stream &s = streams_[stream];
        Message &m = messages_in_flight_[id];
        m.tail = now;
        m.bytes = static_cast<double>(bytes);
        m.stream = stream;
        if (options_.critical_path) recorder_.sent(id, step);
        m.hop = 0;
        if (s.path_length == 0) {
            deliver(id, now);
            return;
        }
        if (s.path_length <= kNear && near_ok_) {
            m.far = nullptr;
            m.length = static_cast<uint16_t>(s.path_length);
            for (uint32_t i = 0; i < s.path_length; ++i) m.near[i] = static_cast<uint16_t>(s.path[i]);
        } else {
            m.far = s.path;
            m.length = 0;
        }
        if (overhead_us_ > 0) {
            // One message at a time per chip, each after the overhead.
            double &free = sender_free_[static_cast<size_t>(net_.topology().chip_of(s.src))];
            free = std::max(free, now) + overhead_us_;
            m.tail = free;
            push(free, kHop, id);
            return;
        }
        hop(id, now);
    }

    // Message `id`'s head reaches its next server at `now`.
    void hop(uint32_t id, double now) {
        Message &m = messages_in_flight_[id];
        const uint32_t server = m.far != nullptr ? m.far[m.hop] : m.near[m.hop];
        const Network::Server &cost = costs_[server];
        ServerState &state = servers_[server];
        const double serialize = m.bytes * cost.us_per_byte;
        const double start = std::max(now, state.free_at);
        const double done = std::max(start + serialize, m.tail);
        state.free_at = done;
        state.busy += serialize;
        state.bytes += m.bytes;
        state.peak_backlog_us = std::max(state.peak_backlog_us, start - now);
        if (credit_bytes_ > 0 && m.hop > 0 && start > now && m.bytes > credit_bytes_) {
            // The buffer fills: the link it came over is held until this
            // one has taken all but a buffer's worth of it.
            const uint32_t before = m.far != nullptr ? m.far[m.hop - 1] : m.near[m.hop - 1];
            double &held = servers_[before].free_at;
            held = std::max(held, start + (m.bytes - credit_bytes_) * cost.us_per_byte);
        }
        m.tail = done + cost.latency_us;
        ++hops_;
        ++m.hop;
        const bool more = m.far != nullptr ? m.hop < streams_[m.stream].path_length : m.hop < m.length;
        if (more)
            push(start + cost.latency_us, kHop, id);
        else
            push(m.tail, kDeliver, id);
    }

    void deliver(uint32_t id, double now) {
        Stream &s = streams_[messages_in_flight_[id].stream];
        free_messages_.push_back(id);
        if (options_.critical_path) recorder_.arrived(id, now);
        ++s.arrived;
        end_ = std::max(end_, now);
        if (s.receiver_waiting) {
            s.receiver_waiting = false;
            work_.push_back(static_cast<uint32_t>(s.receiver));
        }
    }

    const Network &net_;
    SimOptions options_;
    TraceSink *trace_;
    std::string algorithm_;
    std::unordered_map<uint64_t, uint32_t> stream_ids_; // (src, dst, wire) -> stream, while compiling
    BigVector<CompactStep> steps_;
    BigVector<Stream> streams_;
    BigVector<uint32_t> paths_; // the streams' routes
    BigVector<Channel> channels_;
    std::vector<ServerState> servers_;
    const Network::Server *costs_ = nullptr;
    bool near_ok_ = false;             // server numbers fit a Message's `near`
    std::vector<double> reducer_free_; // per chip
    std::vector<double> sender_free_;  // per chip: when its next message may start (the per-message overhead)
    double credit_bytes_ = 0, overhead_us_ = 0;
    PathRecorder recorder_;
    BigVector<Message> messages_in_flight_;
    std::vector<uint32_t> free_messages_;
    EventQueue events_;
    std::vector<uint32_t> work_; // channels to advance at the current time
    double end_ = 0;
    uint64_t messages_ = 0, bytes_sent_ = 0, hops_ = 0;
};

} // namespace

Status simulate(const Network &network, const ProgramSource &source, const SimOptions &options, SimResult *out,
                TraceSink *trace) {
    *out = SimResult{};
    Engine engine(network, options, trace);
    NNPCCL_TRY(engine.compile(source));
    return engine.run(out);
}

} // namespace nnpccl::sim
