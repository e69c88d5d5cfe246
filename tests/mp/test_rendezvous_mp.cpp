// Jobs started side by side by one parent with torchrun's variables and no
// address (WORLD_SIZE=2 LOCAL_WORLD_SIZE=2): they meet through the one-host
// rendezvous file, keyed by what each job's ranks share. Jobs that differ
// in it never meet; jobs that nothing tells apart fail at init saying why,
// and never compute with each other's ranks.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "launch_env.hpp"
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

namespace {

struct ScratchDir {
    char path[40] = "/tmp/nnpccl-test-stale-XXXXXX";
    ScratchDir() { REQUIRE(mkdtemp(path) != nullptr); }
    ~ScratchDir() {
        const std::string dir = path;
        unlink((dir + "/other/job.id").c_str());
        rmdir((dir + "/other").c_str());
        rmdir(path);
    }
};

nnpccl::LaunchEnv rank0_at(const std::string &file) {
    nnpccl::LaunchEnv env;
    env.rank = 0;
    env.size = 2;
    env.rendezvous_file = file;
    env.rendezvous_key = 0x5eed;
    env.rendezvous_keyed_by = "the test";
    return env;
}

} // namespace

TEST_CASE("rank 0s that find the same dead job's rendezvous file at once: exactly one takes it",
          "[mp][launcher][rendezvous]") {
    // Dead rank 0s' files, then eight rank 0s (jobs alike, or a job
    // restarted by two launchers) released together to replace each of
    // them in turn: each that finds a file dead removes it, and only the
    // lock keeps a later one from removing the earlier one's fresh file
    // and taking it too.
    ScratchDir dir;
    constexpr int kFiles = 256, kContenders = 8;
    std::vector<nnpccl::LaunchEnv> envs;
    for (int i = 0; i < kFiles; ++i) envs.push_back(rank0_at(std::string(dir.path) + "/job" + std::to_string(i)));
    const pid_t writer = fork();
    if (writer == 0) {
        for (const nnpccl::LaunchEnv &env : envs)
            if (!nnpccl::publish_unique_id(env, nnpccl_unique_id_t{}).is_ok()) _exit(1);
        _exit(0);
    }
    REQUIRE(exit_status(writer) == 0);
    // Per file: how many took it, and how many contenders have reached it.
    auto *shared = static_cast<int *>(
        mmap(nullptr, 2 * kFiles * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    REQUIRE(shared != MAP_FAILED);
    int *taken = shared, *arrived = shared + kFiles;
    int go[2], done[2], release[2];
    REQUIRE((pipe(go) == 0 && pipe(done) == 0 && pipe(release) == 0));
    std::vector<pid_t> contenders;
    for (int c = 0; c < kContenders; ++c) {
        const pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            close(go[1]);
            close(release[1]);
            char byte = 0;
            (void)!read(go[0], &byte, 1); // until the parent closes it: all start together
            for (int i = 0; i < kFiles; ++i) {
                // Together at each file: arrived, then waiting for the others.
                __atomic_fetch_add(&arrived[i], 1, __ATOMIC_SEQ_CST);
                while (__atomic_load_n(&arrived[i], __ATOMIC_SEQ_CST) < kContenders) sched_yield();
                if (nnpccl::publish_unique_id(envs[static_cast<size_t>(i)], nnpccl_unique_id_t{}).is_ok())
                    __atomic_fetch_add(&taken[i], 1, __ATOMIC_SEQ_CST);
            }
            (void)!write(done[1], &byte, 1);
            (void)!read(release[0], &byte, 1); // a holder stays alive until every contender has tried
            _exit(0);
        }
        contenders.push_back(pid);
    }
    close(go[0]);
    close(go[1]);
    for (int c = 0; c < kContenders; ++c) {
        char byte;
        REQUIRE(read(done[0], &byte, 1) == 1);
    }
    close(release[1]);
    for (pid_t pid : contenders) exit_status(pid);
    for (int fd : {done[0], done[1], release[0]}) close(fd);
    int twice = 0;
    for (int i = 0; i < kFiles; ++i) {
        CHECK(taken[i] >= 1);
        twice += taken[i] > 1;
        unlink(envs[static_cast<size_t>(i)].rendezvous_file.c_str());
    }
    CHECK(twice == 0);
    munmap(shared, 2 * kFiles * sizeof(int));
}

TEST_CASE("the one-host rendezvous file lives in a directory only its user can enter", "[mp][launcher][rendezvous]") {
    ScratchDir dir;
    const std::string runtime = std::string(dir.path) + "/other";
    REQUIRE(mkdir(runtime.c_str(), 0755) == 0);
    setenv("XDG_RUNTIME_DIR", runtime.c_str(), 1);
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("TORCHELASTIC_RUN_ID", "private-dir-test", 1);
    unsetenv("MASTER_ADDR");
    unsetenv("NNPCCL_ROOT");
    nnpccl::LaunchEnv env;
    const nnpccl::Status read = nnpccl::read_launch_env(&env);
    for (const char *var : {"XDG_RUNTIME_DIR", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"})
        unsetenv(var);
    REQUIRE(read.is_ok());
    CHECK(env.rendezvous_file.rfind(runtime + "/nnpccl-", 0) == 0);
    // Open to others, it could hold a file another user put there: refused, naming it.
    const nnpccl::Status refused = nnpccl::publish_unique_id(env, nnpccl_unique_id_t{});
    CHECK(refused.code() == NNPCCL_ERR_INVALID_USAGE);
    CHECK_THAT(refused.message(), Catch::Contains(runtime) && Catch::Contains("not a directory private to this user"));
    REQUIRE(chmod(runtime.c_str(), 0700) == 0);
    CHECK(nnpccl::publish_unique_id(env, nnpccl_unique_id_t{}).is_ok());
    nnpccl::leave_rendezvous(env);
    CHECK(access(env.rendezvous_file.c_str(), F_OK) != 0);
    // Without XDG_RUNTIME_DIR: a directory of this user's own under /tmp, made 0700.
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("TORCHELASTIC_RUN_ID", "private-dir-test", 1);
    nnpccl::LaunchEnv in_tmp;
    REQUIRE(nnpccl::read_launch_env(&in_tmp).is_ok());
    for (const char *var : {"RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"}) unsetenv(var);
    const std::string own = "/tmp/nnpccl-rendezvous-" + std::to_string(getuid()) + "/";
    CHECK(in_tmp.rendezvous_file.rfind(own, 0) == 0);
    REQUIRE(nnpccl::publish_unique_id(in_tmp, nnpccl_unique_id_t{}).is_ok());
    struct stat info {};
    REQUIRE(stat(own.c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0700);
    CHECK(info.st_uid == getuid());
    nnpccl::leave_rendezvous(in_tmp);
}
