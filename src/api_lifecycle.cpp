// The C API's communicator lifecycle: versions and errors, unique ids,
// init (from a unique id, from a launcher's environment, or through the
// one-host rendezvous file), destroy, abort and the questions a caller asks
// of a communicator. The calls themselves are in api.cpp.
#include <arpa/inet.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>
#include <unordered_set>

#include "api_support.hpp"
#include "bootstrap_root.hpp"
#include "comm.hpp"
#include "dtype.hpp"
#include "launch_env.hpp"
#include "library_threads.hpp"
#include "nnpccl.h"

using namespace nnpccl;

namespace {

// The part of init that waits for the other ranks; `stop` ends its waits.
using ConnectStep = nnpccl_comm::ConnectStep;

// Checks the config, then runs `connect` and returns the ready communicator;
// or, with config->blocking = 0, returns its handle at once
// (NNPCCL_IN_PROGRESS) while `connect` runs on a thread of its own, whose
// outcome nnpccl_comm_get_async_error reports.
nnpccl_result_t init(nnpccl_comm_t *out, int nranks, int rank, const nnpccl_config_t *config, ConnectStep connect) {
    std::unique_ptr<nnpccl_comm> comm;
    Status st = nnpccl_comm::prepare(nranks, rank, config, &comm);
    if (!st) return report(nullptr, st);
    if (comm->settings().blocking) {
        st = connect(*comm, nullptr);
        if (!st) return report(nullptr, st);
        *out = comm.release();
        live_comms().add(*out);
        return NNPCCL_SUCCESS;
    }
    NNPCCL_TRY_REPORT(nullptr, comm->connect_in_background(std::move(connect)));
    *out = comm.release();
    live_comms().add(*out);
    return NNPCCL_IN_PROGRESS;
}

// A fresh job secret and a root listening at `where` (port 0: any free port).
Status make_unique_id(const SockAddr &where, int timeout_sec, nnpccl_unique_id_t *out) {
    UniqueId id;
    NNPCCL_TRY(random_secret(&id.secret));
    LibraryThreadSignals blocked; // for the root's thread
    NNPCCL_TRY(start_bootstrap_root(where, id.secret, timeout_sec, &id.root));
    encode_unique_id(id, out);
    return Status::ok();
}

// One-host launch without an address: meet through the rendezvous file.
// Rank 0 publishes it now, the others claim their places now (either
// fails at once where another job holds them) and wait for it as part of
// connecting.
nnpccl_result_t init_through_file(nnpccl_comm_t *comm, const LaunchEnv &env, const nnpccl_config_t *config) {
    Settings settings;
    Status st = resolve_settings(config, &settings);
    nnpccl_unique_id_t published{};
    if (st && env.rank == 0) {
        SockAddr loopback;
        st = parse_host_port("127.0.0.1:1", &loopback);
        loopback.set_port(0);
        if (st) st = make_unique_id(loopback, settings.timeout_sec, &published);
        if (st) st = publish_unique_id(env, published);
    }
    if (st) st = claim_rendezvous_place(env);
    if (!st)
        return report(nullptr, Status(st.code(), "init from the " + env.launcher + " environment: " + st.message()));
    const int timeout_sec = settings.timeout_sec;
    auto connect = [=](nnpccl_comm &building, const StopSignal *stop) {
        nnpccl_unique_id_t raw = published;
        Status found =
            env.rank == 0 ? Status::ok() : read_unique_id(env, Deadline::after_seconds(timeout_sec), &raw, stop);
        UniqueId id;
        if (found) found = decode_unique_id(raw, &id);
        if (!found) {
            leave_rendezvous(env);
            return Status(found.code(), "init from the " + env.launcher + " environment: " + found.message());
        }
        Status connected = building.connect(id, stop);
        // Everyone has joined (or failed): the file and the places have served.
        leave_rendezvous(env);
        if (env.rank == 0 && connected.code() == NNPCCL_ERR_TIMEOUT)
            return Status(connected.code(), connected.message() + kRendezvousFileHint);
        return connected;
    };
    nnpccl_result_t rc = init(comm, env.size, env.rank, config, connect);
    // An init refused before connecting never reached the removal above.
    if (rc != NNPCCL_SUCCESS && rc != NNPCCL_IN_PROGRESS) leave_rendezvous(env);
    return rc;
}

} // namespace

