#include "check_data.hpp"

#include <cstring>
#include <type_traits>


namespace nnpccl_check {

namespace {

bool is_unsigned(nnpccl_datatype_t dt) {
    return dt == NNPCCL_UINT8 || dt == NNPCCL_UINT32 || dt == NNPCCL_UINT64;
}

// The integer value of rank r's element i, before it is stored in a type.
int64_t value(nnpccl_datatype_t dt, nnpccl_redop_t op, int r, size_t i) {
    const int64_t rr = r, ii = static_cast<int64_t>(i % kPeriod);
    switch (op) {
    case NNPCCL_PROD: {
        int64_t v = ((rr + ii) % 7 == 0) ? 2 : 1;
        if (!is_unsigned(dt) && (rr * 3 + ii) % 11 == 0) v = -v;
        return v;
    }
    case NNPCCL_MIN:
    case NNPCCL_MAX: return (rr * 13 + ii * 7) % 61 - (is_unsigned(dt) ? 0 : 30);
    default: return (rr * 7 + ii * 3) % 5 - (is_unsigned(dt) ? 0 : 2);
    }
}

// float to IEEE binary16, rounded to nearest even (subnormals, overflow to
// infinity); a NaN becomes the quiet NaN.
uint16_t to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u); // infinity, or past 65504
    auto round = [](uint32_t bits, uint32_t drop) {
        const uint32_t kept = bits >> drop, rem = bits & ((1u << drop) - 1), halfway = 1u << (drop - 1);
        return kept + (rem > halfway || (rem == halfway && (kept & 1u)) ? 1u : 0u);
    };
    if (abs >= 0x38800000u) return static_cast<uint16_t>(sign | round(abs - 0x38000000u, 13)); // normal
    if (abs < 0x33000000u) return sign; // at most half the smallest subnormal, 2^-25
    const uint32_t exponent = abs >> 23; // a subnormal: mantissa x 2^(exponent - 150) in units of 2^-24
    return static_cast<uint16_t>(sign | round((abs & 0x7fffffu) | 0x800000u, 126 - exponent));
}

// float to bfloat16 (its top half), rounded to nearest even; NaN stays NaN.
uint16_t to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Stores an exact integer (or a float computed from one) as element k of out.
template <typename T> void put(std::vector<unsigned char> &out, size_t k, T v) {
    std::memcpy(out.data() + k * sizeof(T), &v, sizeof(T));
}

void store_integer(nnpccl_datatype_t dt, std::vector<unsigned char> &out, size_t k, uint64_t wrapped) {
    switch (dt) {
    case NNPCCL_INT8:
    case NNPCCL_UINT8: put(out, k, static_cast<uint8_t>(wrapped)); break;
    case NNPCCL_INT32:
    case NNPCCL_UINT32: put(out, k, static_cast<uint32_t>(wrapped)); break;
    default: put(out, k, wrapped); break;
    }
}

void store_float(nnpccl_datatype_t dt, std::vector<unsigned char> &out, size_t k, double v) {
    switch (dt) {
    case NNPCCL_FLOAT16: put(out, k, to_half(static_cast<float>(v))); break;
    case NNPCCL_BFLOAT16: put(out, k, to_bf16(static_cast<float>(v))); break;
    case NNPCCL_FLOAT32: put(out, k, static_cast<float>(v)); break;
    default: put(out, k, v); break;
    }
}

// See tagged_pattern(): rank and index in one exact integer.
int64_t tag_value(nnpccl_datatype_t dt, int rank, size_t i) {
    const int64_t ii = static_cast<int64_t>(i % kPeriod);
    static_assert(kPeriod <= 32768, "an index must fit below the rank's bits");
    if (nnpccl_datatype_size(dt) >= 4) return static_cast<int64_t>(rank % 512) * 32768 + ii;
    const int64_t v = (static_cast<int64_t>(rank % 241) * 37 + ii) % 241;
    return is_unsigned(dt) ? v : v - 120;
}

bool is_float(nnpccl_datatype_t dt) {
    return dt == NNPCCL_FLOAT16 || dt == NNPCCL_BFLOAT16 || dt == NNPCCL_FLOAT32 || dt == NNPCCL_FLOAT64;
}

