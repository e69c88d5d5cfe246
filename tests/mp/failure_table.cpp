// failure-table: injects each failure of issue 42's list into real jobs on
// this host, many times over in the same processes, and prints a table:
// the failure, transport, ranks, trials, the longest time from the
// injection to the survivors' error, hangs, leaks and corrupt results.
//
// The ranks that survive a trial stay for the next, so a leak adds up: each
// measures, after every trial's communicator is gone, its open descriptors
// (/proc/self/fd), its shared-memory mappings (memfd and /dev/shm lines of
// /proc/self/maps) and the host's /dev/shm entries named nnpccl (other
// programs' come and go) against its own
// baseline before the first trial, and its resident memory growth from the
// tenth trial to the last. A rank whose process ends (exit, SIGKILL) is a
// new process each trial.
//
//   failure-table [TRIALS [CASE-FILTER]]    (default 20 trials, every case)
//
// Only 127.0.0.1 is used (NNPCCL_SOCKET_IFNAME=lo is set).
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "nnpccl.h"

namespace {

double now_s() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

enum class Injection { Destroy, Exit, Kill, SignalAbort, Fork };

struct Case {
    const char *name;
    Injection how;
    const char *transport;
    int nranks;
};

// What the ranks share: the trial's unique id, when the failure was
// injected, and each rank's report of the trial.
struct RankReport {
    double error_after = 0; // seconds from the injection to this rank's error
    int hung = 0;           // no error within 10 s
    int corrupt = 0;        // a call that succeeded with wrong data
    int unexpected = 0;     // a call that should have succeeded failed (or the reverse)
    long fds = 0, shm_maps = 0, dev_shm = 0, rss_kib = 0;
};
struct Shared {
    std::atomic<int> trial_ready{-1}; // the trial whose id is published
    nnpccl_unique_id_t id;
    std::atomic<double> injected_at{0};
    std::atomic<int> finished[8]; // per rank: the last trial it finished
    RankReport reports[8];
    Shared() {
        for (auto &f : finished) f.store(-1);
    }
};
Shared *g_shared = nullptr;

// Entries of `path` whose name contains `part`.
long count_dir(const char *path, const char *part = "") {
    DIR *d = opendir(path);
    if (d == nullptr) return -1;
    long n = 0;
    while (dirent *e = readdir(d)) n += e->d_name[0] != '.' && std::strstr(e->d_name, part) != nullptr ? 1 : 0;
    closedir(d);
    return n;
}

long shm_mappings() {
    FILE *f = std::fopen("/proc/self/maps", "r");
    if (f == nullptr) return -1;
    char line[512];
    long n = 0;
    while (std::fgets(line, sizeof line, f) != nullptr)
        n += std::strstr(line, "memfd:") != nullptr || std::strstr(line, "/dev/shm/") != nullptr ? 1 : 0;
    std::fclose(f);
    return n;
}

long rss_kib() {
    FILE *f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) return -1;
    char line[256];
    long kib = -1;
    while (std::fgets(line, sizeof line, f) != nullptr)
        if (std::sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    std::fclose(f);
    return kib;
}

void wait_for(const std::atomic<int> &value, int at_least) {
    while (value.load() < at_least) usleep(500);
}

nnpccl_comm_t join(int rank, int nranks, int trial) {
    if (rank == 0) {
        nnpccl_unique_id_t id;
        if (nnpccl_get_unique_id(&id) != NNPCCL_SUCCESS) return nullptr;
        g_shared->id = id;
        g_shared->injected_at.store(0);
        g_shared->trial_ready.store(trial);
    }
    wait_for(g_shared->trial_ready, trial);
    nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
    cfg.timeout_sec = 20;
    nnpccl_comm_t comm = nullptr;
    if (nnpccl_comm_init_rank(&comm, nranks, g_shared->id, rank, &cfg) != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "rank %d: init failed: %s\n", rank, nnpccl_get_last_error(nullptr));
        return nullptr;
    }
    return comm;
}

