#include "engine.hpp"

#include <sched.h>

#include <algorithm>

#include "dtype.hpp"
#include "library_threads.hpp"
#include "log.hpp"

namespace nnpccl {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

constexpr auto kLivenessPeriod = std::chrono::milliseconds(100);
// How much longer a timed-out wait that can name no silent rank goes on
// (idle_wait): enough for a peer's own timeout, which may name one, to
// reach this rank through the rendezvous root.
constexpr auto kNamingGrace = std::chrono::seconds(1);
constexpr int kSleepSliceMs = 10;
// A waiting rank yields its core for this many of its transports' typical
// answer times (Transport::spin_hint_us), and at least kMinYieldUs, before
// it sleeps: a sleeper's wake-up costs tens of µs under a hypervisor, on
// every message it waits for. Over TCP, where an answer is a large
// message's kernel copies, 200 µs was too short a yield: ranks that share
// cores slept through most waits (docs/performance.md, "Waiting over TCP").
constexpr int kYieldAnswers = 10;
constexpr int kMinYieldUs = 200;
// Polls a spinning wait makes before it looks at the clock: with one pause
// each, a few microseconds, well inside the spin phase.
constexpr unsigned kQuickPolls = 64;

} // namespace

Engine::Engine(std::vector<Transport *> transports, int timeout_sec, int spin_us, int local_ranks)
    : transports_(std::move(transports)), timeout_sec_(timeout_sec) {
    // Spinning only pays when every local rank has a core; then spin as long
    // as the slowest transport usually takes to answer.
    int cores = static_cast<int>(std::thread::hardware_concurrency());
    int hint = 0;
    for (Transport *t : transports_) hint = std::max(hint, t->spin_hint_us());
    spin_us_ = spin_us >= 0 ? spin_us : (local_ranks <= cores ? hint : 0);
    yield_us_ = std::max(kMinYieldUs, kYieldAnswers * hint);
}

Engine::~Engine() {
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        stopping_ = true;
    }
    queue_changed_.notify_all();
    if (progress_thread_.joinable()) progress_thread_.join();
}

void Engine::submit(const std::shared_ptr<Operation> &op, bool background) {
    std::unique_lock<std::mutex> lock(queue_mutex_);
    if (failed_.load()) {
        Status why = failure_;
        lock.unlock();
        finish(op, why);
        return;
    }
    queue_.push_back(op);
    queued_.store(queue_.size(), std::memory_order_release);
    if (background) {
        ensure_progress_thread();
        queue_changed_.notify_one();
    }
}

void Engine::ensure_progress_thread() {
    if (progress_thread_.joinable()) return;
    LibraryThreadSignals blocked;
    progress_thread_ = std::thread([this] { progress_thread_main(); });
}

bool Engine::sends_pending() const {
    for (Transport *t : transports_)
        if (t->has_pending_sends()) return true;
    return false;
}

void Engine::finish_pending_sends() {
    // Poll in short turns, holding the drive lock only for the poll itself,
    // so a caller who wants to drive is never kept waiting behind a sleep.
    // Messages that cannot leave (their peer died, or stopped reading) end
    // in an error as an operation's wait would: liveness every
    // kLivenessPeriod, NNPCCL_TIMEOUT without any transport event.
    uint64_t seen = event_count();
    Clock::time_point last_event = Clock::now(), last_check = last_event;
    while (true) {
        {
            std::unique_lock<DriveLock> driving(drive_lock_, std::try_to_lock);
            if (!driving.owns_lock()) return; // whoever drives takes the pending sends along
            {
                std::lock_guard<std::mutex> lock(queue_mutex_);
                if (stopping_ || !queue_.empty()) return;
            }
            if (failed_.load() || !sends_pending()) return;
            for (Transport *t : transports_) t->poll();
            const Clock::time_point now = Clock::now();
            if (const uint64_t events = event_count(); events != seen) {
                seen = events;
                last_event = now;
            }
            if (now - last_check >= kLivenessPeriod) {
                last_check = now;
                Status peers = check_peers();
                if (peers && now - last_event >= std::chrono::seconds(timeout_sec_))
                    peers = timeout_error("the last messages of this rank's operations have not left for %d s "
                                          "(NNPCCL_TIMEOUT)",
                                          timeout_sec_);
                if (!peers) {
                    fail_locked_queue(peers);
                    return;
                }
            }
        }
        std::unique_lock<std::mutex> lock(queue_mutex_);
        queue_changed_.wait_for(lock, std::chrono::microseconds(50), [this] { return stopping_ || !queue_.empty(); });
    }
}

