// The C API's collectives, sends and receives, and requests: every
// argument is validated before anything happens (an invalid argument has no
// effect and leaves the communicator usable), then the call goes to the
// communicator. Init and the communicator's lifecycle are in api_lifecycle.cpp.
#include <arpa/inet.h>
#include <pthread.h>
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

struct nnpccl_request {
    std::shared_ptr<Operation> op;
    nnpccl_comm *comm;
    // Its communicator's creator, kept here: the communicator may be freed
    // before the request, and a fork's child must refuse the request
    // without reading it (see used_after_fork).
    pid_t creator_pid;
};

namespace {

// The requests handed out and not yet waited, tested done or freed. wait,
// test and free look a handle up here before touching it, so a second wait
// or a garbage handle is refused rather than read after its free. (Like
// any pointer handle, one whose memory a newer request took names that
// request.) Cost: a mutex and a hash lookup per nonblocking call.
class LiveRequests {
public:
    void add(nnpccl_request *r) {
        std::lock_guard<std::mutex> lock(mutex_);
        live_.insert(r);
    }
    // Takes the request out; false when it was not live.
    bool take(nnpccl_request *r) {
        std::lock_guard<std::mutex> lock(mutex_);
        return live_.erase(r) != 0;
    }
    // Under the lock, so no other thread's wait or free can take it
    // meanwhile: `peek` runs on a live request and says whether to take it.
    template <typename Fn> bool peek(nnpccl_request *r, Fn &&fn) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (live_.count(r) == 0) return false;
        if (fn(*r)) live_.erase(r);
        return true;
    }
    // Held across fork(), as LiveComms' lock is (api_support.cpp).
    void lock_for_fork() { mutex_.lock(); }
    void unlock_after_fork() { mutex_.unlock(); }

private:
    std::mutex mutex_;
    std::unordered_set<const nnpccl_request *> live_;
};

LiveRequests &live_requests() {
    static LiveRequests *registry = new LiveRequests; // never destroyed: requests may be waited at exit
    return *registry;
}

struct RequestsForkWatch {
    RequestsForkWatch() {
        pthread_atfork([] { live_requests().lock_for_fork(); }, [] { live_requests().unlock_after_fork(); },
                       [] { live_requests().unlock_after_fork(); });
    }
} requests_fork_watch;

// A live request of a communicator made before a fork of this process:
// in the child it stays live and untouched (its operation is the
// parent's engine's), and every call on it is refused. Otherwise, when
// `take`, it is no longer live.
enum class Found { NotLive, Forked, Taken };
Found find_request(nnpccl_request *request, bool take) {
    Found found = Found::NotLive;
    live_requests().peek(request, [&](const nnpccl_request &r) {
        found = made_before_fork(r.creator_pid) ? Found::Forked : Found::Taken;
        return found == Found::Taken && take;
    });
    return found;
}

Status not_a_request() {
    return invalid_argument("request is not a live request (already waited, completed by nnpccl_test, freed, or "
                            "corrupt)");
}

// Elements of `count` times `factor` of `dt` must fit in memory arithmetic.
// Multiplies with overflow checks rather than dividing the limit: every call
// asks, and a 64-bit division costs tens of cycles.
Status check_count(const char *name, size_t count, size_t factor, nnpccl_datatype_t dt) {
    const size_t elem = datatype_size(dt);
    size_t bytes = 0;
    if (__builtin_mul_overflow(count, factor, &bytes) || __builtin_mul_overflow(bytes, elem, &bytes) ||
        bytes > static_cast<size_t>(PTRDIFF_MAX))
        return invalid_argument("%s=%zu overflows: %zu x %zu bytes does not fit in memory", name, count, factor, elem);
    return Status::ok();
}

// Calls of this many bytes or more check that their buffers are mapped.
constexpr size_t kCheckedMappingBytes = size_t{1} << 30;
// Calls with blocks this large have their buffers checked out of line
// (below); smaller ones only when their buffers might overlap. Any call
// that reaches kCheckedMappingBytes has one block at least this large.
constexpr size_t kLargeBlockBytes = kCheckedMappingBytes / static_cast<size_t>(kMaxRanks);

