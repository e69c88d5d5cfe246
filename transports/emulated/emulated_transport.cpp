#include "emulated_transport.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include <signal.h>
#include <unistd.h>

#include "log.hpp"

namespace nnpccl {

// Cross-process sharing needs the table's lock words to be plain integers in memory.
static_assert(std::atomic<uint64_t>::is_always_lock_free, "link table lock words must be lock-free");

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

// One link's state in the table. Its interval array follows it, capacity_
// entries; `count` and the intervals are only touched under `lock`. Zero
// bytes are a free lock and an empty list.
struct LinkTimeline::Record {
    std::atomic<uint64_t> lock; // 0: free; else the holder's pid << 32 | its acquisition count
    uint64_t count; // intervals in use
    uint64_t reserved[6];
};

namespace {

constexpr size_t kCacheLine = 64;
constexpr int kSpinsBeforeYield = 64;

size_t record_stride(int intervals_per_link) {
    const size_t bytes = kCacheLine + static_cast<size_t>(std::max(2, intervals_per_link)) * 2 * sizeof(int64_t);
    return (bytes + kCacheLine - 1) / kCacheLine * kCacheLine;
}

// Acquisitions by this process, so that a lock word names one acquisition.
std::atomic<uint32_t> lock_acquisitions{0};

} // namespace

size_t LinkTimeline::table_bytes(size_t links, int intervals_per_link) {
    return std::max<size_t>(links, 1) * record_stride(intervals_per_link);
}

LinkTimeline::LinkTimeline(const EmulationModel &model, void *shared_table, int intervals_per_link)
    : capacity_(static_cast<size_t>(std::max(2, intervals_per_link))), stride_(record_stride(intervals_per_link)) {
    cost_.reserve(model.links.size());
    for (const EmulatedLink &link : model.links) {
        // Dilating time by `scale`: a byte takes scale times longer, so does the wire's latency.
        const double ns_per_byte = model.scale / link.gbytes_per_sec; // 1 GB/s = 1 byte per ns
        cost_.push_back({ns_per_byte, static_cast<int64_t>(std::llround(link.latency_us * 1e3 * model.scale))});
    }
    if (shared_table != nullptr) {
        table_ = static_cast<unsigned char *>(shared_table);
    } else {
        const size_t bytes = table_bytes(cost_.size(), intervals_per_link);
        own_table_.reset(new unsigned char[bytes]());
        table_ = own_table_.get();
    }
    scratch_.reserve(capacity_ + 1);
}

LinkTimeline::Record &LinkTimeline::record(int link) const {
    return *reinterpret_cast<Record *>(table_ + static_cast<size_t>(link) * stride_);
}

LinkTimeline::Interval *LinkTimeline::intervals(Record &r) {
    static_assert(sizeof(Record) == kCacheLine, "a record's header is one cache line");
    return reinterpret_cast<Interval *>(reinterpret_cast<unsigned char *>(&r) + kCacheLine);
}

uint64_t LinkTimeline::lock(Record &r, int link) {
    std::atomic<uint64_t> &word = r.lock;
    const uint64_t mine = static_cast<uint64_t>(getpid()) << 32 |
                          (lock_acquisitions.fetch_add(1, std::memory_order_relaxed) + 1);
    uint64_t holder = 0;
    int64_t holder_since = 0;
    for (int tries = 0;; ++tries) {
        uint64_t seen = word.load(std::memory_order_relaxed);
        if (seen == 0) {
            if (word.compare_exchange_weak(seen, mine, std::memory_order_acquire, std::memory_order_relaxed)) return mine;
            continue;
        }
        if (tries < kSpinsBeforeYield) continue;
        // The holder may be a rank this core should run instead: give the core up.
        std::this_thread::yield();
        const int64_t now = emulation_now_ns();
        if (seen != holder) {
            holder = seen;
            holder_since = now;
            continue;
        }
        const int64_t held = now - holder_since;
        if (held < kCheckHolderNs) continue;
        const auto pid = static_cast<pid_t>(seen >> 32);
        const bool gone = kill(pid, 0) != 0 && errno == ESRCH;
        if (!gone && held < kTakeOverNs) continue;
        if (word.compare_exchange_strong(seen, mine, std::memory_order_acquire, std::memory_order_relaxed)) {
            LOG_WARN("link emulation: took over the lock of link %d from process %d, %s for %.0f ms; its busy "
                     "intervals are repaired",
                     link, static_cast<int>(pid), gone ? "which no longer exists, after waiting" : "which held it",
                     static_cast<double>(held) / 1e6);
            repair(r);
            return mine;
        }
    }
}

void LinkTimeline::unlock(Record &r, int link, uint64_t mine) {
    // Only this acquisition releases: a waiter that took the lock over keeps it.
    uint64_t expected = mine;
    if (!r.lock.compare_exchange_strong(expected, 0, std::memory_order_release))
        LOG_WARN("link emulation: the lock of link %d was taken over while this process held it", link);
}

void LinkTimeline::repair(Record &r) {
    Interval *iv = intervals(r);
    size_t n = std::min<size_t>(r.count, capacity_);
    std::sort(iv, iv + n, [](const Interval &a, const Interval &b) { return a.start < b.start; });
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
        if (iv[i].done <= iv[i].start) continue;
        if (kept > 0 && iv[i].start <= iv[kept - 1].done)
            iv[kept - 1].done = std::max(iv[kept - 1].done, iv[i].done);
        else
            iv[kept++] = iv[i];
    }
    r.count = kept;
}

