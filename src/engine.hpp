// The progress engine of one communicator: a queue of operations run in
// issue order, except that sends and receives pending together run side by
// side where they use different streams and buffers (two ranks that post a
// send to each other and then a receive must not wait for each other's
// send to finish first); operations still finish in issue order. Whoever
// waits drives: a blocking call or nnpccl_wait runs the executor on the
// caller's thread; operations nobody waits for are driven by
// a progress thread that exists only once a nonblocking call was made. So
// the runtime progresses itself, and blocking calls pay no thread hand-off.
//
// A rank whose last operation left messages in flight (a provider that
// needs progress calls to move them) hands them to the progress thread,
// which polls until they are gone, so a peer never waits for this rank's
// next call.
//
// Waiting for peers: spin for NNPCCL_SPIN_US (default: the transports' own
// hint, 20 µs for shm and 250 µs for ofi, when there are at least as many
// cores as local ranks, else 0), yield a few times, then sleep on the
// transport's doorbell or completion queue. While waiting, peers' liveness is
// checked every 100 ms, and no progress for NNPCCL_TIMEOUT seconds ends the
// operation with NNPCCL_ERR_TIMEOUT naming the peer and step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deadline.hpp"
#include "drive_lock.hpp"
#include "executor.hpp"
#include "scratch_pool.hpp"

namespace nnpccl {

// A send or recv: the one stream and the one buffer it uses, which tell
// whether it may run beside other pending sends and receives.
struct PointToPoint {
    bool active = false; // false for collectives
    int peer = -1;
    bool sends = false;
    const char *begin = nullptr; // its buffer, [begin, end)
    const char *end = nullptr;

    // Whether `later` must wait for this one (issued earlier, unfinished):
    // both are not sends and receives, or they share a stream (messages on a
    // stream belong to operations in issue order), or one writes where the
    // other reads or writes.
    bool orders(const PointToPoint &later) const;
};

// What names an operation in errors: "allreduce #12 (1024 x float, sum)".
// Kept as fields and formatted only when a message needs it, since a
// string made on every call costs as much as a small call itself.
struct OperationName {
    Collective collective = Collective::Barrier;
    uint64_t sequence = 0;
    size_t count = 0;
    nnpccl_datatype_t datatype = NNPCCL_UINT8;
    nnpccl_redop_t op = NNPCCL_SUM;
    int peer = -1; // a send's or recv's, or a rooted collective's root
    bool in_place = false;
    std::string context; // "the tuner's agreement on ...": said before the call, where set
    std::string text() const;
    static OperationName of(const Call &call, uint64_t sequence) {
        OperationName name;
        name.collective = call.collective;
        name.sequence = sequence;
        name.count = call.count;
        name.datatype = call.datatype;
        name.op = call.op;
        name.peer = call.root;
        name.in_place = call.in_place;
        return name;
    }
};

struct Operation {
    OperationName name;
    std::string description() const { return name.text(); }
    PointToPoint p2p;
    std::unique_ptr<ScheduleRun> run;
    // The schedule's scratch buffer, when it has one, from the
    // communicator's pool. Not zeroed: every builder writes its scratch
    // before reading it (the schedule simulation fills scratch with garbage
    // to catch one that does not), and zeroing a buffer as large as the
    // call on every call would be one more pass over memory.
    ScratchPool::Lease scratch;

    // Set for a collective whose algorithm is only known once the ones
    // ahead of it have run (measured tuning, src/tuner.hpp): makes `run`
    // when the operation reaches the front of the queue.
    std::function<Status(Operation &)> prepare;
    // Called, when the operation succeeds, with its time in µs from its
    // first step to its end.
    std::function<void(double)> on_success;
    Clock::time_point started{};

    std::atomic<bool> done{false};
    Status result; // valid once done
    std::mutex mutex;
    std::condition_variable finished;
};

class Engine {
public:
    Engine(std::vector<Transport *> transports, int timeout_sec, int spin_us, int local_ranks);
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    // Queues an operation; with `background` the progress thread drives it.
    void submit(const std::shared_ptr<Operation> &op, bool background);
    // Drives until `op` has finished; returns its result.
    Status wait(Operation &op);
    // The drive lock as the short way holds it: let go at the end of its scope.
    class ShortDrive {
    public:
        ShortDrive() = default;
        ~ShortDrive() { release(); }
        ShortDrive(const ShortDrive &) = delete;
        ShortDrive &operator=(const ShortDrive &) = delete;
        void release() {
            if (lock_ != nullptr) lock_->leave(how_);
            lock_ = nullptr;
        }

