// What every C API entry point shares (api.cpp, inspect.cpp): finding and
// holding a live communicator for the length of a call, and reporting a
// failure where nnpccl_get_last_error will find it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>

#include "asymmetric_fence.hpp"
#include "comm.hpp"
#include "status.hpp"

namespace nnpccl {

// This process's id, refreshed in a fork's child (pthread_atfork), so that
// asking costs a load rather than a getpid() system call per call.
extern std::atomic<pid_t> g_process_id;
// A communicator is its creator's: a fork's child shares its sockets,
// shared memory and futexes, and one use there would send the child's data
// into the parent's job or wake the parent's peers. Every call in the
// child fails with forked_error(), touching nothing the two share (not
// even the communicator's locks, which a parent thread may have held at
// the fork); destroy and abort there free nothing either.
inline bool used_after_fork(const nnpccl_comm *comm) {
    return comm->creator_pid() != g_process_id.load(std::memory_order_relaxed);
}
inline bool made_before_fork(pid_t creator) { return creator != g_process_id.load(std::memory_order_relaxed); }
// NNPCCL_ERR_INVALID_USAGE naming both processes, reported as this
// thread's last error (never the communicator's: see above).
nnpccl_result_t report_forked(pid_t creator);
inline nnpccl_result_t report_forked(const nnpccl_comm *comm) { return report_forked(comm->creator_pid()); }

// Returns st's code; a failure's message goes to the communicator, or to
// this thread's last error when there is none.
nnpccl_result_t report(nnpccl_comm *comm, const Status &st);
// This thread's last error of a call that had no communicator.
const char *thread_last_error();
// Sets it to a static text without allocating: what a signal handler's
// abort reports (see LiveComms::Slot::aborted_by_handler).
nnpccl_result_t report_static(nnpccl_result_t code, const char *text);

#define NNPCCL_TRY_REPORT(comm, expr)                                                                             \
    do {                                                                                                          \
        ::nnpccl::Status try_status_ = (expr);                                                                    \
        if (!try_status_.is_ok()) return ::nnpccl::report((comm), try_status_);                                           \
    } while (0)

// The communicators created and not yet destroyed or aborted. A call finds
// its handle here and holds it for its length; abort and destroy take the
// handle out, then wait for the holders to leave. So a call that races with
// abort on another thread (a thread polling nnpccl_comm_get_async_error,
// say) either finishes before the free or finds the handle gone: it never
// touches freed memory, and a stale or garbage handle is refused without
// being dereferenced.
//
// A hold takes no lock and no read-modify-write when the thread holds the
// communicator it held last, as a training loop does: a locked instruction
// waits for the call's earlier stores to leave the core, and a collective's
// last store is into a line the peer is reading, so a locked instruction
// per call exposed a transfer between cores on every small call. Instead
// the thread publishes the handle in a slot of its own, then reads how many
// handles have been removed; if none was since it last found this one under
// the lock, the handle is live. remove() counts the removal, fences, then
// waits while any slot holds the handle: the fences keep the two sides
// from missing each other (src/asymmetric_fence.hpp). Nested holds on one thread
// (not made by the API today) count in the communicator (call_entered) under the
// lock instead.
class LiveComms {
public:
    LiveComms();
    void add(nnpccl_comm *comm);
    // Takes the handle out; returns once no call holds it.
    void remove(nnpccl_comm *comm);

    struct Slot;
    // How one call holds its communicator: in this thread's slot, counted
    // in it, or not at all (it is not live).
    struct Hold {
        Slot *slot = nullptr;
        bool counted = false;
        bool held() const { return slot != nullptr || counted; }
    };
    // Inline: the common hold, of the communicator this thread held last
    // with no removal since, is a few loads and one store.
    inline Hold hold(nnpccl_comm *comm);
    void release(nnpccl_comm *comm, const Hold &how) {
        if (how.slot != nullptr) how.slot->held.store(nullptr, std::memory_order_release);
        else if (how.counted)
            comm->call_left();
    }

