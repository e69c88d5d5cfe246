// Inputs for which every reduction order gives the same, exact result, and
// the expected outputs, so ccl-bench and the tests can compare bit for bit.
//
// Rank r's element i is a small integer from a pattern that repeats every
// kPeriod elements: sums of them stay exactly representable even in
// bfloat16 for hundreds of ranks, products are powers of two (and signs),
// and integer overflow wraps identically in any order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nnpccl.h"

namespace nnpccl_check {

constexpr size_t kPeriod = 5 * 7 * 11 * 61; // every pattern's period divides it

// One period of a typed pattern, ready to be tiled over a buffer.
class Pattern {
public:
    Pattern() = default;
    Pattern(nnpccl_datatype_t dt, std::vector<unsigned char> bytes);
    // Writes elements [first, first + count) of the tiled pattern to dst.
    void fill(void *dst, size_t first, size_t count) const;
    // Counts elements of buf that differ bit for bit from [first, first + count).
    size_t count_wrong(const void *buf, size_t first, size_t count) const;

private:
    size_t elem_ = 1;
    std::vector<unsigned char> bytes_; // kPeriod elements
};

// What rank `rank` contributes.
Pattern input_pattern(nnpccl_datatype_t dt, nnpccl_redop_t op, int rank);
// The reduction over ranks 0..nranks-1 of their inputs (avg divides by nranks).
Pattern reduced_pattern(nnpccl_datatype_t dt, nnpccl_redop_t op, int nranks);

} // namespace nnpccl_check
