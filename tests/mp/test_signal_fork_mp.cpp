// The two places where a call may land in a state the library did not
// choose: a signal handler that aborts again and again (a repeating
// watchdog timer) while the aborted call tears its communicator down and
// after, and a fork's child whose parent had threads inside the library at
// the fork. Neither may take a lock or allocate where the interrupted code
// may hold one, nor touch what the parent's job uses.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "local_launch.hpp"
#include "mp_support.hpp"
#include "nnpccl_inspect.h"
#include "sanitizer_build.hpp"

namespace {

// ThreadSanitizer holds an asynchronous signal back until a point of its
// own choosing, and reports a fork of a process whose threads hold locks:
// the two tests here are left to the plain and ASan builds
// (kThreadSanitizer). AddressSanitizer's own operator new and delete must pair with each other:
// this program's replacements (below), which count allocations, are left
// out of an ASan build, which checks the rest of each test.
constexpr bool kCountsAllocations = !kAddressSanitizer;

// Set while a signal handler runs a library call: an allocation then is
// counted, since the handler may have interrupted the allocator itself.
volatile sig_atomic_t g_in_handler = 0;
std::atomic<long> g_allocations_in_handler{0};

} // namespace

#ifndef NNPCCL_TEST_ASAN
// Every operator new and delete of the test program (the library's too,
// linked in) passes here; outside a handler they only forward.
namespace {

void *allocate(std::size_t bytes) {
    if (g_in_handler) g_allocations_in_handler.fetch_add(1, std::memory_order_relaxed);
    if (void *p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
    throw std::bad_alloc();
}

void release(void *p) noexcept {
    if (g_in_handler && p != nullptr) g_allocations_in_handler.fetch_add(1, std::memory_order_relaxed);
    std::free(p);
}

} // namespace

void *operator new(std::size_t bytes) { return allocate(bytes); }
void *operator new[](std::size_t bytes) { return allocate(bytes); }
void operator delete(void *p) noexcept { release(p); }
void operator delete[](void *p) noexcept { release(p); }
void operator delete(void *p, std::size_t) noexcept { release(p); }
void operator delete[](void *p, std::size_t) noexcept { release(p); }
#endif

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Kills this process after `seconds` unless stopped: a deadlock shows as
// a rank killed, never as a test that waits forever.
struct Watchdog {
    pid_t dog = -1;
    explicit Watchdog(int seconds) {
        const pid_t owner = getpid();
        dog = fork();
        if (dog == 0) {
            sleep(static_cast<unsigned>(seconds));
            kill(owner, SIGKILL);
            _exit(0);
        }
    }
    ~Watchdog() {
        if (dog <= 0) return;
        kill(dog, SIGKILL);
        waitpid(dog, nullptr, 0);
    }
};

nnpccl_comm_t g_alarmed_comm = nullptr;
// What the handler's aborts returned: the first interrupts the call, the
// later ones land during its teardown or after it.
std::atomic<int> g_aborts{0}, g_aborts_ok{0}, g_aborts_being_freed{0}, g_aborts_freed{0}, g_aborts_other{0};

void abort_again_and_again(int) {
    g_in_handler = 1;
    const nnpccl_result_t rc = nnpccl_comm_abort(g_alarmed_comm);
    g_in_handler = 0;
    ++g_aborts;
    switch (rc) {
    case NNPCCL_SUCCESS: ++g_aborts_ok; break;
    case NNPCCL_ERR_INVALID_USAGE: ++g_aborts_being_freed; break;
    case NNPCCL_ERR_INVALID_ARGUMENT: ++g_aborts_freed; break;
    default: ++g_aborts_other; break;
    }
}

// Rank 0 is inside an allreduce that waits for rank 1 when a timer starts
// firing every 0.5 ms, each time aborting the communicator from its
// handler; it keeps firing through the call's return, the free, and 20 ms
// after. Every abort must return at once without allocating (the handler
// may have interrupted malloc, or a lock the teardown holds), and the
// call must return within a second of the first.
int abort_from_repeating_alarm(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = join_job(rank, nranks, id, 30);
    if (comm == nullptr) return 1;
    int failures = 0;
    std::vector<float> buf(1 << 18, 1.0f);
    if (nnpccl_allreduce(buf.data(), buf.data(), 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm) != NNPCCL_SUCCESS) return 1;
    if (rank == 1) {
        usleep(1500000);
        const nnpccl_result_t rc =
            nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm);
        EXPECT(rc == NNPCCL_ERR_REMOTE);
        nnpccl_comm_abort(comm);
        return failures;
    }
    Watchdog dog(20);
    g_alarmed_comm = comm;
    struct sigaction on_alarm {};
    on_alarm.sa_handler = abort_again_and_again;
    sigemptyset(&on_alarm.sa_mask);
    on_alarm.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &on_alarm, nullptr);
    const itimerval every_half_ms{{0, 500}, {0, 300000}};
    setitimer(ITIMER_REAL, &every_half_ms, nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    const nnpccl_result_t rc = nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm);
    const double seconds = seconds_since(t0);
    // The handler goes on firing on a freed communicator, as a watchdog
    // not yet told would.
    while (seconds_since(t0) < seconds + 0.02) {
    }
    const itimerval off{};
    setitimer(ITIMER_REAL, &off, nullptr);
    signal(SIGALRM, SIG_DFL);
    EXPECT(rc == NNPCCL_ERR_REMOTE);
    EXPECT(seconds < 1.5); // 0.3 s to the first signal, then a sleep slice
    if (kCountsAllocations) EXPECT(g_allocations_in_handler.load() == 0);
    EXPECT(g_aborts_ok.load() >= 1);
    EXPECT(g_aborts_freed.load() >= 1);
    EXPECT(g_aborts_other.load() == 0);
    int ignored = 0;
    EXPECT(nnpccl_comm_rank(comm, &ignored) == NNPCCL_ERR_INVALID_ARGUMENT);
    std::fprintf(stderr,
                 "rank 0: %s after %.2f s; %d aborts from the handler (%d during the call, %d during the teardown, "
                 "%d after the free), %ld allocations in it\n",
                 nnpccl_get_error_string(rc), seconds, g_aborts.load(), g_aborts_ok.load(), g_aborts_being_freed.load(),
                 g_aborts_freed.load(), g_allocations_in_handler.load());
    return failures;
}

} // namespace

