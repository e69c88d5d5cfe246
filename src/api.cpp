// The C API: validates every argument before anything happens (an invalid
// argument has no effect and leaves the communicator usable), then hands
// the call to the communicator.
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <cstdint>
#include <cstring>
#include <memory>

#include "bootstrap_root.hpp"
#include "comm.hpp"
#include "dtype.hpp"
#include "nnpccl.h"

using namespace nnpccl;

struct nnpccl_request {
    std::shared_ptr<Operation> op;
    nnpccl_comm *comm;
};

namespace {

thread_local std::string t_last_error;

nnpccl_result_t report(nnpccl_comm *comm, const Status &st) {
    if (!st.is_ok()) {
        if (comm != nullptr) comm->set_last_error(st.message());
        else t_last_error = st.message();
    }
    return st.code();
}

#define NNPCCL_TRY_REPORT(comm, expr)                                                                             \
    do {                                                                                                          \
        ::nnpccl::Status try_status_ = (expr);                                                                    \
        if (!try_status_.is_ok()) return report((comm), try_status_);                                             \
    } while (0)

Status check_comm(nnpccl_comm *comm) {
    if (comm == nullptr) return invalid_argument("comm is NULL");
    if (comm->magic != nnpccl_comm::kMagic) return invalid_argument("comm is not a live communicator (destroyed or corrupt)");
    return Status::ok();
}

// Holds the communicator alive for the length of one API call.
class CallGuard {
public:
    explicit CallGuard(nnpccl_comm *comm) : comm_(comm) { comm_->active_calls.fetch_add(1); }
    ~CallGuard() { comm_->active_calls.fetch_sub(1); }
    CallGuard(const CallGuard &) = delete;
    CallGuard &operator=(const CallGuard &) = delete;
    Status check() const {
        return comm_->closing.load() ? invalid_usage("the communicator is being destroyed or aborted") : Status::ok();
    }

private:
    nnpccl_comm *comm_;
};

// Frees the communicator once no other thread is inside a call on it.
void free_comm(nnpccl_comm *comm) {
    while (comm->active_calls.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    comm->magic = 0;
    delete comm;
}

// Elements of `count` times `factor` of `dt` must fit in memory arithmetic.
Status check_count(const char *name, size_t count, size_t factor, nnpccl_datatype_t dt) {
    const size_t elem = datatype_size(dt);
    if (factor != 0 && count > static_cast<size_t>(PTRDIFF_MAX) / elem / factor)
        return invalid_argument("%s=%zu overflows: %zu x %zu bytes does not fit in memory", name, count, factor, elem);
    return Status::ok();
}

Status validate(nnpccl_comm *comm, const CollectiveCall &c) {
    NNPCCL_TRY(check_comm(comm));
    if (c.collective == Collective::Barrier) return Status::ok();
    if (!valid_datatype(c.datatype))
        return invalid_argument("datatype=%d is not an nnpccl_datatype_t (0..%d)", static_cast<int>(c.datatype),
                                NNPCCL_NUM_DATATYPES - 1);
    const bool reduces = c.collective == Collective::Allreduce || c.collective == Collective::ReduceScatter ||
                         c.collective == Collective::Reduce;
    if (reduces && !valid_redop(c.op))
        return invalid_argument("op=%d is not an nnpccl_redop_t (0..%d)", static_cast<int>(c.op), NNPCCL_NUM_OPS - 1);
    const bool rooted = c.collective == Collective::Broadcast || c.collective == Collective::Reduce;
    if (rooted && (c.root < 0 || c.root >= comm->nranks))
        return invalid_argument("root=%d is out of range: the communicator has ranks 0..%d", c.root, comm->nranks - 1);
    const bool blocks = c.collective == Collective::ReduceScatter || c.collective == Collective::Allgather;
    const char *count_name = c.collective == Collective::ReduceScatter ? "recvcount"
                             : c.collective == Collective::Allgather   ? "sendcount"
                                                                       : "count";
    NNPCCL_TRY(check_count(count_name, c.count, blocks ? static_cast<size_t>(comm->nranks) : 1, c.datatype));
    if (c.count == 0) return Status::ok();
    const bool reads_send = c.collective != Collective::Broadcast || comm->rank == c.root;
    const bool writes_recv = c.collective != Collective::Reduce || comm->rank == c.root;
    if (reads_send && c.send == nullptr) return invalid_argument("sendbuf is NULL with %s=%zu", count_name, c.count);
    if (writes_recv && c.recv == nullptr) return invalid_argument("recvbuf is NULL with %s=%zu", count_name, c.count);
    return Status::ok();
}

nnpccl_result_t run(nnpccl_comm *comm, const CollectiveCall &call, nnpccl_request_t *request) {
    NNPCCL_TRY_REPORT(nullptr, check_comm(comm));
    CallGuard guard(comm);
    NNPCCL_TRY_REPORT(comm, guard.check());
    Status st = validate(comm, call);
    if (!st) return report(comm, st);
    Status failed = comm->engine->failure();
    if (!failed) return report(comm, Status(failed.code(), "the communicator has failed earlier: " + failed.message()));
    std::shared_ptr<Operation> op;
    st = comm->start(call, request != nullptr, &op);
    if (!st) return report(comm, st);
    if (request != nullptr) {
        *request = new nnpccl_request{op, comm};
        return NNPCCL_SUCCESS;
    }
    return report(comm, comm->engine->wait(*op));
}

nnpccl_result_t run_nonblocking(nnpccl_comm *comm, const CollectiveCall &call, nnpccl_request_t *request) {
    if (request == nullptr) return report(check_comm(comm).is_ok() ? comm : nullptr, invalid_argument("request is NULL"));
    *request = nullptr;
    return run(comm, call, request);
}

CollectiveCall make_call(Collective coll, const void *send, void *recv, size_t count, nnpccl_datatype_t dt,
                         nnpccl_redop_t op, int root) {
    CollectiveCall c;
    c.collective = coll;
    c.send = send;
    c.recv = recv;
    c.count = count;
    c.datatype = dt;
    c.op = op;
    c.root = root;
    return c;
}

nnpccl_result_t init(nnpccl_comm_t *comm, const UniqueId &id, int nranks, int rank, const nnpccl_config_t *config) {
    std::unique_ptr<nnpccl_comm> created;
    Status st = nnpccl_comm::create(id, nranks, rank, config, &created);
    if (!st) return report(nullptr, st);
    *comm = created.release();
    return NNPCCL_SUCCESS;
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
    if (comm == nullptr || comm->magic != nnpccl_comm::kMagic) return t_last_error.c_str();
    std::lock_guard<std::mutex> lock(comm->error_mutex);
    return comm->last_error.c_str();
}

namespace {

// A fresh job secret and a root listening at `where` (port 0: any free port).
Status make_unique_id(const SockAddr &where, int timeout_sec, nnpccl_unique_id_t *out) {
    UniqueId id;
    NNPCCL_TRY(random_secret(&id.secret));
    NNPCCL_TRY(start_bootstrap_root(where, id.secret, timeout_sec, &id.root));
    encode_unique_id(id, out);
    return Status::ok();
}

// One-host launch without an address: meet through the rendezvous file.
nnpccl_result_t init_through_file(nnpccl_comm_t *comm, const LaunchEnv &env, const nnpccl_config_t *config) {
    Settings settings;
    Status st = resolve_settings(config, &settings);
    nnpccl_unique_id_t raw;
    if (st && env.rank == 0) {
        SockAddr loopback;
        st = parse_host_port("127.0.0.1:1", &loopback);
        loopback.set_port(0);
        if (st) st = make_unique_id(loopback, settings.timeout_sec, &raw);
        if (st) st = publish_unique_id(env.rendezvous_file, raw);
    } else if (st) {
        st = read_unique_id(env.rendezvous_file, Deadline::after_seconds(settings.timeout_sec), &raw);
    }
    UniqueId id;
    if (st) st = decode_unique_id(raw, &id);
    if (!st) return report(nullptr, Status(st.code(), "init from the " + env.launcher + " environment: " + st.message()));
    nnpccl_result_t rc = init(comm, id, env.size, env.rank, config);
    // Everyone has joined (or failed): the file has served.
    if (env.rank == 0) unlink(env.rendezvous_file.c_str());
    return rc;
}

} // namespace

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
    return init(comm, decoded, nranks, rank, config);
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
        // Rank 0 hosts the root on every interface at the given port, so the
        // name other hosts use for it need not be one of its own addresses.
        Settings settings;
        st = resolve_settings(config, &settings);
        SockAddr any = id.root;
        if (any.family() == AF_INET) reinterpret_cast<sockaddr_in *>(&any.storage)->sin_addr.s_addr = htonl(INADDR_ANY);
        else reinterpret_cast<sockaddr_in6 *>(&any.storage)->sin6_addr = in6addr_any;
        SockAddr bound;
        if (st) st = start_bootstrap_root(any, id.secret, settings.timeout_sec, &bound);
    }
    if (!st) return report(nullptr, Status(st.code(), format("init from the %s environment: %s",
                                                             env.launcher.empty() ? "launcher" : env.launcher.c_str(),
                                                             st.message().c_str())));
    return init(comm, id, env.size, env.rank, config);
}

