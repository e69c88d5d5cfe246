// Peer arithmetic, apart from the builders that use it: who is next to whom
// on a ring, who exchanges with whom in recursive halving-doubling, a rank's
// parent and children in a double binary tree, the rings of a 2D torus, and
// how a range is cut into balanced pieces.
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

// The elements [begin, end) of a buffer.
struct ElemRange {
    size_t begin = 0;
    size_t end = 0;
    size_t size() const { return end - begin; }
};

// [begin, end) cut into balanced_pieces() of at most `most` elements each,
// in order; none when the range is empty. Both ends of a transfer cut the
// same range the same way, so they agree on every message's size.
std::vector<ElemRange> chunked(size_t begin, size_t end, size_t most);

// Smallest k with 2^k >= n.
inline int ceil_log2(int n) {
    int k = 0;
    while ((1 << k) < n) ++k;
    return k;
}

// Recursive halving-doubling on any number of ranks. The largest power of
// two p2 <= p ranks take part in the log2(p2) exchanges; they are the
// "active" ranks, at positions 0..p2-1 in rank order. The r = p - p2
// "extra" ranks 0, 2, ..., 2r-2 fold their data into the rank just above
// them before the exchanges and get their result back from it after, so
// position i < r stands for ranks 2i and 2i+1, and position i >= r for
// rank i + r alone: the ranks a position stands for are consecutive.
// Data is laid out by virtual rank (label): the shares a round swaps are
// those of a run of labels. By default a label is its position and the
// round of bit `mask` pairs labels that differ in that bit (Rabenseifner).
// Another pairing (Swing's, swing.cpp) gives the labels' positions and this
// rank's partner per round; it must split the labels as the bits do: in
// the round of `mask`, a rank's partner's label agrees with its own above
// that bit and differs in it.
struct ButterflyPairing {
    std::vector<int> position_of_label; // a permutation of 0..p2-1
    std::vector<int> partner_by_bit;    // this rank's partner's position in the round of bit b
};

class HalvingDoublingPattern {
public:
    HalvingDoublingPattern(int nranks, int rank, ButterflyPairing pairing = {});
    int active_count() const { return active_; }
    // log2(active_count()): the exchanges of the halving, and of the doubling.
    int rounds() const { return rounds_; }
    bool is_extra() const { return extra_; }
    // The rank this one folds with: an extra's active rank, an active
    // rank's extra, or -1 for an active rank that stands for itself alone.
    int fold_partner() const { return fold_partner_; }
    // The virtual rank (label) of this rank (of its active rank, for an extra).
    int virtual_rank() const { return virtual_rank_; }
    // The active rank with virtual rank v.
    int active_rank(int v) const { return active_rank_at(position(v)); }
    // The ranks virtual rank v stands for: [first, last].
    int first_rank_of(int v) const { return first_rank_at(position(v)); }
    int last_rank_of(int v) const { return active_rank(v); }
    // The active rank this rank's active rank exchanges with in the round
    // whose virtual ranks differ in bit `mask`.
    int exchange_partner(int mask) const;

private:
    int position(int v) const {
        return pairing_.position_of_label.empty() ? v : pairing_.position_of_label[static_cast<size_t>(v)];
    }
    int active_rank_at(int i) const { return i < folded_ ? 2 * i + 1 : i + folded_; }
    int first_rank_at(int i) const { return i < folded_ ? 2 * i : i + folded_; }

    int active_ = 1, rounds_ = 0, folded_ = 0;
    bool extra_ = false;
    int fold_partner_ = -1, virtual_rank_ = 0;
    ButterflyPairing pairing_;
};

// A rank's place in one of the two binary trees (which = 0 or 1) of a
// double binary tree (topology/trees.hpp: no rank is inner in both, so the
// two trees, each carrying half the data, split every rank's bandwidth).
// Unrooted (root < 0), the trees span ranks 0..p-1 in rank order and each
// has its own top. Rooted, both hang from `root`: they are the double binary
// tree over the other p-1 ranks in the order root+1, root+2, ... (mod p),
// and each one's top is the only child `root` has in it.
class DoubleTreePattern {
public:
    DoubleTreePattern(int nranks, int root, int which, int rank);
    int parent() const { return parent_; } // -1 at the top
    const std::vector<int> &children() const { return children_; }
    // Edges on the longest path from the top to a leaf; the same on every rank.
    int height() const { return height_; }
    // Edges from this rank up to the top.
    int depth() const { return depth_; }

private:
    int parent_ = -1;
    std::vector<int> children_;
    int height_ = 0;
    int depth_ = 0;
};

// An x-by-y torus of ranks, rank r at (r % x, r / x): the ring along X
// through r (its row) and the ring along Y through r (its column), each in
// increasing coordinate order, or decreasing when `reversed` (the other
// direction of the same links).
std::vector<int> torus_row(int x, int rank, bool reversed);
std::vector<int> torus_column(int x, int y, int rank, bool reversed);

} // namespace nnpccl
