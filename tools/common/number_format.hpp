// Numbers in the tables' columns, as nccl-tests prints them: right-aligned
// in `width` characters with as many decimals as fit (two, then one, then
// none, then an exponent). ccl-bench and the peer benches print three below
// 1, where two would move the sub-µs times of small calls on shared memory
// in steps of several percent; ccl-sim prints two (docs/design.md,
// "Benchmark output").
#pragma once

#include <string>

namespace nnpccl_tools {

std::string table_number(double v, int width, int decimals_below_one = 2);

} // namespace nnpccl_tools
