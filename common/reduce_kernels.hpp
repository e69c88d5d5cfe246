// The reduction kernels per instruction set, for reduce.cpp's dispatch and
// for the tests that hold every set to the scalar reference bit for bit.
// Internal: nothing here is exported.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nnpccl.h"

namespace nnpccl::kernels {

// `divisor` is 1 unless op is NNPCCL_AVG (reduce() makes it so).
using ReduceFn = void (*)(void *dst, const void *a, const void *b, size_t count, nnpccl_redop_t op, uint32_t divisor);
// Called only with divisor > 1.
using DivideFn = void (*)(void *dst, const void *src, size_t count, uint32_t divisor);

// One instruction set's kernels, indexed by datatype. In a set an ISA file
// defines, a null entry means it has nothing better than the set below it
// (the compiler's own vectorisation of the scalar code is as good for
// that datatype); the sets usable_kernel_sets() returns are complete.
struct KernelSet {
    const char *name;
    ReduceFn reduce[NNPCCL_NUM_DATATYPES];
    DivideFn divide[NNPCCL_NUM_DATATYPES];
};

// The reference and the fallback: portable code, built for the baseline.
const KernelSet &scalar_kernels();

#if defined(__x86_64__) || defined(__i386__)
// float16 and bfloat16 widened to float32 in vector registers, and float32
// min and max: AVX2 with F16C (reduce_avx2.cpp) and AVX-512 F and BW
// (reduce_avx512.cpp).
const KernelSet &avx2_kernels();
const KernelSet &avx512_kernels();
#if defined(NNPCCL_REDUCE_AVX512FP16)
// float16 sum, prod, min and max in AVX-512 FP16 arithmetic (reduce_avx512fp16.cpp).
const KernelSet &avx512fp16_kernels();
#endif
#endif

constexpr int kMaxKernelSets = 4;
// The sets this CPU runs, completed from the ones below them, scalar first
// and the best last; returns how many.
int usable_kernel_sets(KernelSet (&sets)[kMaxKernelSets]);

// The best usable set, chosen on first use (thread-safe) and logged at INFO:
// the widest, except that float16's and bfloat16's kernels are the vector
// set's whose sum was timed fastest on this CPU (reduce.cpp,
// choose_kernels). The name is the widest set's.
const KernelSet &active_kernels();

} // namespace nnpccl::kernels
