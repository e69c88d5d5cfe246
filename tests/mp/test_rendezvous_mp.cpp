// Jobs started side by side by one parent with torchrun's variables and no
// address (WORLD_SIZE=2 LOCAL_WORLD_SIZE=2): they meet through the one-host
// rendezvous file, keyed by what each job's ranks share. Jobs that differ
// in it never meet; jobs that nothing tells apart fail at init saying why,
// and never compute with each other's ranks.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nnpccl.h"

namespace {

constexpr int kNotToldApart = 3; // a rank's exit status: init refused, naming why

struct JobSpec {
    int id;             // the data: every rank contributes id * 100 + rank
    const char *secret; // NNPCCL_JOB_SECRET, or nullptr
};

// A rank started by this process, as a launcher's would be: exits 0 when
// its allreduce gave its own job's sum, kNotToldApart when init refused
// because another job could not be told apart, 1 otherwise.
pid_t start_rank(const JobSpec &job, int rank) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid != 0) return pid;
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("NNPCCL_TIMEOUT", "20", 1);
    for (const char *var : {"MASTER_ADDR", "MASTER_PORT", "NNPCCL_ROOT", "TORCHELASTIC_RUN_ID", "NNPCCL_JOB_SECRET"})
        unsetenv(var);
    if (job.secret != nullptr) setenv("NNPCCL_JOB_SECRET", job.secret, 1);
    const auto start = std::chrono::steady_clock::now();
    nnpccl_comm_t comm = nullptr;
    if (nnpccl_comm_init_from_env(&comm, nullptr) != NNPCCL_SUCCESS) {
        const std::string why = nnpccl_get_last_error(nullptr);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(stderr, "job %d rank %d: init failed after %.2f s: %s\n", job.id, rank, seconds, why.c_str());
        const bool named =
            why.find("nothing tells this job from another that process starts alike") != std::string::npos &&
            why.find("NNPCCL_JOB_SECRET") != std::string::npos;
        _exit(named && seconds < 5 ? kNotToldApart : 1);
    }
    int64_t mine = job.id * 100 + rank, sum = 0;
    const bool sent = nnpccl_allreduce(&mine, &sum, 1, NNPCCL_INT64, NNPCCL_SUM, comm) == NNPCCL_SUCCESS;
    const bool own = sum == job.id * 200 + 1;
    if (!sent || !own)
        std::fprintf(stderr, "job %d rank %d: allreduce %s, sum %lld where its job's is %d\n", job.id, rank,
                     sent ? "ran" : "failed", static_cast<long long>(sum), job.id * 200 + 1);
    _exit(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS && sent && own ? 0 : 1);
}

int exit_status(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace

TEST_CASE("two 2-rank jobs started side by side by one parent each meet only their own ranks",
          "[mp][launcher][rendezvous]") {
    const JobSpec a{1, "0123456789abcdef0123456789abcdef"}, b{2, "fedcba9876543210fedcba9876543210"};
    for (int trial = 0; trial < 3; ++trial) {
        INFO("trial " << trial);
        // Interleaved, so that each job's rank 1 could find the other's rank 0 first.
        const pid_t a0 = start_rank(a, 0), b1 = start_rank(b, 1), b0 = start_rank(b, 0), a1 = start_rank(a, 1);
        CHECK(exit_status(a0) == 0);
        CHECK(exit_status(a1) == 0);
        CHECK(exit_status(b0) == 0);
        CHECK(exit_status(b1) == 0);
    }
}

TEST_CASE("two jobs that nothing tells apart, started by one parent, fail at init naming why and never join",
          "[mp][launcher][rendezvous]") {
    // Only their data differs, which nnpccl does not see: whichever rank 0
    // a rank found, it could not know it for its own.
    const JobSpec a{1, nullptr}, b{2, nullptr};
    const pid_t a0 = start_rank(a, 0), b1 = start_rank(b, 1), b0 = start_rank(b, 0), a1 = start_rank(a, 1);
    for (pid_t pid : {a0, a1, b0, b1}) CHECK(exit_status(pid) == kNotToldApart);
}
