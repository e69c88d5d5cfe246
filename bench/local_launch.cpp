#include "local_launch.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int run_local_ranks(int nranks, const std::function<int(int, int, const nnpccl_unique_id_t &)> &body,
                    bool stop_others_on_failure, std::vector<int> *statuses) {
    nnpccl_unique_id_t id;
    nnpccl_result_t rc = nnpccl_get_unique_id(&id);
    if (rc != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "ccl-bench: nnpccl_get_unique_id failed: %s\n", nnpccl_get_last_error(nullptr));
        return 2;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    std::vector<pid_t> children;
    for (int rank = 0; rank < nranks; ++rank) {
        pid_t pid = fork();
        if (pid < 0) {
            std::perror("ccl-bench: fork");
            for (pid_t c : children) kill(c, SIGTERM);
            return 2;
        }
        if (pid == 0) {
            // A rank is stopped by a plain SIGTERM, whatever handlers the parent installed.
            for (int sig : {SIGTERM, SIGINT, SIGSEGV, SIGABRT}) signal(sig, SIG_DFL);
            int status = body(rank, nranks, id);
            std::fflush(stdout);
            _exit(status);
        }
        children.push_back(pid);
    }
    int worst = 0;
    size_t left = children.size();
    while (left > 0) {
        int status = 0;
        pid_t pid = wait(&status);
        if (pid < 0) break;
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
                if (c != pid) kill(c, SIGTERM);
        }
        if (code > worst) worst = code;
    }
    return worst;
}