void Engine::hand_over_pending_sends() {
    // Completions of eager sends are usually waiting: collect them first, so
    // only sends that really need more progress wake the thread.
    for (Transport *t : transports_) t->poll();
    if (!sends_pending()) return;
    std::lock_guard<std::mutex> lock(queue_mutex_);
    sends_pending_ = true;
    ensure_progress_thread();
    queue_changed_.notify_one();
}

Status Engine::wait(Operation &op) {
    while (!op.done.load(std::memory_order_acquire)) {
        std::lock_guard<DriveLock> driving(drive_lock_);
        if (!op.done.load(std::memory_order_acquire)) drive(&op);
    }
    // Operations queued behind ours may belong to nobody waiting: let the thread take them.
    queue_changed_.notify_one();
    return op.result;
}

bool Engine::try_drive_alone(ShortDrive *driving) {
    // An operation queued by another thread after this look waits behind
    // this call, as it would behind any driver.
    if (queued_.load(std::memory_order_acquire) != 0 || failed_.load()) return false;
    const DriveLock::Held how = drive_lock_.try_enter_short();
    if (how == DriveLock::Held::No) return false;
    driving->release();
    driving->lock_ = &drive_lock_;
    driving->how_ = how;
    return true;
}

Status Engine::run_alone(ScheduleRun &run, const OperationName &name) {
    IdleSpell idle;
    while (true) {
        // abort() from another thread leaves failing to the driver.
        if (stop_driving()) return failure();
        const uint64_t seen = event_count();
        for (Transport *t : transports_) t->poll();
        size_t progressed = 0;
        if (Status st = run.advance(&progressed); !st) {
            Status named(st.code(), name.text() + ": " + st.message());
            fail_locked_queue(named);
            return failure();
        }
        if (run.finished()) {
            hand_over_pending_sends();
            return Status::ok();
        }
        if (progressed > 0) {
            idle.active = false;
            continue;
        }
        if (!idle_wait(seen, idle, name, &run)) return failure();
    }
}

Status Engine::close(const Deadline &deadline) {
    {
        std::lock_guard<DriveLock> driving(drive_lock_);
        drive(nullptr);
    }
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        stopping_ = true;
    }
    queue_changed_.notify_all();
    if (progress_thread_.joinable()) progress_thread_.join();
    std::lock_guard<DriveLock> driving(drive_lock_);
    Status st = failure();
    if (st) st = drain_sends(deadline);
    for (Transport *t : transports_) {
        Status flushed = st ? t->flush(deadline) : Status::ok();
        if (!flushed) st = flushed;
    }
    return st;
}

// Polls until the last messages have left, asking every kLivenessPeriod
// whether a peer died (the transports and the bootstrap): a message to a
// dead rank would otherwise keep destroy busy until the deadline, which is
// NNPCCL_TIMEOUT away. At the deadline the transports' flush names the
// peers that did not take theirs.
Status Engine::drain_sends(const Deadline &deadline) {
    Clock::time_point last_check = Clock::now();
    while (sends_pending() && !deadline.passed()) {
        for (Transport *t : transports_) t->poll();
        const Clock::time_point now = Clock::now();
        if (now - last_check >= kLivenessPeriod) {
            last_check = now;
            if (Status peers = check_peers(); !peers) return peers;
        }
        std::this_thread::yield();
    }
    return Status::ok();
}

Status Engine::failure() const {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    return failure_;
}

void Engine::finish(const std::shared_ptr<Operation> &op, const Status &result) {
    if (result && op->on_success)
        op->on_success(std::chrono::duration<double, std::micro>(Clock::now() - op->started).count());
    {
        std::lock_guard<std::mutex> lock(op->mutex);
        op->result = result;
        op->done.store(true, std::memory_order_release);
    }
    op->finished.notify_all();
}

