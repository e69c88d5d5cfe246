#include "local_launch.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

bool read_exactly(int fd, void *buffer, size_t length) {
    auto *bytes = static_cast<char *>(buffer);
    size_t got = 0;
    while (got < length) {
        ssize_t n = read(fd, bytes + got, length - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        got += static_cast<size_t>(n);
    }
    return true;
}

bool write_exactly(int fd, const void *buffer, size_t length) {
    return write(fd, buffer, length) == static_cast<ssize_t>(length); // below PIPE_BUF: one write
}

// Reaps one of `pending` once it has exited, removes it (and its entry in
// `pidfds`) and returns it, with its status; -1 when none is left. Only
// these children are reaped: a caller may have others of its own, which
// wait() would take from it. With a pidfd for each (Linux 5.3 on), the
// wait sleeps in poll(2); without (an older kernel, no descriptor left), it
// looks every millisecond. A child someone else reaped (a caller that
// ignores SIGCHLD) counts as exited with status 2.
pid_t reap_one_of(std::vector<pid_t> &pending, std::vector<int> &pidfds, int *status) {
    while (!pending.empty()) {
        const bool sleep_in_poll = std::find(pidfds.begin(), pidfds.end(), -1) == pidfds.end();
        if (sleep_in_poll) {
            std::vector<pollfd> fds;
            for (int fd : pidfds) fds.push_back(pollfd{fd, POLLIN, 0});
            if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return -1;
        }
        for (size_t i = 0; i < pending.size(); ++i) {
            pid_t got = waitpid(pending[i], status, WNOHANG);
            while (got < 0 && errno == EINTR) got = waitpid(pending[i], status, WNOHANG);
            if (got == 0) continue;
            if (got < 0) *status = 2 << 8;
            const pid_t pid = pending[i];
            if (pidfds[i] >= 0) close(pidfds[i]);
            pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
            pidfds.erase(pidfds.begin() + static_cast<std::ptrdiff_t>(i));
            return pid;
        }
        if (!sleep_in_poll) usleep(1000);
    }
    return -1;
}

// SIGCONT too: a stopped rank (SIGSTOP, a debugger let go) would keep a
// SIGTERM pending, and its launcher waiting for it, for ever.
void stop_child(pid_t child) {
    kill(child, SIGTERM);
    kill(child, SIGCONT);
}

void stop_children(const std::vector<pid_t> &children) {
    for (pid_t c : children) stop_child(c);
    for (pid_t c : children) waitpid(c, nullptr, 0);
}

// The rendezvous root's process: makes the id, sends it up `id_out`, and
// keeps the root alive until the parent closes `job_over`.
[[noreturn]] void hold_root(int id_out, int job_over) {
    nnpccl_unique_id_t id;
    if (nnpccl_get_unique_id(&id) != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "ccl-bench: nnpccl_get_unique_id failed: %s\n", nnpccl_get_last_error(nullptr));
        _exit(2);
    }
    if (!write_exactly(id_out, &id, sizeof id)) _exit(2);
    char ignored;
    while (read(job_over, &ignored, 1) < 0 && errno == EINTR) {
    }
    _exit(0);
}

} // namespace

