#include "size_sweep.hpp"

#include "command_line.hpp"

namespace nnpccl_tools {

CLI::Option *add_sweep_options(CLI::App &app, SizeSweep *sweep) {
    app.add_option("-b,--minbytes", sweep->min_bytes, "smallest size in bytes (K, M, G suffixes), default 32M")
        ->transform(size_value())
        ->type_name("SIZE");
    app.add_option("-e,--maxbytes", sweep->max_bytes, "largest size, default 32M")
        ->transform(size_value())
        ->type_name("SIZE");
    CLI::Option *factor = app.add_option("-f,--stepfactor", sweep->step_factor,
                                         "multiply the size by this each step, default 1 (2 when -e > -b)")
                              ->transform(whole_number(1))
                              ->type_name("N");
    app.add_option("-i,--stepbytes", sweep->step_bytes, "add this many bytes each step instead")
        ->transform(size_value())
        ->type_name("SIZE");
    return factor;
}

void default_step(const CLI::Option *factor, SizeSweep *sweep) {
    if (factor->count() == 0 && sweep->step_bytes == 0 && sweep->max_bytes > sweep->min_bytes) sweep->step_factor = 2;
}

std::vector<size_t> sweep_sizes(const SizeSweep &sweep, size_t unit) {
    std::vector<size_t> sizes;
    for (size_t bytes = sweep.min_bytes; bytes <= sweep.max_bytes;) {
        sizes.push_back(bytes / unit * unit);
        const size_t next = sweep.step_bytes != 0 ? bytes + sweep.step_bytes : bytes * sweep.step_factor;
        if (next <= bytes) break;
        bytes = next;
    }
    return sizes;
}

} // namespace nnpccl_tools
