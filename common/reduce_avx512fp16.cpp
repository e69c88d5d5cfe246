// float16 sum, prod, min and max in AVX-512 FP16's own arithmetic
// (vaddph, vmulph, vminph, vmaxph on 32 halves a vector), with no widening
// to float32 and back; this file alone is compiled with -mavx512fp16, and
// reduce.cpp calls it only on CPUs that have it.
//
// Why the bits are the reference's: the reference widens to float32,
// computes there and rounds to nearest even once back to float16. A
// product of two halves (11-bit significands) is exact in float32, so
// rounding it once equals vmulph's single rounding. A sum may round in
// float32 first, but float32's 24 bits are at least 2·11 + 2, and a double
// rounding through a format that wide equals the single one (Figueroa,
// "When is double rounding innocuous?", 1995). min and max pick an operand
// either way (quieting a signalling NaN, as the reference's narrowing
// does). NaNs: the first source's, quieted, as vaddps, vaddph and the
// widening all do, payloads kept. avg's divide does round twice in the
// reference (the quotient is not exact in float32), so it stays on the
// widening kernels below, as does bfloat16, which this extension has no
// arithmetic for. The tests hold this set to the reference like the others.
//
// Cost: a load of each operand, the op and a store per 32 elements, where
// the widening kernels convert each operand and the result too.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized" // GCC bug 105593, as in reduce_avx512.cpp
#endif
#include <immintrin.h>

#include "reduce_kernels.hpp"

namespace nnpccl::kernels {

namespace {

constexpr size_t kStep = 32;

__m512h add(__m512h x, __m512h y) {
    __m512h r;
    asm("vaddph %2, %1, %0" : "=v"(r) : "v"(x), "v"(y)); // x's NaN when both are: the operand order is fixed
    return r;
}
__m512h mul(__m512h x, __m512h y) {
    __m512h r;
    asm("vmulph %2, %1, %0" : "=v"(r) : "v"(x), "v"(y));
    return r;
}

// min and max pass a signalling NaN through; the reference's narrowing
// quiets it.
__m512h quiet(__m512h v) {
    const __m512i bits = _mm512_castph_si512(v);
    const __mmask32 nan = _mm512_cmp_ph_mask(v, v, _CMP_UNORD_Q);
    return _mm512_castsi512_ph(
        _mm512_mask_blend_epi16(nan, bits, _mm512_or_si512(bits, _mm512_set1_epi16(0x0200))));
}

// reduce.cpp's minimum (`smallest`) or maximum: minph/maxph (y's side
// unless y wins the compare), the union or intersection of the bits of
// equal values (-0 below +0), then y's NaN, then x's.
__m512h extremum(__m512h x, __m512h y, bool smallest) {
    const __m512i xb = _mm512_castph_si512(x), yb = _mm512_castph_si512(y);
    const __m512i pick = smallest ? _mm512_castph_si512(_mm512_min_ph(y, x)) : _mm512_castph_si512(_mm512_max_ph(y, x));
    const __m512i both = smallest ? _mm512_or_si512(xb, yb) : _mm512_and_si512(xb, yb);
    __m512i r = _mm512_mask_blend_epi16(_mm512_cmp_ph_mask(x, y, _CMP_EQ_OQ), pick, both);
    r = _mm512_mask_blend_epi16(_mm512_cmp_ph_mask(y, y, _CMP_UNORD_Q), r, yb);
    r = _mm512_mask_blend_epi16(_mm512_cmp_ph_mask(x, x, _CMP_UNORD_Q), r, xb);
    return _mm512_castsi512_ph(r);
}

// dst may alias a or b element for element. The tail is masked: lanes past
// `n` are neither read nor written.
template <class Fn> void combine(void *dst, const void *a, const void *b, size_t n, Fn fn) {
    auto *d = static_cast<uint16_t *>(dst);
    const auto *x = static_cast<const uint16_t *>(a);
    const auto *y = static_cast<const uint16_t *>(b);
    size_t i = 0;
    for (; i + kStep <= n; i += kStep)
        _mm512_storeu_ph(d + i, fn(_mm512_loadu_ph(x + i), _mm512_loadu_ph(y + i)));
    if (i == n) return;
    const __mmask32 tail = (__mmask32{1} << (n - i)) - 1;
    const __m512h xt = _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(tail, x + i));
    const __m512h yt = _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(tail, y + i));
    _mm512_mask_storeu_epi16(d + i, tail, _mm512_castph_si512(fn(xt, yt)));
}

void reduce_half(void *dst, const void *a, const void *b, size_t n, nnpccl_redop_t op, uint32_t divisor) {
    switch (op) {
    case NNPCCL_SUM: combine(dst, a, b, n, add); return;
    case NNPCCL_PROD: combine(dst, a, b, n, mul); return;
    case NNPCCL_MIN: combine(dst, a, b, n, [](__m512h x, __m512h y) { return quiet(extremum(x, y, true)); }); return;
    case NNPCCL_MAX: combine(dst, a, b, n, [](__m512h x, __m512h y) { return quiet(extremum(x, y, false)); }); return;
    default: avx512_kernels().reduce[NNPCCL_FLOAT16](dst, a, b, n, op, divisor); return; // avg
    }
}

} // namespace

const KernelSet &avx512fp16_kernels() {
    static const KernelSet set = [] {
        KernelSet s{"avx512f+bw+fp16", {}, {}};
        s.reduce[NNPCCL_FLOAT16] = reduce_half;
        return s;
    }();
    return set;
}

} // namespace nnpccl::kernels
