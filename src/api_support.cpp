#include "api_support.hpp"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace nnpccl {

namespace {

thread_local std::string t_last_error;
// When set, this thread's last error instead of t_last_error: a static
// text a signal handler's call reported (a plain thread-local pointer, so
// that setting it neither allocates nor runs a thread_local's guard).
__thread const char *t_static_error = nullptr;

void set_thread_error(const std::string &message) {
    t_static_error = nullptr;
    t_last_error = message;
}

} // namespace

nnpccl_result_t report(nnpccl_comm *comm, const Status &st) {
    if (!st.is_ok()) {
        if (comm != nullptr) comm->set_last_error(st.message());
        else
            set_thread_error(st.message());
    }
    return st.code();
}

const char *thread_last_error() { return t_static_error != nullptr ? t_static_error : t_last_error.c_str(); }

nnpccl_result_t report_static(nnpccl_result_t code, const char *text) {
    t_static_error = text;
    return code;
}

std::atomic<pid_t> g_process_id{getpid()};

namespace {

// Registered once as the library loads. The registry's lock is held
// across the fork, so the child's copy is free and the registry whole.
struct ForkWatch {
    ForkWatch() {
        pthread_atfork([] { live_comms().lock_for_fork(); }, [] { live_comms().unlock_after_fork(); },
                       [] {
                           g_process_id.store(getpid(), std::memory_order_relaxed);
                           live_comms().unlock_after_fork();
                       });
    }
} fork_watch;

} // namespace

nnpccl_result_t report_forked(pid_t creator) {
    set_thread_error(format("communicator created by pid %d used in pid %d; communicators do not survive fork(): the "
                            "child must create its own (the parent's is unaffected)",
                            static_cast<int>(creator), static_cast<int>(getpid())));
    return NNPCCL_ERR_INVALID_USAGE;
}

__thread LiveComms::Slot *t_live_slot = nullptr;

namespace {

// A thread's claim on its slot, given back when the thread exits. Touched
// only when the thread takes the slot.
struct SlotClaim {
    LiveComms::Slot *slot = nullptr;
    ~SlotClaim() {
        if (slot == nullptr) return;
        t_live_slot = nullptr;
        slot->known = nullptr;
        slot->aborted_by_handler.store(nullptr, std::memory_order_relaxed);
        slot->taken.store(false, std::memory_order_release);
    }
};
thread_local SlotClaim t_slot_claim;

} // namespace

LiveComms::LiveComms() : fence_(AsymmetricFence::process()) {}

LiveComms::Slot &LiveComms::this_thread_slot() { return t_live_slot != nullptr ? *t_live_slot : claim_slot(); }

LiveComms::Slot &LiveComms::claim_slot() {
    Slot *claimed = nullptr;
    for (Slot *s = slots_.load(std::memory_order_acquire); s != nullptr && claimed == nullptr; s = s->next) {
        bool free = false;
        if (s->taken.compare_exchange_strong(free, true)) claimed = s;
    }
    if (claimed == nullptr) {
        claimed = new Slot; // never freed: see Slot
        claimed->taken.store(true, std::memory_order_relaxed);
        claimed->next = slots_.load(std::memory_order_relaxed);
        while (!slots_.compare_exchange_weak(claimed->next, claimed, std::memory_order_release,
                                             std::memory_order_relaxed)) {
        }
    }
    t_slot_claim.slot = claimed;
    t_live_slot = claimed;
    return *claimed;
}

// Between a holder's store of its slot and its load of the removal count,
// against remove()'s count and its reads of the slots: Dekker's pattern
// (src/asymmetric_fence.hpp).
void LiveComms::hold_fence() const { fence_.light(); }