// The exact checks of a call's buffers, given which of them this rank
// reads and writes: they must not overlap unless the call is in place
// (call.hpp, is_in_place), and a call of kCheckedMappingBytes or more must
// end in mapped memory, so that a count far beyond the buffer (a corrupt or
// mistyped one) is refused rather than planned: a plan has a step per
// chunk, and one of 2^45 bytes would not fit in memory. Cost: up to four
// mincore() calls, against a transfer of at least a GiB.
[[gnu::noinline]] Status check_buffers(const nnpccl_comm *comm, const Call &c, const char *count_name,
                                       bool reads_send, bool writes_recv) {
    using C = Collective;
    const size_t block = c.count * datatype_size(c.datatype), all = block * static_cast<size_t>(comm->nranks());
    const bool reads_all = c.collective == C::ReduceScatter || c.collective == C::Scatter || c.collective == C::Alltoall;
    const bool writes_all = c.collective == C::Allgather || c.collective == C::Gather || c.collective == C::Alltoall;
    const size_t send_bytes = reads_send ? (reads_all ? all : block) : 0;
    const size_t recv_bytes = writes_recv ? (writes_all ? all : block) : 0;
    static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const struct {
        const char *name;
        const void *buffer;
        size_t bytes;
    } buffers[] = {{"sendbuf", c.send, send_bytes}, {"recvbuf", c.recv, recv_bytes}};
    for (const auto &b : buffers) {
        if (b.bytes < kCheckedMappingBytes) continue;
        const auto first = reinterpret_cast<uintptr_t>(b.buffer);
        for (uintptr_t at : {first, first + (b.bytes - 1)}) {
            unsigned char resident = 0;
            // Only ENOMEM says "not mapped"; anything else lets the call go on.
            if (mincore(reinterpret_cast<void *>(at & ~(page - 1)), 1, &resident) != 0 && errno == ENOMEM)
                return invalid_argument("%s=%zu needs %zu bytes of %s, but %s + %zu is not mapped memory", count_name,
                                        c.count, b.bytes, b.name, b.name, static_cast<size_t>(at - first));
        }
    }
    const auto send_at = reinterpret_cast<uintptr_t>(c.send), recv_at = reinterpret_cast<uintptr_t>(c.recv);
    if (send_bytes == 0 || recv_bytes == 0 || send_at >= recv_at + recv_bytes || recv_at >= send_at + send_bytes ||
        is_in_place(c, comm->rank()))
        return Status::ok();
    const char *layout = "in place is sendbuf == recvbuf";
    switch (c.collective) {
    case C::ReduceScatter: layout = "in place is recvbuf == sendbuf + rank x recvcount elements"; break;
    case C::Allgather: layout = "in place is sendbuf == recvbuf + rank x sendcount elements"; break;
    case C::Gather: layout = "in place (on the root) is sendbuf == recvbuf + root x sendcount elements"; break;
    case C::Scatter: layout = "in place (on the root) is recvbuf == sendbuf + root x recvcount elements"; break;
    default: break;
    }
    return invalid_argument("sendbuf (%zu bytes at %p) and recvbuf (%zu bytes at %p) overlap but the call is not in "
                            "place: %s, or buffers that do not overlap",
                            send_bytes, c.send, recv_bytes, c.recv, layout);
}