// Caller holds drive_lock_, so no operation's buffers are in use while
// their operations are failed.
void Engine::fail_locked_queue(const Status &why) {
    std::deque<std::shared_ptr<Operation>> doomed;
    bool first = false;
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        if (!failed_.load()) {
            failure_ = why;
            failed_.store(true);
            first = true;
            LOG_WARN("communicator failed: %s", why.message().c_str());
        }
        doomed.swap(queue_);
        queued_.store(0, std::memory_order_release);
    }
    for (Transport *t : transports_) t->announce_abort(failure());
    // The peers hear why before a transport drops its connections (ofi's
    // forget_caller_memory() closes the endpoint), which they would
    // otherwise take for this rank's own failure.
    if (first && failure_hook_) failure_hook_(why);
    // The doomed operations' callers may free their buffers once told.
    for (Transport *t : transports_) t->forget_caller_memory();
    Status reason = failure();
    for (auto &op : doomed) finish(op, reason);
}

void Engine::abort(const Status &why) {
    bool first = false;
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        if (!failed_.load()) {
            failure_ = why;
            failed_.store(true);
            first = true;
        }
    }
    for (Transport *t : transports_) t->announce_abort(failure());
    if (first && failure_hook_) failure_hook_(why);
    // With nobody driving, fail the queue here. Otherwise leave it to the
    // driver, which checks failed_ on every turn (at most a sleep slice
    // apart): a queued operation always has one, its blocking caller or the
    // progress thread, so waiting here for the drive lock would only wait
    // for that.
    std::unique_lock<DriveLock> driving(drive_lock_, std::try_to_lock);
    if (driving.owns_lock()) fail_locked_queue(why);
    queue_changed_.notify_all();
}

// The transports first: where one sees a peer's death directly (shm's
// process handles) it names it more precisely than the bootstrap can.
Status Engine::check_peers(bool between_calls) {
    for (Transport *t : transports_)
        if (Status peers = t->check_peers(); !peers) return peers;
    return job_check_ ? job_check_(between_calls) : Status::ok();
}

void Engine::check_peers_between_calls() {
    if (failed_.load()) return;
    const int64_t now = Clock::now().time_since_epoch().count();
    int64_t last = last_check_between_calls_ticks_.load(std::memory_order_relaxed);
    const int64_t period = std::chrono::duration_cast<Clock::duration>(kLivenessPeriod).count();
    if (now - last < period || !last_check_between_calls_ticks_.compare_exchange_strong(last, now)) return;
    std::unique_lock<DriveLock> driving(drive_lock_, std::try_to_lock);
    if (!driving.owns_lock() || failed_.load()) return;
    if (Status peers = check_peers(true); !peers) fail_locked_queue(peers);
}

uint64_t Engine::event_count() const {
    uint64_t sum = 0;
    for (Transport *t : transports_) sum += t->event_count();
    return sum;
}

