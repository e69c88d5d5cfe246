// Leaving is failing: a rank that destroys its communicator, or whose
// process ends, while the others are inside or later enter a call that needs
// it, fails every such rank within about a second, naming it and why, over
// every transport; a rank whose own call failed locally tells the others
// its reason.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "local_launch.hpp"
#include "mp_support.hpp"
#include "sanitizer_build.hpp"

namespace {

// A limit on the address space (RLIMIT_AS) is how these tests make memory
// run out, and a sanitizer's runtime maps shadow memory and allocates
// outside the limit's accounting, then aborts when a mapping fails: under
// one, the tests that set it are left to the plain build.
constexpr bool kSanitized = kAddressSanitizer || kThreadSanitizer;
// ThreadSanitizer holds an asynchronous signal back until the thread reaches
// a point of its own choosing (a blocking call, the call's return), so a
// handler cannot be timed to land inside a call there.
constexpr bool kSignalsDeferred = kThreadSanitizer;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// How the leaving rank goes.
enum class Leaving { Destroy, Exit };

struct LeaveCase {
    Leaving how;
    bool others_inside; // the others are already waiting when it leaves
};

LeaveCase g_case;

// Three ranks; rank 2 makes one call with the others, then leaves. Ranks 0
// and 1 make an allreduce that needs it: it must fail with
// NNPCCL_ERR_REMOTE naming rank 2 well before the 30 s deadline.
int leave_while_needed(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = join_job(rank, nranks, id, 30);
    if (comm == nullptr) return 1;
    std::vector<float> buf(1 << 16, 1.0f);
    if (nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm) != NNPCCL_SUCCESS)
        return 1;
    if (rank == 2) {
        if (g_case.others_inside) usleep(300000);
        if (g_case.how == Leaving::Exit) return 0; // the process ends with its communicator
        return nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS ? 0 : 1;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const nnpccl_result_t rc = nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm);
    const double seconds = seconds_since(t0);
    const std::string message = nnpccl_get_last_error(comm);
    nnpccl_result_t async = NNPCCL_SUCCESS;
    nnpccl_comm_get_async_error(comm, &async);
    const bool ok = rc == NNPCCL_ERR_REMOTE && async == NNPCCL_ERR_REMOTE && seconds < 3 &&
                    message.find("rank 2") != std::string::npos;
    std::fprintf(stderr, "rank %d: %s after %.2f s: %s%s\n", rank, nnpccl_get_error_string(rc), seconds,
                 message.c_str(), ok ? "" : " (FAILED)");
    nnpccl_comm_abort(comm);
    return ok ? 0 : 1;
}

void run_leave_case(const char *transport, LeaveCase c) {
    g_case = c;
    setenv("NNPCCL_TRANSPORT", transport, 1);
    std::vector<int> statuses;
    run_local_ranks(3, leave_while_needed, false, &statuses);
    unsetenv("NNPCCL_TRANSPORT");
    CHECK(statuses == std::vector<int>{0, 0, 0});
}

} // namespace

TEST_CASE("a rank that destroys its communicator fails, within a second, every rank whose call needs it",
          "[mp][leaving]") {
    const char *transport = GENERATE("shm", "socket", "ofi");
    const bool others_inside = GENERATE(true, false);
    CAPTURE(transport, others_inside);
    run_leave_case(transport, {Leaving::Destroy, others_inside});
}

TEST_CASE("a rank whose process ends with its communicator fails, within a second, every rank whose call needs it",
          "[mp][leaving]") {
    const char *transport = GENERATE("shm", "socket", "ofi");
    CAPTURE(transport);
    run_leave_case(transport, {Leaving::Exit, true});
}

