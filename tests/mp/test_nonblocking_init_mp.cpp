// Nonblocking init (config.blocking = 0) and abort during init, on real
// ranks: init returns at once and is polled to readiness; a communicator
// that is still initializing refuses every call without waiting; abort,
// from any thread at any moment of the init, returns within a fraction of
// a second and leaves no socket, thread or shared memory behind, and the
// ranks that were waiting for the aborted one fail instead of hanging.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "check_data.hpp"
#include "local_launch.hpp"
#include "mp_support.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The machine's 2 cores are shared: polls sleep between calls rather than spin.
void pause_between_polls() { std::this_thread::sleep_for(std::chrono::milliseconds(3)); }

nnpccl_config_t nonblocking_config(int timeout_sec) {
    nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
    cfg.timeout_sec = timeout_sec;
    cfg.blocking = 0;
    return cfg;
}

// Polls a nonblocking init until it is no longer in progress (or `limit_sec`
// has passed, which returns NNPCCL_IN_PROGRESS).
nnpccl_result_t poll_init(nnpccl_comm_t comm, double limit_sec) {
    const auto start = Clock::now();
    nnpccl_result_t state = NNPCCL_IN_PROGRESS;
    while (seconds_since(start) < limit_sec) {
        if (nnpccl_comm_get_async_error(comm, &state) != NNPCCL_SUCCESS) return NNPCCL_ERR_INTERNAL;
        if (state != NNPCCL_IN_PROGRESS) return state;
        pause_between_polls();
    }
    return NNPCCL_IN_PROGRESS;
}

bool mentions(const char *text, const char *words) { return std::strstr(text, words) != nullptr; }

// What a rank holds: its open file descriptors and its threads.
struct Resources {
    int fds = 0;
    int threads = 0;
    bool operator==(const Resources &o) const { return fds == o.fds && threads == o.threads; }
};

int count_entries(const char *dir) {
    int n = 0;
    if (DIR *d = opendir(dir)) {
        while (dirent *e = readdir(d)) n += e->d_name[0] != '.';
        closedir(d);
    }
    return n;
}

Resources resources_now() { return Resources{count_entries("/proc/self/fd"), count_entries("/proc/self/task")}; }

// The count once whatever has ended has left /proc: a joined thread's task
// may be listed for a moment after pthread_join returns (the kernel wakes
// the joiner before it has released the task). Looks again for up to a
// second while the count is not `expected`; a real leak stays.
Resources resources_settled(const Resources &expected) {
    Resources now = resources_now();
    for (int i = 0; i < 100 && !(now == expected); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        now = resources_now();
    }
    return now;
}

// The count to come back to. ThreadSanitizer starts a thread of its own at
// the process's first pthread_create and keeps it; one thread started and
// joined here makes that happen before counting (elsewhere it leaves nothing).
Resources resources_baseline() {
    std::thread([] {}).join();
    return resources_now();
}

std::vector<std::string> shm_files() {
    std::vector<std::string> names;
    if (DIR *d = opendir("/dev/shm")) {
        while (dirent *e = readdir(d))
            if (std::strncmp(e->d_name, "nnpccl", 6) == 0) names.push_back(e->d_name);
        closedir(d);
    }
    return names;
}

int init_then_allreduce(int rank, int nranks, const nnpccl_unique_id_t &id) {
    int failures = 0;
    nnpccl_config_t cfg = nonblocking_config(30);
    nnpccl_comm_t comm = nullptr;
    EXPECT(nnpccl_comm_init_rank(&comm, nranks, id, rank, &cfg) == NNPCCL_IN_PROGRESS);
    if (comm == nullptr) return failures + 1;
    nnpccl_result_t state = poll_init(comm, 20);
    EXPECT(state == NNPCCL_SUCCESS);
    if (state != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "rank %d: init ended in %s: %s\n", rank, nnpccl_get_error_string(state),
                     nnpccl_get_last_error(comm));
        nnpccl_comm_abort(comm);
        return failures;
    }
    int r = -1, n = -1;
    EXPECT(nnpccl_comm_rank(comm, &r) == NNPCCL_SUCCESS && r == rank);
    EXPECT(nnpccl_comm_size(comm, &n) == NNPCCL_SUCCESS && n == nranks);
    // Large enough for the pipelined ring, not only the direct algorithm.
    const size_t count = 3 * nnpccl_check::kPeriod + 17;
    std::vector<float> send(count), recv(count);
    nnpccl_check::input_pattern(NNPCCL_FLOAT32, NNPCCL_SUM, rank).fill(send.data(), 0, count);
    EXPECT(nnpccl_allreduce(send.data(), recv.data(), count, NNPCCL_FLOAT32, NNPCCL_SUM, comm) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_check::reduced_pattern(NNPCCL_FLOAT32, NNPCCL_SUM, nranks).count_wrong(recv.data(), 0, count) == 0);
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