Status validate(const nnpccl_comm *comm, const Call &c) {
    using C = Collective;
    if (c.collective == C::Barrier) return Status::ok();
    if (!valid_datatype(c.datatype))
        return invalid_argument("datatype=%d is not an nnpccl_datatype_t (0..%d)", static_cast<int>(c.datatype),
                                NNPCCL_NUM_DATATYPES - 1);
    if (reduces(c.collective) && !valid_redop(c.op))
        return invalid_argument("op=%d is not an nnpccl_redop_t (0..%d)", static_cast<int>(c.op), NNPCCL_NUM_OPS - 1);
    if (has_root(c.collective) && (c.root < 0 || c.root >= comm->nranks()))
        return invalid_argument("root=%d is out of range: the communicator has ranks 0..%d", c.root,
                                comm->nranks() - 1);
    const bool p2p = is_point_to_point(c.collective);
    if (p2p && (c.root < 0 || c.root >= comm->nranks()))
        return invalid_argument("peer=%d is out of range: the communicator has ranks 0..%d", c.root,
                                comm->nranks() - 1);
    // The transports have no stream from a rank to itself, and a blocking
    // send to oneself could never meet its recv.
    if (p2p && c.root == comm->rank())
        return invalid_argument("peer=%d is this rank: a rank cannot %s itself", c.root,
                                c.collective == C::Send ? "send to" : "receive from");
    // Counts of one rank's block: the call covers nranks of them.
    const bool blocks = c.collective == C::ReduceScatter || c.collective == C::Allgather || c.collective == C::Gather ||
                        c.collective == C::Scatter || c.collective == C::Alltoall;
    const char *count_name = (c.collective == C::ReduceScatter || c.collective == C::Scatter) ? "recvcount"
                             : (c.collective == C::Allgather || c.collective == C::Gather)    ? "sendcount"
                                                                                              : "count";
    NNPCCL_TRY(check_count(count_name, c.count, blocks ? static_cast<size_t>(comm->nranks()) : 1, c.datatype));
    if (c.count == 0) return Status::ok();
    // Only the root reads a broadcast's or scatter's sendbuf, and only the
    // root writes a reduce's or gather's recvbuf; a recv has no sendbuf and
    // a send no recvbuf.
    const bool reads_send =
        c.collective == C::Broadcast || c.collective == C::Scatter ? comm->rank() == c.root : c.collective != C::Recv;
    const bool writes_recv =
        c.collective == C::Reduce || c.collective == C::Gather ? comm->rank() == c.root : c.collective != C::Send;
    if (reads_send && c.send == nullptr) return invalid_argument("sendbuf is NULL with %s=%zu", count_name, c.count);
    if (writes_recv && c.recv == nullptr) return invalid_argument("recvbuf is NULL with %s=%zu", count_name, c.count);
    // A few compares for the common call, whose buffers are in place or
    // far apart and small; the exact checks are out of line. The buffers
    // may overlap only if |send - recv| < span, here one unsigned compare.
    const size_t block = c.count * datatype_size(c.datatype); // check_count bounded it
    const uintptr_t span = block * static_cast<size_t>(comm->nranks());
    const auto send_at = reinterpret_cast<uintptr_t>(c.send), recv_at = reinterpret_cast<uintptr_t>(c.recv);
    if (block >= kLargeBlockBytes ||
        (send_at - recv_at + (span - 1) < 2 * span - 1 && !(send_at == recv_at && is_in_place(c, comm->rank()))))
        NNPCCL_TRY(check_buffers(comm, c, count_name, reads_send, writes_recv));
    return Status::ok();
}

nnpccl_result_t run_checked(nnpccl_comm *comm, const CallGuard &guard, Call &call, nnpccl_request_t *request);

// Any error of a started call but an invalid argument is fatal for the
// communicator (nnpccl.h). One that did not come from the engine (out of
// memory while planning or queueing, say) fails it now: its async error is
// set, later calls fail at once with it, and the peers hear why (through
// the transports and the rendezvous root) rather than wait for this rank.
// Two refusals are not failures: an invalid argument, and a call its forced
// algorithms cannot plan (the planner's NNPCCL_ERR_INVALID_USAGE). The
// planner refuses before the call takes its number, and every rank with the
// same rules refuses alike, so nothing has moved and the communicator stays
// usable (ccl-bench --compare forces every algorithm in turn and relies on
// it). Any other invalid usage from here (the engine's mismatches) has
// failed the engine already.
bool only_refused(const Status &st) {
    return st.code() == NNPCCL_ERR_INVALID_ARGUMENT || st.code() == NNPCCL_ERR_INVALID_USAGE;
}

nnpccl_result_t fail_call(nnpccl_comm *comm, const Status &st) {
    if (!only_refused(st) && comm->ready() && !comm->failed()) comm->abort(st);
    return report(comm, st);
}