TEST_CASE("a rank with unmatched pending work destroys promptly once its peer has left", "[mp][leaving]") {
    const char *transport = GENERATE("shm", "socket", "ofi");
    CAPTURE(transport);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    CHECK(run_local_ranks(2, [](int rank, int nranks, const nnpccl_unique_id_t &id) {
              nnpccl_comm_t comm = join_job(rank, nranks, id, 30);
              if (comm == nullptr) return 1;
              float one = 1, sum = 0;
              if (nnpccl_allreduce(&one, &sum, 1, NNPCCL_FLOAT32, NNPCCL_SUM, comm) != NNPCCL_SUCCESS) return 1;
              if (rank == 1) return nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS ? 0 : 1;
              // A receive rank 1 never matches, left pending at destroy.
              std::vector<float> buf(1024);
              nnpccl_request_t request = nullptr;
              if (nnpccl_irecv(buf.data(), buf.size(), NNPCCL_FLOAT32, 1, comm, &request) != NNPCCL_SUCCESS) return 1;
              if (nnpccl_request_free(request) != NNPCCL_SUCCESS) return 1;
              const auto t0 = std::chrono::steady_clock::now();
              const nnpccl_result_t rc = nnpccl_comm_destroy(comm);
              const double seconds = seconds_since(t0);
              const std::string message = nnpccl_get_last_error(nullptr);
              const bool ok = rc == NNPCCL_ERR_REMOTE && seconds < 3 && message.find("rank 1") != std::string::npos;
              std::fprintf(stderr, "rank 0: destroy: %s after %.2f s: %s%s\n", nnpccl_get_error_string(rc), seconds,
                           message.c_str(), ok ? "" : " (FAILED)");
              return ok ? 0 : 1;
          }) == 0);
    unsetenv("NNPCCL_TRANSPORT");
}

// How long rank 2 lets rank 0 start waiting for it before it leaves.
constexpr useconds_t kLeaveAfterUs = 1500000;

TEST_CASE("a rank that leaves is heard of promptly by a peer it never exchanged a message with", "[mp][leaving]") {
    // Rank 2 talks to rank 1 only, then destroys its communicator while
    // rank 0 waits to receive from it: rank 0 had no stream to rank 2 (over
    // ofi, no connection either) and must still hear of the leaving.
    const char *transport = GENERATE("shm", "socket", "ofi");
    CAPTURE(transport);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    CHECK(run_local_ranks(3, [](int rank, int nranks, const nnpccl_unique_id_t &id) {
              nnpccl_comm_t comm = join_job(rank, nranks, id, 10);
              if (comm == nullptr) return 1;
              std::vector<float> buf(256, 1.0f);
              if (rank == 2) {
                  if (nnpccl_send(buf.data(), buf.size(), NNPCCL_FLOAT32, 1, comm) != NNPCCL_SUCCESS) return 1;
                  usleep(kLeaveAfterUs); // rank 0 is waiting by now, even on a loaded machine
                  return nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS ? 0 : 1;
              }
              if (rank == 1) {
                  if (nnpccl_recv(buf.data(), buf.size(), NNPCCL_FLOAT32, 2, comm) != NNPCCL_SUCCESS) return 1;
                  if (nnpccl_send(buf.data(), buf.size(), NNPCCL_FLOAT32, 0, comm) != NNPCCL_SUCCESS) return 1;
                  return nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS ? 0 : 1;
              }
              if (nnpccl_recv(buf.data(), buf.size(), NNPCCL_FLOAT32, 1, comm) != NNPCCL_SUCCESS) return 1;
              const auto t0 = std::chrono::steady_clock::now();
              const nnpccl_result_t rc = nnpccl_recv(buf.data(), buf.size(), NNPCCL_FLOAT32, 2, comm);
              const double seconds = seconds_since(t0);
              const std::string message = nnpccl_get_last_error(comm);
              const bool ok = rc == NNPCCL_ERR_REMOTE && seconds < kLeaveAfterUs / 1e6 + 3 &&
                              message.find("rank 2 has left") != std::string::npos;
              std::fprintf(stderr, "rank 0: recv from rank 2: %s after %.2f s: %s%s\n", nnpccl_get_error_string(rc),
                           seconds, message.c_str(), ok ? "" : " (FAILED)");
              nnpccl_comm_abort(comm);
              return ok ? 0 : 1;
          }) == 0);
    unsetenv("NNPCCL_TRANSPORT");
}