// Ranks 0 and 1 wait in init for rank 2, which never calls it. Rank 0's
// main thread polls while another thread aborts; rank 1 must hear of it.
int abort_while_waiting_for_a_missing_rank(int rank, int nranks, const nnpccl_unique_id_t &id) {
    if (rank == 2) return 0;
    int failures = 0;
    const Resources before = resources_baseline();
    const std::vector<std::string> segments_before = shm_files();
    // A deadline far away: the abort, not the deadline, must end these inits.
    nnpccl_config_t cfg = nonblocking_config(60);
    nnpccl_comm_t comm = nullptr;
    const auto start = Clock::now();
    EXPECT(nnpccl_comm_init_rank(&comm, nranks, id, rank, &cfg) == NNPCCL_IN_PROGRESS);
    if (comm == nullptr) return failures + 1;
    EXPECT(seconds_since(start) < 0.5); // it did not wait for anyone
    if (rank == 1) {
        nnpccl_result_t state = poll_init(comm, 10);
        EXPECT(state == NNPCCL_ERR_REMOTE);
        EXPECT(mentions(nnpccl_get_last_error(comm), "rank 0"));
        EXPECT(seconds_since(start) < 5);
        EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    } else {
        std::atomic<double> abort_seconds{-1};
        std::atomic<int> abort_result{-1};
        std::thread aborter([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300)); // the init is waiting by now
            const auto t0 = Clock::now();
            abort_result = nnpccl_comm_abort(comm);
            abort_seconds = seconds_since(t0);
        });
        // Polls right through the abort: each call either runs before the
        // communicator is freed or finds the handle gone.
        nnpccl_result_t state = NNPCCL_IN_PROGRESS;
        int in_progress_polls = 0;
        while (nnpccl_comm_get_async_error(comm, &state) == NNPCCL_SUCCESS && state == NNPCCL_IN_PROGRESS &&
               seconds_since(start) < 10) {
            ++in_progress_polls;
            pause_between_polls();
        }
        aborter.join();
        EXPECT(in_progress_polls > 10);
        EXPECT(abort_result.load() == NNPCCL_SUCCESS);
        EXPECT(abort_seconds.load() >= 0 && abort_seconds.load() < 2);
        if (abort_seconds.load() > 0.5)
            std::fprintf(stderr, "rank 0: abort took %.3f s\n", abort_seconds.load());
        // The handle is gone: refused, not dereferenced.
        EXPECT(nnpccl_comm_get_async_error(comm, &state) == NNPCCL_ERR_INVALID_ARGUMENT);
    }
    const Resources after = resources_settled(before);
    EXPECT(after == before);
    if (!(after == before))
        std::fprintf(stderr, "rank %d: %d fds and %d threads before init, %d and %d after\n", rank, before.fds,
                     before.threads, after.fds, after.threads);
    EXPECT(shm_files() == segments_before);
    return failures;
}

// Rank 0 inits without blocking, waits `delay_us` and aborts (or, with
// `destroy`, destroys) at whatever point its init has reached. The others
// (rank 1 nonblocking, rank 2 blocking) must end with an error, never hang.
int abort_soon_after_init(int rank, int nranks, const nnpccl_unique_id_t &id, int delay_us, bool destroy) {
    int failures = 0;
    if (rank == 0) {
        const Resources before = resources_baseline();
        nnpccl_config_t cfg = nonblocking_config(2);
        nnpccl_comm_t comm = nullptr;
        EXPECT(nnpccl_comm_init_rank(&comm, nranks, id, rank, &cfg) == NNPCCL_IN_PROGRESS);
        if (comm == nullptr) return failures + 1;
        if (delay_us > 0) usleep(static_cast<useconds_t>(delay_us));
        const auto t0 = Clock::now();
        EXPECT((destroy ? nnpccl_comm_destroy(comm) : nnpccl_comm_abort(comm)) == NNPCCL_SUCCESS);
        EXPECT(seconds_since(t0) < 2);
        EXPECT(resources_settled(before) == before);
        return failures;
    }
    nnpccl_config_t cfg = nonblocking_config(2);
    cfg.blocking = rank == 1 ? 0 : 1;
    nnpccl_comm_t comm = nullptr;
    const auto start = Clock::now();
    nnpccl_result_t rc = nnpccl_comm_init_rank(&comm, nranks, id, rank, &cfg);
    if (rc == NNPCCL_IN_PROGRESS) rc = poll_init(comm, 10);
    if (rc == NNPCCL_SUCCESS) {
        // Rank 0's init finished before the abort: the abort reaches us through the first collective.
        int32_t x = 1, sum = 0;
        rc = nnpccl_allreduce(&x, &sum, 1, NNPCCL_INT32, NNPCCL_SUM, comm);
        EXPECT(rc != NNPCCL_SUCCESS);
    }
    EXPECT(rc == NNPCCL_ERR_REMOTE || rc == NNPCCL_ERR_TIMEOUT);
    EXPECT(seconds_since(start) < 8);
    if (rc != NNPCCL_ERR_REMOTE && rc != NNPCCL_ERR_TIMEOUT)
        std::fprintf(stderr, "rank %d: %s: %s\n", rank, nnpccl_get_error_string(rc), nnpccl_get_last_error(comm));
    // Destroy would return the communicator's error; abort frees it all the same.
    if (comm != nullptr) EXPECT(nnpccl_comm_abort(comm) == NNPCCL_SUCCESS);
    return failures;
}

