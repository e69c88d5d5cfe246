#include "planning_options.hpp"

#include <cstddef>

#include "config.hpp"

namespace nnpccl {

namespace {

constexpr size_t kMinChunk = 4096;
constexpr size_t kMaxChunk = size_t{64} << 20;

Status apply_config(const nnpccl_config_t &config, PlanningOptions *out) {
    NNPCCL_TRY(check_config_size(&config));
    if (config.chunk_bytes != 0) {
        if (config.chunk_bytes < kMinChunk || config.chunk_bytes > kMaxChunk)
            return invalid_argument("config->chunk_bytes=%zu is not from 4096 to 64M", config.chunk_bytes);
        out->chunk_bytes = config.chunk_bytes;
        out->chunk_source = "config->chunk_bytes";
    }
    if (config.struct_size >= offsetof(nnpccl_config_t, algorithms) + sizeof(config.algorithms) &&
        config.algorithms != nullptr) {
        out->algorithms = config.algorithms;
        out->algorithms_source = "config->algorithms";
    }
    return Status::ok();
}

} // namespace

Status resolve_planning_options(const nnpccl_config_t *config, PlanningOptions *out) {
    PlanningOptions planning;
    NNPCCL_TRY(resolve_machine_options(&planning));
    planning.algorithms = env_string("NNPCCL_ALGO");
    planning.tuning_file = env_string("NNPCCL_TUNING_FILE");
    NNPCCL_TRY(env_size("NNPCCL_CHUNK_SIZE", kMinChunk, kMaxChunk, "4K to 64M", &planning.chunk_bytes));
    if (config != nullptr) NNPCCL_TRY(apply_config(*config, &planning));
    planning.chunk_bytes &= ~size_t{63}; // keeps every slot cache-line aligned
    *out = planning;
    return Status::ok();
}

Status resolve_tuning_options(TuningOptions *out) {
    *out = TuningOptions{};
    // Opt-in: measured choices are not reproducible (docs/design.md).
    return env_flag("NNPCCL_TUNE", &out->enabled);
}

} // namespace nnpccl
