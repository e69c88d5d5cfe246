// Cost: one pass over 2n input and n output elements; memory bound for
// native types on the host, conversion bound for float16 and bfloat16 in
// the scalar kernels (the vector ones widen and narrow in registers).
//
// The scalar kernels here are the reference and the fallback; the ISA
// files (reduce_avx2.cpp, reduce_avx512.cpp) replace some of them, and the
// best set the CPU runs is chosen once per process.
#include "reduce.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "dtype.hpp"
#include "log.hpp"
#include "status.hpp"
#include "reduce_kernels.hpp"

namespace nnpccl {

namespace {

// How a stored element becomes the value arithmetic is done in, and back.
// kFirstNaN: see first_nan().
template <typename T> struct NativeRepr {
    using Storage = T;
    using Acc = T;
    static constexpr bool kFirstNaN = false;
    static Acc load(T v) { return v; }
    static T store(Acc v) { return v; }
};
struct HalfRepr {
    using Storage = uint16_t;
    using Acc = float;
    static constexpr bool kFirstNaN = true;
    static Acc load(uint16_t v) { return half_to_float(v); }
    static uint16_t store(Acc v) { return float_to_half(v); }
};
struct Bf16Repr {
    using Storage = uint16_t;
    using Acc = float;
    static constexpr bool kFirstNaN = true;
    static Acc load(uint16_t v) { return bf16_to_float(v); }
    static uint16_t store(Acc v) { return float_to_bf16(v); }
};

// Integer sum and product wrap: do them in the unsigned type of the same
// width, where overflow is defined.
template <typename Acc> Acc wrap_add(Acc x, Acc y) {
    if constexpr (std::is_integral_v<Acc>) {
        using U = std::make_unsigned_t<Acc>;
        return static_cast<Acc>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
    } else {
        return x + y;
    }
}
template <typename Acc> Acc wrap_mul(Acc x, Acc y) {
    if constexpr (std::is_integral_v<Acc>) {
        // Promote through unsigned int at least, so uint8/uint16 products do
        // not overflow a signed int.
        using U = std::common_type_t<std::make_unsigned_t<Acc>, unsigned>;
        return static_cast<Acc>(static_cast<U>(x) * static_cast<U>(y));
    } else {
        return x * y;
    }
}
template <typename Acc> Acc divide_by(Acc x, uint32_t d) {
    if constexpr (std::is_integral_v<Acc> && std::is_signed_v<Acc>)
        return static_cast<Acc>(static_cast<int64_t>(x) / static_cast<int64_t>(d));
    else if constexpr (std::is_integral_v<Acc>)
        return static_cast<Acc>(static_cast<uint64_t>(x) / d);
    else
        return x / static_cast<Acc>(d);
}

// Which NaN x + y or x * y returns when both are NaN is the compiler's
// choice (it may swap the operands). The 16-bit types fix it, so that their
// vector kernels can match bit for bit: x's payload, which narrowing quiets
// as the hardware would have. With one NaN operand, or none, the hardware
// result is the same whichever way round.
template <typename Repr> typename Repr::Acc first_nan(typename Repr::Acc x, typename Repr::Acc result) {
    if constexpr (Repr::kFirstNaN)
        return x != x ? x : result;
    else
        return result;
}

// min and max as IEEE 754-2019's minimum and maximum: a NaN operand makes
// the result NaN (x's when both are; the executor puts the local operand
// first, so a direct allreduce's fold in rank order gives every rank the
// same), and -0 is below +0. Both are then commutative up to a NaN's
// payload, so which rank holds the NaN or the signed zero does not matter,
// and the vector kernels give the same bits (reduce_simd.hpp).
template <bool kSmallest, typename Acc> Acc extremum(Acc x, Acc y) {
    if constexpr (std::is_floating_point_v<Acc>) {
        if (x != x) return x;
        if (y != y) return y;
        if (x == y) {
            // Equal values differ at most in the sign: min takes the union
            // of the bits (-0), max the intersection (+0).
            using Bits = std::conditional_t<sizeof(Acc) == 4, uint32_t, uint64_t>;
            Bits bx, by;
            std::memcpy(&bx, &x, sizeof x);
            std::memcpy(&by, &y, sizeof y);
            const Bits r = kSmallest ? (bx | by) : (bx & by);
            std::memcpy(&x, &r, sizeof x);
            return x;
        }
    }
    if constexpr (kSmallest) return y < x ? y : x;
    else return x < y ? y : x;
}

template <typename Repr, typename Fn>
void combine(void *dst, const void *a, const void *b, size_t n, Fn fn) {
    using S = typename Repr::Storage;
    S *d = static_cast<S *>(dst);
    const S *x = static_cast<const S *>(a);
    const S *y = static_cast<const S *>(b);
    for (size_t i = 0; i < n; ++i) d[i] = Repr::store(fn(Repr::load(x[i]), Repr::load(y[i])));
}

template <typename Repr>
void reduce_typed(void *dst, const void *a, const void *b, size_t n, nnpccl_redop_t op, uint32_t divisor) {
    using Acc = typename Repr::Acc;
    switch (op) {
    case NNPCCL_SUM:
    case NNPCCL_AVG:
        if (divisor > 1)
            combine<Repr>(dst, a, b, n,
                          [divisor](Acc x, Acc y) { return divide_by(first_nan<Repr>(x, wrap_add(x, y)), divisor); });
        else
            combine<Repr>(dst, a, b, n, [](Acc x, Acc y) { return first_nan<Repr>(x, wrap_add(x, y)); });
        break;
    case NNPCCL_PROD:
        combine<Repr>(dst, a, b, n, [](Acc x, Acc y) { return first_nan<Repr>(x, wrap_mul(x, y)); });
        break;
    case NNPCCL_MIN: combine<Repr>(dst, a, b, n, [](Acc x, Acc y) { return extremum<true>(x, y); }); break;
    case NNPCCL_MAX: combine<Repr>(dst, a, b, n, [](Acc x, Acc y) { return extremum<false>(x, y); }); break;
    default: break;
    }
}

template <typename Repr> void divide_typed(void *dst, const void *src, size_t n, uint32_t divisor) {
    using S = typename Repr::Storage;
    S *d = static_cast<S *>(dst);
    const S *s = static_cast<const S *>(src);
    for (size_t i = 0; i < n; ++i) d[i] = Repr::store(divide_by(Repr::load(s[i]), divisor));
}

template <typename Repr> void set_kernels(kernels::KernelSet &set, nnpccl_datatype_t dt) {
    set.reduce[dt] = reduce_typed<Repr>;
    set.divide[dt] = divide_typed<Repr>;
}

kernels::KernelSet make_scalar_kernels() {
    kernels::KernelSet set{"scalar", {}, {}};
    set_kernels<NativeRepr<int8_t>>(set, NNPCCL_INT8);
    set_kernels<NativeRepr<uint8_t>>(set, NNPCCL_UINT8);
    set_kernels<NativeRepr<int32_t>>(set, NNPCCL_INT32);
    set_kernels<NativeRepr<uint32_t>>(set, NNPCCL_UINT32);
    set_kernels<NativeRepr<int64_t>>(set, NNPCCL_INT64);
    set_kernels<NativeRepr<uint64_t>>(set, NNPCCL_UINT64);
    set_kernels<HalfRepr>(set, NNPCCL_FLOAT16);
    set_kernels<Bf16Repr>(set, NNPCCL_BFLOAT16);
    set_kernels<NativeRepr<float>>(set, NNPCCL_FLOAT32);
    set_kernels<NativeRepr<double>>(set, NNPCCL_FLOAT64);
    return set;
}

kernels::KernelSet overlay(const kernels::KernelSet &below, const kernels::KernelSet &above) {
    kernels::KernelSet set = below;
    set.name = above.name;
    for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d) {
        if (above.reduce[d] != nullptr) set.reduce[d] = above.reduce[d];
        if (above.divide[d] != nullptr) set.divide[d] = above.divide[d];
    }
    return set;
}

// The best time, in ns, of `calls` sums of `bytes` of `dt` by each of
// `sums`, over `rounds` rounds that take turns after one that warms the
// caches and is not counted: the best round is the one least disturbed by
// whatever else the host runs.
std::vector<double> best_sum_ns(const std::vector<kernels::ReduceFn> &sums, nnpccl_datatype_t dt, size_t bytes,
                                int rounds, int calls) {
    // 0x3c bytes: ordinary non-zero values in every type (1.06 as float16).
    std::vector<unsigned char> a(bytes, 0x3c), b(bytes, 0x3c), out(bytes, 0);
    const size_t count = bytes / datatype_size(dt);
    std::vector<double> best(sums.size(), 0);
    for (int round = 0; round <= rounds; ++round) {
        for (size_t k = 0; k < sums.size(); ++k) {
            const auto start = std::chrono::steady_clock::now();
            for (int call = 0; call < calls; ++call) sums[k](out.data(), a.data(), b.data(), count, NNPCCL_SUM, 1);
            const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
            if (round == 1 || (round > 1 && ns < best[k])) best[k] = ns;
        }
    }
    return best;
}

// The widest set is not always the fastest for the 16-bit types: where a
// core splits 512-bit operations in two (AMD's Zen 4), its 512-bit
// float16 conversions cost more than twice the 256-bit ones, so AVX2's
// float16 sum beats AVX-512's there (docs/performance.md, "float16: AVX2
// beats AVX-512 on Zen 4"). So for float16 and bfloat16 the first use
// times every vector set's sum and keeps the fastest. Every set is
// bit-exact with the reference, so the choice changes speed, never a
// result. Cost: once per process, 32 sums of 16 KiB per candidate and type.
kernels::KernelSet choose_kernels() {
    kernels::KernelSet sets[kernels::kMaxKernelSets];
    const int n = kernels::usable_kernel_sets(sets);
    kernels::KernelSet chosen = sets[n - 1];
    std::string choices;
    for (nnpccl_datatype_t dt : {NNPCCL_FLOAT16, NNPCCL_BFLOAT16}) {
        std::vector<kernels::ReduceFn> candidates;
        std::vector<int> owners;
        for (int i = n > 1 ? 1 : 0; i < n; ++i) {
            if (std::find(candidates.begin(), candidates.end(), sets[i].reduce[dt]) != candidates.end()) continue;
            candidates.push_back(sets[i].reduce[dt]);
            owners.push_back(i);
        }
        if (candidates.size() < 2) continue;
        // 16 KiB per buffer: the three fit in L2.
        const std::vector<double> ns = best_sum_ns(candidates, dt, 16 << 10, 7, 4);
        const int owner = owners[static_cast<size_t>(std::min_element(ns.begin(), ns.end()) - ns.begin())];
        chosen.reduce[dt] = sets[owner].reduce[dt];
        chosen.divide[dt] = sets[owner].divide[dt];
        choices += format(", %s: %s (timed)", datatype_name(dt), sets[owner].name);
    }
    LOG_INFO("reduction kernels: %s%s", chosen.name, choices.c_str());
    return chosen;
}

// The best µs per byte of a sum of `dt` over 64 KiB by the kernel reduce() runs.
double sum_us_per_byte(nnpccl_datatype_t dt) {
    constexpr size_t kBytes = 64 << 10;
    return best_sum_ns({kernels::active_kernels().reduce[dt]}, dt, kBytes, 5, 1)[0] / 1000 / kBytes;
}

HostReduceSpeed measure_host_reduce_speed() {
    HostReduceSpeed speed;
    for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d) {
        const auto dt = static_cast<nnpccl_datatype_t>(d);
        const size_t size = datatype_size(dt);
        const size_t index = size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : 3;
        speed.us_per_byte[index] = std::max(speed.us_per_byte[index], sum_us_per_byte(dt));
    }
    return speed;
}

} // namespace