// Rank 0 checks every call on its initializing communicator while rank 1
// holds the init back by coming late (and with a blocking init).
int calls_during_init(int rank, int nranks, const nnpccl_unique_id_t &id) {
    int failures = 0;
    nnpccl_comm_t comm = nullptr;
    if (rank == 1) {
        usleep(400000);
        nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
        cfg.timeout_sec = 30;
        EXPECT(nnpccl_comm_init_rank(&comm, nranks, id, rank, &cfg) == NNPCCL_SUCCESS);
    } else {
        nnpccl_config_t cfg = nonblocking_config(30);
        EXPECT(nnpccl_comm_init_rank(&comm, nranks, id, rank, &cfg) == NNPCCL_IN_PROGRESS);
        if (comm == nullptr) return failures + 1;
        const auto t0 = Clock::now();
        float x = 1, y = 0;
        EXPECT(nnpccl_allreduce(&x, &y, 1, NNPCCL_FLOAT32, NNPCCL_SUM, comm) == NNPCCL_ERR_INVALID_USAGE);
        EXPECT(mentions(nnpccl_get_last_error(comm), "still initializing"));
        EXPECT(mentions(nnpccl_get_last_error(comm), "nnpccl_comm_get_async_error"));
        nnpccl_request_t req = nullptr;
        EXPECT(nnpccl_ibroadcast(&x, &y, 1, NNPCCL_FLOAT32, 0, comm, &req) == NNPCCL_ERR_INVALID_USAGE);
        EXPECT(req == nullptr);
        EXPECT(nnpccl_barrier(comm) == NNPCCL_ERR_INVALID_USAGE);
        int value = -1;
        EXPECT(nnpccl_comm_rank(comm, &value) == NNPCCL_ERR_INVALID_USAGE);
        EXPECT(nnpccl_comm_size(comm, &value) == NNPCCL_ERR_INVALID_USAGE);
        EXPECT(value == -1);
        nnpccl_result_t state = NNPCCL_SUCCESS;
        EXPECT(nnpccl_comm_get_async_error(comm, &state) == NNPCCL_SUCCESS && state == NNPCCL_IN_PROGRESS);
        EXPECT(seconds_since(t0) < 0.2); // refused at once, nothing waited
        EXPECT(poll_init(comm, 20) == NNPCCL_SUCCESS);
    }
    if (comm == nullptr) return failures + 1;
    int32_t mine = rank + 1, sum = 0;
    EXPECT(nnpccl_allreduce(&mine, &sum, 1, NNPCCL_INT32, NNPCCL_SUM, comm) == NNPCCL_SUCCESS && sum == 3);
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

// Runs `body` in a child process, which starts with one thread and no
// rendezvous root of earlier tests, so that its resources can be counted.
int in_child(const std::function<int()> &body) {
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) _exit(body());
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Rank 1 of a job whose root nobody runs: its init retries the connection
// until the abort.
int abort_while_connecting() {
    const int rank = 1;
    int failures = 0;
    const Resources before = resources_baseline();
    setenv("NNPCCL_ROOT", "127.0.0.1:9", 1); // nothing listens there
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    nnpccl_config_t cfg = nonblocking_config(60);
    nnpccl_comm_t comm = nullptr;
    EXPECT(nnpccl_comm_init_from_env(&comm, &cfg) == NNPCCL_IN_PROGRESS);
    if (comm == nullptr) return failures + 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(150)); // a few connection attempts
    nnpccl_result_t state = NNPCCL_SUCCESS;
    EXPECT(nnpccl_comm_get_async_error(comm, &state) == NNPCCL_SUCCESS && state == NNPCCL_IN_PROGRESS);
    const auto t0 = Clock::now();
    EXPECT(nnpccl_comm_abort(comm) == NNPCCL_SUCCESS);
    EXPECT(seconds_since(t0) < 0.5);
    EXPECT(resources_settled(before) == before);
    return failures;
}

} // namespace

