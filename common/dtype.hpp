// Element types: sizes, names, and the float16/bfloat16 conversions the
// reduction kernels and the tests share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "nnpccl.h"

namespace nnpccl {

constexpr bool valid_datatype(int dt) { return dt >= 0 && dt < NNPCCL_NUM_DATATYPES; }
constexpr bool valid_redop(int op) { return op >= 0 && op < NNPCCL_NUM_OPS; }

// 0 for a value that is not a datatype. Inline: every call asks it.
// In nnpccl_datatype_t's order: int8, uint8, int32, uint32, int64,
// uint64, float16, bfloat16, float32, float64. At namespace scope: an array
// local to the function was built on the stack by every call, in 16-byte
// stores that the 8-byte read of one size could not be forwarded from.
inline constexpr size_t kDatatypeSizes[NNPCCL_NUM_DATATYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
constexpr size_t datatype_size(nnpccl_datatype_t dt) { return valid_datatype(dt) ? kDatatypeSizes[dt] : 0; }
// nccl-tests's names where they exist ("float", "half", "bfloat16", "int8" ...).
const char *datatype_name(nnpccl_datatype_t dt);
const char *redop_name(nnpccl_redop_t op);
// Accepts our names and the common aliases (float32, fp32, f16, bf16 ...);
// returns false when the name is unknown.
bool parse_datatype(const char *name, nnpccl_datatype_t *dt);
bool parse_redop(const char *name, nnpccl_redop_t *op);

inline float bits_to_float(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}
inline uint32_t float_to_bits(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits;
}

inline float bf16_to_float(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN stays NaN (quiet), infinities stay infinite.
inline uint16_t float_to_bf16(float f) {
    uint32_t bits = float_to_bits(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
    uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>((bits + rounding) >> 16);
}

// IEEE binary16 <-> binary32, exact widening and round-to-nearest-even
// narrowing, subnormals included.
inline float half_to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13));
    if (exp != 0) return bits_to_float(sign | ((exp + 112u) << 23) | (mant << 13));
    // Subnormal (or zero): value = mant * 2^-24, exact in float.
    float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return bits_to_float(sign | float_to_bits(magnitude));
}

inline uint16_t float_to_half(float f) {
    uint32_t bits = float_to_bits(f);
    uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
    uint32_t abs = bits & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u); // rounds to >= 65520: inf
    if (abs < 0x38800000u) {
        // Result is subnormal in half: scale so the float adder rounds to
        // nearest even at the half's last place (2^-24).
        float scaled = bits_to_float(abs) + 0.5f; // 0.5 = 2^-1 puts 2^-24 at float's last place
        return static_cast<uint16_t>(sign | (float_to_bits(scaled) - 0x3f000000u));
    }
    uint32_t rounding = 0xfffu + ((abs >> 13) & 1u);
    uint32_t rebased = abs - (112u << 23) + rounding;
    return static_cast<uint16_t>(sign | (rebased >> 13));
}

} // namespace nnpccl