extern "C" {


nnpccl_result_t nnpccl_get_version(int *version) {
    if (version == nullptr) return report(nullptr, invalid_argument("version is NULL"));
    *version = NNPCCL_VERSION_CODE;
    return NNPCCL_SUCCESS;
}

const char *nnpccl_get_error_string(nnpccl_result_t result) {
    switch (result) {
    case NNPCCL_SUCCESS: return "success";
    case NNPCCL_ERR_INVALID_ARGUMENT: return "invalid argument";
    case NNPCCL_ERR_INVALID_USAGE: return "invalid usage";
    case NNPCCL_ERR_SYSTEM: return "system error";
    case NNPCCL_ERR_INTERNAL: return "internal error";
    case NNPCCL_ERR_REMOTE: return "remote error (a peer failed)";
    case NNPCCL_ERR_TIMEOUT: return "timeout";
    case NNPCCL_IN_PROGRESS: return "in progress";
    }
    return "unknown result code";
}

const char *nnpccl_get_last_error(nnpccl_comm_t comm) {
    CallGuard guard(comm);
    if (!guard.held() || used_after_fork(comm)) return thread_last_error();
    // Aborted by a signal handler meanwhile, the communicator is freed as this call returns.
    if (t_live_slot != nullptr && t_live_slot->abort_on_return.load(std::memory_order_relaxed) == comm) {
        if (std::string why = comm->last_error_copy(); !why.empty()) report(nullptr, Status(NNPCCL_ERR_REMOTE, why));
        return thread_last_error();
    }
    return comm->last_error();
}

nnpccl_result_t nnpccl_get_unique_id(nnpccl_unique_id_t *out) {
    if (out == nullptr) return report(nullptr, invalid_argument("id is NULL"));
    Settings settings;
    Status st = resolve_settings(nullptr, &settings);
    SockAddr local;
    if (st) st = pick_local_address(&local);
    if (st) st = make_unique_id(local, settings.timeout_sec, out);
    return report(nullptr, st);
}

nnpccl_result_t nnpccl_comm_init_rank(nnpccl_comm_t *comm, int nranks, nnpccl_unique_id_t id, int rank,
                                      const nnpccl_config_t *config) {
    if (comm == nullptr) return report(nullptr, invalid_argument("comm (the output pointer) is NULL"));
    *comm = nullptr;
    if (nranks < 1 || nranks > kMaxRanks)
        return report(nullptr, invalid_argument("nranks=%d is not from 1 to %d", nranks, kMaxRanks));
    if (rank < 0 || rank >= nranks)
        return report(nullptr, invalid_argument("rank=%d is out of range for nranks=%d", rank, nranks));
    UniqueId decoded;
    Status st = decode_unique_id(id, &decoded);
    if (!st) return report(nullptr, st);
    return init(comm, nranks, rank, config,
                [decoded](nnpccl_comm &building, const StopSignal *stop) { return building.connect(decoded, stop); });
}

nnpccl_result_t nnpccl_comm_init_from_env(nnpccl_comm_t *comm, const nnpccl_config_t *config) {
    if (comm == nullptr) return report(nullptr, invalid_argument("comm (the output pointer) is NULL"));
    *comm = nullptr;
    LaunchEnv env;
    Status st = read_launch_env(&env);
    if (st && !env.rendezvous_file.empty()) return init_through_file(comm, env, config);
    UniqueId id;
    id.secret = env.secret;
    if (st) st = parse_host_port(env.root, &id.root);
    if (st && env.rank == 0) {
        Settings settings;
        st = resolve_settings(config, &settings);
        LibraryThreadSignals blocked; // for the root's thread
        if (st) st = start_root_from_env(env, settings.timeout_sec, &id);
    }
    if (!st) return report(nullptr, Status(st.code(), format("init from the %s environment: %s",
                                                             env.launcher.empty() ? "launcher" : env.launcher.c_str(),
                                                             st.message().c_str())));
    return init(comm, env.size, env.rank, config, [id, env](nnpccl_comm &building, const StopSignal *stop) {
        return explain_join_failure(env, building.connect(id, stop));
    });
}

nnpccl_result_t nnpccl_comm_destroy(nnpccl_comm_t comm) {
    CallGuard guard(comm);
    NNPCCL_TRY_REPORT(nullptr, guard.check_live());
    if (used_after_fork(comm)) return report_forked(comm);
    if (!comm->begin_closing()) return report(nullptr, invalid_usage("comm is already being destroyed or aborted"));
    // An init still running is aborted: it has no operations to wait for,
    // and waiting for it could take until its deadline.
    comm->stop_init();
    const Status st = comm->close();
    guard.release();
    free_comm(comm);
    return st.code() == NNPCCL_SUCCESS ? NNPCCL_SUCCESS : report(nullptr, st);
}

nnpccl_result_t nnpccl_comm_abort(nnpccl_comm_t comm) {
    if (abort_from_interrupted_call(comm)) return NNPCCL_SUCCESS;
    if (nnpccl_result_t refused; refuse_repeated_handler_abort(comm, &refused)) return refused;
    CallGuard guard(comm);
    NNPCCL_TRY_REPORT(nullptr, guard.check_live());
    if (used_after_fork(comm)) return report_forked(comm);
    if (!comm->begin_closing()) return report(nullptr, invalid_usage("comm is already being destroyed or aborted"));
    // A running init stops waiting and tells the other ranks; calls blocked
    // in other threads fail now and leave; then it can go.
    comm->stop_init();
    comm->abort(remote_error("rank %d aborted the communicator (nnpccl_comm_abort)", comm->rank()));
    guard.release();
    // Its timeline (NNPCCL_TRACE) is written as it is freed, once no thread drives its engine.
    free_comm(comm);
    return NNPCCL_SUCCESS;
}

nnpccl_result_t nnpccl_comm_rank(nnpccl_comm_t comm, int *rank) {
    CallGuard guard(comm);
    NNPCCL_TRY_REPORT(nullptr, guard.check_live());
    if (used_after_fork(comm)) return report_forked(comm);
    if (rank == nullptr) return report(comm, invalid_argument("rank (the output pointer) is NULL"));
    NNPCCL_TRY_REPORT(comm, check_ready(comm));
    *rank = comm->rank();
    return NNPCCL_SUCCESS;
}

nnpccl_result_t nnpccl_comm_size(nnpccl_comm_t comm, int *size) {
    CallGuard guard(comm);
    NNPCCL_TRY_REPORT(nullptr, guard.check_live());
    if (used_after_fork(comm)) return report_forked(comm);
    if (size == nullptr) return report(comm, invalid_argument("size (the output pointer) is NULL"));
    NNPCCL_TRY_REPORT(comm, check_ready(comm));
    *size = comm->nranks();
    return NNPCCL_SUCCESS;
}

nnpccl_result_t nnpccl_comm_get_async_error(nnpccl_comm_t comm, nnpccl_result_t *async_error) {
    CallGuard guard(comm);
    NNPCCL_TRY_REPORT(nullptr, guard.check_live());
    if (used_after_fork(comm)) return report_forked(comm);
    if (async_error == nullptr) return report(comm, invalid_argument("async_error (the output pointer) is NULL"));
    NNPCCL_TRY_REPORT(comm, guard.check_open());
    switch (comm->init_state()) {
    case nnpccl_comm::InitState::Running: *async_error = NNPCCL_IN_PROGRESS; return NNPCCL_SUCCESS;
    case nnpccl_comm::InitState::Failed:
        comm->set_last_error(comm->init_failure().message());
        *async_error = comm->init_failure().code();
        return NNPCCL_SUCCESS;
    case nnpccl_comm::InitState::Ready: break;
    }
    Status failure = comm->async_error();
    if (!failure) comm->set_last_error(failure.message());
    *async_error = failure.code();
    return NNPCCL_SUCCESS;
}

} // extern "C"
