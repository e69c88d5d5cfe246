// The sizes a tool walks, as nccl-tests walks them: from -b to -e, each
// step multiplied by -f or, given -i, that many bytes added. ccl-bench,
// ccl-bench --explain, ccl-sim and the peer benches all walk them here.
#pragma once

#include <cstddef>
#include <vector>

#include <CLI/CLI.hpp>

namespace nnpccl_tools {

struct SizeSweep {
    size_t min_bytes = 32 << 20;
    size_t max_bytes = 32 << 20;
    size_t step_factor = 1;
    size_t step_bytes = 0; // not 0: add this each step instead of multiplying
};

// -b, -e, -f and -i as ccl-bench and ccl-sim take them; returns -f's
// option, which default_step() asks whether it was given.
CLI::Option *add_sweep_options(CLI::App &app, SizeSweep *sweep);

// After parsing: a range (-e > -b) with neither -f nor -i doubles.
void default_step(const CLI::Option *factor, SizeSweep *sweep);

// Every size of the sweep in bytes, rounded down to a multiple of `unit`
// (an element, or a whole block per rank for the block-wise collectives).
// Stops at -e, or where a step would not grow (a factor of 1, -b 0, or
// overflow).
std::vector<size_t> sweep_sizes(const SizeSweep &sweep, size_t unit = 1);

} // namespace nnpccl_tools