namespace {

// This process's address space in bytes (VmSize), or 0.
size_t address_space_bytes() {
    FILE *f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) return 0;
    char line[256];
    size_t kib = 0;
    while (std::fgets(line, sizeof line, f) != nullptr)
        if (std::sscanf(line, "VmSize: %zu kB", &kib) == 1) break;
    std::fclose(f);
    return kib << 10;
}

} // namespace

TEST_CASE("a rank out of memory while starting a call fails its communicator and tells the others why",
          "[mp][leaving][local-failure]") {
    if (kSanitized) {
        WARN("left to the plain build: RLIMIT_AS and a sanitizer's shadow memory do not mix");
        return;
    }
    const char *transport = GENERATE("shm", "socket");
    CAPTURE(transport);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    CHECK(run_local_ranks(2, [](int rank, int nranks, const nnpccl_unique_id_t &id) {
              // Small chunks: the alltoall's schedule has a step per chunk,
              // megabytes of them, which rank 1 has no room to plan.
              nnpccl_comm_t comm = join_job(rank, nranks, id, 30, 4096);
              if (comm == nullptr) return 1;
              int failures = 0;
              const size_t count = size_t{8} << 20; // per block: 64 MiB of floats in all
              std::vector<float> buf(count * static_cast<size_t>(nranks), 1.0f);
              if (nnpccl_allreduce(buf.data(), buf.data(), 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm) != NNPCCL_SUCCESS)
                  return 1;
              // Rank 1's address space ends a little past what it maps now,
              // and it holds every free block of 64 KiB or more (its heap,
              // inherited from the test process, has many): small
              // allocations still succeed, large ones fail.
              std::vector<void *> hoard;
              hoard.reserve(size_t{1} << 16);
              if (rank == 1) {
                  const size_t room = address_space_bytes() + (size_t{1} << 20);
                  const rlimit limit{room, room};
                  if (setrlimit(RLIMIT_AS, &limit) != 0) return 1;
                  for (void *p = std::malloc(64 << 10); p != nullptr && hoard.size() < hoard.capacity();
                       p = std::malloc(64 << 10))
                      hoard.push_back(p);
              }
              const auto t0 = std::chrono::steady_clock::now();
              nnpccl_result_t rc = nnpccl_alltoall(buf.data(), buf.data(), count, NNPCCL_FLOAT32, comm);
              const double seconds = seconds_since(t0);
              const std::string message = nnpccl_get_last_error(comm);
              nnpccl_result_t async = NNPCCL_SUCCESS;
              nnpccl_comm_get_async_error(comm, &async);
              const nnpccl_result_t expected = rank == 1 ? NNPCCL_ERR_SYSTEM : NNPCCL_ERR_REMOTE;
              EXPECT(rc == expected);
              EXPECT(async == expected);
              EXPECT(message.find("out of memory while starting alltoall") != std::string::npos);
              if (rank == 0) EXPECT(message.find("rank 1") != std::string::npos);
              EXPECT(seconds < 3);
              std::fprintf(stderr, "rank %d: %s after %.2f s: %s\n", rank, nnpccl_get_error_string(rc), seconds,
                           message.c_str());
              // Failed for good: the next call fails at once with the same error.
              float one = 1;
              rc = nnpccl_allreduce(&one, &one, 1, NNPCCL_FLOAT32, NNPCCL_SUM, comm);
              EXPECT(rc == expected);
              EXPECT(std::string(nnpccl_get_last_error(comm)).find("out of memory while starting alltoall") !=
                     std::string::npos);
              nnpccl_comm_abort(comm);
              for (void *p : hoard) std::free(p);
              return failures;
          }) == 0);
    unsetenv("NNPCCL_TRANSPORT");
}

