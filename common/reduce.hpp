// Reduction kernels: dst[i] = a[i] (op) b[i] for every datatype and op.
// float16 and bfloat16 are widened to float32, combined, and rounded back to
// nearest even once per call. Integer sum and prod wrap (two's complement).
// When both operands of a float16 or bfloat16 sum, avg or prod are NaN, the
// result is a's NaN, quieted. The kernels are chosen once per process for
// the CPU (reduce_kernels.hpp) and give the same bits whichever is chosen.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nnpccl.h"

namespace nnpccl {

// dst may alias a or b (element for element). avg combines like sum; when
// `divisor` > 1 the combined value is divided by it before rounding, which is
// how the last hop of an avg finishes (integers truncate toward zero).
void reduce(void *dst, const void *a, const void *b, size_t count, nnpccl_datatype_t dt,
            nnpccl_redop_t op, uint32_t divisor);

// dst[i] = src[i] / divisor (the finishing step of avg where no combine is
// left to fuse it into); a plain copy when divisor <= 1. dst may equal src.
void divide(void *dst, const void *src, size_t count, nnpccl_datatype_t dt, uint32_t divisor);

// How fast this host reduces, for the planner's γ: µs per byte of output
// of a sum, by element size 1, 2, 4 and 8 bytes (index 0..3), the slowest
// datatype of each size (float16 and bfloat16 convert), each the best of a
// few runs over 64 KiB. Measured on first use, once per process (a few
// milliseconds); thread-safe.
struct HostReduceSpeed {
    double us_per_byte[4] = {0, 0, 0, 0};
};
const HostReduceSpeed &host_reduce_speed();

} // namespace nnpccl