int run_local_ranks(int nranks, const std::function<int(int, int, const nnpccl_unique_id_t &)> &body,
                    bool stop_others_on_failure, std::vector<int> *statuses,
                    const BeforeRanksStart &before_ranks_start) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::vector<pid_t> children;
    std::vector<int> parent_ends; // every pipe end the parent holds; no child may keep one
    auto close_parent_ends = [&parent_ends] {
        for (int fd : parent_ends) close(fd);
        parent_ends.clear();
    };
    auto give_up = [&](const char *what) {
        std::perror(what);
        close_parent_ends();
        stop_children(children);
        return 2;
    };
    // Forks a child running `child(read_end, write_end)` with a fresh pipe;
    // the parent keeps the end `parent_reads` says.
    auto fork_with_pipe = [&](bool parent_reads, const std::function<void(int, int)> &child, int *parent_end) {
        int fds[2];
        if (pipe(fds) != 0) return false;
        pid_t pid = fork();
        if (pid < 0) {
            close(fds[0]);
            close(fds[1]);
            return false;
        }
        if (pid == 0) {
            for (int fd : parent_ends) close(fd);
            child(fds[0], fds[1]);
            _exit(2);
        }
        close(parent_reads ? fds[1] : fds[0]);
        *parent_end = parent_reads ? fds[0] : fds[1];
        parent_ends.push_back(*parent_end);
        children.push_back(pid);
        return true;
    };

    std::vector<int> id_to_rank(static_cast<size_t>(nranks));
    const pid_t launcher = getpid();
    for (int rank = 0; rank < nranks; ++rank) {
        auto run_rank = [&, rank, launcher](int id_in, int unused) {
            // A launcher that is killed takes its ranks along, rather than
            // leave them running a job nobody waits for.
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher) _exit(2);
            close(unused);
            // A rank is stopped by a plain SIGTERM, whatever handlers the parent installed.
            for (int sig : {SIGTERM, SIGINT, SIGSEGV, SIGABRT}) signal(sig, SIG_DFL);
            nnpccl_unique_id_t id;
            if (!read_exactly(id_in, &id, sizeof id)) _exit(2); // the parent gave up
            close(id_in);
            int status = body(rank, nranks, id);
            std::fflush(stdout);
            _exit(status);
        };
        if (!fork_with_pipe(false, run_rank, &id_to_rank[static_cast<size_t>(rank)]))
            return give_up("ccl-bench: starting a rank");
    }
    const std::vector<pid_t> ranks = children;

    int id_from_root = -1;
    int job_over_pipe[2]; // the parent closes its write end when the job is over
    if (pipe(job_over_pipe) != 0) return give_up("ccl-bench: pipe");
    parent_ends.push_back(job_over_pipe[1]);
    const bool root_started = fork_with_pipe(
        true,
        [&](int unused, int id_out) {
            close(unused);
            hold_root(id_out, job_over_pipe[0]);
        },
        &id_from_root);
    close(job_over_pipe[0]);
    if (!root_started) return give_up("ccl-bench: starting the rendezvous root");
    const pid_t root_holder = children.back();

    nnpccl_unique_id_t id;
    if (!read_exactly(id_from_root, &id, sizeof id)) {
        std::fprintf(stderr, "ccl-bench: the rendezvous root's process made no unique id\n");
        close_parent_ends();
        stop_children(children);
        return 2;
    }
    if (before_ranks_start) before_ranks_start(id);
    // A rank that died before reading its id must fail the job, not kill
    // the launcher with SIGPIPE.
    struct sigaction ignore_pipe {}, previous_pipe {};
    ignore_pipe.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore_pipe, &previous_pipe);
    for (int fd : id_to_rank)
        if (!write_exactly(fd, &id, sizeof id))
            std::perror("ccl-bench: handing the unique id to a rank"); // the rank has exited; its status shows it
    sigaction(SIGPIPE, &previous_pipe, nullptr);
    children = ranks;
    int worst = 0;
    size_t left = children.size();
    bool root_holder_reaped = false;
    // Whichever of the job's processes exits first, so that the first rank
    // to fail is seen at once.
    std::vector<pid_t> pending = children;
    pending.push_back(root_holder);
    std::vector<int> pidfds;
    for (pid_t pid : pending) pidfds.push_back(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    while (left > 0) {
        int status = 0;
        const pid_t pid = reap_one_of(pending, pidfds, &status);
        if (pid < 0) break;
        if (pid == root_holder) { // early: its root is gone, and the ranks will say so
            root_holder_reaped = true;
            continue;
        }
        --left;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (statuses != nullptr) {
            statuses->resize(children.size(), 0);
            for (size_t r = 0; r < children.size(); ++r)
                if (children[r] == pid) (*statuses)[r] = code;
        }
        if (code != 0 && worst == 0 && stop_others_on_failure) {
            std::fprintf(stderr, "ccl-bench: a rank (pid %d) exited with status %d; stopping the others\n",
                         static_cast<int>(pid), code);
            for (pid_t c : children)
                if (c != pid) stop_child(c);
        }
        // The job's status is its first failure's: the ranks stopped
        // after it would report SIGTERM (143), which is not the cause.
        if (worst == 0) worst = code;
    }
    for (int fd : pidfds)
        if (fd >= 0) close(fd);
    close_parent_ends(); // ends the root's process
    if (!root_holder_reaped) waitpid(root_holder, nullptr, 0);
    return worst;
}
