#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "dtype.hpp"

using namespace nnpccl;

TEST_CASE("bfloat16 rounds to nearest even", "[dtype]") {
    CHECK(float_to_bf16(1.0f) == 0x3f80);
    CHECK(float_to_bf16(1.00390625f) == 0x3f80);   // 1 + 2^-8: halfway, even is 1.0
    CHECK(float_to_bf16(1.01171875f) == 0x3f82);   // 1 + 3*2^-8: halfway, even is 1 + 2^-6
    CHECK(float_to_bf16(1.0078125f) == 0x3f81);    // exactly representable
    CHECK(float_to_bf16(1.005859375f) == 0x3f81);  // above halfway rounds up
    CHECK(float_to_bf16(-2.0f) == 0xc000);
    CHECK(float_to_bf16(INFINITY) == 0x7f80);
    CHECK(float_to_bf16(3.40282347e38f) == 0x7f80); // max float rounds up to infinity
    CHECK(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

TEST_CASE("float16 rounds to nearest even, subnormals and overflow included", "[dtype]") {
    CHECK(float_to_half(1.0f) == 0x3c00);
    CHECK(float_to_half(2049.0f) == 0x6800);      // halfway between 2048 and 2050: even is 2048
    CHECK(float_to_half(2051.0f) == 0x6802);      // halfway between 2050 and 2052: even is 2052
    CHECK(float_to_half(65504.0f) == 0x7bff);     // largest finite
    CHECK(float_to_half(65519.0f) == 0x7bff);     // below the rounding boundary
    CHECK(float_to_half(65520.0f) == 0x7c00);     // rounds to infinity
    CHECK(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);      // smallest subnormal
    CHECK(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);      // halfway to it: even is 0
    CHECK(float_to_half(std::ldexp(3.0f, -25)) == 0x0002);      // halfway between 1 and 2 ulps: even is 2
    CHECK(float_to_half(std::ldexp(1023.5f, -24)) == 0x0400);   // rounds up into the normals
    CHECK(float_to_half(-0.0f) == 0x8000);
    CHECK(std::isnan(half_to_float(float_to_half(NAN))));
}

TEST_CASE("every float16 and bfloat16 value survives a round trip through float", "[dtype]") {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        auto v = static_cast<uint16_t>(h);
        bool half_nan = (v & 0x7c00) == 0x7c00 && (v & 0x3ff) != 0;
        if (!half_nan) REQUIRE(float_to_half(half_to_float(v)) == v);
        bool bf_nan = (v & 0x7f80) == 0x7f80 && (v & 0x7f) != 0;
        if (!bf_nan) REQUIRE(float_to_bf16(bf16_to_float(v)) == v);
    }
}

TEST_CASE("datatype and op names parse in both spellings", "[dtype]") {
    nnpccl_datatype_t dt;
    REQUIRE(parse_datatype("float32", &dt));
    CHECK(dt == NNPCCL_FLOAT32);
    REQUIRE(parse_datatype("bf16", &dt));
    CHECK(dt == NNPCCL_BFLOAT16);
    REQUIRE(parse_datatype("half", &dt));
    CHECK(dt == NNPCCL_FLOAT16);
    CHECK_FALSE(parse_datatype("float128", &dt));
    nnpccl_redop_t op;
    REQUIRE(parse_redop("avg", &op));
    CHECK(op == NNPCCL_AVG);
    CHECK_FALSE(parse_redop("xor", &op));
    for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d) CHECK(datatype_size(static_cast<nnpccl_datatype_t>(d)) > 0);
}