TEST_CASE("a nonblocking init polled to success gives a working communicator", "[mp][nonblocking-init]") {
    CHECK(run_local_ranks(3, init_then_allreduce) == 0);
}

TEST_CASE("abort from another thread ends an init waiting for a missing rank, on every rank", "[mp][nonblocking-init][abort]") {
    CHECK(run_local_ranks(3, abort_while_waiting_for_a_missing_rank) == 0);
}

TEST_CASE("abort or destroy right after a nonblocking init returns never hangs or leaks", "[mp][nonblocking-init][abort]") {
    // From before the connection to the root to (likely) after the init has finished.
    const int delays_us[] = {0, 200, 2000, 10000, 50000};
    for (int round = 0; round < 5; ++round) {
        const int delay_us = delays_us[round];
        const bool destroy = round % 2 == 1;
        INFO("round " << round << ": " << (destroy ? "destroy" : "abort") << " after " << delay_us << " us");
        CHECK(run_local_ranks(3, [=](int rank, int nranks, const nnpccl_unique_id_t &id) {
                  return abort_soon_after_init(rank, nranks, id, delay_us, destroy);
              }) == 0);
    }
}

TEST_CASE("calls on a communicator that is still initializing are refused at once", "[mp][nonblocking-init]") {
    CHECK(run_local_ranks(2, calls_during_init) == 0);
}

TEST_CASE("a failed nonblocking init reports its error through the async error", "[nonblocking-init]") {
    nnpccl_unique_id_t id;
    REQUIRE(nnpccl_get_unique_id(&id) == NNPCCL_SUCCESS);
    nnpccl_config_t cfg = nonblocking_config(1);
    nnpccl_comm_t comm = nullptr;
    REQUIRE(nnpccl_comm_init_rank(&comm, 2, id, 0, &cfg) == NNPCCL_IN_PROGRESS); // rank 1 never comes
    REQUIRE(comm != nullptr);
    CHECK(poll_init(comm, 10) == NNPCCL_ERR_TIMEOUT);
    CHECK_THAT(nnpccl_get_last_error(comm), Catch::Contains("rank(s) 1 never joined"));
    float x = 1;
    CHECK(nnpccl_allreduce(&x, &x, 1, NNPCCL_FLOAT32, NNPCCL_SUM, comm) == NNPCCL_ERR_INVALID_USAGE);
    CHECK_THAT(nnpccl_get_last_error(comm), Catch::Contains("init failed"));
    CHECK(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS); // the handle still had to be freed
}

TEST_CASE("abort stops a nonblocking init from the environment that retries an unreachable root", "[nonblocking-init][abort]") {
    CHECK(in_child(abort_while_connecting) == 0);
}

TEST_CASE("config.blocking other than 0 or 1 is refused by name", "[nonblocking-init]") {
    nnpccl_unique_id_t id;
    REQUIRE(nnpccl_get_unique_id(&id) == NNPCCL_SUCCESS);
    nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
    cfg.blocking = 2;
    nnpccl_comm_t comm = nullptr;
    CHECK(nnpccl_comm_init_rank(&comm, 1, id, 0, &cfg) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(comm == nullptr);
    CHECK_THAT(nnpccl_get_last_error(nullptr), Catch::Contains("blocking"));
    // The same root serves a 1-rank nonblocking init, which needs nobody else.
    cfg.blocking = 0;
    REQUIRE(nnpccl_comm_init_rank(&comm, 1, id, 0, &cfg) == NNPCCL_IN_PROGRESS);
    CHECK(poll_init(comm, 10) == NNPCCL_SUCCESS);
    double v = 2.5, out = 0;
    CHECK(nnpccl_allreduce(&v, &out, 1, NNPCCL_FLOAT64, NNPCCL_SUM, comm) == NNPCCL_SUCCESS);
    CHECK(out == 2.5);
    CHECK(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
}