// An allreduce of 64 Ki floats whose sum every rank can check.
nnpccl_result_t checked_allreduce(nnpccl_comm_t comm, int rank, int nranks, float round, int *corrupt) {
    std::vector<float> buf(1 << 16);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = round * static_cast<float>(rank + 1) + static_cast<float>(i % 97);
    const nnpccl_result_t rc = nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm);
    if (rc != NNPCCL_SUCCESS) return rc;
    const float ranks_sum = static_cast<float>(nranks * (nranks + 1) / 2);
    for (size_t i = 0; i < buf.size(); ++i)
        if (buf[i] != round * ranks_sum + static_cast<float>(nranks) * static_cast<float>(i % 97)) {
            ++*corrupt;
            break;
        }
    return rc;
}

// The failing call of a surviving rank: it must fail, and how soon after
// the injection is its report.
void expect_failure(nnpccl_comm_t comm, int rank, int nranks, RankReport *r) {
    int corrupt = 0;
    const double start = now_s();
    const nnpccl_result_t rc = checked_allreduce(comm, rank, nranks, 2, &corrupt);
    const double end = now_s();
    r->corrupt += corrupt;
    if (rc == NNPCCL_SUCCESS) {
        ++r->unexpected;
        return;
    }
    const double injected = g_shared->injected_at.load();
    r->error_after = end - (injected > 0 ? injected : start);
    if (rc == NNPCCL_ERR_TIMEOUT || end - start > 10) r->hung = 1;
}

volatile sig_atomic_t g_aborting = 0;
nnpccl_comm_t g_alarmed = nullptr;
void abort_on_alarm(int) {
    if (!g_aborting) g_shared->injected_at.store(now_s());
    g_aborting = 1;
    nnpccl_comm_abort(g_alarmed);
}

// One trial on one rank; returns false when the trial could not be run.
bool run_trial(const Case &c, int rank, int trial, long base_fds) {
    RankReport r{};
    nnpccl_comm_t comm = join(rank, c.nranks, trial);
    if (comm == nullptr) return false;
    const int victim = c.nranks - 1;
    if (checked_allreduce(comm, rank, c.nranks, 1, &r.corrupt) != NNPCCL_SUCCESS) ++r.unexpected;
    bool gone = false;
    if (rank == victim && (c.how == Injection::Destroy || c.how == Injection::Exit || c.how == Injection::Kill)) {
        usleep(100000); // the others are inside their call by now
        g_shared->injected_at.store(now_s());
        if (c.how == Injection::Exit) std::exit(0);
        if (c.how == Injection::Kill) raise(SIGKILL);
        if (nnpccl_comm_destroy(comm) != NNPCCL_SUCCESS) ++r.unexpected;
        gone = true;
    } else if (c.how == Injection::SignalAbort && rank == 0) {
        g_alarmed = comm;
        g_aborting = 0;
        struct sigaction on_alarm {};
        on_alarm.sa_handler = abort_on_alarm;
        sigemptyset(&on_alarm.sa_mask);
        on_alarm.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &on_alarm, nullptr);
        const itimerval every_ms{{0, 1000}, {0, 100000}};
        setitimer(ITIMER_REAL, &every_ms, nullptr);
        expect_failure(comm, rank, c.nranks, &r);
        const itimerval off{};
        setitimer(ITIMER_REAL, &off, nullptr);
        signal(SIGALRM, SIG_DFL);
        gone = true; // freed as the interrupted call returned
    } else if (c.how == Injection::SignalAbort) {
        usleep(300000); // rank 0's handler aborts meanwhile
        expect_failure(comm, rank, c.nranks, &r);
    } else if (c.how == Injection::Fork) {
        if (rank == 0) {
            const pid_t child = fork();
            if (child == 0) {
                g_shared->injected_at.store(now_s());
                float x = 1;
                _exit(nnpccl_allreduce(&x, &x, 1, NNPCCL_FLOAT32, NNPCCL_SUM, comm) == NNPCCL_ERR_INVALID_USAGE ? 0
                                                                                                                : 1);
            }
            int status = -1;
            waitpid(child, &status, 0);
            r.error_after = now_s() - g_shared->injected_at.load();
            if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) ++r.unexpected;
        }
        // The parent's job goes on, with its own data.
        for (int round = 2; round < 4; ++round)
            if (checked_allreduce(comm, rank, c.nranks, static_cast<float>(round), &r.corrupt) != NNPCCL_SUCCESS)
                ++r.unexpected;
        if (nnpccl_comm_destroy(comm) != NNPCCL_SUCCESS) ++r.unexpected;
        gone = true;
    } else {
        expect_failure(comm, rank, c.nranks, &r);
    }
    if (!gone) nnpccl_comm_abort(comm);
    // The rendezvous root's thread (rank 0) ends a moment after the last
    // rank leaves it: give the descriptors a second to come back.
    for (int i = 0; i < 100 && count_dir("/proc/self/fd") > base_fds; ++i) usleep(10000);
    r.fds = count_dir("/proc/self/fd");
    r.shm_maps = shm_mappings();
    r.dev_shm = count_dir("/dev/shm", "nnpccl");
    r.rss_kib = rss_kib();
    g_shared->reports[rank] = r;
    return true;
}