    private:
        friend class Engine;
        DriveLock *lock_ = nullptr;
        DriveLock::Held how_ = DriveLock::Held::No;
    };
    // The short way for a blocking call: where nothing is queued and no
    // thread drives, takes the drive lock into `driving` and returns true;
    // the caller then runs its call with run_alone() before it lets go.
    bool try_drive_alone(ShortDrive *driving);
    // Runs `run` on the caller's thread to its end, as drive() would run it
    // at the front of an empty queue, but with no Operation and no queue.
    // Caller holds the lock try_drive_alone() gave it.
    Status run_alone(ScheduleRun &run, const OperationName &name);
    // Destroy's end of the engine: drives until the queue is empty, stops the
    // progress thread, then waits (until `deadline`) for the last messages
    // to leave every transport. The flush runs under the drive lock with no
    // progress thread left, since no transport may be driven by two
    // threads at once.
    Status close(const Deadline &deadline);
    // Fails every queued and future operation with `why` and tells peers.
    // Safe from any thread.
    void abort(const Status &why);
    // Async-signal-safe (nnpccl_comm_abort from a signal handler that
    // interrupted a call of this engine's thread): only marks the engine.
    // Whoever drives fails the queue with the reason set_abort_reason()
    // gave at its next turn (a sleep slice at most), and tells the peers.
    void request_abort() { abort_requested_.store(true, std::memory_order_relaxed); }
    void set_abort_reason(const Status &why) { abort_reason_ = why; }
    // The error that failed the engine, or ok.
    Status failure() const;
    bool failed() const { return failed_.load(); }
    // Whether no operation waits in the queue (one being driven may still run).
    bool idle() const { return queued_.load(std::memory_order_acquire) == 0; }
    // Checked with the transports' own liveness every 100 ms while waiting
    // (the rendezvous root's reports of dead ranks); its argument says the
    // check is check_peers_between_calls'.
    void set_job_check(std::function<Status(bool between_calls)> check) { job_check_ = std::move(check); }
    // For nnpccl_comm_get_async_error: a communicator that makes no call
    // would otherwise hear of a dead or aborted peer only at its next call.
    // Runs the liveness checks a waiting call makes, at most once per
    // liveness period and only when no thread drives (a driver makes them
    // itself), and fails the communicator as a call would if one fails.
    void check_peers_between_calls();
    // Called once when this engine fails (to tell the rest of the job why).
    void set_failure_hook(std::function<void(const Status &)> hook) { failure_hook_ = std::move(hook); }

private:
    void drive(Operation *target);
    // Runs what can run of the operations at the front of the queue: the
    // first, and the sends and receives behind it that nothing ahead of
    // them orders. Finished ones at the front are taken off and finished;
    // *front gets the first unfinished one (null when none is left).
    Status advance_front(size_t *progressed, std::shared_ptr<Operation> *front);
    void finish(const std::shared_ptr<Operation> &op, const Status &result);
    void fail_locked_queue(const Status &why);
    // A driver's time without progress: since when, and the last liveness check.
    struct IdleSpell {
        bool active = false; // the driver clears it whenever something moves
        unsigned quick_polls = 0; // polls of this spell before it read the clock
        bool naming_grace = false; // timed out naming no one: waiting for a peer's report (idle_wait)
        int departed = -1;         // a peer that had left, which the run waited on at the last liveness check
        Clock::time_point since{}, last_check{};
    };
    // One turn of waiting for the blocked `run` (of the operation `name`),
    // starting `idle` if it is not active: spin, yield or sleep; false once
    // it has failed the queue (liveness, NNPCCL_TIMEOUT).
    bool idle_wait(uint64_t seen, IdleSpell &idle, const OperationName &name, const ScheduleRun *run);
    // The liveness check of a wait: peers that died or failed, a peer that
    // left while the run still needs it, NNPCCL_TIMEOUT. Fails the queue
    // and returns false when the wait is over.
    bool check_waiting(Clock::time_point now, IdleSpell &idle, const OperationName &name, const ScheduleRun *run);
    uint64_t event_count() const;
    void progress_thread_main();
    bool sends_pending() const;
    void ensure_progress_thread(); // caller holds queue_mutex_
    // Polls while messages are still leaving and no operation is queued.
    void finish_pending_sends();
    // close()'s wait for the last messages to leave, with liveness checks.
    Status drain_sends(const Deadline &deadline);
    // End of a drive with the queue empty: leaves sends still in flight to
    // the progress thread. Caller holds drive_lock_.
    void hand_over_pending_sends();

    std::vector<Transport *> transports_;
    std::function<Status(bool)> job_check_;
    // The peers' liveness, as the transports and the bootstrap see it.
    Status check_peers(bool between_calls = false);
    std::atomic<int64_t> last_check_between_calls_ticks_{0}; // Clock ticks since its epoch
    std::function<void(const Status &)> failure_hook_;
    int timeout_sec_;
    int spin_us_;
    int yield_us_; // after the spin: yielding the core, before sleeping

    mutable std::mutex queue_mutex_;
    std::deque<std::shared_ptr<Operation>> queue_;
    std::atomic<size_t> queued_{0}; // queue_.size(), readable without the lock
    std::condition_variable queue_changed_;
    DriveLock drive_lock_; // held by whichever thread drives
    // advance_front's operations, kept to spare the driving loop an allocation per turn.
    std::vector<std::shared_ptr<Operation>> window_;
    std::vector<char> stream_busy_; // by 2*peer + (sends ? 1 : 0), reused each turn
    std::thread progress_thread_;
    bool stopping_ = false;
    bool sends_pending_ = false; // set by a driver that left messages in flight

    std::atomic<bool> failed_{false};
    Status failure_; // under queue_mutex_
    std::atomic<bool> abort_requested_{false};
    Status abort_reason_; // set at init
    // A driver's check on every turn: failed, or an abort was requested.
    // Caller holds drive_lock_; fails the queue if either.
    bool stop_driving() {
        if (!failed_.load() && !abort_requested_.load(std::memory_order_relaxed)) return false;
        fail_locked_queue(failed_.load() ? failure() : abort_reason_);
        return true;
    }
};

} // namespace nnpccl
