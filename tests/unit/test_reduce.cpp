// Every datatype x op of the kernels against a scalar reference written
// independently: values go through double (exact for every input used) and
// the result is narrowed once. And the data path's copy, against memcpy.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "copy.hpp"
#include "dtype.hpp"
#include "reduce.hpp"

using namespace nnpccl;

namespace {

double load(nnpccl_datatype_t dt, const unsigned char *p) {
    switch (dt) {
    case NNPCCL_INT8: { int8_t v; std::memcpy(&v, p, 1); return v; }
    case NNPCCL_UINT8: return *p;
    case NNPCCL_INT32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case NNPCCL_UINT32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case NNPCCL_INT64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case NNPCCL_UINT64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case NNPCCL_FLOAT16: { uint16_t v; std::memcpy(&v, p, 2); return half_to_float(v); }
    case NNPCCL_BFLOAT16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_float(v); }
    case NNPCCL_FLOAT32: { float v; std::memcpy(&v, p, 4); return v; }
    default: { double v; std::memcpy(&v, p, 8); return v; }
    }
}

bool is_integer(nnpccl_datatype_t dt) { return dt <= NNPCCL_UINT64; }

// Integer results wrap: compute modulo 2^bits from the exact value.
void store(nnpccl_datatype_t dt, unsigned char *p, double v) {
    switch (dt) {
    case NNPCCL_INT8:
    case NNPCCL_UINT8: { auto w = static_cast<uint8_t>(static_cast<int64_t>(v)); std::memcpy(p, &w, 1); break; }
    case NNPCCL_INT32:
    case NNPCCL_UINT32: { auto w = static_cast<uint32_t>(static_cast<int64_t>(v)); std::memcpy(p, &w, 4); break; }
    case NNPCCL_INT64: { auto w = static_cast<int64_t>(v); std::memcpy(p, &w, 8); break; }
    case NNPCCL_UINT64: { auto w = static_cast<uint64_t>(v); std::memcpy(p, &w, 8); break; }
    case NNPCCL_FLOAT16: { uint16_t w = float_to_half(static_cast<float>(v)); std::memcpy(p, &w, 2); break; }
    case NNPCCL_BFLOAT16: { uint16_t w = float_to_bf16(static_cast<float>(v)); std::memcpy(p, &w, 2); break; }
    case NNPCCL_FLOAT32: { auto w = static_cast<float>(v); std::memcpy(p, &w, 4); break; }
    default: std::memcpy(p, &v, 8); break;
    }
}

// Inputs small enough that sums and products are exact in double and in
// float (where 16-bit types accumulate), but that overflow int8/uint8.
double random_value(nnpccl_datatype_t dt, std::mt19937 &rng) {
    bool is_unsigned = dt == NNPCCL_UINT8 || dt == NNPCCL_UINT32 || dt == NNPCCL_UINT64;
    std::uniform_int_distribution<int> d(is_unsigned ? 0 : -100, 100);
    double v = d(rng);
    if (!is_integer(dt)) v /= 4; // quarters: exact in every float type
    return v;
}

} // namespace