namespace {

// A child of rank 0, forked after init: every call with the parent's
// communicator fails at once naming the fork, and none of it reaches the
// parent's job. Exits 0 when it saw that.
[[noreturn]] void use_parents_communicator(nnpccl_comm_t comm, bool destroys) {
    const int rank = 0;
    int failures = 0;
    std::vector<float> buf(1024, 100.0f);
    nnpccl_result_t rc = nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm);
    const std::string message = nnpccl_get_last_error(comm);
    EXPECT(rc == NNPCCL_ERR_INVALID_USAGE);
    EXPECT(message.find("communicator created by pid " + std::to_string(getppid()) + " used in pid " +
                        std::to_string(getpid()) + "; communicators do not survive fork()") != std::string::npos);
    nnpccl_request_t request = nullptr;
    EXPECT(nnpccl_iallreduce(buf.data(), buf.data(), 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm, &request) ==
           NNPCCL_ERR_INVALID_USAGE);
    nnpccl_result_t async = NNPCCL_SUCCESS;
    EXPECT(nnpccl_comm_get_async_error(comm, &async) == NNPCCL_ERR_INVALID_USAGE);
    // Neither tells the parent's peers anything, nor closes what the parent uses.
    if (destroys)
        EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_ERR_INVALID_USAGE);
    else
        EXPECT(nnpccl_comm_abort(comm) == NNPCCL_ERR_INVALID_USAGE);
    std::fflush(stderr);
    std::exit(failures == 0 ? 0 : 1); // exit(), not _exit(): whatever runs at exit runs
}

int fork_after_init(int rank, int nranks, const nnpccl_unique_id_t &id, bool destroys) {
    nnpccl_comm_t comm = join_job(rank, nranks, id, 30);
    if (comm == nullptr) return 1;
    int failures = 0;
    std::vector<float> buf(1024);
    auto allreduce_checked = [&](float round) {
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = round * static_cast<float>(rank + 1) + static_cast<float>(i);
        const nnpccl_result_t rc =
            nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm);
        EXPECT(rc == NNPCCL_SUCCESS);
        size_t wrong = 0;
        for (size_t i = 0; i < buf.size(); ++i) wrong += buf[i] != round * 3.0f + 2.0f * static_cast<float>(i) ? 1 : 0;
        EXPECT(wrong == 0);
        if (rc != NNPCCL_SUCCESS) std::fprintf(stderr, "rank %d: %s\n", rank, nnpccl_get_last_error(comm));
    };
    allreduce_checked(1);
    if (rank == 0) {
        const pid_t child = fork();
        if (child == 0) use_parents_communicator(comm, destroys);
        int status = -1;
        EXPECT(child > 0 && waitpid(child, &status, 0) == child);
        EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    // Rank 1's calls wait for the parent's; the child's data never joins them.
    for (int round = 2; round < 6; ++round) allreduce_checked(static_cast<float>(round));
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

} // namespace

TEST_CASE("a communicator used in a fork's child fails there at once and the parent's job goes on unharmed",
          "[mp][fork]") {
    const char *transport = GENERATE("shm", "socket");
    const bool destroys = GENERATE(true, false);
    CAPTURE(transport, destroys);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    CHECK(run_local_ranks(2, [destroys](int rank, int nranks, const nnpccl_unique_id_t &id) {
              return fork_after_init(rank, nranks, id, destroys);
          }) == 0);
    unsetenv("NNPCCL_TRANSPORT");
}