nnpccl_result_t nnpccl_comm_destroy(nnpccl_comm_t comm) {
    Status st = check_comm(comm);
    if (!st) return report(nullptr, st);
    if (comm->closing.exchange(true)) return report(nullptr, invalid_usage("comm is already being destroyed or aborted"));
    st = comm->engine->drain();
    // The last messages may still be leaving this rank: let them go first.
    Deadline deadline = Deadline::after_seconds(comm->settings.timeout_sec);
    for (Transport *t : comm->active_transports()) {
        Status flushed = st.is_ok() ? t->flush(deadline) : Status::ok();
        if (!flushed) st = flushed;
    }
    comm->bootstrap->say_goodbye();
    free_comm(comm);
    return st.code() == NNPCCL_SUCCESS ? NNPCCL_SUCCESS : report(nullptr, st);
}

nnpccl_result_t nnpccl_comm_abort(nnpccl_comm_t comm) {
    Status st = check_comm(comm);
    if (!st) return report(nullptr, st);
    if (comm->closing.exchange(true)) return report(nullptr, invalid_usage("comm is already being destroyed or aborted"));
    // Calls blocked in other threads fail now and leave; then it can go.
    comm->engine->abort(remote_error("rank %d aborted the communicator (nnpccl_comm_abort)", comm->rank));
    free_comm(comm);
    return NNPCCL_SUCCESS;
}