TEST_CASE("reduction kernels match a scalar reference for every datatype and op", "[reduce]") {
    std::mt19937 rng(12345);
    const size_t n = 1031; // odd, so vector loops have a tail
    for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d) {
        auto dt = static_cast<nnpccl_datatype_t>(d);
        const size_t es = datatype_size(dt);
        for (int o = 0; o < NNPCCL_NUM_OPS; ++o) {
            auto op = static_cast<nnpccl_redop_t>(o);
            for (uint32_t divisor : {1u, 3u}) {
                if (divisor != 1 && op != NNPCCL_AVG) continue;
                DYNAMIC_SECTION(datatype_name(dt) << " " << redop_name(op) << " / " << divisor) {
                    std::vector<unsigned char> a(n * es), b(n * es), out(n * es), expect(n * es);
                    for (size_t i = 0; i < n; ++i) {
                        store(dt, &a[i * es], random_value(dt, rng));
                        store(dt, &b[i * es], random_value(dt, rng));
                    }
                    for (size_t i = 0; i < n; ++i) {
                        double x = load(dt, &a[i * es]), y = load(dt, &b[i * es]), r = 0;
                        switch (op) {
                        case NNPCCL_SUM: case NNPCCL_AVG: r = x + y; break;
                        case NNPCCL_PROD: r = x * y; break;
                        case NNPCCL_MIN: r = std::min(x, y); break;
                        case NNPCCL_MAX: r = std::max(x, y); break;
                        default: break;
                        }
                        if (op == NNPCCL_AVG && divisor > 1) {
                            if (is_integer(dt)) {
                                // The wrapped sum, read back as the type, then truncated.
                                unsigned char wrapped[8];
                                store(dt, wrapped, r);
                                r = std::trunc(load(dt, wrapped) / divisor);
                            } else if (dt == NNPCCL_FLOAT64) {
                                r = r / divisor;
                            } else {
                                r = static_cast<float>(r) / static_cast<float>(divisor);
                            }
                        }
                        store(dt, &expect[i * es], r);
                    }
                    reduce(out.data(), a.data(), b.data(), n, dt, op, divisor);
                    size_t wrong = 0;
                    for (size_t i = 0; i < n; ++i) wrong += std::memcmp(&out[i * es], &expect[i * es], es) != 0;
                    CHECK(wrong == 0);
                    // In place (dst == a) gives the same bits.
                    reduce(a.data(), a.data(), b.data(), n, dt, op, divisor);
                    CHECK(std::memcmp(a.data(), out.data(), out.size()) == 0);
                }
            }
        }
    }
}

TEST_CASE("bfloat16 and float16 sums round once, to nearest even", "[reduce]") {
    // 256 + 1 is halfway between bf16 neighbours 256 and 258: even is 256;
    // 258 + 1 = 259 is halfway between 258 and 260: even is 260.
    uint16_t a[2] = {float_to_bf16(256.0f), float_to_bf16(258.0f)};
    uint16_t b[2] = {float_to_bf16(1.0f), float_to_bf16(1.0f)};
    uint16_t out[2];
    reduce(out, a, b, 2, NNPCCL_BFLOAT16, NNPCCL_SUM, 1);
    CHECK(bf16_to_float(out[0]) == 256.0f);
    CHECK(bf16_to_float(out[1]) == 260.0f);
    // float16: 2048 + 1 -> 2048, 2050 + 1 -> 2052.
    uint16_t ha[2] = {float_to_half(2048.0f), float_to_half(2050.0f)};
    uint16_t hb[2] = {float_to_half(1.0f), float_to_half(1.0f)};
    reduce(out, ha, hb, 2, NNPCCL_FLOAT16, NNPCCL_SUM, 1);
    CHECK(half_to_float(out[0]) == 2048.0f);
    CHECK(half_to_float(out[1]) == 2052.0f);
    // Overflow to infinity in float16: 60000 + 60000.
    uint16_t big = float_to_half(60000.0f);
    reduce(out, &big, &big, 1, NNPCCL_FLOAT16, NNPCCL_SUM, 1);
    CHECK(std::isinf(half_to_float(out[0])));
}

TEST_CASE("integer sums and products wrap", "[reduce]") {
    int8_t a = 100, b = 100, r = 0;
    reduce(&r, &a, &b, 1, NNPCCL_INT8, NNPCCL_SUM, 1);
    CHECK(r == static_cast<int8_t>(-56));
    uint32_t x = 0xffffffffu, y = 2, z = 0;
    reduce(&z, &x, &y, 1, NNPCCL_UINT32, NNPCCL_SUM, 1);
    CHECK(z == 1u);
    int64_t big = std::numeric_limits<int64_t>::max(), two = 2, p = 0;
    reduce(&p, &big, &two, 1, NNPCCL_INT64, NNPCCL_PROD, 1);
    CHECK(p == -2);
}

TEST_CASE("divide finishes avg without a combine", "[reduce]") {
    float v[3] = {3.0f, 6.0f, -9.0f}, out[3];
    divide(out, v, 3, NNPCCL_FLOAT32, 3);
    CHECK(out[0] == 1.0f);
    CHECK(out[1] == 2.0f);
    CHECK(out[2] == -3.0f);
    int32_t iv[2] = {7, -7}, iout[2];
    divide(iout, iv, 2, NNPCCL_INT32, 2);
    CHECK(iout[0] == 3);
    CHECK(iout[1] == -3);
}

