// What the multi-process tests' rank bodies share: an expectation that
// counts failures and says which rank saw them (Catch2's macros belong to
// the test process, not to its forked ranks), and joining a job.
#pragma once

#include <cstddef>
#include <cstdio>

#include "nnpccl.h"

// In a rank body with `int rank` and `int failures` in scope.
#define EXPECT(cond)                                                                                                   \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            std::fprintf(stderr, "rank %d: %s:%d: expectation failed: %s\n", rank, __FILE__, __LINE__, #cond);        \
            ++failures;                                                                                                \
        }                                                                                                              \
    } while (0)

// A blocking init with this deadline and chunk size; nullptr,
// having said why, when it fails.
inline nnpccl_comm_t join_job(int rank, int nranks, const nnpccl_unique_id_t &id, int timeout_sec,
                              size_t chunk_bytes = 0) {
    nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
    cfg.timeout_sec = timeout_sec;
    cfg.chunk_bytes = chunk_bytes; // 0: NNPCCL_CHUNK_SIZE or the default
    nnpccl_comm_t comm = nullptr;
    if (nnpccl_comm_init_rank(&comm, nranks, id, rank, &cfg) != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "rank %d: init failed: %s\n", rank, nnpccl_get_last_error(nullptr));
        return nullptr;
    }
    return comm;
}
