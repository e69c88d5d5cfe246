/* A user's first program, in C99 against the public header only: 3 ranks in
 * one process tree, each allreduces its rank + 1 (every rank must get 6),
 * then gathers, scatters, exchanges blocks all to all, and passes a value
 * around the ring with isend/irecv. Built by the test suite and, against
 * the installed library through pkg-config, by tests/install_test.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nnpccl.h>

#define NRANKS 3

static int failed_call(const char *what, nnpccl_result_t rc, nnpccl_comm_t comm, int rank) {
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, nnpccl_get_error_string(rc), nnpccl_get_last_error(comm));
    return 1;
}

/* Block j of what rank r sends holds 10*r + j. */
static int more_collectives(nnpccl_comm_t comm, int rank) {
    int32_t mine = 10 * rank, gathered[NRANKS] = {0}, scattered = -1;
    int32_t blocks[NRANKS], swapped[NRANKS];
    int32_t from_prev = -1;
    nnpccl_request_t sent, received;
    nnpccl_result_t rc;
    int j, wrong = 0;
    rc = nnpccl_gather(&mine, rank == 0 ? gathered : NULL, 1, NNPCCL_INT32, 0, comm);
    if (rc != NNPCCL_SUCCESS) return failed_call("gather", rc, comm, rank);
    for (j = 0; j < NRANKS && rank == 0; ++j) wrong += gathered[j] != 10 * j;
    rc = nnpccl_scatter(rank == 0 ? gathered : NULL, &scattered, 1, NNPCCL_INT32, 0, comm);
    if (rc != NNPCCL_SUCCESS) return failed_call("scatter", rc, comm, rank);
    wrong += scattered != 10 * rank;
    for (j = 0; j < NRANKS; ++j) blocks[j] = 10 * rank + j;
    rc = nnpccl_alltoall(blocks, swapped, 1, NNPCCL_INT32, comm);
    if (rc != NNPCCL_SUCCESS) return failed_call("alltoall", rc, comm, rank);
    for (j = 0; j < NRANKS; ++j) wrong += swapped[j] != 10 * j + rank;
    /* Both posted before either is waited for: no rank waits on another's send. */
    rc = nnpccl_isend(&mine, 1, NNPCCL_INT32, (rank + 1) % NRANKS, comm, &sent);
    if (rc != NNPCCL_SUCCESS) return failed_call("isend", rc, comm, rank);
    rc = nnpccl_irecv(&from_prev, 1, NNPCCL_INT32, (rank + NRANKS - 1) % NRANKS, comm, &received);
    if (rc != NNPCCL_SUCCESS) return failed_call("irecv", rc, comm, rank);
    if ((rc = nnpccl_wait(sent)) != NNPCCL_SUCCESS) return failed_call("wait (isend)", rc, comm, rank);
    if ((rc = nnpccl_wait(received)) != NNPCCL_SUCCESS) return failed_call("wait (irecv)", rc, comm, rank);
    wrong += from_prev != 10 * ((rank + NRANKS - 1) % NRANKS);
    printf("rank %d: gather, scatter, alltoall and the ring exchange: %s\n", rank, wrong == 0 ? "ok" : "WRONG");
    return wrong != 0;
}

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
    if (!ok || more_collectives(comm, rank) != 0) ok = 0;
    nnpccl_comm_destroy(comm);
    fflush(stdout); /* the child leaves by _exit, which would drop what a pipe still buffers */
    return ok ? 0 : 1;
}

/* The ranks are forked before the id is made: making it starts the
 * rendezvous root's thread, and a child forked while that thread holds a
 * lock could wait on it forever. Each rank reads the id from a pipe. */
int main(void) {
    int version = 0;
    int id_pipe[NRANKS][2];
    nnpccl_unique_id_t id;
    nnpccl_get_version(&version);
    printf("nnpccl version code %d\n", version);
    fflush(stdout);
    for (int rank = 0; rank < NRANKS; ++rank) {
        if (pipe(id_pipe[rank]) != 0) {
            perror("pipe");
            return 1;
        }
        if (fork() == 0) {
            for (int other = 0; other <= rank; ++other) close(id_pipe[other][1]);
            if (read(id_pipe[rank][0], &id, sizeof id) != (ssize_t)sizeof id) _exit(1);
            _exit(run_rank(rank, id));
        }
        close(id_pipe[rank][0]);
    }
    int failed = nnpccl_get_unique_id(&id) != NNPCCL_SUCCESS;
    if (failed) fprintf(stderr, "get_unique_id: %s\n", nnpccl_get_last_error(NULL));
    for (int rank = 0; rank < NRANKS; ++rank) {
        if (!failed && write(id_pipe[rank][1], &id, sizeof id) != (ssize_t)sizeof id) failed = 1;
        close(id_pipe[rank][1]); /* without an id the rank reads end-of-file and exits */
    }
    for (int i = 0; i < NRANKS; ++i) {
        int status = 0;
        wait(&status);
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    return failed;
}