namespace {

nnpccl_comm_t g_alarmed_comm = nullptr;
nnpccl_result_t g_abort_in_handler = NNPCCL_ERR_INTERNAL;

void abort_on_alarm(int) { g_abort_in_handler = nnpccl_comm_abort(g_alarmed_comm); }

// Rank 0 is inside a call that waits for rank 1 (which does not call yet)
// when SIGALRM's handler aborts its communicator: the call returns within
// a second, the communicator is gone, and rank 1 hears of the abort.
int abort_from_alarm(int rank, int nranks, const nnpccl_unique_id_t &id, bool nonblocking) {
    nnpccl_comm_t comm = join_job(rank, nranks, id, 30);
    if (comm == nullptr) return 1;
    int failures = 0;
    std::vector<float> buf(1 << 20, 1.0f);
    // Small calls first, so that the call below takes the short way on a biased drive lock.
    for (int i = 0; i < 64; ++i)
        if (nnpccl_allreduce(buf.data(), buf.data(), 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm) != NNPCCL_SUCCESS) return 1;
    if (rank == 1) {
        usleep(1500000);
        const auto t0 = std::chrono::steady_clock::now();
        const nnpccl_result_t rc =
            nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm);
        const std::string message = nnpccl_get_last_error(comm);
        EXPECT(rc == NNPCCL_ERR_REMOTE);
        EXPECT(message.find("rank 0 aborted the communicator") != std::string::npos);
        EXPECT(seconds_since(t0) < 3);
        if (failures) std::fprintf(stderr, "rank 1: %s: %s\n", nnpccl_get_error_string(rc), message.c_str());
        nnpccl_comm_abort(comm);
        return failures;
    }
    g_alarmed_comm = comm;
    struct sigaction on_alarm {};
    on_alarm.sa_handler = abort_on_alarm;
    sigemptyset(&on_alarm.sa_mask);
    on_alarm.sa_flags = SA_RESTART; // the hardest case: interrupted system calls go on
    sigaction(SIGALRM, &on_alarm, nullptr);
    const itimerval in_300ms{{0, 0}, {0, 300000}};
    setitimer(ITIMER_REAL, &in_300ms, nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    nnpccl_result_t rc = NNPCCL_SUCCESS;
    if (nonblocking) {
        nnpccl_request_t request = nullptr;
        rc = nnpccl_iallreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm, &request);
        if (rc == NNPCCL_SUCCESS) rc = nnpccl_wait(request);
    } else {
        rc = nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm);
    }
    const double seconds = seconds_since(t0);
    const std::string message = nnpccl_get_last_error(nonblocking ? nullptr : comm);
    EXPECT(g_abort_in_handler == NNPCCL_SUCCESS);
    EXPECT(rc == NNPCCL_ERR_REMOTE);
    EXPECT(message.find("rank 0 aborted the communicator") != std::string::npos);
    EXPECT(seconds < 3); // 0.3 s to the signal, then a sleep slice
    int ignored = 0;
    EXPECT(nnpccl_comm_rank(comm, &ignored) == NNPCCL_ERR_INVALID_ARGUMENT); // freed as the call returned
    std::fprintf(stderr, "rank 0: %s after %.2f s: %s\n", nnpccl_get_error_string(rc), seconds, message.c_str());
    return failures;
}

} // namespace

TEST_CASE("nnpccl_comm_abort from a signal handler ends the interrupted call within a second", "[mp][abort]") {
    if (kSignalsDeferred) {
        WARN("left to the plain and ASan builds: ThreadSanitizer defers the signal past the call");
        return;
    }
    const char *transport = GENERATE("shm", "socket", "ofi");
    const bool nonblocking = GENERATE(false, true);
    CAPTURE(transport, nonblocking);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    CHECK(run_local_ranks(2, [nonblocking](int rank, int nranks, const nnpccl_unique_id_t &id) {
              return abort_from_alarm(rank, nranks, id, nonblocking);
          }) == 0);
    unsetenv("NNPCCL_TRANSPORT");
}