// Runs a collective on the communicator `guard` holds, completing `call` in
// place (it is the caller's own copy of the arguments). No C++ exception
// leaves through the C API: planning and queueing allocate, and a process
// out of memory gets an error from the call rather than std::terminate.
nnpccl_result_t run(nnpccl_comm *comm, const CallGuard &guard, Call &call, nnpccl_request_t *request) {
    try {
        return run_checked(comm, guard, call, request);
    } catch (const std::bad_alloc &) {
        // Telling the communicator and the peers allocates too; with memory
        // this short that may fail as well, and the code still returns.
        try {
            const Status st = system_error("out of memory while starting %s of %zu elements",
                                           collective_name(call.collective), call.count);
            return guard.held() ? fail_call(comm, st) : report(nullptr, st);
        } catch (...) {
            return NNPCCL_ERR_SYSTEM;
        }
    } catch (const std::exception &e) {
        try {
            const Status st = internal_error("%s", e.what());
            return guard.held() ? fail_call(comm, st) : report(nullptr, st);
        } catch (...) {
            return NNPCCL_ERR_INTERNAL;
        }
    }
}

nnpccl_result_t run_checked(nnpccl_comm *comm, const CallGuard &guard, Call &call, nnpccl_request_t *request) {
    NNPCCL_TRY_REPORT(nullptr, guard.check_live());
    if (used_after_fork(comm)) return report_forked(comm);
    NNPCCL_TRY_REPORT(comm, guard.check_open());
    NNPCCL_TRY_REPORT(comm, check_ready(comm));
    Status st = validate(comm, call);
    if (!st) return report(comm, st);
    if (comm->failed()) {
        Status failed = comm->failure();
        return report(comm, Status(failed.code(), "the communicator has failed earlier: " + failed.message()));
    }
    comm->complete(&call);
    if (request == nullptr) {
        st = comm->run_blocking(call);
        return st ? NNPCCL_SUCCESS : fail_call(comm, st);
    }
    // The handle is made and registered before the operation starts: an
    // allocation that fails afterwards would leave it running on buffers
    // the caller was told it may reuse.
    auto made = std::make_unique<nnpccl_request>(nnpccl_request{nullptr, comm, comm->creator_pid()});
    live_requests().add(made.get());
    // Out of the registry again if start fails, by error or by exception.
    struct Unregister {
        nnpccl_request *request;
        ~Unregister() {
            if (request != nullptr) live_requests().take(request);
        }
    } unregister{made.get()};
    st = comm->start(call, true, &made->op);
    if (!st) return fail_call(comm, st);
    unregister.request = nullptr;
    *request = made.release();
    return NNPCCL_SUCCESS;
}

// Whether a blocking call moves nothing and waits for nothing, so that it
// only takes its number, as a planned call would: a rank that passes
// elements where the others pass none is still caught at the next call.
// Such a call is a collective of no elements, with valid arguments, on a
// ready communicator that has not failed and has nothing queued. It skips
// run(), whose checks and their Status values cost more than the call;
// anything else goes there, and is refused there if it is wrong.
// validate() accepts every call this does.
bool only_takes_its_number(const nnpccl_comm *comm, const Call &c) {
    using C = Collective;
    return c.count == 0 && c.collective != C::Barrier && !is_point_to_point(c.collective) &&
           valid_datatype(c.datatype) && (!reduces(c.collective) || valid_redop(c.op)) &&
           (!has_root(c.collective) || (c.root >= 0 && c.root < comm->nranks())) && !comm->closing() && comm->ready() &&
           !comm->failed() && comm->idle() && !used_after_fork(comm);
}

nnpccl_result_t run_blocking(nnpccl_comm *comm, Call &&call) {
    CallGuard guard(comm);
    if (guard.held() && only_takes_its_number(comm, call)) {
        comm->number_empty_call();
        return NNPCCL_SUCCESS;
    }
    return run(comm, guard, call, nullptr);
}

nnpccl_result_t run_nonblocking(nnpccl_comm *comm, Call &&call, nnpccl_request_t *request) {
    if (request != nullptr) *request = nullptr;
    CallGuard guard(comm);
    if (request == nullptr) {
        if (guard.held() && used_after_fork(comm)) return report_forked(comm);
        return report(guard.held() ? comm : nullptr, invalid_argument("request is NULL"));
    }
    return run(comm, guard, call, request);
}