// Integer avg: the sum wrapped to the type, then divided with truncation.
uint64_t integer_avg(nnpccl_datatype_t dt, uint64_t wrapped, int nranks) {
    switch (dt) {
    case NNPCCL_INT8: return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(wrapped)) / nranks);
    case NNPCCL_UINT8: return static_cast<uint8_t>(wrapped) / static_cast<uint64_t>(nranks);
    case NNPCCL_INT32: return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(wrapped)) / nranks);
    case NNPCCL_UINT32: return static_cast<uint32_t>(wrapped) / static_cast<uint64_t>(nranks);
    case NNPCCL_INT64: return static_cast<uint64_t>(static_cast<int64_t>(wrapped) / nranks);
    default: return wrapped / static_cast<uint64_t>(nranks);
    }
}

} // namespace

Pattern::Pattern(nnpccl_datatype_t dt, std::vector<unsigned char> bytes)
    : elem_(nnpccl_datatype_size(dt)), bytes_(std::move(bytes)) {}

void Pattern::fill(void *dst, size_t first, size_t count) const {
    auto *out = static_cast<unsigned char *>(dst);
    size_t done = 0;
    while (done < count) {
        size_t at = (first + done) % kPeriod;
        size_t run = std::min(count - done, kPeriod - at);
        std::memcpy(out + done * elem_, bytes_.data() + at * elem_, run * elem_);
        done += run;
    }
}

size_t Pattern::count_wrong(const void *buf, size_t first, size_t count) const {
    const auto *in = static_cast<const unsigned char *>(buf);
    size_t wrong = 0, done = 0;
    while (done < count) {
        size_t at = (first + done) % kPeriod;
        size_t run = std::min(count - done, kPeriod - at);
        const unsigned char *expect = bytes_.data() + at * elem_;
        if (std::memcmp(in + done * elem_, expect, run * elem_) != 0)
            for (size_t k = 0; k < run; ++k)
                wrong += std::memcmp(in + (done + k) * elem_, expect + k * elem_, elem_) != 0 ? 1 : 0;
        done += run;
    }
    return wrong;
}

Pattern input_pattern(nnpccl_datatype_t dt, nnpccl_redop_t op, int rank) {
    std::vector<unsigned char> bytes(kPeriod * nnpccl_datatype_size(dt));
    for (size_t i = 0; i < kPeriod; ++i) {
        int64_t v = value(dt, op, rank, i);
        if (is_float(dt)) store_float(dt, bytes, i, static_cast<double>(v));
        else store_integer(dt, bytes, i, static_cast<uint64_t>(v));
    }
    return Pattern(dt, std::move(bytes));
}

Pattern tagged_pattern(nnpccl_datatype_t dt, int rank) {
    std::vector<unsigned char> bytes(kPeriod * nnpccl_datatype_size(dt));
    for (size_t i = 0; i < kPeriod; ++i) {
        int64_t v = tag_value(dt, rank, i);
        if (is_float(dt)) store_float(dt, bytes, i, static_cast<double>(v));
        else store_integer(dt, bytes, i, static_cast<uint64_t>(v));
    }
    return Pattern(dt, std::move(bytes));
}

Pattern reduced_pattern(nnpccl_datatype_t dt, nnpccl_redop_t op, int nranks) {
    std::vector<unsigned char> bytes(kPeriod * nnpccl_datatype_size(dt));
    for (size_t i = 0; i < kPeriod; ++i) {
        // Exact in int64 / double for the ranges value() produces (wrapping
        // is applied when storing integers).
        int64_t acc = value(dt, op, 0, i);
        double facc = static_cast<double>(acc);
        for (int r = 1; r < nranks; ++r) {
            int64_t v = value(dt, op, r, i);
            switch (op) {
            case NNPCCL_PROD:
                acc = static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(v));
                facc *= static_cast<double>(v);
                break;
            case NNPCCL_MIN: acc = v < acc ? v : acc; break;
            case NNPCCL_MAX: acc = v > acc ? v : acc; break;
            default: acc += v; break;
            }
            if (op != NNPCCL_PROD) facc = static_cast<double>(acc);
        }
        if (is_float(dt)) {
            double result = facc;
            if (op == NNPCCL_AVG) {
                // The library divides once, in the accumulation type.
                if (dt == NNPCCL_FLOAT64) result = facc / nranks;
                else result = static_cast<double>(static_cast<float>(facc) / static_cast<float>(nranks));
            }
            store_float(dt, bytes, i, result);
        } else {
            uint64_t wrapped = static_cast<uint64_t>(acc);
            if (op == NNPCCL_AVG) wrapped = integer_avg(dt, wrapped, nranks);
            store_integer(dt, bytes, i, wrapped);
        }
    }
    return Pattern(dt, std::move(bytes));
}

} // namespace nnpccl_check

