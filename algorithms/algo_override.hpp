// NNPCCL_ALGO: the user's override of the selector, per collective and per
// size range. Grammar (whitespace is not allowed, names are lower case):
//
//   spec   := entry (';' entry)*
//   entry  := collective ':' choice (',' choice)*
//   choice := algorithm [':' size '-' (size | 'max')]
//   size   := digits ['K' | 'M' | 'G']        (powers of 1024)
//
// e.g. "allreduce:direct:0-8K,ring:8K-max;broadcast:ring". A range is
// half-open, [low, high), over the size ccl-bench prints for the call; a
// choice without a range covers every size. The first matching choice
// wins; sizes no choice covers are left to the selector.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "collective.hpp"
#include "status.hpp"

namespace nnpccl {

struct AlgoChoice {
    Collective collective = Collective::Allreduce;
    std::string algorithm;
    size_t low = 0;
    size_t high = static_cast<size_t>(-1); // exclusive; SIZE_MAX stands for "max"
};

class AlgoOverride {
public:
    // Parses `spec`. A failure is an invalid argument whose message starts
    // with `source` (where the spec came from) and names the offending token
    // and its position (1-based character).
    Status parse(std::string_view spec, std::string_view source = "NNPCCL_ALGO");

    // The forced algorithm for a call of `bytes` bytes, or nullptr.
    const std::string *pick(Collective c, size_t bytes) const;

    bool empty() const { return choices_.empty(); }
    const std::vector<AlgoChoice> &choices() const { return choices_; }
    // Where the rules came from (parse's `source`), for messages about them.
    const std::string &source() const { return source_; }

private:
    std::vector<AlgoChoice> choices_;
    std::string source_ = "NNPCCL_ALGO";
};

} // namespace nnpccl