    // A thread's slot: the handle it holds (null between calls), and the
    // handle it last found live with the removal count it saw then. Slots
    // are never freed: remove() may read a slot whose thread has exited.
    struct Slot {
        std::atomic<const nnpccl_comm *> held{nullptr};
        std::atomic<bool> taken{false};
        Slot *next = nullptr; // fixed once the slot is in the list
        const nnpccl_comm *known = nullptr;
        uint64_t known_removals = 0;
        // Set by nnpccl_comm_abort in a signal handler that interrupted
        // this thread's call on that communicator: the call frees it as it
        // returns (CallGuard).
        std::atomic<nnpccl_comm *> abort_on_return{nullptr};
        // The communicator such an abort marked, kept (compared, never
        // read through) after the call freed it, until a new communicator
        // takes its address (add()): a handler that fires again, during
        // that teardown or after it (a repeating timer), aborts it again
        // and must then be refused without a lock or an allocation, since
        // the thread it interrupted may hold either. `handler_abort_freed`
        // says whether the free has happened.
        std::atomic<const nnpccl_comm *> aborted_by_handler{nullptr};
        std::atomic<bool> handler_abort_freed{false};
    };

private:
    Hold hold_slow(nnpccl_comm *comm);
    Slot &this_thread_slot();
    Slot &claim_slot(); // this thread's first hold
    void hold_fence() const;
    bool held_anywhere(const nnpccl_comm *comm) const;

public:
    // Held across fork() (pthread_atfork), so that a fork's child finds the
    // registry whole and its lock free whatever the parent's threads were
    // doing: every call in the child looks its handle up before refusing it.
    void lock_for_fork() { mutex_.lock(); }
    void unlock_after_fork() { mutex_.unlock(); }

private:
    std::mutex mutex_;
    std::unordered_set<const nnpccl_comm *> live_; // under mutex_
    std::atomic<uint64_t> removals_{0};
    std::atomic<Slot *> slots_{nullptr};
    AsymmetricFence &fence_;
};

// This thread's slot, null until its first hold. A plain thread-local
// pointer (no guard, no constructor), so reading it takes one access.
extern __thread LiveComms::Slot *t_live_slot;

LiveComms::Hold LiveComms::hold(nnpccl_comm *comm) {
    Slot *slot = t_live_slot;
    if (slot != nullptr && comm != nullptr && comm == slot->known &&
        slot->held.load(std::memory_order_relaxed) == nullptr) {
        slot->held.store(comm, std::memory_order_relaxed);
        fence_.light();
        if (removals_.load(std::memory_order_acquire) == slot->known_removals) return Hold{slot, false};
        slot->held.store(nullptr, std::memory_order_release); // removed since: look again, under the lock
    }
    return hold_slow(comm);
}

// Never destroyed: threads may still hold or give back slots while the
// process exits. Inline: every call asks for it.
inline LiveComms &live_comms() {
    static LiveComms *registry = new LiveComms;
    return *registry;
}

void finish_abort_on_return(LiveComms::Slot &slot);

// Holds the communicator alive for the length of one API call.
class CallGuard {
public:
    explicit CallGuard(nnpccl_comm *comm) : asked_(comm), how_(live_comms().hold(comm)) {}
    ~CallGuard() {
        LiveComms::Slot *slot = how_.slot;
        release();
        if (slot != nullptr && slot->abort_on_return.load(std::memory_order_relaxed) != nullptr)
            finish_abort_on_return(*slot);
    }
    CallGuard(const CallGuard &) = delete;
    CallGuard &operator=(const CallGuard &) = delete;

    bool held() const { return how_.held(); }
    // Ends the hold early: abort and destroy, before they free the communicator.
    void release() {
        if (how_.held()) live_comms().release(asked_, how_);
        how_ = {};
    }
    // Whether the handle names a live communicator (report failures with no communicator).
    Status check_live() const {
        if (asked_ == nullptr) return invalid_argument("comm is NULL");
        if (!how_.held()) return invalid_argument("comm is not a live communicator (destroyed, aborted or corrupt)");
        return Status::ok();
    }
    // Whether it may still start work (report failures on the communicator).
    Status check_open() const {
        return asked_->closing() ? invalid_usage("the communicator is being destroyed or aborted") : Status::ok();
    }

private:
    nnpccl_comm *asked_;
    LiveComms::Hold how_;
};

// Frees the communicator once no other thread is inside a call on it. The
// caller has released its own hold.
void free_comm(nnpccl_comm *comm);
// nnpccl_comm_abort in a signal handler that interrupted a call of this
// thread on `comm`: only async-signal-safe steps (marks it closing, stops
// its init or asks its engine to fail, which wakes the interrupted wait
// within a sleep slice); the call frees it as it returns. False, doing
// nothing, when this thread holds no call on `comm`.
bool abort_from_interrupted_call(nnpccl_comm *comm);
// nnpccl_comm_abort of a communicator that a handler's abort on this
// thread marked earlier (it is being freed, or was): refused, with only
// async-signal-safe steps, into *result. False when that is not the case.
bool refuse_repeated_handler_abort(const nnpccl_comm *comm, nnpccl_result_t *result);
// The rest of that abort, once the interrupted call has let go of it.
void finish_abort_on_return(LiveComms::Slot &slot);

// Calls that need the built communicator are refused, without waiting,
// while a nonblocking init is still building it and after that init failed.
Status not_ready(const nnpccl_comm *comm); // the error, when it is not
inline Status check_ready(const nnpccl_comm *comm) { return comm->ready() ? Status::ok() : not_ready(comm); }

} // namespace nnpccl
