// NNPCCL_TUNING_FILE: algorithm choices measured offline (`ccl-bench C
// --compare R --tune FILE` writes them), which the selector prefers to its
// model. Unlike NNPCCL_ALGO they are preferences: where the preferred
// algorithm does not apply to a call, the model chooses. Being fixed in a
// file, they keep results reproducible (docs/design.md), where measuring
// at run time would not. The format, one item per line:
//
//   # a comment
//   nranks N              the job size it was measured with (required)
//   topology NAME         the topology it was measured on (required)
//   COLLECTIVE:CHOICES    NNPCCL_ALGO's syntax for one collective
//
// e.g. "nranks 4\ntopology flat\nallreduce:direct:0-16K,ring:16K-max\n".
#pragma once

#include <string>
#include <string_view>

#include "algo_override.hpp"
#include "status.hpp"

namespace nnpccl {

struct TuningFile {
    int nranks = 0;
    std::string topology;
    AlgoOverride choices;
};

// Parses a tuning file's text. A malformed line is an invalid argument
// naming `source` (where the text came from) and the line.
Status parse_tuning_file(std::string_view text, std::string_view source, TuningFile *out);

} // namespace nnpccl
