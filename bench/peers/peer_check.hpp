// The buffers of one row of a peer bench and the test pattern that makes
// every reduction exact in any order, so that a result is right only bit
// for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "peer_types.hpp"

namespace peer_bench {

// How many elements each rank sends and receives for a requested size. Sizes
// round down to whole elements and, for reduce_scatter/allgather, to a whole
// number of elements per rank.
struct Layout {
    size_t send_count = 0;   // elements of the out-of-place input
    size_t recv_count = 0;   // elements of the output
    size_t buffer_count = 0; // elements of the in-place buffer (input and output)
    size_t total_count = 0;  // the "count" column: the whole buffer, all ranks' parts
    size_t total_bytes = 0;  // S: the "size" column and algbw = S / t
};

inline Layout layout_for(Collective c, size_t bytes, size_t element_size, int nranks) {
    const size_t count = bytes / element_size;
    const size_t n = static_cast<size_t>(nranks);
    Layout layout;
    switch (c) {
    case Collective::AllReduce:
    case Collective::Broadcast:
    case Collective::Reduce:
        layout.send_count = layout.recv_count = count;
        layout.total_count = count;
        break;
    case Collective::ReduceScatter:
        layout.recv_count = count / n;
        layout.send_count = layout.total_count = layout.recv_count * n;
        break;
    case Collective::AllGather:
        layout.send_count = count / n;
        layout.recv_count = layout.total_count = layout.send_count * n;
        break;
    }
    layout.buffer_count = std::max(layout.send_count, layout.recv_count);
    layout.total_bytes = layout.total_count * element_size;
    return layout;
}

// Where the input of the in-place variant lives inside the one buffer: at
// this rank's block for allgather (MPI_IN_PLACE and Gloo agree), at the start
// otherwise. The output always starts at element 0 (for reduce_scatter
// MPI_IN_PLACE leaves this rank's block at the start of the buffer).
inline size_t in_place_input_offset(Collective c, const Layout &layout, int rank) {
    return c == Collective::AllGather ? static_cast<size_t>(rank) * layout.send_count : 0;
}

enum class Placement { OutOfPlace, InPlace };

// ---------------------------------------------------------------------------
// Test pattern: small non-negative integers, so that every reduction is exact
// in any order and for every type, and a result is right only bit for bit.

struct Case {
    Collective collective;
    RedOp op;
    Dtype dtype;
    int rank;
    int nranks;
    int root;
    Layout layout;
};

// A 32-bit hash of (rank, element): neighbouring elements and ranks differ,
// so a block that lands in the wrong place is counted wrong.
inline uint32_t scramble(uint64_t element, uint64_t rank) {
    uint64_t x = element * 0x9E3779B97F4A7C15ull + (rank + 1) * 0xD1B54A32D192ED03ull;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return static_cast<uint32_t>(x >> 32);
}

// What `rank` contributes at global element index `element` (the element's
// index in the whole, all-ranks buffer).
inline double input_value(const Case &c, int rank, uint64_t element) {
    const double largest = info(c.dtype).largest_exact_integer;
    // Values stay below 255 and below the type's largest value: the poison
    // written into outputs (all bits set) never equals a right answer.
    const double value_span = std::min(255.0, largest);
    if (!info(c.collective).reduces)
        return scramble(element, static_cast<uint64_t>(rank)) % static_cast<uint32_t>(value_span);
    switch (c.op) {
    case RedOp::Sum: {
        // nranks values below the span must add up below the largest value.
        const double span = std::max(1.0, std::min(value_span, std::floor(largest / c.nranks)));
        return scramble(element, static_cast<uint64_t>(rank)) % static_cast<uint32_t>(span);
    }
    case RedOp::Prod:
        // One rank per element contributes 1, 2 or 3, the others 1: the
        // product never overflows whatever the number of ranks.
        if (element % static_cast<uint64_t>(c.nranks) == static_cast<uint64_t>(rank))
            return 1 + scramble(element, 0) % 3;
        return 1;
    case RedOp::Min:
    case RedOp::Max: return scramble(element, static_cast<uint64_t>(rank)) % static_cast<uint32_t>(value_span);
    }
    return 0;
}

inline double reduce_over_ranks(const Case &c, uint64_t element) {
    double acc = input_value(c, 0, element);
    for (int r = 1; r < c.nranks; ++r) {
        const double v = input_value(c, r, element);
        switch (c.op) {
        case RedOp::Sum: acc += v; break;
        case RedOp::Prod: acc *= v; break;
        case RedOp::Min: acc = std::min(acc, v); break;
        case RedOp::Max: acc = std::max(acc, v); break;
        }
    }
    return acc;
}

// The right value of output element `index` on this rank.
inline double expected_value(const Case &c, uint64_t index) {
    switch (c.collective) {
    case Collective::AllReduce:
    case Collective::Reduce: return reduce_over_ranks(c, index);
    case Collective::ReduceScatter:
        return reduce_over_ranks(c, static_cast<uint64_t>(c.rank) * c.layout.recv_count + index);
    case Collective::AllGather: return input_value(c, static_cast<int>(index / c.layout.send_count), index);
    case Collective::Broadcast: return input_value(c, c.root, index);
    }
    return 0;
}

// The two buffers of one row. `send` is the out-of-place input; `recv` is
// the out-of-place output and the in-place buffer (input and output).
template <typename T> struct Buffers {
    explicit Buffers(const Layout &layout) : send(layout.send_count), recv(layout.buffer_count) {}
    std::vector<T> send;
    std::vector<T> recv;
};

// Writes this rank's input for `placement` and poisons every output element
// that is not also input, so an element the collective forgot is wrong.
template <typename T> void prepare_input(const Case &c, Placement placement, Buffers<T> &buffers) {
    std::memset(buffers.recv.data(), 0xFF, buffers.recv.size() * sizeof(T));
    T *input = placement == Placement::OutOfPlace
                   ? buffers.send.data()
                   : buffers.recv.data() + in_place_input_offset(c.collective, c.layout, c.rank);
    // Only allgather's input is one block of the global buffer.
    const uint64_t first_element =
        c.collective == Collective::AllGather ? static_cast<uint64_t>(c.rank) * c.layout.send_count : 0;
    for (size_t i = 0; i < c.layout.send_count; ++i)
        input[i] = static_cast<T>(input_value(c, c.rank, first_element + i));
}

// Elements of this rank's output that differ bit for bit from the right
// result. Only reduce's root has an output.
template <typename T> uint64_t count_wrong(const Case &c, const Buffers<T> &buffers) {
    if (c.collective == Collective::Reduce && c.rank != c.root) return 0;
    uint64_t wrong = 0;
    for (size_t i = 0; i < c.layout.recv_count; ++i) {
        const T expected = static_cast<T>(expected_value(c, i));
        if (std::memcmp(&expected, &buffers.recv[i], sizeof(T)) != 0) ++wrong;
    }
    return wrong;
}

} // namespace peer_bench
