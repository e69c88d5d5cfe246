// The float16 and bfloat16 kernels for AVX2 with F16C; this file alone is
// compiled with -mavx2 -mf16c, and reduce.cpp calls it only on CPUs that
// have both.
#include <immintrin.h>

#include "reduce_kernels.hpp"
#include "reduce_simd.hpp"

namespace nnpccl::kernels {

namespace {

struct Avx2 {
    using V = __m256;
    static constexpr size_t kStep = 16;

    // When both operands are NaN the result is the first source's NaN; the
    // reference returns x's (reduce.cpp, first_nan), and the intrinsics
    // would let the compiler swap the operands of these commutative ops.
    static V add(V x, V y) {
        V r;
        asm("vaddps %2, %1, %0" : "=x"(r) : "x"(x), "x"(y));
        return r;
    }
    static V mul(V x, V y) {
        V r;
        asm("vmulps %2, %1, %0" : "=x"(r) : "x"(x), "x"(y));
        return r;
    }
    static V div(V x, V y) { return _mm256_div_ps(x, y); }
    // reduce.cpp's minimum and maximum: minps/maxps (y's side unless y wins
    // the compare), the union or intersection of the bits of equal values
    // (-0 below +0), then y's NaN, then x's.
    static V minimum(V x, V y) {
        V r = _mm256_min_ps(y, x);
        r = _mm256_blendv_ps(r, _mm256_or_ps(x, y), _mm256_cmp_ps(x, y, _CMP_EQ_OQ));
        r = _mm256_blendv_ps(r, y, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
        return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    }
    static V load32(const float *p) { return _mm256_loadu_ps(p); }
    static void store32(float *p, V v) { _mm256_storeu_ps(p, v); }
    static V maximum(V x, V y) {
        V r = _mm256_max_ps(y, x);
        r = _mm256_blendv_ps(r, _mm256_and_ps(x, y), _mm256_cmp_ps(x, y, _CMP_EQ_OQ));
        r = _mm256_blendv_ps(r, y, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
        return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    }
    static V splat(float f) { return _mm256_set1_ps(f); }

    // vcvtph2ps is exact (subnormals too); vcvtps2ph with an immediate
    // rounding mode rounds to nearest even whatever MXCSR says, overflows
    // to infinity, and turns a NaN into sign | 0x7e00 | the top 9 payload
    // bits, as float_to_half does.
    static void load_f16(const uint16_t *p, V &lo, V &hi) {
        lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 8)));
    }
    static void store_f16(uint16_t *p, V lo, V hi) {
        _mm_storeu_si128(reinterpret_cast<__m128i *>(p), _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(p + 8), _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT));
    }

    // Even elements in `lo`, odd ones in `hi`: widening is a shift or a
    // mask, and narrowing picks the high halves back with one word blend.
    static void load_bf16(const uint16_t *p, V &lo, V &hi) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
        lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
        hi = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
    }
    // float_to_bf16 on 8 lanes, the result in each lane's high 16 bits,
    // for the values the kernels narrow: a NaN among them is quiet and its
    // low 16 bits are zero (add, mul and div return a quieted operand, which
    // came from a bfloat16, or the default NaN; min and max quiet theirs),
    // so adding the rounding increment leaves its high half as
    // float_to_bf16's NaN branch would make it.
    static __m256i round_bf16(V f) {
        const __m256i bits = _mm256_castps_si256(f);
        // All ones where the kept part is odd: then 0x7fff - (-1) = 0x8000.
        const __m256i bit16 = _mm256_set1_epi32(0x10000);
        const __m256i odd = _mm256_cmpeq_epi32(_mm256_and_si256(bits, bit16), bit16);
        return _mm256_sub_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd);
    }
    static V quiet(V f) {
        const V nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
        return _mm256_or_ps(f, _mm256_and_ps(nan, _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000))));
    }
    static void store_bf16(uint16_t *p, V lo, V hi) {
        const __m256i even = _mm256_srli_epi32(round_bf16(lo), 16);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), _mm256_blend_epi16(even, round_bf16(hi), 0xaa));
    }
};

} // namespace

const KernelSet &avx2_kernels() {
    static const KernelSet set = make_kernel_set<Avx2>("avx2+f16c");
    return set;
}

} // namespace nnpccl::kernels