struct Row {
    int trials = 0;
    double worst = 0;
    int hangs = 0, corrupt = 0, unexpected = 0;
    long fd_growth = 0, map_growth = 0, dev_shm_growth = 0, rss_growth_kib = 0;
};

// Runs `trials` of case `c`: persistent processes for the ranks that
// survive, and a new process each trial for a rank whose process ends.
Row run_case(const Case &c, int trials) {
    Row row;
    new (g_shared) Shared();
    const bool victim_dies = c.how == Injection::Exit || c.how == Injection::Kill;
    const int persistent = victim_dies ? c.nranks - 1 : c.nranks;
    int to_parent[2];
    if (pipe(to_parent) != 0) return row;
    std::vector<pid_t> ranks;
    for (int rank = 0; rank < persistent; ++rank) {
        const pid_t pid = fork();
        if (pid == 0) {
            close(to_parent[0]);
            long base_fds = count_dir("/proc/self/fd"), base_maps = shm_mappings(),
                 base_dev = count_dir("/dev/shm", "nnpccl");
            long rss_at_10 = 0;
            Row mine;
            for (int trial = 0; trial < trials; ++trial) {
                if (rank != 0) wait_for(g_shared->finished[0], trial - 1);
                if (!run_trial(c, rank, trial, base_fds)) _exit(2);
                const RankReport &r = g_shared->reports[rank];
                mine.trials++;
                mine.worst = std::max(mine.worst, r.error_after);
                mine.hangs += r.hung;
                mine.corrupt += r.corrupt;
                mine.unexpected += r.unexpected;
                mine.fd_growth = std::max(mine.fd_growth, r.fds - base_fds);
                mine.map_growth = std::max(mine.map_growth, r.shm_maps - base_maps);
                mine.dev_shm_growth = std::max(mine.dev_shm_growth, r.dev_shm - base_dev);
                if (trial == std::min(9, trials - 1)) rss_at_10 = r.rss_kib;
                mine.rss_growth_kib = r.rss_kib - rss_at_10;
                g_shared->finished[rank].store(trial);
                // Every rank done before the next trial's id.
                for (int other = 0; other < persistent; ++other) wait_for(g_shared->finished[other], trial);
            }
            (void)!write(to_parent[1], &mine, sizeof mine);
            _exit(0);
        }
        ranks.push_back(pid);
    }
    close(to_parent[1]);
    if (victim_dies)
        for (int trial = 0; trial < trials; ++trial) {
            const pid_t pid = fork();
            if (pid == 0) {
                run_trial(c, c.nranks - 1, trial, 0);
                _exit(1);
            }
            waitpid(pid, nullptr, 0);
            wait_for(g_shared->finished[0], trial);
        }
    for (size_t i = 0; i < ranks.size(); ++i) {
        Row got;
        if (read(to_parent[0], &got, sizeof got) != static_cast<ssize_t>(sizeof got)) {
            ++row.unexpected;
            continue;
        }
        row.trials = std::max(row.trials, got.trials);
        row.worst = std::max(row.worst, got.worst);
        row.hangs += got.hangs;
        row.corrupt += got.corrupt;
        row.unexpected += got.unexpected;
        row.fd_growth = std::max(row.fd_growth, got.fd_growth);
        row.map_growth = std::max(row.map_growth, got.map_growth);
        row.dev_shm_growth = std::max(row.dev_shm_growth, got.dev_shm_growth);
        row.rss_growth_kib = std::max(row.rss_growth_kib, got.rss_growth_kib);
    }
    close(to_parent[0]);
    for (pid_t pid : ranks) waitpid(pid, nullptr, 0);
    return row;
}

} // namespace