nnpccl_result_t nnpccl_comm_rank(nnpccl_comm_t comm, int *rank) {
    Status st = check_comm(comm);
    if (st && rank == nullptr) st = invalid_argument("rank (the output pointer) is NULL");
    if (!st) return report(check_comm(comm).is_ok() ? comm : nullptr, st);
    *rank = comm->rank;
    return NNPCCL_SUCCESS;
}

nnpccl_result_t nnpccl_comm_size(nnpccl_comm_t comm, int *size) {
    Status st = check_comm(comm);
    if (st && size == nullptr) st = invalid_argument("size (the output pointer) is NULL");
    if (!st) return report(check_comm(comm).is_ok() ? comm : nullptr, st);
    *size = comm->nranks;
    return NNPCCL_SUCCESS;
}

nnpccl_result_t nnpccl_comm_get_async_error(nnpccl_comm_t comm, nnpccl_result_t *async_error) {
    Status st = check_comm(comm);
    if (st && async_error == nullptr) st = invalid_argument("async_error (the output pointer) is NULL");
    if (!st) return report(check_comm(comm).is_ok() ? comm : nullptr, st);
    Status failure = comm->engine->failure();
    if (!failure) comm->set_last_error(failure.message());
    *async_error = failure.code();
    return NNPCCL_SUCCESS;
}

