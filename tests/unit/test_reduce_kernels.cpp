// Every kernel set this CPU runs against the scalar reference, bit for bit:
// every datatype and op, random bit patterns and edge values (signed zeros,
// subnormals, the largest finite, infinities, quiet and signalling NaNs
// with payloads, sums exactly halfway between two 16-bit values), counts
// around the vector widths, and dst aliasing a or b.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "reduce.hpp"
#include "reduce_kernels.hpp"

using namespace nnpccl;

namespace {

const size_t kCounts[] = {0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 65, 1000};
// Bytes past the end of dst that no kernel may write.
constexpr size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xa5;

std::vector<uint64_t> edge_values(nnpccl_datatype_t dt) {
    switch (dt) {
    case NNPCCL_FLOAT16:
        return {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400, 0x8400, 0x3c00,
                0xbc00, 0x3c01, 0x1000, 0x9000, 0x1400, 0x7bff, 0xfbff, 0x7bfe, 0x7c00,
                0xfc00, 0x7e00, 0xfe00, 0x7e55, 0xffff, 0x7c01, 0xfc01, 0x7d55, 0x7dff};
    case NNPCCL_BFLOAT16:
        return {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x807f, 0x0080, 0x8080, 0x3f80,
                0xbf80, 0x3f81, 0x3b80, 0xbb80, 0x3c00, 0x7f7f, 0xff7f, 0x7f7e, 0x7f80,
                0xff80, 0x7fc0, 0xffc0, 0x7fd5, 0xffff, 0x7f81, 0xff81, 0x7faa, 0x7fbf};
    case NNPCCL_FLOAT32:
        return {0x00000000, 0x80000000, 0x00000001, 0x007fffff, 0x00800000, 0x3f800000, 0x33800000, 0x7f7fffff,
                0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc12345, 0x7f800001, 0x7fa5a5a5};
    case NNPCCL_FLOAT64:
        return {0x0ull,
                0x8000000000000000ull,
                0x1ull,
                0x7fefffffffffffffull,
                0x7ff0000000000000ull,
                0xfff0000000000000ull,
                0x7ff8000000000000ull,
                0x7ff0000000000001ull,
                0xfff8000000012345ull,
                0x3ff0000000000000ull,
                0x3ca0000000000000ull};
    default: // integers: 0, 1, -1, the extremes
        return {0, 1, ~0ull, 0x7f, 0x80, 0x7fffffff, 0x80000000, 0x7fffffffffffffffull, 0x8000000000000000ull, 2};
    }
}

// 16-bit pairs whose exact sum lies halfway between two neighbours: a
// normal value plus half its unit in the last place (which rounds to even
// up or down depending on a's last bit).
void fill_ties(nnpccl_datatype_t dt, std::mt19937_64 &rng, uint16_t *a, uint16_t *b, size_t n) {
    const unsigned mant_bits = dt == NNPCCL_FLOAT16 ? 10 : 7;
    const unsigned exp_max = dt == NNPCCL_FLOAT16 ? 30 : 254;
    for (size_t i = 0; i < n; ++i) {
        const unsigned exp = mant_bits + 2 + static_cast<unsigned>(rng() % (exp_max - mant_bits - 1));
        const uint16_t sign = static_cast<uint16_t>((rng() & 1) << 15);
        const uint16_t mant = static_cast<uint16_t>(rng() & ((1u << mant_bits) - 1));
        a[i] = static_cast<uint16_t>(sign | (exp << mant_bits) | mant);
        b[i] = static_cast<uint16_t>(sign | ((exp - mant_bits - 1) << mant_bits));
        if (rng() & 1) std::swap(a[i], b[i]);
    }
}

// How the inputs of one case are made.
enum class Pattern { Random, Edges, Ties };

void fill(nnpccl_datatype_t dt, Pattern pattern, std::mt19937_64 &rng, std::vector<unsigned char> &a,
          std::vector<unsigned char> &b, size_t count) {
    const size_t size = datatype_size(dt);
    for (auto &byte : a) byte = static_cast<unsigned char>(rng());
    for (auto &byte : b) byte = static_cast<unsigned char>(rng());
    if (pattern == Pattern::Ties && size == 2) {
        fill_ties(dt, rng, reinterpret_cast<uint16_t *>(a.data()), reinterpret_cast<uint16_t *>(b.data()), count);
    } else if (pattern != Pattern::Random) {
        // Every pair of edge values in turn, then random pairs of them.
        const std::vector<uint64_t> edges = edge_values(dt);
        for (size_t i = 0; i < count; ++i) {
            const size_t pair = i < edges.size() * edges.size() ? i : rng() % (edges.size() * edges.size());
            std::memcpy(&a[i * size], &edges[pair / edges.size()], size);
            std::memcpy(&b[i * size], &edges[pair % edges.size()], size);
        }
    }
}

std::string hex(const unsigned char *p, size_t size) {
    static const char digits[] = "0123456789abcdef";
    std::string s = "0x";
    for (size_t i = size; i-- > 0;) {
        s += digits[p[i] >> 4];
        s += digits[p[i] & 15];
    }
    return s;
}

enum class Alias { None, DstIsA, DstIsB };

// Runs `set`'s kernel for (dt, op, divisor) on one input and checks it
// against the scalar reference; divide when `op` is NNPCCL_NUM_OPS.
void check(const kernels::KernelSet &set, nnpccl_datatype_t dt, int op, uint32_t divisor, size_t count, Pattern pattern,
           Alias alias, std::mt19937_64 &rng) {
    const size_t size = datatype_size(dt);
    const size_t bytes = count * size;
    std::vector<unsigned char> a(bytes + kGuard), b(bytes + kGuard);
    fill(dt, pattern, rng, a, b, count);
    std::vector<unsigned char> expected(bytes + kGuard, kGuardByte);
    const bool divide = op == NNPCCL_NUM_OPS;
    const auto redop = static_cast<nnpccl_redop_t>(op);
    if (divide)
        kernels::scalar_kernels().divide[dt](expected.data(), a.data(), count, divisor);
    else
        kernels::scalar_kernels().reduce[dt](expected.data(), a.data(), b.data(), count, redop, divisor);

    std::vector<unsigned char> out(bytes + kGuard, kGuardByte);
    std::vector<unsigned char> a_in = a, b_in = b;
    unsigned char *dst = out.data();
    if (alias == Alias::DstIsA) dst = a.data();
    if (alias == Alias::DstIsB) dst = b.data();
    if (divide)
        set.divide[dt](dst, a.data(), count, divisor);
    else
        set.reduce[dt](dst, a.data(), b.data(), count, redop, divisor);

    if (alias == Alias::None) {
        CHECK(a == a_in);
        CHECK(b == b_in);
    } else {
        // Aliased dst: its guard bytes are the input's own.
        std::memcpy(expected.data() + bytes, dst + bytes, kGuard);
    }
    const int first_diff = [&] {
        for (size_t i = 0; i < bytes + kGuard; ++i)
            if (dst[i] != expected[i]) return static_cast<int>(i);
        return -1;
    }();
    if (first_diff >= 0) {
        const size_t e = static_cast<size_t>(first_diff) / size;
        std::string where = std::string("kernels ") + set.name + ", " + datatype_name(dt) + " " +
                            (divide ? "divide" : redop_name(redop)) + ", divisor " + std::to_string(divisor) +
                            ", count " + std::to_string(count) + ", pattern " +
                            std::to_string(static_cast<int>(pattern)) + ", alias " +
                            std::to_string(static_cast<int>(alias)) + ": ";
        if (e < count)
            where += "element " + std::to_string(e) + ": a " + hex(&a_in[e * size], size) + " b " +
                     hex(&b_in[e * size], size) + " -> " + hex(&dst[e * size], size) + ", reference " +
                     hex(&expected[e * size], size);
        else
            where += "wrote past the end, at byte " + std::to_string(first_diff) + " of " + std::to_string(bytes);
        FAIL_CHECK(where);
    }
}

void check_set(const kernels::KernelSet &set, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d) {
        const auto dt = static_cast<nnpccl_datatype_t>(d);
        for (int op = 0; op <= NNPCCL_NUM_OPS; ++op) {
            const bool divide = op == NNPCCL_NUM_OPS;
            std::vector<uint32_t> divisors{1};
            if (op == NNPCCL_AVG) divisors = {1, 3, 8};
            if (divide) divisors = {3, 8};
            for (uint32_t divisor : divisors)
                for (size_t count : kCounts)
                    for (Pattern pattern : {Pattern::Random, Pattern::Edges, Pattern::Ties})
                        for (Alias alias : {Alias::None, Alias::DstIsA, Alias::DstIsB}) {
                            if (divide && alias == Alias::DstIsB) continue;
                            check(set, dt, op, divisor, count, pattern, alias, rng);
                        }
        }
    }
}

} // namespace

