#include "emulated_transport.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "log.hpp"

namespace nnpccl {

// Cross-process sharing needs the table's atomics to be plain integers in memory.
static_assert(std::atomic<int64_t>::is_always_lock_free, "link table atomics must be lock-free");

int64_t emulation_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

Status validate_emulation_model(const EmulationModel &model, int nranks) {
    if (!(model.scale > 0) || !std::isfinite(model.scale))
        return invalid_argument("emulation model: scale %g must be a positive number (NNPCCL_EMULATE_SCALE)",
                                model.scale);
    for (size_t id = 0; id < model.links.size(); ++id) {
        const EmulatedLink &link = model.links[id];
        if (!(link.gbytes_per_sec > 0) || !std::isfinite(link.gbytes_per_sec))
            return invalid_argument("emulation model: link %zu has bandwidth %g GB/s (must be positive)", id,
                                    link.gbytes_per_sec);
        if (!(link.latency_us >= 0) || !std::isfinite(link.latency_us))
            return invalid_argument("emulation model: link %zu has latency %g us (must be zero or more)", id,
                                    link.latency_us);
    }
    if (model.path.size() != static_cast<size_t>(nranks))
        return invalid_argument("emulation model: the path table has %zu source ranks, the communicator %d",
                                model.path.size(), nranks);
    for (size_t src = 0; src < model.path.size(); ++src) {
        if (model.path[src].size() != static_cast<size_t>(nranks))
            return invalid_argument("emulation model: rank %zu has paths to %zu ranks, the communicator has %d", src,
                                    model.path[src].size(), nranks);
        for (size_t dst = 0; dst < model.path[src].size(); ++dst)
            for (int id : model.path[src][dst])
                if (id < 0 || static_cast<size_t>(id) >= model.links.size())
                    return invalid_argument("emulation model: the path from rank %zu to rank %zu crosses link %d, "
                                            "but the links are numbered 0 to %zu",
                                            src, dst, id, model.links.size() - 1);
    }
    return Status::ok();
}

LinkTimeline::LinkTimeline(const EmulationModel &model, std::atomic<int64_t> *shared_busy_until) {
    cost_.reserve(model.links.size());
    for (const EmulatedLink &link : model.links) {
        // Dilating time by `scale`: a byte takes scale times longer, so does the wire's latency.
        const double ns_per_byte = model.scale / link.gbytes_per_sec; // 1 GB/s = 1 byte per ns
        cost_.push_back({ns_per_byte, static_cast<int64_t>(std::llround(link.latency_us * 1e3 * model.scale))});
    }
    if (shared_busy_until != nullptr) {
        busy_until_ = shared_busy_until;
    } else {
        own_busy_until_.reset(new std::atomic<int64_t>[cost_.size()]);
        for (size_t i = 0; i < cost_.size(); ++i) own_busy_until_[i].store(0, std::memory_order_relaxed);
        busy_until_ = own_busy_until_.get();
    }
}

int64_t LinkTimeline::reserve(const std::vector<int> &path, size_t bytes, int64_t ready_ns) {
    // Walk the path as the message would: `head_ns` is when its first byte
    // reaches the next link, `tail_ns` when its last byte has come out of the
    // previous one. A link cannot finish sending the tail before it has
    // received it, so a fast link behind a slow one runs at the slow rate.
    int64_t head_ns = ready_ns;
    int64_t tail_ns = ready_ns;
    for (int id : path) {
        const LinkCost &cost = cost_[static_cast<size_t>(id)];
        const auto serialize_ns = static_cast<int64_t>(std::llround(static_cast<double>(bytes) * cost.ns_per_byte));
        std::atomic<int64_t> &busy_until = busy_until_[static_cast<size_t>(id)];
        // FIFO server: start when the link is free; another rank sharing the
        // table may reserve in between, in which case start after it.
        int64_t free_at = busy_until.load(std::memory_order_relaxed);
        int64_t start = 0, done = 0;
        do {
            start = std::max(head_ns, free_at);
            done = std::max(start + serialize_ns, tail_ns);
        } while (!busy_until.compare_exchange_weak(free_at, std::max(free_at, done), std::memory_order_relaxed));
        head_ns = start + cost.latency_ns;
        tail_ns = done + cost.latency_ns;
    }
    return tail_ns;
}

EmulatedTransport::EmulatedTransport(Transport *inner, int rank, EmulationModel model, EmulationOptions options)
    : inner_(inner), rank_(rank), model_(std::move(model)), options_(options),
      timeline_(model_, options.shared_link_busy_until), name_(std::string("emulated ") + inner->name()) {
    options_.held_per_stream = std::max(1, options_.held_per_stream);
    LOG_INFO("link emulation over %s: %zu links, scale %g, %d held messages per stream, link state %s", inner->name(),
             model_.links.size(), model_.scale, options_.held_per_stream,
             options_.shared_link_busy_until != nullptr ? "shared by the host's ranks" : "private to this rank");
}

EmulatedTransport::~EmulatedTransport() {
    // Normal after an abort; after destroy, flush() has emptied the queues.
    if (held_total_ != 0) LOG_INFO("link emulation: %zu committed messages dropped undelivered", held_total_);
}

EmulatedTransport::Stream &EmulatedTransport::stream(int peer, int channel) {
    const auto p = static_cast<size_t>(peer);
    const auto c = static_cast<size_t>(channel);
    if (p >= streams_.size()) streams_.resize(p + 1);
    std::vector<Stream> &by_channel = streams_[p];
    if (c >= by_channel.size()) {
        const std::vector<int> *path = nullptr;
        const auto src = static_cast<size_t>(rank_);
        if (src < model_.path.size() && p < model_.path[src].size() && !model_.path[src][p].empty())
            path = &model_.path[src][p];
        const size_t old = by_channel.size();
        by_channel.resize(c + 1);
        for (size_t i = old; i <= c; ++i) {
            by_channel[i].path = path;
            if (path != nullptr) by_channel[i].ring.resize(static_cast<size_t>(options_.held_per_stream));
        }
    }
    return by_channel[c];
}

void *EmulatedTransport::try_acquire_send(int peer, int channel) {
    Stream &s = stream(peer, channel);
    if (s.path == nullptr) return inner_->try_acquire_send(peer, channel);
    // A full queue may have a due message at its front: hand it over now
    // rather than wait for the next poll, so the link never idles for it.
    if (s.count == s.ring.size() && deliver_due(peer, channel, s, emulation_now_ns()) == 0) return nullptr;
    // The slot after the last held message; unchanged by deliveries, so
    // asking twice without a commit returns the same buffer.
    HeldMessage &next = s.ring[(s.first + s.count) % s.ring.size()];
    if (!next.buffer) next.buffer.reset(new unsigned char[inner_->max_message_bytes()]);
    return next.buffer.get();
}

void EmulatedTransport::commit_send(int peer, int channel, size_t bytes) {
    Stream &s = stream(peer, channel);
    if (s.path == nullptr) {
        inner_->commit_send(peer, channel, bytes);
        return;
    }
    HeldMessage &next = s.ring[(s.first + s.count) % s.ring.size()];
    next.bytes = bytes;
    next.due_ns = timeline_.reserve(*s.path, bytes, emulation_now_ns());
    ++s.count;
    ++held_total_;
}

size_t EmulatedTransport::deliver_due(int peer, int channel, Stream &s, int64_t now_ns) {
    size_t delivered = 0;
    while (s.count > 0) {
        HeldMessage &front = s.ring[s.first];
        if (front.due_ns > now_ns) break;
        void *slot = inner_->try_acquire_send(peer, channel);
        if (slot == nullptr) break; // the receiver has not freed a slot: try again next pass
        std::memcpy(slot, front.buffer.get(), front.bytes);
        inner_->commit_send(peer, channel, front.bytes);
        s.first = (s.first + 1) % s.ring.size();
        --s.count;
        ++delivered;
    }
    held_total_ -= delivered;
    handed_over_.fetch_add(delivered, std::memory_order_relaxed);
    return delivered;
}

size_t EmulatedTransport::deliver_all_due(int64_t now_ns) {
    size_t delivered = 0;
    for (size_t p = 0; p < streams_.size() && held_total_ > 0; ++p)
        for (size_t c = 0; c < streams_[p].size(); ++c)
            if (streams_[p][c].count > 0)
                delivered += deliver_due(static_cast<int>(p), static_cast<int>(c), streams_[p][c], now_ns);
    return delivered;
}

void EmulatedTransport::poll() {
    if (held_total_ > 0) deliver_all_due(emulation_now_ns());
    inner_->poll();
}

uint64_t EmulatedTransport::event_count() const {
    return inner_->event_count() + handed_over_.load(std::memory_order_relaxed);
}

void EmulatedTransport::wait_for_event(uint64_t seen, int timeout_ms) {
    int64_t now = emulation_now_ns();
    // A message that fell due since the caller's last poll is an event.
    if (held_total_ > 0) deliver_all_due(now);
    if (event_count() != seen || timeout_ms <= 0) return;
    // What is still held is either not due yet or waits for an inner slot
    // (the inner transport's events announce those): sleep on the inner
    // transport, but no longer than until the earliest arrival.
    int64_t next_due = std::numeric_limits<int64_t>::max();
    for (const std::vector<Stream> &by_channel : streams_)
        for (const Stream &s : by_channel)
            if (s.count > 0 && s.ring[s.first].due_ns > now) next_due = std::min(next_due, s.ring[s.first].due_ns);
    const uint64_t inner_seen = seen - handed_over_.load(std::memory_order_relaxed);
    const int64_t timeout_ns = static_cast<int64_t>(timeout_ms) * 1000000;
    if (next_due == std::numeric_limits<int64_t>::max() || next_due - now >= timeout_ns) {
        inner_->wait_for_event(inner_seen, timeout_ms);
        return;
    }
    const int64_t until_due_ns = next_due - now;
    if (until_due_ns >= 1000000) {
        // Whole milliseconds, rounded down: waking a little early costs one
        // more pass, waking late would delay the message.
        inner_->wait_for_event(inner_seen, static_cast<int>(until_due_ns / 1000000));
    } else {
        // Under a millisecond the inner wait cannot be bounded (its timeout is
        // in ms): sleep precisely instead; an inner event waits at most that long.
        std::this_thread::sleep_for(std::chrono::nanoseconds(until_due_ns));
    }
}

Status EmulatedTransport::flush(const Deadline &deadline) {
    while (held_total_ > 0) {
        const uint64_t seen = event_count();
        poll();
        if (held_total_ == 0) break;
        if (event_count() == seen) {
            // Nothing moved: either not due yet, or a receiver keeps its slots full.
            NNPCCL_TRY(inner_->check_peers());
            if (deadline.passed())
                return timeout_error("link emulation: at the deadline %zu committed message(s) were still held: "
                                     "their receivers did not free a slot",
                                     held_total_);
        }
        wait_for_event(event_count(), std::max(1, deadline.ms_left(10)));
    }
    return inner_->flush(deadline);
}

} // namespace nnpccl
