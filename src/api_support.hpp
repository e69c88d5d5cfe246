// What every C API entry point shares (api.cpp, inspect.cpp): finding and
// holding a live communicator for the length of a call, and reporting a
// failure where nnpccl_get_last_error will find it.
#pragma once

#include <mutex>
#include <string>
#include <unordered_set>

#include "comm.hpp"
#include "status.hpp"

namespace nnpccl {

// Returns st's code; a failure's message goes to the communicator, or to
// this thread's last error when there is none.
nnpccl_result_t report(nnpccl_comm *comm, const Status &st);
// This thread's last error of a call that had no communicator.
const std::string &thread_last_error();

#define NNPCCL_TRY_REPORT(comm, expr)                                                                             \
    do {                                                                                                          \
        ::nnpccl::Status try_status_ = (expr);                                                                    \
        if (!try_status_.is_ok()) return ::nnpccl::report((comm), try_status_);                                           \
    } while (0)

// The communicators created and not yet destroyed or aborted. A call finds
// its handle here and holds it (active_calls) under the same lock, and
// abort/destroy take the handle out before waiting for the holders to leave.
// So a call that races with abort on another thread (a thread polling
// nnpccl_comm_get_async_error, say) either finishes before the free or finds
// the handle gone: it never touches freed memory, and a stale or garbage
// handle is refused without being dereferenced.
class LiveComms {
public:
    void add(nnpccl_comm *comm) {
        std::lock_guard<std::mutex> lock(mutex_);
        live_.insert(comm);
    }
    void remove(nnpccl_comm *comm) {
        std::lock_guard<std::mutex> lock(mutex_);
        live_.erase(comm);
    }
    // True, with one more active call on it, when comm is live.
    bool hold(nnpccl_comm *comm) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (live_.count(comm) == 0) return false;
        comm->active_calls.fetch_add(1);
        return true;
    }

private:
    std::mutex mutex_;
    std::unordered_set<const nnpccl_comm *> live_;
};

LiveComms &live_comms();

// Holds the communicator alive for the length of one API call.
class CallGuard {
public:
    explicit CallGuard(nnpccl_comm *comm) : asked_(comm), held_(live_comms().hold(comm) ? comm : nullptr) {}
    ~CallGuard() { release(); }
    CallGuard(const CallGuard &) = delete;
    CallGuard &operator=(const CallGuard &) = delete;

    bool held() const { return held_ != nullptr; }
    // Ends the hold early: abort and destroy, before they free the communicator.
    void release() {
        if (held_ != nullptr) held_->active_calls.fetch_sub(1);
        held_ = nullptr;
    }
    // Whether the handle names a live communicator (report failures with no communicator).
    Status check_live() const {
        if (asked_ == nullptr) return invalid_argument("comm is NULL");
        if (held_ == nullptr) return invalid_argument("comm is not a live communicator (destroyed, aborted or corrupt)");
        return Status::ok();
    }
    // Whether it may still start work (report failures on the communicator).
    Status check_open() const {
        return held_->closing.load() ? invalid_usage("the communicator is being destroyed or aborted") : Status::ok();
    }

private:
    nnpccl_comm *asked_;
    nnpccl_comm *held_;
};

// Frees the communicator once no other thread is inside a call on it. The
// caller has released its own hold.
void free_comm(nnpccl_comm *comm);

// Calls that need the built communicator are refused, without waiting,
// while a nonblocking init is still building it and after that init failed.
Status check_ready(const nnpccl_comm *comm);

} // namespace nnpccl
