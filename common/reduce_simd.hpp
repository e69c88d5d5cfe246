// float16 and bfloat16 reduction kernels, and float32 min and max, written
// once over an instruction set's traits, for the ISA files (reduce_avx2.cpp,
// reduce_avx512.cpp) that are compiled with their own -m flags. Everything
// here has internal linkage: an inline function with external linkage
// compiled with AVX could be the copy the linker keeps for baseline callers
// too.
//
// The traits `I` give:
// - V, a vector of float32, and kStep, the 16-bit elements one step handles
//   (two V's worth);
// - add, mul, div, splat; add and mul return x's NaN when both operands
//   are NaN, as the reference does;
// - minimum and maximum, reduce.cpp's: a NaN operand gives NaN (x's when
//   both are), -0 is below +0;
// - load_f16, store_f16, load_bf16, store_bf16 of kStep elements as two V's;
//   the stores round to nearest even exactly like dtype.hpp's float_to_half
//   and float_to_bf16, NaNs included, given that a NaN reaching store_bf16
//   is quiet and has its low 16 bits zero;
// - quiet, which sets the quiet bit of NaNs;
// - load32 and store32 of one V of float32, unaligned.
//
// Cost: one pass over 2n input and n output 16-bit elements; per element a
// widening, the op and a narrowing, all in vector registers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "nnpccl.h"
#include "reduce_kernels.hpp"

namespace nnpccl::kernels {
namespace {

// settle: what min and max results need before narrowing. vcvtps2ph
// quiets a NaN itself; the bfloat16 narrowing expects quiet NaNs, and min
// and max pass a signalling one through.
template <class I> struct HalfFormat {
    static typename I::V settle(typename I::V v) { return v; }
    static void load(const uint16_t *p, typename I::V &lo, typename I::V &hi) { I::load_f16(p, lo, hi); }
    static void store(uint16_t *p, typename I::V lo, typename I::V hi) { I::store_f16(p, lo, hi); }
};
template <class I> struct Bf16Format {
    static typename I::V settle(typename I::V v) { return I::quiet(v); }
    static void load(const uint16_t *p, typename I::V &lo, typename I::V &hi) { I::load_bf16(p, lo, hi); }
    static void store(uint16_t *p, typename I::V lo, typename I::V hi) { I::store_bf16(p, lo, hi); }
};

// dst may alias a or b element for element: each step loads before it
// stores. The tail runs the same vector code on a zero-padded copy, so it
// rounds exactly like the body and never touches memory past `n`.
template <class I, class Format, class Fn> void combine16(void *dst, const void *a, const void *b, size_t n, Fn fn) {
    using V = typename I::V;
    constexpr size_t kStep = I::kStep;
    uint16_t *d = static_cast<uint16_t *>(dst);
    const uint16_t *x = static_cast<const uint16_t *>(a);
    const uint16_t *y = static_cast<const uint16_t *>(b);
    size_t i = 0;
    for (; i + kStep <= n; i += kStep) {
        V xl, xh, yl, yh;
        Format::load(x + i, xl, xh);
        Format::load(y + i, yl, yh);
        Format::store(d + i, fn(xl, yl), fn(xh, yh));
    }
    if (i == n) return;
    uint16_t tx[kStep] = {}, ty[kStep] = {}, td[kStep];
    std::memcpy(tx, x + i, (n - i) * sizeof(uint16_t));
    std::memcpy(ty, y + i, (n - i) * sizeof(uint16_t));
    V xl, xh, yl, yh;
    Format::load(tx, xl, xh);
    Format::load(ty, yl, yh);
    Format::store(td, fn(xl, yl), fn(xh, yh));
    std::memcpy(d + i, td, (n - i) * sizeof(uint16_t));
}

template <class I, class Format>
void reduce16(void *dst, const void *a, const void *b, size_t n, nnpccl_redop_t op, uint32_t divisor) {
    using V = typename I::V;
    switch (op) {
    case NNPCCL_SUM:
    case NNPCCL_AVG:
        if (divisor > 1) {
            // The reference divides by the divisor converted to float.
            const V d = I::splat(static_cast<float>(divisor));
            combine16<I, Format>(dst, a, b, n, [d](V x, V y) { return I::div(I::add(x, y), d); });
        } else {
            combine16<I, Format>(dst, a, b, n, [](V x, V y) { return I::add(x, y); });
        }
        break;
    case NNPCCL_PROD: combine16<I, Format>(dst, a, b, n, [](V x, V y) { return I::mul(x, y); }); break;
    case NNPCCL_MIN: combine16<I, Format>(dst, a, b, n, [](V x, V y) { return Format::settle(I::minimum(x, y)); }); break;
    case NNPCCL_MAX: combine16<I, Format>(dst, a, b, n, [](V x, V y) { return Format::settle(I::maximum(x, y)); }); break;
    default: break;
    }
}

// float32 min and max: the compiler vectorises the reference's other float32
// ops as well as a hand-written loop would, but not the NaN and signed-zero
// branches of its minimum and maximum. dst may alias a or b element for
// element; the tail runs the same code on a zero-padded copy.
template <class I> void reduce32(void *dst, const void *a, const void *b, size_t n, nnpccl_redop_t op, uint32_t divisor) {
    using V = typename I::V;
    if (op != NNPCCL_MIN && op != NNPCCL_MAX) return scalar_kernels().reduce[NNPCCL_FLOAT32](dst, a, b, n, op, divisor);
    constexpr size_t kLanes = sizeof(V) / sizeof(float);
    const bool smallest = op == NNPCCL_MIN;
    auto fn = [smallest](V x, V y) { return smallest ? I::minimum(x, y) : I::maximum(x, y); };
    float *d = static_cast<float *>(dst);
    const float *x = static_cast<const float *>(a);
    const float *y = static_cast<const float *>(b);
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) I::store32(d + i, fn(I::load32(x + i), I::load32(y + i)));
    if (i == n) return;
    float tx[kLanes] = {}, ty[kLanes] = {}, td[kLanes];
    std::memcpy(tx, x + i, (n - i) * sizeof(float));
    std::memcpy(ty, y + i, (n - i) * sizeof(float));
    I::store32(td, fn(I::load32(tx), I::load32(ty)));
    std::memcpy(d + i, td, (n - i) * sizeof(float));
}

template <class I, class Format> void divide16(void *dst, const void *src, size_t n, uint32_t divisor) {
    using V = typename I::V;
    const V d = I::splat(static_cast<float>(divisor));
    combine16<I, Format>(dst, src, src, n, [d](V x, V) { return I::div(x, d); });
}

template <class I> KernelSet make_kernel_set(const char *name) {
    KernelSet set{name, {}, {}};
    set.reduce[NNPCCL_FLOAT16] = reduce16<I, HalfFormat<I>>;
    set.reduce[NNPCCL_BFLOAT16] = reduce16<I, Bf16Format<I>>;
    set.reduce[NNPCCL_FLOAT32] = reduce32<I>;
    set.divide[NNPCCL_FLOAT16] = divide16<I, HalfFormat<I>>;
    set.divide[NNPCCL_BFLOAT16] = divide16<I, Bf16Format<I>>;
    return set;
}

} // namespace
} // namespace nnpccl::kernels
