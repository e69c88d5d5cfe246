#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend.hpp"
#include "nnpccl.h"

namespace {

class NnpcclBackend final : public Backend {
public:
    explicit NnpcclBackend(nnpccl_comm_t comm) : comm_(comm) {
        nnpccl_comm_rank(comm_, &rank_);
        nnpccl_comm_size(comm_, &size_);
    }
    int rank() const override { return rank_; }
    int size() const override { return size_; }

    void start_sum(void *buf, size_t count, Dtype dtype) override {
        nnpccl_request_t req = nullptr;
        check("iallreduce", nnpccl_iallreduce(buf, buf, count, datatype(dtype), NNPCCL_SUM, comm_, &req));
        pending_.push_back(req);
    }

    void wait_all() override {
        for (nnpccl_request_t req : pending_) check("wait", nnpccl_wait(req));
        pending_.clear();
    }

    void allgather(uint64_t mine, uint64_t *all) override {
        check("allgather", nnpccl_allgather(&mine, all, 1, NNPCCL_UINT64, comm_));
    }

    bool finish() override {
        if (nnpccl_comm_destroy(comm_) == NNPCCL_SUCCESS) return true;
        std::fprintf(stderr, "dist_mlp: rank %d: destroy failed: %s\n", rank_, nnpccl_get_last_error(nullptr));
        return false;
    }

private:
    static nnpccl_datatype_t datatype(Dtype d) {
        switch (d) {
        case Dtype::float32: return NNPCCL_FLOAT32;
        case Dtype::bfloat16: return NNPCCL_BFLOAT16;
        case Dtype::float64: return NNPCCL_FLOAT64;
        }
        return NNPCCL_FLOAT32;
    }

    void check(const char *what, nnpccl_result_t rc) {
        if (rc == NNPCCL_SUCCESS) return;
        std::fprintf(stderr, "dist_mlp: rank %d: %s failed: %s: %s\n", rank_, what, nnpccl_get_error_string(rc),
                     nnpccl_get_last_error(comm_));
        nnpccl_comm_abort(comm_);
        std::exit(1);
    }

    nnpccl_comm_t comm_;
    int rank_ = 0, size_ = 1;
    std::vector<nnpccl_request_t> pending_;
};

} // namespace

std::unique_ptr<Backend> nnpccl_backend() {
    nnpccl_comm_t comm = nullptr;
    if (nnpccl_comm_init_from_env(&comm, nullptr) != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "dist_mlp: init failed: %s (use --np N, or a launcher)\n", nnpccl_get_last_error(nullptr));
        return nullptr;
    }
    return std::make_unique<NnpcclBackend>(comm);
}