TEST_CASE("every kernel set this CPU runs matches the scalar reference bit for bit", "[reduce][kernels]") {
    kernels::KernelSet sets[kernels::kMaxKernelSets];
    const int n = kernels::usable_kernel_sets(sets);
    REQUIRE(n >= 1);
    CHECK(std::string(sets[0].name) == "scalar");
    for (int i = 0; i < n; ++i) {
        for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d) {
            REQUIRE(sets[i].reduce[d] != nullptr);
            REQUIRE(sets[i].divide[d] != nullptr);
        }
        WARN("checking kernel set " << sets[i].name);
        check_set(sets[i], 15 + static_cast<uint64_t>(i));
    }
}

TEST_CASE("reduce() and divide() run the best kernel set this CPU has", "[reduce][kernels]") {
    kernels::KernelSet sets[kernels::kMaxKernelSets];
    const int n = kernels::usable_kernel_sets(sets);
    const kernels::KernelSet &active = kernels::active_kernels();
    CHECK(std::string(active.name) == sets[n - 1].name);
    for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d) {
        const bool timed = d == NNPCCL_FLOAT16 || d == NNPCCL_BFLOAT16;
        // A timed choice is one vector set's kernel pair, never a mix; the
        // other types run the widest set's.
        bool found = false;
        for (int i = timed && n > 1 ? 1 : n - 1; i < n; ++i)
            found = found || (active.reduce[d] == sets[i].reduce[d] && active.divide[d] == sets[i].divide[d]);
        CHECK(found);
    }
    // Through the public entry points, including what they do before the
    // kernel: avg's divisor is ignored for the other ops.
    std::mt19937_64 rng(7);
    for (nnpccl_datatype_t dt : {NNPCCL_FLOAT16, NNPCCL_BFLOAT16, NNPCCL_FLOAT32}) {
        const size_t count = 1000, bytes = count * datatype_size(dt);
        std::vector<unsigned char> a(bytes), b(bytes), got(bytes), want(bytes);
        for (auto &byte : a) byte = static_cast<unsigned char>(rng());
        for (auto &byte : b) byte = static_cast<unsigned char>(rng());
        for (int op = 0; op < NNPCCL_NUM_OPS; ++op) {
            const auto redop = static_cast<nnpccl_redop_t>(op);
            reduce(got.data(), a.data(), b.data(), count, dt, redop, 3);
            kernels::scalar_kernels().reduce[dt](want.data(), a.data(), b.data(), count, redop,
                                                 redop == NNPCCL_AVG ? 3 : 1);
            CHECK(got == want);
        }
        divide(got.data(), a.data(), count, dt, 3);
        kernels::scalar_kernels().divide[dt](want.data(), a.data(), count, 3);
        CHECK(got == want);
    }
}