namespace kernels {

const KernelSet &scalar_kernels() {
    static const KernelSet set = make_scalar_kernels();
    return set;
}

int usable_kernel_sets(KernelSet (&sets)[kMaxKernelSets]) {
    int n = 0;
    sets[n++] = scalar_kernels();
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    // __builtin_cpu_supports reports AVX2 and AVX-512 only where the OS
    // also saves the wider registers. Clang's does not know F16C: CPUID
    // leaf 1 has it.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
    if (f16c && __builtin_cpu_supports("avx2")) {
        sets[n] = overlay(sets[n - 1], avx2_kernels());
        ++n;
    }
    if (f16c && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
        sets[n] = overlay(sets[n - 1], avx512_kernels());
        ++n;
#if defined(NNPCCL_REDUCE_AVX512FP16)
        // AVX512_FP16 is CPUID leaf 7, EDX bit 23 (not every compiler's
        // __builtin_cpu_supports knows it); its registers are AVX-512's.
        constexpr unsigned kAvx512Fp16 = 1u << 23;
        if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (edx & kAvx512Fp16) != 0 &&
            __builtin_cpu_supports("avx512vl")) {
            sets[n] = overlay(sets[n - 1], avx512fp16_kernels());
            ++n;
        }
#endif
    }
#endif
    return n;
}

const KernelSet &active_kernels() {
    static const KernelSet set = choose_kernels();
    return set;
}

} // namespace kernels

const HostReduceSpeed &host_reduce_speed() {
    static const HostReduceSpeed speed = measure_host_reduce_speed();
    return speed;
}

void reduce(void *dst, const void *a, const void *b, size_t count, nnpccl_datatype_t dt, nnpccl_redop_t op,
            uint32_t divisor) {
    if (!valid_datatype(dt)) return;
    if (op != NNPCCL_AVG) divisor = 1;
    kernels::active_kernels().reduce[dt](dst, a, b, count, op, divisor);
}

void divide(void *dst, const void *src, size_t count, nnpccl_datatype_t dt, uint32_t divisor) {
    if (divisor <= 1) {
        if (dst != src) std::memmove(dst, src, count * datatype_size(dt));
        return;
    }
    if (!valid_datatype(dt)) return;
    kernels::active_kernels().divide[dt](dst, src, count, divisor);
}

} // namespace nnpccl
