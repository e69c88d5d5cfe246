// The algorithm registry: every schedule nnpccl can run, by name, with the
// collectives it serves and the conditions under which it applies. The
// selector, the NNPCCL_ALGO parser and `ccl-bench --list-algos` read it.
#pragma once

#include <string_view>
#include <vector>

#include "collective.hpp"

namespace nnpccl {

struct AlgorithmInfo {
    const char *name;
    const char *summary;     // one line for --list-algos
    const char *constraints; // when it applies, in words ("" = always)
    std::vector<Collective> serves;

    bool serves_collective(Collective c) const;
};

const std::vector<AlgorithmInfo> &algorithm_registry();

// nullptr when no algorithm has that name.
const AlgorithmInfo *find_algorithm(std::string_view name);

// "ring, direct, ..." for error messages: the algorithms serving `c`.
std::string algorithm_names_for(Collective c);

} // namespace nnpccl