namespace {

// The size of the first mapping of this rank's shm segments ("memfd:nnpccl-shm"), or 0.
size_t shm_segment_bytes() {
    FILE *f = std::fopen("/proc/self/maps", "r");
    if (f == nullptr) return 0;
    char line[512];
    size_t bytes = 0;
    while (bytes == 0 && std::fgets(line, sizeof line, f) != nullptr) {
        unsigned long begin = 0, end = 0;
        if (std::strstr(line, "memfd:nnpccl-shm") != nullptr && std::sscanf(line, "%lx-%lx", &begin, &end) == 2)
            bytes = end - begin;
    }
    std::fclose(f);
    return bytes;
}

size_t g_segment_bytes = 0;

} // namespace

TEST_CASE("a peer's shm segment that does not fit the address space is reported as such", "[mp][shm]") {
    if (kSanitized) {
        WARN("left to the plain build: RLIMIT_AS and a sanitizer's shadow memory do not mix");
        return;
    }
    // Large queues, so that the segments dwarf whatever else init maps.
    setenv("NNPCCL_TRANSPORT", "shm", 1);
    setenv("NNPCCL_SHM_SLOTS", "8", 1);
    setenv("NNPCCL_SHM_BYTES", std::to_string(size_t{4} << 30).c_str(), 1);
    char size_file[] = "/tmp/nnpccl-test-segment-XXXXXX";
    const int fd = mkstemp(size_file);
    REQUIRE(fd >= 0);
    close(fd);
    static const char *size_path = nullptr;
    size_path = size_file;
    // A first job measures a segment.
    REQUIRE(run_local_ranks(2, [](int rank, int nranks, const nnpccl_unique_id_t &id) {
                nnpccl_comm_t comm = join_job(rank, nranks, id, 30, size_t{4} << 20);
                if (comm == nullptr) return 1;
                if (rank == 0)
                    if (FILE *f = std::fopen(size_path, "w")) {
                        std::fprintf(f, "%zu\n", shm_segment_bytes());
                        std::fclose(f);
                    }
                return nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS ? 0 : 1;
            }) == 0);
    if (FILE *f = std::fopen(size_file, "r")) {
        if (std::fscanf(f, "%zu", &g_segment_bytes) != 1) g_segment_bytes = 0;
        std::fclose(f);
    }
    unlink(size_file);
    REQUIRE(g_segment_bytes >= (size_t{32} << 20));
    // The second: rank 1 has room for its own segment but not its peer's.
    std::vector<int> statuses;
    run_local_ranks(
        2,
        [](int rank, int nranks, const nnpccl_unique_id_t &id) {
            if (rank == 1) {
                const size_t room = address_space_bytes() + g_segment_bytes + g_segment_bytes / 2;
                const rlimit limit{room, room};
                if (setrlimit(RLIMIT_AS, &limit) != 0) return 1;
            }
            nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
            cfg.timeout_sec = 30;
            cfg.chunk_bytes = size_t{4} << 20;
            nnpccl_comm_t comm = nullptr;
            const nnpccl_result_t rc = nnpccl_comm_init_rank(&comm, nranks, id, rank, &cfg);
            const std::string message = nnpccl_get_last_error(nullptr);
            int failures = 0;
            EXPECT(rc != NNPCCL_SUCCESS);
            if (rank == 1) {
                EXPECT(rc == NNPCCL_ERR_SYSTEM);
                EXPECT(message.find("cannot map the shm segment of rank 0 (" + std::to_string(g_segment_bytes) +
                                    " bytes)") != std::string::npos);
                EXPECT(message.find("out of address space or memory") != std::string::npos);
                EXPECT(message.find("NNPCCL_CHUNK_SIZE, NNPCCL_SHM_SLOTS") == std::string::npos);
            }
            std::fprintf(stderr, "rank %d: %s: %s\n", rank, nnpccl_get_error_string(rc), message.c_str());
            if (comm != nullptr) nnpccl_comm_abort(comm);
            return failures;
        },
        false, &statuses);
    unsetenv("NNPCCL_TRANSPORT");
    unsetenv("NNPCCL_SHM_SLOTS");
    unsetenv("NNPCCL_SHM_BYTES");
    CHECK(statuses == std::vector<int>{0, 0});
}
