// The communicator's side of the C API's lifecycle calls (comm.hpp): a
// nonblocking init's thread, the errors a caller asks for, and the ends of
// a communicator (destroy's close, abort, and abort from a signal handler).
#include <system_error>
#include <utility>

#include "comm.hpp"
#include "library_threads.hpp"
#include "log.hpp"

using namespace nnpccl;

nnpccl_comm::~nnpccl_comm() {
    // After an abort the progress thread may still be driving, into the
    // trace: the engine is stopped before the trace is read. The rest goes
    // in the members' order, as without a trace.
    if (trace_ == nullptr || engine_ == nullptr || trace_->written()) return;
    engine_.reset();
    if (Status written = trace_->write(); !written) LOG_WARN("%s", written.message().c_str());
}

Status nnpccl_comm::connect_in_background(ConnectStep connect) {
    NNPCCL_TRY(init_stop_.open());
    init_state_.store(InitState::Running);
    try {
        LibraryThreadSignals blocked;
        init_thread_ = std::thread([this, connect = std::move(connect)] {
            Status result = connect(*this, &init_stop_);
            if (result) {
                init_state_.store(InitState::Ready, std::memory_order_release);
                return;
            }
            init_failure_ = result;
            init_state_.store(InitState::Failed, std::memory_order_release);
        });
    } catch (const std::system_error &e) {
        return system_error("cannot start the thread of a nonblocking init: %s", e.what());
    }
    return Status::ok();
}

void nnpccl_comm::stop_init() {
    if (!init_thread_.joinable()) return;
    if (init_state() == InitState::Running) init_stop_.raise();
    init_thread_.join();
}

void nnpccl_comm::set_last_error(const std::string &message) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    last_error_ = message;
}

const char *nnpccl_comm::last_error() {
    std::lock_guard<std::mutex> lock(error_mutex_);
    // Copied here, not by the init's thread, so that a string handed out
    // earlier does not change under its reader.
    if (last_error_.empty() && init_state() == InitState::Failed) last_error_ = init_failure_.message();
    return last_error_.c_str();
}

std::string nnpccl_comm::last_error_copy() { return last_error(); }

Status nnpccl_comm::close() {
    if (!ready()) return Status::ok();
    // The last messages may still be leaving this rank: let them go first.
    Status st = engine_->close(Deadline::after_seconds(settings_.timeout_sec));
    bootstrap_->say_goodbye();
    // Nothing runs any more: this rank's timeline (NNPCCL_TRACE) goes to its file.
    if (trace_ != nullptr)
        if (Status traced = trace_->write(); !traced && st) st = traced;
    return st;
}

void nnpccl_comm::abort(const Status &why) {
    if (ready()) engine_->abort(why);
}

void nnpccl_comm::request_abort() {
    switch (init_state()) {
    case InitState::Running: init_stop_.raise(); break;
    case InitState::Ready: engine_->request_abort(); break;
    case InitState::Failed: break;
    }
}

Status nnpccl_comm::async_error() {
    engine_->check_peers_between_calls();
    return engine_->failure();
}

void nnpccl_comm::force_algorithms(std::shared_ptr<const AlgoOverride> forced) { selector_->force(std::move(forced)); }

Status nnpccl_comm::next_algorithm(const Call &call, std::string *name, size_t *tuning_calls_left) {
    return selector_->next_algorithm(call, next_sequence_, name, tuning_calls_left);
}
