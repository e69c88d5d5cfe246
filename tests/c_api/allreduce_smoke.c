/* A user's first program, in C99 against the public header only: 3 ranks in
 * one process tree, each allreduces its rank + 1; every rank must get 6.
 * Built by the test suite and, against the installed library through
 * pkg-config, by tests/install_test.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nnpccl.h>

#define NRANKS 3

static int run_rank(int rank, nnpccl_unique_id_t id) {
    nnpccl_comm_t comm;
    nnpccl_config_t config = NNPCCL_CONFIG_INIT;
    config.timeout_sec = 30;
    if (nnpccl_comm_init_rank(&comm, NRANKS, id, rank, &config) != NNPCCL_SUCCESS) {
        fprintf(stderr, "rank %d: init: %s\n", rank, nnpccl_get_last_error(NULL));
        return 1;
    }
    float mine[2] = {(float)(rank + 1), (float)(2 * rank)}, sum[2] = {0, 0};
    nnpccl_result_t rc = nnpccl_allreduce(mine, sum, 2, NNPCCL_FLOAT32, NNPCCL_SUM, comm);
    if (rc != NNPCCL_SUCCESS) {
        fprintf(stderr, "rank %d: allreduce: %s: %s\n", rank, nnpccl_get_error_string(rc), nnpccl_get_last_error(comm));
        return 1;
    }
    int ok = sum[0] == 6.0f && sum[1] == 6.0f;
    printf("rank %d: allreduce gives %g %g%s\n", rank, sum[0], sum[1], ok ? "" : " (WRONG)");
    nnpccl_comm_destroy(comm);
    return ok ? 0 : 1;
}

int main(void) {
    int version = 0;
    nnpccl_unique_id_t id;
    nnpccl_get_version(&version);
    if (nnpccl_get_unique_id(&id) != NNPCCL_SUCCESS) {
        fprintf(stderr, "get_unique_id: %s\n", nnpccl_get_last_error(NULL));
        return 1;
    }
    printf("nnpccl version code %d\n", version);
    fflush(stdout);
    for (int rank = 0; rank < NRANKS; ++rank)
        if (fork() == 0) _exit(run_rank(rank, id));
    int failed = 0, status = 0;
    for (int i = 0; i < NRANKS; ++i) {
        wait(&status);
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    return failed;
}
