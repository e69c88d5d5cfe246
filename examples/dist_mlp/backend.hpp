// What dist_mlp needs from a collective library, so that the same training
// runs over nnpccl or, for comparison, over MPI. Every failure prints the
// library's message and ends the job (abort), as a training script would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

enum class Dtype { float32, bfloat16, float64 };

class Backend {
public:
    virtual ~Backend() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    // Starts summing `count` elements of `buf` over the ranks, in place.
    virtual void start_sum(void *buf, size_t count, Dtype dtype) = 0;
    // Waits for every sum started.
    virtual void wait_all() = 0;
    void sum(void *buf, size_t count, Dtype dtype) {
        start_sum(buf, count, dtype);
        wait_all();
    }
    // Every rank's `mine`, in rank order, into `all` (size() values).
    virtual void allgather(uint64_t mine, uint64_t *all) = 0;
    // Ends the communicator; false (with a message) when that fails.
    virtual bool finish() = 0;
};

// nnpccl: a communicator from the launcher's environment (torchrun, mpirun,
// or the variables dist_mlp --np sets); nullptr, with a message, on failure.
std::unique_ptr<Backend> nnpccl_backend();

#ifdef DIST_MLP_WITH_MPI
// MPI_COMM_WORLD, collectives by MPI_Iallreduce (bfloat16 as a user-defined
// sum over 16-bit words, rounding as nnpccl does).
std::unique_ptr<Backend> mpi_backend(int *argc, char ***argv);
#endif