TEST_CASE("min and max are IEEE 754 minimum and maximum: a NaN wins, -0 is below +0, either way round", "[reduce]") {
    // Bit patterns per type: NaN, 1, -0, +0.
    struct Case {
        nnpccl_datatype_t dt;
        uint64_t nan, one, negative_zero;
    };
    const Case cases[] = {{NNPCCL_FLOAT32, 0x7fc00001, 0x3f800000, 0x80000000},
                          {NNPCCL_FLOAT64, 0x7ff8000000000001ull, 0x3ff0000000000000ull, 0x8000000000000000ull},
                          {NNPCCL_FLOAT16, 0x7e01, 0x3c00, 0x8000},
                          {NNPCCL_BFLOAT16, 0x7fc1, 0x3f80, 0x8000}};
    for (const Case &c : cases) {
        const size_t es = datatype_size(c.dt);
        // Vector-wide, so the kernels' bodies and tails both see each pair.
        const size_t n = 67;
        auto run = [&](uint64_t x, uint64_t y, nnpccl_redop_t op) {
            std::vector<unsigned char> a(n * es), b(n * es), out(n * es);
            for (size_t i = 0; i < n; ++i) {
                std::memcpy(&a[i * es], &x, es);
                std::memcpy(&b[i * es], &y, es);
            }
            reduce(out.data(), a.data(), b.data(), n, c.dt, op, 1);
            uint64_t first = 0;
            std::memcpy(&first, out.data(), es);
            for (size_t i = 1; i < n; ++i) CHECK(std::memcmp(&out[i * es], out.data(), es) == 0);
            return first;
        };
        const uint64_t exponent_all_ones = c.dt == NNPCCL_FLOAT64 ? 0x7ff0000000000000ull
                                           : c.dt == NNPCCL_FLOAT32 ? 0x7f800000ull
                                           : c.dt == NNPCCL_FLOAT16 ? 0x7c00ull
                                                                    : 0x7f80ull;
        auto is_nan = [&](uint64_t v) { return (v & exponent_all_ones) == exponent_all_ones && (v & ~exponent_all_ones & (exponent_all_ones - 1)) != 0; };
        INFO(datatype_name(c.dt));
        for (nnpccl_redop_t op : {NNPCCL_MIN, NNPCCL_MAX}) {
            CHECK(is_nan(run(c.nan, c.one, op)));
            CHECK(is_nan(run(c.one, c.nan, op)));
            CHECK(run(c.negative_zero, 0, op) == (op == NNPCCL_MIN ? c.negative_zero : 0));
            CHECK(run(0, c.negative_zero, op) == (op == NNPCCL_MIN ? c.negative_zero : 0));
        }
    }
}

TEST_CASE("copy_bytes copies exactly what memcpy does at every distance and length", "[copy]") {
    // Distances 1-15 (modulo 4 KiB) take the vector loop from 2 KiB up,
    // the rest memcpy; lengths around the loop's 64-byte turns and the
    // 2 KiB threshold, on sources at odd offsets too.
    std::vector<unsigned char> source(3 * 4096 + 70000), target(source.size() + 8192);
    for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<unsigned char>(i * 131 + 7);
    for (size_t from : {size_t{0}, size_t{3}, size_t{4096 + 40}})
        for (size_t distance : {size_t{0}, size_t{1}, size_t{8}, size_t{15}, size_t{16}, size_t{4097}})
            for (size_t length : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{2047}, size_t{2048},
                                  size_t{5000}, size_t{70000}}) {
                const unsigned char *src = source.data() + from;
                // The target's address lies `distance` past the source's modulo 4 KiB.
                const uintptr_t want = (reinterpret_cast<uintptr_t>(src) + distance) & 4095;
                const uintptr_t base = reinterpret_cast<uintptr_t>(target.data());
                unsigned char *dst = target.data() + ((want - base) & 4095);
                std::fill(target.begin(), target.end(), 0xee);
                nnpccl::copy_bytes(dst, src, length);
                INFO("from " << from << " distance " << distance << " length " << length);
                CHECK(nnpccl::slow_copy_distance(dst, src) == (distance % 4096 >= 1 && distance % 4096 <= 15));
                CHECK(std::memcmp(dst, src, length) == 0);
                CHECK(dst[length] == 0xee); // nothing past the end
                if (dst > target.data()) CHECK(dst[-1] == 0xee);
            }
}