bool Engine::check_waiting(Clock::time_point now, IdleSpell &idle, const OperationName &name, const ScheduleRun *run) {
    Status peers = check_peers();
    if (!peers) {
        fail_locked_queue(Status(peers.code(), name.text() + ": " + peers.message()));
        return false;
    }
    // A peer that left cleanly had finished every call it made, so a run
    // still waiting on it waits for something that never comes. Seen at
    // two checks in a row, with no progress between: the run has tried its
    // steps since the transport first said so, and still waits on it.
    const int departed = run != nullptr ? run->waiting_on_departed() : -1;
    if (departed >= 0 && departed == idle.departed) {
        fail_locked_queue(remote_error("%s: rank %d has left: it destroyed its communicator while this call "
                                       "still needs it (waiting for %s)",
                                       name.text().c_str(), departed, run->blocked_on().c_str()));
        return false;
    }
    idle.departed = departed;
    if (now - idle.since >= std::chrono::seconds(timeout_sec_)) {
        // The peer this rank waits on may itself be waiting on the one
        // at fault; a peer that has stopped showing signs of life names it.
        const auto quiet =
            std::min<std::chrono::milliseconds>(std::chrono::seconds(1), std::chrono::milliseconds(timeout_sec_ * 500));
        // Over sockets a rank sees the signs of life of its partners
        // only. Waiting on a partner as stuck as itself, it names no one;
        // the partner, whose own timeout comes at the same moment, may
        // name the stopped rank, and its failure reaches this rank
        // through check_peers above. Who is silent is asked once, at the
        // deadline: a partner that falls silent in the grace has most
        // likely failed, and is not the one to blame.
        std::string silent;
        if (!idle.naming_grace)
            for (Transport *t : transports_)
                if (std::string s = t->silent_peers(quiet); !s.empty()) silent += (silent.empty() ? "" : ", ") + s;
        idle.naming_grace = silent.empty();
        if (!silent.empty() || now - idle.since >= std::chrono::seconds(timeout_sec_) + kNamingGrace) {
            fail_locked_queue(timeout_error(
                "%s: no progress for %d s (NNPCCL_TIMEOUT) while waiting for %s%s%s", name.text().c_str(), timeout_sec_,
                run != nullptr ? run->blocked_on().c_str() : "its turn", silent.empty() ? "" : "; ", silent.c_str()));
            return false;
        }
    }
    return true;
}

bool Engine::idle_wait(uint64_t seen, IdleSpell &idle, const OperationName &name, const ScheduleRun *run) {
    if (!idle.active) {
        idle.active = true;
        idle.quick_polls = 0;
        idle.naming_grace = false;
        idle.departed = -1;
        idle.since = Clock::time_point{};
    }
    // A spinning spell's first polls leave the clock alone: a small call's
    // answer usually lands within them, and reading the clock (tens of ns
    // under a hypervisor) would only delay noticing it.
    if (spin_us_ > 0 && idle.quick_polls < kQuickPolls) {
        ++idle.quick_polls;
        cpu_relax();
        return true;
    }
    auto now = Clock::now();
    if (idle.since == Clock::time_point{}) idle.since = idle.last_check = now;
    if (now - idle.last_check >= kLivenessPeriod) {
        idle.last_check = now;
        if (!check_waiting(now, idle, name, run)) return false;
    }
    auto idle_us = std::chrono::duration_cast<std::chrono::microseconds>(now - idle.since).count();
    if (idle_us < spin_us_) {
        cpu_relax(); // one pause: tens of ns on recent cores, so a wait ends soon after its answer lands
    } else if (idle_us < spin_us_ + yield_us_) {
        sched_yield();
    } else if (transports_.size() == 1) {
        transports_[0]->wait_for_event(seen, kSleepSliceMs);
    } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return true;
}

std::string OperationName::text() const {
    std::string text;
    if (is_point_to_point(collective))
        text = format("%s #%llu %s rank %d (%zu x %s)", collective_name(collective),
                      static_cast<unsigned long long>(sequence), collective == Collective::Send ? "to" : "from", peer,
                      count, datatype_name(datatype));
    else if (collective == Collective::Barrier)
        text = format("barrier #%llu", static_cast<unsigned long long>(sequence));
    else
        text = format("%s #%llu (%zu x %s%s%s%s%s)", collective_name(collective),
                      static_cast<unsigned long long>(sequence), count, datatype_name(datatype),
                      reduces(collective) ? ", " : "", reduces(collective) ? redop_name(op) : "",
                      has_root(collective) ? format(", root %d", peer).c_str() : "", in_place ? ", in place" : "");
    return context.empty() ? text : context + " (" + text + ")";
}

bool PointToPoint::orders(const PointToPoint &later) const {
    if (!active || !later.active) return true;
    if (peer == later.peer && sends == later.sends) return true;
    if (begin == end || later.begin == later.end) return false; // an empty buffer touches nothing
    const bool overlap = begin < later.end && later.begin < end;
    return overlap && !(sends && later.sends);
}