Call make_call(Collective coll, const void *send, void *recv, size_t count, nnpccl_datatype_t dt, nnpccl_redop_t op,
               int root) {
    Call c;
    c.collective = coll;
    c.send = send;
    c.recv = recv;
    c.count = count;
    c.datatype = dt;
    c.op = op;
    c.root = root;
    return c;
}

} // namespace

extern "C" {

nnpccl_result_t nnpccl_allreduce(const void *sendbuf, void *recvbuf, size_t count, nnpccl_datatype_t datatype,
                                 nnpccl_redop_t op, nnpccl_comm_t comm) {
    return run_blocking(comm, make_call(Collective::Allreduce, sendbuf, recvbuf, count, datatype, op, -1));
}
nnpccl_result_t nnpccl_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, nnpccl_datatype_t datatype,
                                      nnpccl_redop_t op, nnpccl_comm_t comm) {
    return run_blocking(comm, make_call(Collective::ReduceScatter, sendbuf, recvbuf, recvcount, datatype, op, -1));
}
nnpccl_result_t nnpccl_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, nnpccl_datatype_t datatype,
                                 nnpccl_comm_t comm) {
    return run_blocking(comm, make_call(Collective::Allgather, sendbuf, recvbuf, sendcount, datatype, NNPCCL_SUM, -1));
}
nnpccl_result_t nnpccl_broadcast(const void *sendbuf, void *recvbuf, size_t count, nnpccl_datatype_t datatype, int root,
                                 nnpccl_comm_t comm) {
    return run_blocking(comm, make_call(Collective::Broadcast, sendbuf, recvbuf, count, datatype, NNPCCL_SUM, root));
}
nnpccl_result_t nnpccl_reduce(const void *sendbuf, void *recvbuf, size_t count, nnpccl_datatype_t datatype,
                              nnpccl_redop_t op, int root, nnpccl_comm_t comm) {
    return run_blocking(comm, make_call(Collective::Reduce, sendbuf, recvbuf, count, datatype, op, root));
}
nnpccl_result_t nnpccl_gather(const void *sendbuf, void *recvbuf, size_t sendcount, nnpccl_datatype_t datatype, int root,
                              nnpccl_comm_t comm) {
    return run_blocking(comm, make_call(Collective::Gather, sendbuf, recvbuf, sendcount, datatype, NNPCCL_SUM, root));
}
nnpccl_result_t nnpccl_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, nnpccl_datatype_t datatype,
                               int root, nnpccl_comm_t comm) {
    return run_blocking(comm, make_call(Collective::Scatter, sendbuf, recvbuf, recvcount, datatype, NNPCCL_SUM, root));
}
nnpccl_result_t nnpccl_alltoall(const void *sendbuf, void *recvbuf, size_t count, nnpccl_datatype_t datatype,
                                nnpccl_comm_t comm) {
    return run_blocking(comm, make_call(Collective::Alltoall, sendbuf, recvbuf, count, datatype, NNPCCL_SUM, -1));
}
nnpccl_result_t nnpccl_send(const void *sendbuf, size_t count, nnpccl_datatype_t datatype, int peer,
                            nnpccl_comm_t comm) {
    return run_blocking(comm, make_call(Collective::Send, sendbuf, nullptr, count, datatype, NNPCCL_SUM, peer));
}
nnpccl_result_t nnpccl_recv(void *recvbuf, size_t count, nnpccl_datatype_t datatype, int peer, nnpccl_comm_t comm) {
    return run_blocking(comm, make_call(Collective::Recv, nullptr, recvbuf, count, datatype, NNPCCL_SUM, peer));
}
nnpccl_result_t nnpccl_barrier(nnpccl_comm_t comm) {
    return run_blocking(comm, make_call(Collective::Barrier, nullptr, nullptr, 0, NNPCCL_UINT8, NNPCCL_SUM, -1));
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
nnpccl_result_t nnpccl_igather(const void *sendbuf, void *recvbuf, size_t sendcount, nnpccl_datatype_t datatype,
                               int root, nnpccl_comm_t comm, nnpccl_request_t *request) {
    return run_nonblocking(comm, make_call(Collective::Gather, sendbuf, recvbuf, sendcount, datatype, NNPCCL_SUM, root),
                           request);
}
nnpccl_result_t nnpccl_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount, nnpccl_datatype_t datatype,
                                int root, nnpccl_comm_t comm, nnpccl_request_t *request) {
    return run_nonblocking(comm, make_call(Collective::Scatter, sendbuf, recvbuf, recvcount, datatype, NNPCCL_SUM, root),
                           request);
}
nnpccl_result_t nnpccl_ialltoall(const void *sendbuf, void *recvbuf, size_t count, nnpccl_datatype_t datatype,
                                 nnpccl_comm_t comm, nnpccl_request_t *request) {
    return run_nonblocking(comm, make_call(Collective::Alltoall, sendbuf, recvbuf, count, datatype, NNPCCL_SUM, -1),
                           request);
}
nnpccl_result_t nnpccl_isend(const void *sendbuf, size_t count, nnpccl_datatype_t datatype, int peer,
                             nnpccl_comm_t comm, nnpccl_request_t *request) {
    return run_nonblocking(comm, make_call(Collective::Send, sendbuf, nullptr, count, datatype, NNPCCL_SUM, peer),
                           request);
}
nnpccl_result_t nnpccl_irecv(void *recvbuf, size_t count, nnpccl_datatype_t datatype, int peer, nnpccl_comm_t comm,
                             nnpccl_request_t *request) {
    return run_nonblocking(comm, make_call(Collective::Recv, nullptr, recvbuf, count, datatype, NNPCCL_SUM, peer),
                           request);
}
nnpccl_result_t nnpccl_ibarrier(nnpccl_comm_t comm, nnpccl_request_t *request) {
    return run_nonblocking(comm, make_call(Collective::Barrier, nullptr, nullptr, 0, NNPCCL_UINT8, NNPCCL_SUM, -1),
                           request);
}