void LiveComms::add(nnpccl_comm *comm) {
    // A handler's abort of a communicator freed at this address is no
    // longer about this one.
    for (Slot *s = slots_.load(std::memory_order_acquire); s != nullptr; s = s->next) {
        const nnpccl_comm *freed = comm;
        s->aborted_by_handler.compare_exchange_strong(freed, nullptr, std::memory_order_relaxed);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    live_.insert(comm);
}

LiveComms::Hold LiveComms::hold_slow(nnpccl_comm *comm) {
    Hold how;
    if (comm == nullptr) return how;
    Slot &slot = this_thread_slot();
    if (slot.held.load(std::memory_order_relaxed) == nullptr) {
        slot.held.store(comm, std::memory_order_relaxed);
        hold_fence();
        const uint64_t removals = removals_.load(std::memory_order_acquire);
        how.slot = &slot;
        if (comm == slot.known && removals == slot.known_removals) return how;
        // Live now, with no removal since `removals` was read: a later
        // removal changes the count, and the next hold looks again.
        std::lock_guard<std::mutex> lock(mutex_);
        if (live_.count(comm) != 0) {
            slot.known = comm;
            slot.known_removals = removals;
            return how;
        }
        slot.held.store(nullptr, std::memory_order_release);
        return Hold{};
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (live_.count(comm) == 0) return Hold{};
    comm->call_entered();
    how.counted = true;
    return how;
}

bool LiveComms::held_anywhere(const nnpccl_comm *comm) const {
    for (const Slot *s = slots_.load(std::memory_order_acquire); s != nullptr; s = s->next)
        if (s->held.load(std::memory_order_acquire) == comm) return true;
    return false;
}

void LiveComms::remove(nnpccl_comm *comm) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        live_.erase(comm);
        removals_.fetch_add(1);
    }
    fence_.heavy();
    while (held_anywhere(comm) || comm->calls_inside()) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

void free_comm(nnpccl_comm *comm) {
    live_comms().remove(comm);
    delete comm;
}

bool abort_from_interrupted_call(nnpccl_comm *comm) {
    LiveComms::Slot *slot = t_live_slot;
    if (comm == nullptr || slot == nullptr || slot->held.load(std::memory_order_relaxed) != comm) return false;
    // Held by this thread, so live. A destroy or abort already under way
    // frees it itself; this only makes its waits end.
    if (comm->begin_closing()) {
        slot->handler_abort_freed.store(false, std::memory_order_relaxed);
        slot->aborted_by_handler.store(comm, std::memory_order_relaxed);
        slot->abort_on_return.store(comm, std::memory_order_relaxed);
    }
    comm->request_abort();
    return true;
}

void finish_abort_on_return(LiveComms::Slot &slot) {
    nnpccl_comm *comm = slot.abort_on_return.exchange(nullptr, std::memory_order_relaxed);
    if (comm == nullptr) return;
    comm->stop_init();
    comm->abort(
        remote_error("rank %d aborted the communicator (nnpccl_comm_abort, from a signal handler)", comm->rank()));
    // The caller can no longer ask the communicator why its call failed:
    // nnpccl_get_last_error(NULL), or with the stale handle, tells it.
    if (std::string why = comm->last_error_copy(); !why.empty()) set_thread_error(why);
    free_comm(comm);
    slot.handler_abort_freed.store(true, std::memory_order_relaxed);
}

bool refuse_repeated_handler_abort(const nnpccl_comm *comm, nnpccl_result_t *result) {
    const LiveComms::Slot *slot = t_live_slot;
    if (comm == nullptr || slot == nullptr || slot->aborted_by_handler.load(std::memory_order_relaxed) != comm)
        return false;
    *result = slot->handler_abort_freed.load(std::memory_order_relaxed)
                  ? report_static(NNPCCL_ERR_INVALID_ARGUMENT,
                                  "comm was aborted by a signal handler and freed as the call it interrupted returned")
                  : report_static(NNPCCL_ERR_INVALID_USAGE,
                                  "comm is already being aborted (by a signal handler, as the call it interrupted "
                                  "returns)");
    return true;
}

Status not_ready(const nnpccl_comm *comm) {
    switch (comm->init_state()) {
    case nnpccl_comm::InitState::Ready: return Status::ok();
    case nnpccl_comm::InitState::Running:
        return invalid_usage("the communicator is still initializing (nonblocking init): poll "
                             "nnpccl_comm_get_async_error until it gives NNPCCL_SUCCESS before using it");
    case nnpccl_comm::InitState::Failed: break;
    }
    return invalid_usage("the communicator's nonblocking init failed, so it can only be destroyed or aborted: %s",
                         comm->init_failure().message().c_str());
}


} // namespace nnpccl