nnpccl_result_t nnpccl_allreduce(const void *sendbuf, void *recvbuf, size_t count, nnpccl_datatype_t datatype,
                                 nnpccl_redop_t op, nnpccl_comm_t comm) {
    return run(comm, make_call(Collective::Allreduce, sendbuf, recvbuf, count, datatype, op, -1), nullptr);
}
nnpccl_result_t nnpccl_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, nnpccl_datatype_t datatype,
                                      nnpccl_redop_t op, nnpccl_comm_t comm) {
    return run(comm, make_call(Collective::ReduceScatter, sendbuf, recvbuf, recvcount, datatype, op, -1), nullptr);
}
nnpccl_result_t nnpccl_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, nnpccl_datatype_t datatype,
                                 nnpccl_comm_t comm) {
    return run(comm, make_call(Collective::Allgather, sendbuf, recvbuf, sendcount, datatype, NNPCCL_SUM, -1), nullptr);
}
nnpccl_result_t nnpccl_broadcast(const void *sendbuf, void *recvbuf, size_t count, nnpccl_datatype_t datatype, int root,
                                 nnpccl_comm_t comm) {
    return run(comm, make_call(Collective::Broadcast, sendbuf, recvbuf, count, datatype, NNPCCL_SUM, root), nullptr);
}
nnpccl_result_t nnpccl_reduce(const void *sendbuf, void *recvbuf, size_t count, nnpccl_datatype_t datatype,
                              nnpccl_redop_t op, int root, nnpccl_comm_t comm) {
    return run(comm, make_call(Collective::Reduce, sendbuf, recvbuf, count, datatype, op, root), nullptr);
}
nnpccl_result_t nnpccl_barrier(nnpccl_comm_t comm) {
    return run(comm, make_call(Collective::Barrier, nullptr, nullptr, 0, NNPCCL_UINT8, NNPCCL_SUM, -1), nullptr);
}

nnpccl_result_t nnpccl_iallreduce(const void *sendbuf, void *recvbuf, size_t count, nnpccl_datatype_t datatype,
                                  nnpccl_redop_t op, nnpccl_comm_t comm, nnpccl_request_t *request) {
    return run_nonblocking(comm, make_call(Collective::Allreduce, sendbuf, recvbuf, count, datatype, op, -1), request);
}
nnpccl_result_t nnpccl_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                       nnpccl_datatype_t datatype, nnpccl_redop_t op, nnpccl_comm_t comm,
                                       nnpccl_request_t *request) {
    return run_nonblocking(comm, make_call(Collective::ReduceScatter, sendbuf, recvbuf, recvcount, datatype, op, -1),
                           request);
}
nnpccl_result_t nnpccl_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount, nnpccl_datatype_t datatype,
                                  nnpccl_comm_t comm, nnpccl_request_t *request) {
    return run_nonblocking(comm, make_call(Collective::Allgather, sendbuf, recvbuf, sendcount, datatype, NNPCCL_SUM, -1),
                           request);
}
nnpccl_result_t nnpccl_ibroadcast(const void *sendbuf, void *recvbuf, size_t count, nnpccl_datatype_t datatype,
                                  int root, nnpccl_comm_t comm, nnpccl_request_t *request) {
    return run_nonblocking(comm, make_call(Collective::Broadcast, sendbuf, recvbuf, count, datatype, NNPCCL_SUM, root),
                           request);
}
nnpccl_result_t nnpccl_ireduce(const void *sendbuf, void *recvbuf, size_t count, nnpccl_datatype_t datatype,
                               nnpccl_redop_t op, int root, nnpccl_comm_t comm, nnpccl_request_t *request) {
    return run_nonblocking(comm, make_call(Collective::Reduce, sendbuf, recvbuf, count, datatype, op, root), request);
}
nnpccl_result_t nnpccl_ibarrier(nnpccl_comm_t comm, nnpccl_request_t *request) {
    return run_nonblocking(comm, make_call(Collective::Barrier, nullptr, nullptr, 0, NNPCCL_UINT8, NNPCCL_SUM, -1),
                           request);
}

nnpccl_result_t nnpccl_wait(nnpccl_request_t request) {
    if (request == nullptr) return report(nullptr, invalid_argument("request is NULL"));
    std::unique_ptr<nnpccl_request> owned(request);
    CallGuard guard(owned->comm);
    Status st = owned->comm->engine->wait(*owned->op);
    return report(owned->comm, st);
}

nnpccl_result_t nnpccl_test(nnpccl_request_t request, int *done) {
    if (request == nullptr) return report(nullptr, invalid_argument("request is NULL"));
    if (done == nullptr) return report(request->comm, invalid_argument("done (the output pointer) is NULL"));
    *done = request->op->done.load(std::memory_order_acquire) ? 1 : 0;
    if (*done == 0) return NNPCCL_SUCCESS;
    std::unique_ptr<nnpccl_request> owned(request);
    return report(owned->comm, owned->op->result);
}

nnpccl_result_t nnpccl_request_free(nnpccl_request_t request) {
    if (request == nullptr) return report(nullptr, invalid_argument("request is NULL"));
    delete request;
    return NNPCCL_SUCCESS;
}

} // extern "C"