std::vector<std::pair<int64_t, int64_t>> LinkTimeline::busy_intervals(int link) {
    Record &r = record(link);
    const uint64_t held = lock(r, link);
    std::vector<std::pair<int64_t, int64_t>> out;
    const Interval *iv = intervals(r);
    for (size_t i = 0; i < r.count; ++i) out.emplace_back(iv[i].start, iv[i].done);
    unlock(r, link, held);
    return out;
}

int64_t LinkTimeline::reserve(const std::vector<int> &path, size_t bytes, int64_t ready_ns,
                              std::vector<int64_t> *stream_done) {
    if (stream_done != nullptr && stream_done->size() < path.size()) stream_done->resize(path.size(), 0);
    // Walk the path as the message would: `head_ns` is when its first byte
    // reaches the next link, `tail_ns` when its last byte has come out of the
    // previous one. A link cannot finish sending the tail before it has
    // received it, so a fast link behind a slow one runs at the slow rate.
    int64_t head_ns = ready_ns;
    int64_t tail_ns = ready_ns;
    for (size_t hop = 0; hop < path.size(); ++hop) {
        const int id = path[hop];
        const LinkCost &cost = cost_[static_cast<size_t>(id)];
        const auto serialize_ns = static_cast<int64_t>(std::llround(static_cast<double>(bytes) * cost.ns_per_byte));
        const int64_t earliest = stream_done != nullptr ? std::max(head_ns, (*stream_done)[hop]) : head_ns;
        Record &r = record(id);
        const uint64_t held = lock(r, id);
        Interval *iv = intervals(r);
        // The list without what ended long before this head, in order.
        scratch_.clear();
        for (size_t i = 0; i < r.count; ++i)
            if (iv[i].done > ready_ns - kForgetPastNs) scratch_.push_back(iv[i]);
        // The earliest gap at or after `earliest` that holds [start, done).
        int64_t start = earliest;
        size_t at = 0;
        for (; at < scratch_.size(); ++at) {
            const Interval &busy = scratch_[at];
            if (busy.done <= start) continue;
            if (std::max(start + serialize_ns, tail_ns) <= busy.start) break;
            start = busy.done;
        }
        const int64_t done = std::max(start + serialize_ns, tail_ns);
        if (done > start) {
            // Insert, merging with the neighbours it touches.
            const bool joins_before = at > 0 && scratch_[at - 1].done == start;
            const bool joins_after = at < scratch_.size() && scratch_[at].start == done;
            if (joins_before && joins_after) {
                scratch_[at - 1].done = scratch_[at].done;
                scratch_.erase(scratch_.begin() + static_cast<std::ptrdiff_t>(at));
            } else if (joins_before) {
                scratch_[at - 1].done = done;
            } else if (joins_after) {
                scratch_[at].start = start;
            } else {
                scratch_.insert(scratch_.begin() + static_cast<std::ptrdiff_t>(at), Interval{start, done});
            }
        }
        if (scratch_.size() > capacity_) {
            // Full: merge the neighbours whose gap is the least use from
            // now on (a gap before this commit's clock is of no use to any
            // later reservation), losing that gap.
            size_t merge = 0;
            int64_t least = std::numeric_limits<int64_t>::max();
            for (size_t i = 0; i + 1 < scratch_.size(); ++i) {
                const int64_t usable = std::max<int64_t>(
                    0, scratch_[i + 1].start - std::max(scratch_[i].done, ready_ns));
                if (usable < least) {
                    least = usable;
                    merge = i;
                }
            }
            scratch_[merge].done = scratch_[merge + 1].done;
            scratch_.erase(scratch_.begin() + static_cast<std::ptrdiff_t>(merge) + 1);
        }
        std::copy(scratch_.begin(), scratch_.end(), iv);
        r.count = scratch_.size();
        unlock(r, id, held);
        if (stream_done != nullptr) (*stream_done)[hop] = done;
        head_ns = start + cost.latency_ns;
        tail_ns = done + cost.latency_ns;
    }
    return tail_ns;
}

EmulatedTransport::EmulatedTransport(Transport *inner, int rank, EmulationModel model, EmulationOptions options)
    : inner_(inner), rank_(rank), model_(std::move(model)), options_(options),
      timeline_(model_, options.shared_link_table, options.intervals_per_link), name_(std::string("emulated ") + inner->name()) {
    options_.held_per_stream = std::max(1, options_.held_per_stream);
    LOG_INFO("link emulation over %s: %zu links, scale %g, %d held messages per stream, link state %s", inner->name(),
             model_.links.size(), model_.scale, options_.held_per_stream,
             options_.shared_link_table != nullptr ? "shared by the host's ranks" : "private to this rank");
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

void *EmulatedTransport::try_acquire_send(int peer, int channel, size_t bytes) {
    Stream &s = stream(peer, channel);
    if (s.path == nullptr) return inner_->try_acquire_send(peer, channel, bytes);
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
    next.due_ns = timeline_.reserve(*s.path, bytes, emulation_now_ns(), &s.hop_done);
    ++s.count;
    ++held_total_;
}

size_t EmulatedTransport::deliver_due(int peer, int channel, Stream &s, int64_t now_ns) {
    size_t delivered = 0;
    while (s.count > 0) {
        HeldMessage &front = s.ring[s.first];
        if (front.due_ns > now_ns) break;
        void *slot = inner_->try_acquire_send(peer, channel, front.bytes);
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