Status Engine::advance_front(size_t *progressed, std::shared_ptr<Operation> *front) {
    // Every pending send and recv up to the first collective is a
    // candidate, however many a rank posts before it waits (an alltoall
    // written as isends to everyone, then irecvs from everyone): a cap on
    // the window would leave a recv the peer's sends need out of it.
    std::vector<std::shared_ptr<Operation>> &window = window_;
    window.clear();
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        for (const auto &op : queue_) {
            // A collective runs alone: behind a send or recv it waits, and
            // nothing behind it starts before it has finished.
            if (!window.empty() && !op->p2p.active) break;
            window.push_back(op);
            if (!op->p2p.active) break;
        }
    }
    // Only the first unfinished operation of each stream (peer and
    // direction) may run; it alone is checked against every earlier
    // unfinished one for overlapping buffers. Cost per turn: O(n) for n
    // pending, plus O(n) for each of at most 2p stream heads.
    std::vector<char> &stream_busy = stream_busy_;
    stream_busy.assign(stream_busy.size(), 0);
    *progressed = 0;
    for (size_t i = 0; i < window.size(); ++i) {
        Operation &op = *window[i];
        if (op.run == nullptr) {
            // Only a collective is prepared late, and it heads the window.
            Status st = op.prepare ? op.prepare(op) : internal_error("%s has nothing to run", op.description().c_str());
            if (!st) {
                fail_locked_queue(Status(st.code(), op.description() + ": " + st.message()));
                window.clear();
                return st;
            }
        }
        if (op.on_success && op.started == Clock::time_point{}) op.started = Clock::now();
        if (op.run->finished()) continue;
        bool held = false;
        if (op.p2p.active) {
            const size_t stream = 2 * static_cast<size_t>(op.p2p.peer) + (op.p2p.sends ? 1 : 0);
            if (stream >= stream_busy.size()) stream_busy.resize(stream + 1, 0);
            held = stream_busy[stream] != 0;
            stream_busy[stream] = 1;
        }
        for (size_t j = 0; j < i && !held; ++j)
            held = !window[j]->run->finished() && window[j]->p2p.orders(op.p2p);
        if (held) continue;
        size_t steps = 0;
        Status st = op.run->advance(&steps);
        *progressed += steps;
        if (!st) {
            fail_locked_queue(Status(st.code(), op.description() + ": " + st.message()));
            window.clear();
            return st;
        }
    }
    window.clear(); // holds no operation past its run
    // Finished in issue order: a request is done only when all before it are.
    front->reset();
    while (true) {
        std::shared_ptr<Operation> done;
        {
            std::lock_guard<std::mutex> lock(queue_mutex_);
            if (queue_.empty()) return Status::ok();
            if (queue_.front()->run == nullptr || !queue_.front()->run->finished()) {
                *front = queue_.front();
                return Status::ok();
            }
            done = queue_.front();
            queue_.pop_front();
            queued_.store(queue_.size(), std::memory_order_release);
        }
        finish(done, Status::ok());
        ++*progressed;
    }
}

void Engine::drive(Operation *target) {
    IdleSpell idle;
    while (true) {
        std::shared_ptr<Operation> op;
        {
            std::lock_guard<std::mutex> lock(queue_mutex_);
            if (!queue_.empty()) op = queue_.front();
        }
        if (op == nullptr || (target != nullptr && target->done.load(std::memory_order_acquire))) {
            if (op == nullptr) hand_over_pending_sends();
            return;
        }
        if (stop_driving()) return;
        uint64_t seen = event_count();
        for (Transport *t : transports_) t->poll();
        size_t progressed = 0;
        std::shared_ptr<Operation> blocked;
        if (!advance_front(&progressed, &blocked)) return; // the queue has failed
        if (blocked == nullptr || progressed > 0) {
            idle.active = false;
            continue;
        }
        if (!idle_wait(seen, idle, blocked->name, blocked->run.get())) return;
    }
}

void Engine::progress_thread_main() {
    std::unique_lock<std::mutex> lock(queue_mutex_);
    while (true) {
        queue_changed_.wait(lock, [this] { return stopping_ || !queue_.empty() || sends_pending_; });
        if (stopping_) return;
        sends_pending_ = false;
        lock.unlock();
        {
            std::lock_guard<DriveLock> driving(drive_lock_);
            drive(nullptr);
        }
        finish_pending_sends();
        lock.lock();
    }
}

} // namespace nnpccl
