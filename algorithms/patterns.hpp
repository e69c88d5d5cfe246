// Peer arithmetic, apart from the builders that use it: who is next to whom
// on a ring, and how a range is cut into balanced pieces.
#pragma once

#include <cstddef>
#include <vector>

namespace nnpccl {

// A rank's place on a ring given as the sequence of ranks around it.
class RingPattern {
public:
    RingPattern(const std::vector<int> &order, int rank);
    int size() const { return static_cast<int>(order_.size()); }
    int position() const { return position_; }
    int next() const { return rank_at(position_ + 1); }
    int prev() const { return rank_at(position_ - 1); }
    // The rank `offset` places along the ring from position 0, wrapping both ways.
    int rank_at(int offset) const;

private:
    std::vector<int> order_;
    int position_ = 0;
};

// Piece `i` of `parts` balanced pieces of [0, total): the first total % parts
// pieces get one element more.
inline size_t piece_begin(size_t total, size_t parts, size_t i) {
    size_t base = total / parts, extra = total % parts;
    return i * base + (i < extra ? i : extra);
}
inline size_t piece_size(size_t total, size_t parts, size_t i) {
    return total / parts + (i < total % parts ? 1 : 0);
}

// How a range of `total` elements is cut into pieces of at most `most`:
// as few pieces as that allows, all of (nearly) the same size, so no call
// ends in a tiny piece that costs a whole round of latency for nothing.
inline size_t balanced_pieces(size_t total, size_t most) { return most == 0 ? 0 : (total + most - 1) / most; }

// Smallest k with 2^k >= n.
inline int ceil_log2(int n) {
    int k = 0;
    while ((1 << k) < n) ++k;
    return k;
}

} // namespace nnpccl
