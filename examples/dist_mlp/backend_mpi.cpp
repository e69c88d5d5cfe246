// MPI's C API only: its deprecated C++ bindings do not compile warning-free.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "backend.hpp"
#include "model.hpp"

namespace {

// MPI has no bfloat16: a user-defined sum over 16-bit words, each pair added
// in float32 and rounded to nearest even, as nnpccl sums bfloat16.
void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *) {
    const auto *a = static_cast<const uint16_t *>(in);
    auto *b = static_cast<uint16_t *>(inout);
    for (int i = 0; i < *len; ++i) b[i] = to_bf16(from_bf16(a[i]) + from_bf16(b[i]));
}

class MpiBackend final : public Backend {
public:
    MpiBackend() {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
        MPI_Op_create(bf16_sum, 1, &bf16_sum_);
    }
    int rank() const override { return rank_; }
    int size() const override { return size_; }

    void start_sum(void *buf, size_t count, Dtype dtype) override {
        MPI_Request req;
        const MPI_Datatype type = dtype == Dtype::float32   ? MPI_FLOAT
                                  : dtype == Dtype::float64 ? MPI_DOUBLE
                                                            : MPI_UINT16_T;
        const MPI_Op op = dtype == Dtype::bfloat16 ? bf16_sum_ : MPI_SUM;
        MPI_Iallreduce(MPI_IN_PLACE, buf, static_cast<int>(count), type, op, MPI_COMM_WORLD, &req);
        pending_.push_back(req);
    }

    void wait_all() override {
        MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE);
        pending_.clear();
    }

    void allgather(uint64_t mine, uint64_t *all) override {
        MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    }

    bool finish() override {
        MPI_Op_free(&bf16_sum_);
        return MPI_Finalize() == MPI_SUCCESS;
    }

private:
    int rank_ = 0, size_ = 1;
    MPI_Op bf16_sum_ = MPI_OP_NULL;
    std::vector<MPI_Request> pending_;
};

} // namespace

// MPI's default error handler on MPI_COMM_WORLD aborts the job on any
// failure, which is what dist_mlp wants.
std::unique_ptr<Backend> mpi_backend(int *argc, char ***argv) {
    MPI_Init(argc, argv);
    return std::make_unique<MpiBackend>();
}
