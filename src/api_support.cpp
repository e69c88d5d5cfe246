#include "api_support.hpp"

#include <chrono>
#include <thread>

namespace nnpccl {

namespace {

thread_local std::string t_last_error;

} // namespace

nnpccl_result_t report(nnpccl_comm *comm, const Status &st) {
    if (!st.is_ok()) {
        if (comm != nullptr) comm->set_last_error(st.message());
        else t_last_error = st.message();
    }
    return st.code();
}

const std::string &thread_last_error() { return t_last_error; }

LiveComms &live_comms() {
    static LiveComms registry;
    return registry;
}

void free_comm(nnpccl_comm *comm) {
    live_comms().remove(comm);
    while (comm->active_calls.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    delete comm;
}

Status check_ready(const nnpccl_comm *comm) {
    switch (comm->init_state.load(std::memory_order_acquire)) {
    case nnpccl_comm::InitState::Ready: return Status::ok();
    case nnpccl_comm::InitState::Running:
        return invalid_usage("the communicator is still initializing (nonblocking init): poll "
                             "nnpccl_comm_get_async_error until it gives NNPCCL_SUCCESS before using it");
    case nnpccl_comm::InitState::Failed: break;
    }
    return invalid_usage("the communicator's nonblocking init failed, so it can only be destroyed or aborted: %s",
                         comm->init_failure.message().c_str());
}


} // namespace nnpccl
