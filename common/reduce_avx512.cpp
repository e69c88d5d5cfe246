// The float16 and bfloat16 kernels for AVX-512 F and BW (vcvtph2ps and
// vcvtps2ph on zmm are AVX-512F); this file alone is compiled with
// -mavx512f -mavx512bw, and reduce.cpp calls it only on CPUs that have
// both and F16C.
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() (a
// self-initialised variable) as the unused merge source, which
// -Wmaybe-uninitialized flags at every use (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "reduce_kernels.hpp"
#include "reduce_simd.hpp"

namespace nnpccl::kernels {

namespace {

struct Avx512 {
    using V = __m512;
    static constexpr size_t kStep = 32;

    // As in reduce_avx2.cpp: the first source's NaN wins, so the operand
    // order is fixed in asm.
    static V add(V x, V y) {
        V r;
        asm("vaddps %2, %1, %0" : "=v"(r) : "v"(x), "v"(y));
        return r;
    }
    static V mul(V x, V y) {
        V r;
        asm("vmulps %2, %1, %0" : "=v"(r) : "v"(x), "v"(y));
        return r;
    }
    static V div(V x, V y) { return _mm512_div_ps(x, y); }
    // As reduce_avx2.cpp's, with masks (and integer or/and: AVX-512F has no
    // float ones).
    static V minimum(V x, V y) {
        const V both = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), _mm512_castps_si512(y)));
        V r = _mm512_mask_mov_ps(_mm512_min_ps(y, x), _mm512_cmp_ps_mask(x, y, _CMP_EQ_OQ), both);
        r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), y);
        return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
    }
    static V load32(const float *p) { return _mm512_loadu_ps(p); }
    static void store32(float *p, V v) { _mm512_storeu_ps(p, v); }
    static V maximum(V x, V y) {
        const V both = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_castps_si512(y)));
        V r = _mm512_mask_mov_ps(_mm512_max_ps(y, x), _mm512_cmp_ps_mask(x, y, _CMP_EQ_OQ), both);
        r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), y);
        return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
    }
    static V splat(float f) { return _mm512_set1_ps(f); }

    // As in reduce_avx2.cpp: exact widening, narrowing to nearest even by
    // the immediate whatever MXCSR says, NaN payloads truncated and quieted.
    static void load_f16(const uint16_t *p, V &lo, V &hi) {
        lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
        hi = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 16)));
    }
    static void store_f16(uint16_t *p, V lo, V hi) {
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), _mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(p + 16), _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT));
    }

    // Even elements in `lo`, odd ones in `hi`, as in reduce_avx2.cpp.
    static void load_bf16(const uint16_t *p, V &lo, V &hi) {
        const __m512i v = _mm512_loadu_si512(p);
        lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        hi = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
    }
    // float_to_bf16 on 16 lanes, the result in each lane's high 16 bits, for
    // the values the kernels narrow (see reduce_avx2.cpp: a NaN among them is
    // quiet and its low 16 bits are zero).
    static __m512i round_bf16(V f) {
        const __m512i bits = _mm512_castps_si512(f);
        // Where the kept part is odd, 0x7fff + 1 = 0x8000.
        const __mmask16 odd = _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0x10000));
        return _mm512_mask_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), odd, bits,
                                     _mm512_set1_epi32(0x8000));
    }
    static V quiet(V f) {
        const __m512i bits = _mm512_castps_si512(f);
        const __m512i quieted = _mm512_or_si512(bits, _mm512_set1_epi32(0x00400000));
        return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), bits, quieted));
    }
    static void store_bf16(uint16_t *p, V lo, V hi) {
        const __m512i even = _mm512_srli_epi32(round_bf16(lo), 16);
        _mm512_storeu_si512(p, _mm512_mask_blend_epi16(0xaaaaaaaau, even, round_bf16(hi)));
    }
};

} // namespace

const KernelSet &avx512_kernels() {
    static const KernelSet set = make_kernel_set<Avx512>("avx512f+bw");
    return set;
}

} // namespace nnpccl::kernels