nnpccl_result_t nnpccl_wait(nnpccl_request_t request) {
    if (request == nullptr) return report(nullptr, invalid_argument("request is NULL"));
    switch (find_request(request, true)) {
    case Found::NotLive: return report(nullptr, not_a_request());
    case Found::Forked: return report_forked(request->creator_pid);
    case Found::Taken: break;
    }
    std::unique_ptr<nnpccl_request> owned(request);
    CallGuard guard(owned->comm);
    // Destroy and abort finish every operation before they free the communicator.
    if (!guard.held())
        return report(nullptr, owned->op->done.load(std::memory_order_acquire)
                                   ? owned->op->result
                                   : invalid_usage("the request's communicator was destroyed or aborted"));
    Status st = owned->comm->wait(*owned->op);
    return report(owned->comm, st);
}

nnpccl_result_t nnpccl_test(nnpccl_request_t request, int *done) {
    if (request == nullptr) return report(nullptr, invalid_argument("request is NULL"));
    nnpccl_comm *asked = nullptr;
    bool finished = false, forked = false;
    // With done NULL the request stays live: the error changes nothing.
    const bool live = live_requests().peek(request, [&](const nnpccl_request &r) {
        forked = made_before_fork(r.creator_pid);
        asked = r.comm;
        finished = !forked && r.op->done.load(std::memory_order_acquire);
        return finished && done != nullptr;
    });
    if (!live) return report(nullptr, not_a_request());
    if (forked) return report_forked(request->creator_pid);
    CallGuard guard(asked);
    nnpccl_comm *comm = guard.held() ? asked : nullptr;
    if (done == nullptr) return report(comm, invalid_argument("done (the output pointer) is NULL"));
    *done = finished ? 1 : 0;
    if (!finished) return NNPCCL_SUCCESS;
    std::unique_ptr<nnpccl_request> owned(request);
    return report(comm, owned->op->result);
}

nnpccl_result_t nnpccl_request_free(nnpccl_request_t request) {
    if (request == nullptr) return report(nullptr, invalid_argument("request is NULL"));
    switch (find_request(request, true)) {
    case Found::NotLive: return report(nullptr, not_a_request());
    // Freed in a fork's child, its operation would go back to the parent's pools: kept as it is.
    case Found::Forked: return report_forked(request->creator_pid);
    case Found::Taken: break;
    }
    delete request;
    return NNPCCL_SUCCESS;
}

} // extern "C"
