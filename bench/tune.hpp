// ccl-bench --tune FILE: the fastest algorithm --compare measured per size,
// written as NNPCCL_TUNING_FILE reads it (the format: the library's
// algorithms/tuning_file.hpp, and docs/design.md).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace nnpccl_bench {

// Merges `collective`'s line into the file at `path` (made if absent; a
// file of another job size or topology is an error): `winners` holds, in
// increasing size, each measured size in bytes and its fastest algorithm;
// each covers the sizes from it up to the next, the first from 0 and the
// last to any size. False, with a message, when the file cannot be used.
bool write_tuning_file(const std::string &path, const std::string &collective, int nranks, const std::string &topology,
                       const std::vector<std::pair<size_t, std::string>> &winners, const std::string &how,
                       std::string *error);

} // namespace nnpccl_bench