TEST_CASE("nnpccl_comm_abort from a repeating signal handler never allocates or locks, and the call returns at once",
          "[mp][abort]") {
    if (kThreadSanitizer) {
        WARN("left to the plain and ASan builds: ThreadSanitizer defers the signal past the call");
        return;
    }
    const char *transport = GENERATE("shm", "socket", "ofi");
    CAPTURE(transport);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    CHECK(run_local_ranks(2, abort_from_repeating_alarm) == 0);
    unsetenv("NNPCCL_TRANSPORT");
}

namespace {

// Every C API call that takes a communicator or a request, on the parent's
// communicator and on a request it started, in a fork's child: each must
// fail at once naming the fork. A call that waited on a lock a parent's
// thread held at the fork would hang until the alarm kills the child.
[[noreturn]] void call_everything_in_child(nnpccl_comm_t comm, nnpccl_request_t parents_request) {
    alarm(5);
    const int rank = 0;
    int failures = 0;
    // Handles that are no communicator and no request are refused after a
    // look at the registries, whose locks the parent's threads were taking.
    int not_a_handle = 0;
    int ignored = 0;
    EXPECT(nnpccl_comm_rank(reinterpret_cast<nnpccl_comm_t>(&not_a_handle), &ignored) == NNPCCL_ERR_INVALID_ARGUMENT);
    EXPECT(nnpccl_test(reinterpret_cast<nnpccl_request_t>(&not_a_handle), &ignored) == NNPCCL_ERR_INVALID_ARGUMENT);
    const std::string named = "used in pid " + std::to_string(getpid());
    auto refused = [&](const char *what, nnpccl_result_t rc) {
        const std::string message = nnpccl_get_last_error(nullptr);
        if (rc != NNPCCL_ERR_INVALID_USAGE || message.find(named) == std::string::npos) {
            std::fprintf(stderr, "child: %s gave %s: %s\n", what, nnpccl_get_error_string(rc), message.c_str());
            ++failures;
        }
    };
    float buf[8] = {};
    nnpccl_request_t request = nullptr;
    nnpccl_result_t async = NNPCCL_SUCCESS;
    refused("rank", nnpccl_comm_rank(comm, &ignored));
    refused("size", nnpccl_comm_size(comm, &ignored));
    refused("get_async_error", nnpccl_comm_get_async_error(comm, &async));
    refused("set_algorithms", nnpccl_comm_set_algorithms(comm, nullptr));
    const nnpccl_call_t call{NNPCCL_COLL_ALLREDUCE, buf, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, -1};
    char name[64];
    refused("get_algorithm", nnpccl_comm_get_algorithm(comm, &call, name, sizeof name, nullptr));
    refused("allreduce", nnpccl_allreduce(buf, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("reduce_scatter", nnpccl_reduce_scatter(buf, buf, 2, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("allgather", nnpccl_allgather(buf, buf, 2, NNPCCL_FLOAT32, comm));
    refused("broadcast", nnpccl_broadcast(buf, buf, 4, NNPCCL_FLOAT32, 0, comm));
    refused("reduce", nnpccl_reduce(buf, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, 0, comm));
    refused("gather", nnpccl_gather(buf, buf, 2, NNPCCL_FLOAT32, 0, comm));
    refused("scatter", nnpccl_scatter(buf, buf, 2, NNPCCL_FLOAT32, 0, comm));
    refused("alltoall", nnpccl_alltoall(buf, buf, 2, NNPCCL_FLOAT32, comm));
    refused("barrier", nnpccl_barrier(comm));
    refused("send", nnpccl_send(buf, 4, NNPCCL_FLOAT32, 1, comm));
    refused("recv", nnpccl_recv(buf, 4, NNPCCL_FLOAT32, 1, comm));
    refused("iallreduce", nnpccl_iallreduce(buf, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm, &request));
    refused("iallreduce without a request", nnpccl_iallreduce(buf, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm, nullptr));
    refused("ireduce_scatter", nnpccl_ireduce_scatter(buf, buf, 2, NNPCCL_FLOAT32, NNPCCL_SUM, comm, &request));
    refused("iallgather", nnpccl_iallgather(buf, buf, 2, NNPCCL_FLOAT32, comm, &request));
    refused("ibroadcast", nnpccl_ibroadcast(buf, buf, 4, NNPCCL_FLOAT32, 0, comm, &request));
    refused("ireduce", nnpccl_ireduce(buf, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, 0, comm, &request));
    refused("igather", nnpccl_igather(buf, buf, 2, NNPCCL_FLOAT32, 0, comm, &request));
    refused("iscatter", nnpccl_iscatter(buf, buf, 2, NNPCCL_FLOAT32, 0, comm, &request));
    refused("ialltoall", nnpccl_ialltoall(buf, buf, 2, NNPCCL_FLOAT32, comm, &request));
    refused("ibarrier", nnpccl_ibarrier(comm, &request));
    refused("isend", nnpccl_isend(buf, 4, NNPCCL_FLOAT32, 1, comm, &request));
    refused("irecv", nnpccl_irecv(buf, 4, NNPCCL_FLOAT32, 1, comm, &request));
    EXPECT(request == nullptr);
    // The parent's request stays live and untouched: refused every time.
    refused("test", nnpccl_test(parents_request, &ignored));
    refused("request_free", nnpccl_request_free(parents_request));
    refused("wait", nnpccl_wait(parents_request));
    refused("wait again", nnpccl_wait(parents_request));
    EXPECT(std::strlen(nnpccl_get_last_error(comm)) > 0); // this thread's, naming the fork
    refused("destroy", nnpccl_comm_destroy(comm));
    refused("abort", nnpccl_comm_abort(comm));
    // _exit: the parent's exit handlers, static destructors and (under
    // ASan) leak check are the parent's, not a fork's.
    std::fflush(stderr);
    _exit(failures == 0 ? 0 : 1);
}

// While threads of rank 0 take the library's locks again and again (the
// two registries', through handles that are not live, and the
// communicator's error lock, through an invalid argument), rank 0 forks
// 40 children that each call everything; then its request, started before
// the forks, and later allreduces still give rank 1's data.
int fork_while_threads_call(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = join_job(rank, nranks, id, 30);
    if (comm == nullptr) return 1;
    int failures = 0;
    std::vector<float> buf(1024);
    auto fill = [&](float round) {
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = round * static_cast<float>(rank + 1) + static_cast<float>(i);
    };
    auto wrong = [&](float round) {
        size_t n = 0;
        for (size_t i = 0; i < buf.size(); ++i) n += buf[i] != round * 3.0f + 2.0f * static_cast<float>(i) ? 1 : 0;
        return n;
    };
    fill(1);
    if (rank == 1) {
        EXPECT(nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm) ==
               NNPCCL_SUCCESS);
        EXPECT(wrong(1) == 0);
    } else {
        nnpccl_request_t request = nullptr;
        EXPECT(nnpccl_iallreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm, &request) ==
               NNPCCL_SUCCESS);
        std::atomic<bool> stop{false};
        int not_a_handle = 0;
        std::vector<std::thread> callers;
        callers.emplace_back([&] {
            int r = 0;
            while (!stop.load()) nnpccl_comm_rank(reinterpret_cast<nnpccl_comm_t>(&not_a_handle), &r);
        });
        callers.emplace_back([&] {
            int done = 0;
            while (!stop.load()) nnpccl_test(reinterpret_cast<nnpccl_request_t>(&not_a_handle), &done);
        });
        callers.emplace_back([&] {
            while (!stop.load()) nnpccl_comm_rank(comm, nullptr);
        });
        for (int child = 0; child < 40; ++child) {
            const pid_t pid = fork();
            if (pid == 0) call_everything_in_child(comm, request);
            int status = -1;
            EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid);
            if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
                std::fprintf(stderr, "rank 0: child %d %s %d\n", child,
                             WIFSIGNALED(status) ? "was killed by signal" : "exited with",
                             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
                ++failures;
                break;
            }
        }
        stop.store(true);
        for (std::thread &t : callers) t.join();
        EXPECT(nnpccl_wait(request) == NNPCCL_SUCCESS);
        EXPECT(wrong(1) == 0);
    }
    for (int round = 2; round < 5; ++round) {
        fill(static_cast<float>(round));
        EXPECT(nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm) ==
               NNPCCL_SUCCESS);
        EXPECT(wrong(static_cast<float>(round)) == 0);
    }
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

} // namespace

TEST_CASE("every call in a fork's child fails at once, whatever the parent's threads held, and the parent's job "
          "goes on",
          "[mp][fork]") {
    if (kThreadSanitizer) {
        WARN("left to the plain and ASan builds: ThreadSanitizer refuses a fork while threads hold locks");
        return;
    }
    const char *transport = GENERATE("shm", "socket");
    CAPTURE(transport);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    CHECK(run_local_ranks(2, fork_while_threads_call) == 0);
    unsetenv("NNPCCL_TRANSPORT");
}