int main(int argc, char **argv) {
    const int trials = argc > 1 ? std::atoi(argv[1]) : 20;
    const char *filter = argc > 2 ? argv[2] : "";
    setenv("NNPCCL_SOCKET_IFNAME", "lo", 1);
    g_shared =
        static_cast<Shared *>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (g_shared == MAP_FAILED || trials < 1) return 2;
    const Case cases[] = {
        {"rank destroys its communicator while needed", Injection::Destroy, "shm", 3},
        {"rank destroys its communicator while needed", Injection::Destroy, "socket", 3},
        {"rank destroys its communicator while needed", Injection::Destroy, "ofi", 3},
        {"rank's process exits with its communicator", Injection::Exit, "shm", 3},
        {"rank's process exits with its communicator", Injection::Exit, "socket", 3},
        {"rank's process exits with its communicator", Injection::Exit, "ofi", 3},
        {"rank killed (SIGKILL) inside a call", Injection::Kill, "shm", 3},
        {"rank killed (SIGKILL) inside a call", Injection::Kill, "socket", 3},
        {"rank killed (SIGKILL) inside a call", Injection::Kill, "ofi", 3},
        {"abort from a repeating SIGALRM handler", Injection::SignalAbort, "shm", 2},
        {"abort from a repeating SIGALRM handler", Injection::SignalAbort, "socket", 2},
        {"abort from a repeating SIGALRM handler", Injection::SignalAbort, "ofi", 2},
        {"forked child calls the parent's communicator", Injection::Fork, "shm", 2},
        {"forked child calls the parent's communicator", Injection::Fork, "socket", 2},
    };
    std::printf("| injected failure | transport | ranks | trials | max time to error | hangs | leaks (fds, shm "
                "maps, /dev/shm, RSS growth after trial 10) | corrupt results | unexpected |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    int bad = 0;
    for (const Case &c : cases) {
        const std::string label = std::string(c.name) + " " + c.transport;
        if (label.find(filter) == std::string::npos) continue;
        setenv("NNPCCL_TRANSPORT", c.transport, 1);
        const Row row = run_case(c, trials);
        const bool leaked = row.fd_growth > 0 || row.map_growth > 0 || row.dev_shm_growth > 0;
        std::printf("| %s | %s | %d | %d | %.2f s | %d | %s (%+ld, %+ld, %+ld, %+ld KiB) | %d | %d |\n", c.name,
                    c.transport, c.nranks, row.trials, row.worst, row.hangs, leaked ? "yes" : "none", row.fd_growth,
                    row.map_growth, row.dev_shm_growth, row.rss_growth_kib, row.corrupt, row.unexpected);
        std::fflush(stdout);
        bad += row.hangs + row.corrupt + row.unexpected + (leaked ? 1 : 0) + (row.trials < trials ? 1 : 0);
    }
    return bad == 0 ? 0 : 1;
}
