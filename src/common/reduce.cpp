// Cost: one pass over 2n input and n output elements; memory bound for
// native types on the host, conversion bound for float16.
#include "reduce.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <type_traits>
#include <vector>

#include "dtype.hpp"

namespace nnpccl {

namespace {

// How a stored element becomes the value arithmetic is done in, and back.
template <typename T> struct NativeRepr {
    using Storage = T;
    using Acc = T;
    static Acc load(T v) { return v; }
    static T store(Acc v) { return v; }
};
struct HalfRepr {
    using Storage = uint16_t;
    using Acc = float;
    static Acc load(uint16_t v) { return half_to_float(v); }
    static uint16_t store(Acc v) { return float_to_half(v); }
};
struct Bf16Repr {
    using Storage = uint16_t;
    using Acc = float;
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
            combine<Repr>(dst, a, b, n, [divisor](Acc x, Acc y) { return divide_by(wrap_add(x, y), divisor); });
        else
            combine<Repr>(dst, a, b, n, [](Acc x, Acc y) { return wrap_add(x, y); });
        break;
    case NNPCCL_PROD: combine<Repr>(dst, a, b, n, [](Acc x, Acc y) { return wrap_mul(x, y); }); break;
    case NNPCCL_MIN: combine<Repr>(dst, a, b, n, [](Acc x, Acc y) { return y < x ? y : x; }); break;
    case NNPCCL_MAX: combine<Repr>(dst, a, b, n, [](Acc x, Acc y) { return x < y ? y : x; }); break;
    default: break;
    }
}

template <typename Repr> void divide_typed(void *dst, const void *src, size_t n, uint32_t divisor) {
    using S = typename Repr::Storage;
    S *d = static_cast<S *>(dst);
    const S *s = static_cast<const S *>(src);
    for (size_t i = 0; i < n; ++i) d[i] = Repr::store(divide_by(Repr::load(s[i]), divisor));
}

template <template <typename> class Visitor, typename... Args> void dispatch(nnpccl_datatype_t dt, Args... args) {
    switch (dt) {
    case NNPCCL_INT8: Visitor<NativeRepr<int8_t>>::run(args...); break;
    case NNPCCL_UINT8: Visitor<NativeRepr<uint8_t>>::run(args...); break;
    case NNPCCL_INT32: Visitor<NativeRepr<int32_t>>::run(args...); break;
    case NNPCCL_UINT32: Visitor<NativeRepr<uint32_t>>::run(args...); break;
    case NNPCCL_INT64: Visitor<NativeRepr<int64_t>>::run(args...); break;
    case NNPCCL_UINT64: Visitor<NativeRepr<uint64_t>>::run(args...); break;
    case NNPCCL_FLOAT16: Visitor<HalfRepr>::run(args...); break;
    case NNPCCL_BFLOAT16: Visitor<Bf16Repr>::run(args...); break;
    case NNPCCL_FLOAT32: Visitor<NativeRepr<float>>::run(args...); break;
    case NNPCCL_FLOAT64: Visitor<NativeRepr<double>>::run(args...); break;
    default: break;
    }
}

template <typename Repr> struct ReduceVisitor {
    static void run(void *dst, const void *a, const void *b, size_t n, nnpccl_redop_t op, uint32_t divisor) {
        reduce_typed<Repr>(dst, a, b, n, op, divisor);
    }
};
template <typename Repr> struct DivideVisitor {
    static void run(void *dst, const void *src, size_t n, uint32_t divisor) {
        divide_typed<Repr>(dst, src, n, divisor);
    }
};

// The best µs per byte of a sum of `dt` over 64 KiB. The first run warms
// the caches and is not counted; the best of the rest is the least
// disturbed by whatever else the host runs.
double sum_us_per_byte(nnpccl_datatype_t dt) {
    constexpr size_t kBytes = 64 << 10;
    constexpr int kRuns = 5;
    // 0x3c bytes: ordinary non-zero values in every type (1.06 as float16).
    std::vector<unsigned char> a(kBytes, 0x3c), b(kBytes, 0x3c), out(kBytes, 0);
    const size_t count = kBytes / datatype_size(dt);
    double best = 0;
    for (int run = 0; run <= kRuns; ++run) {
        const auto start = std::chrono::steady_clock::now();
        reduce(out.data(), a.data(), b.data(), count, dt, NNPCCL_SUM, 1);
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        if (run == 1 || (run > 1 && us < best)) best = us;
    }
    return best / kBytes;
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

const HostReduceSpeed &host_reduce_speed() {
    static const HostReduceSpeed speed = measure_host_reduce_speed();
    return speed;
}

void reduce(void *dst, const void *a, const void *b, size_t count, nnpccl_datatype_t dt, nnpccl_redop_t op,
            uint32_t divisor) {
    if (op != NNPCCL_AVG) divisor = 1;
    dispatch<ReduceVisitor>(dt, dst, a, b, count, op, divisor);
}

void divide(void *dst, const void *src, size_t count, nnpccl_datatype_t dt, uint32_t divisor) {
    if (divisor <= 1) {
        if (dst != src) std::memmove(dst, src, count * datatype_size(dt));
        return;
    }
    dispatch<DivideVisitor>(dt, dst, src, count, divisor);
}

} // namespace nnpccl