namespace nnpccl_check {


bool CallShape::blockwise() const {
    switch (collective) {
    case NNPCCL_COLL_REDUCE_SCATTER:
    case NNPCCL_COLL_ALLGATHER:
    case NNPCCL_COLL_GATHER:
    case NNPCCL_COLL_SCATTER:
    case NNPCCL_COLL_ALLTOALL: return true;
    default: return false;
    }
}
size_t CallShape::total() const { return blockwise() ? count * static_cast<size_t>(nranks) : count; }
size_t CallShape::send_elems() const {
    switch (collective) {
    case NNPCCL_COLL_ALLGATHER:
    case NNPCCL_COLL_GATHER: return count;
    case NNPCCL_COLL_RECV: return 0;
    default: return total();
    }
}

namespace {
nnpccl_redop_t pattern_op(const CallShape &s) {
    return (s.collective == NNPCCL_COLL_ALLGATHER || s.collective == NNPCCL_COLL_BROADCAST) ? NNPCCL_SUM : s.op;
}
// The collectives checked with tagged_pattern(): nothing is combined, so
// every value can say where it came from.
bool moves_only(nnpccl_collective_t c) {
    return c == NNPCCL_COLL_GATHER || c == NNPCCL_COLL_SCATTER || c == NNPCCL_COLL_ALLTOALL || c == NNPCCL_COLL_SEND ||
           c == NNPCCL_COLL_RECV;
}

// tagged_pattern(dt, rank).count_wrong(buf, first, count), without making a
// whole period of the pattern for a block shorter than one: the gathers
// check p blocks per rank.
size_t count_wrong_tagged(nnpccl_datatype_t dt, int rank, const void *buf, size_t first, size_t count) {
    if (count >= kPeriod) return tagged_pattern(dt, rank).count_wrong(buf, first, count);
    const size_t es = nnpccl_datatype_size(dt);
    std::vector<unsigned char> expect(count * es);
    for (size_t k = 0; k < count; ++k) {
        const int64_t v = tag_value(dt, rank, first + k);
        if (is_float(dt)) store_float(dt, expect, k, static_cast<double>(v));
        else store_integer(dt, expect, k, static_cast<uint64_t>(v));
    }
    size_t wrong = 0;
    for (size_t k = 0; k < count; ++k)
        wrong += std::memcmp(static_cast<const unsigned char *>(buf) + k * es, expect.data() + k * es, es) != 0 ? 1 : 0;
    return wrong;
}
} // namespace

void lay_out(const CallShape &s, void *send_storage, void *recv_storage, const void **send, void **recv) {
    const size_t es = nnpccl_datatype_size(s.dt);
    const auto r = static_cast<size_t>(s.rank);
    Pattern mine = moves_only(s.collective) ? tagged_pattern(s.dt, s.rank) : input_pattern(s.dt, pattern_op(s), s.rank);
    auto *rs = static_cast<unsigned char *>(recv_storage);
    // Allgather: rank r's block holds elements r*count.. of its pattern, so
    // the gathered buffer reads as each rank's pattern at its own offsets.
    const size_t first = s.collective == NNPCCL_COLL_ALLGATHER ? r * s.count : 0;
    if (!s.in_place) {
        mine.fill(send_storage, first, s.send_elems());
        *send = send_storage;
        *recv = recv_storage;
        return;
    }
    // In place, by NCCL's pointer rules (every rank alike, as nccl-tests
    // does; only the root's pointers matter to a gather or scatter).
    switch (s.collective) {
    case NNPCCL_COLL_REDUCE_SCATTER:
    case NNPCCL_COLL_SCATTER:
        mine.fill(rs, 0, s.total());
        *send = rs;
        *recv = rs + r * s.count * es;
        break;
    case NNPCCL_COLL_ALLGATHER:
    case NNPCCL_COLL_GATHER:
        mine.fill(rs + r * s.count * es, first, s.count);
        *send = rs + r * s.count * es;
        *recv = rs;
        break;
    default:
        mine.fill(rs, 0, s.total());
        *send = *recv = rs;
        break;
    }
}

size_t count_wrong(const CallShape &s, const void *recv) {
    const size_t es = nnpccl_datatype_size(s.dt);
    const auto *out = static_cast<const unsigned char *>(recv);
    const auto r = static_cast<size_t>(s.rank);
    // Block q of a gathered (or alltoall'd) buffer: rank q's elements from `first`.
    auto wrong_blocks = [&](size_t first) {
        size_t wrong = 0;
        for (int q = 0; q < s.nranks; ++q)
            wrong += count_wrong_tagged(s.dt, q, out + static_cast<size_t>(q) * s.count * es, first, s.count);
        return wrong;
    };
    switch (s.collective) {
    case NNPCCL_COLL_ALLREDUCE: return reduced_pattern(s.dt, s.op, s.nranks).count_wrong(out, 0, s.count);
    case NNPCCL_COLL_REDUCE_SCATTER: return reduced_pattern(s.dt, s.op, s.nranks).count_wrong(out, r * s.count, s.count);
    case NNPCCL_COLL_ALLGATHER: {
        size_t wrong = 0;
        for (int q = 0; q < s.nranks; ++q) {
            auto uq = static_cast<size_t>(q);
            wrong += input_pattern(s.dt, NNPCCL_SUM, q).count_wrong(out + uq * s.count * es, uq * s.count, s.count);
        }
        return wrong;
    }
    case NNPCCL_COLL_BROADCAST: return input_pattern(s.dt, NNPCCL_SUM, s.root).count_wrong(out, 0, s.count);
    case NNPCCL_COLL_REDUCE:
        return s.rank == s.root ? reduced_pattern(s.dt, s.op, s.nranks).count_wrong(out, 0, s.count) : 0;
    case NNPCCL_COLL_BARRIER: break;
    case NNPCCL_COLL_GATHER: return s.rank == s.root ? wrong_blocks(0) : 0;
    case NNPCCL_COLL_SCATTER: return count_wrong_tagged(s.dt, s.root, out, r * s.count, s.count);
    case NNPCCL_COLL_ALLTOALL: return wrong_blocks(r * s.count);
    case NNPCCL_COLL_SEND: break;
    case NNPCCL_COLL_RECV: return count_wrong_tagged(s.dt, s.root, out, 0, s.count);
    default: break;
    }
    return 0;
}

size_t bytes_written(const CallShape &s) {
    const size_t es = nnpccl_datatype_size(s.dt);
    if (s.in_place) return s.total() * es;
    switch (s.collective) {
    case NNPCCL_COLL_REDUCE_SCATTER:
    case NNPCCL_COLL_SCATTER: return s.count * es;
    case NNPCCL_COLL_REDUCE:
    case NNPCCL_COLL_GATHER: return s.rank == s.root ? s.total() * es : 0;
    case NNPCCL_COLL_SEND: return 0;
    default: return s.total() * es;
    }
}

nnpccl_result_t issue(nnpccl_comm_t comm, const CallShape &s, const void *send, void *recv) {
    switch (s.collective) {
    case NNPCCL_COLL_ALLREDUCE: return nnpccl_allreduce(send, recv, s.count, s.dt, s.op, comm);
    case NNPCCL_COLL_REDUCE_SCATTER: return nnpccl_reduce_scatter(send, recv, s.count, s.dt, s.op, comm);
    case NNPCCL_COLL_ALLGATHER: return nnpccl_allgather(send, recv, s.count, s.dt, comm);
    case NNPCCL_COLL_BROADCAST: return nnpccl_broadcast(send, recv, s.count, s.dt, s.root, comm);
    case NNPCCL_COLL_REDUCE: return nnpccl_reduce(send, recv, s.count, s.dt, s.op, s.root, comm);
    case NNPCCL_COLL_BARRIER: return nnpccl_barrier(comm);
    case NNPCCL_COLL_GATHER: return nnpccl_gather(send, recv, s.count, s.dt, s.root, comm);
    case NNPCCL_COLL_SCATTER: return nnpccl_scatter(send, recv, s.count, s.dt, s.root, comm);
    case NNPCCL_COLL_ALLTOALL: return nnpccl_alltoall(send, recv, s.count, s.dt, comm);
    case NNPCCL_COLL_SEND: return nnpccl_send(send, s.count, s.dt, s.root, comm);
    case NNPCCL_COLL_RECV: return nnpccl_recv(recv, s.count, s.dt, s.root, comm);
    default: break;
    }
    return NNPCCL_ERR_INTERNAL;
}

} // namespace nnpccl_check
