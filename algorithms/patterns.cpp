#include "patterns.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

#include "trees.hpp"

namespace nnpccl {

RingPattern::RingPattern(const std::vector<int> &order, int rank) : order_(order) {
    for (size_t i = 0; i < order_.size(); ++i)
        if (order_[i] == rank) position_ = static_cast<int>(i);
}

int RingPattern::rank_at(int offset) const {
    int p = size();
    return order_[static_cast<size_t>(((offset % p) + p) % p)];
}

std::vector<ElemRange> chunked(size_t begin, size_t end, size_t most) {
    std::vector<ElemRange> pieces;
    const size_t total = end - begin, n = balanced_pieces(total, most);
    pieces.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        const size_t first = begin + piece_begin(total, n, i);
        pieces.push_back(ElemRange{first, first + piece_size(total, n, i)});
    }
    return pieces;
}

HalvingDoublingPattern::HalvingDoublingPattern(int nranks, int rank, ButterflyPairing pairing)
    : pairing_(std::move(pairing)) {
    while (active_ * 2 <= nranks) {
        active_ *= 2;
        ++rounds_;
    }
    folded_ = nranks - active_;
    int position = rank - folded_;
    if (rank < 2 * folded_) {
        extra_ = rank % 2 == 0;
        fold_partner_ = extra_ ? rank + 1 : rank - 1;
        position = rank / 2;
    }
    virtual_rank_ = position;
    const std::vector<int> &labels = pairing_.position_of_label;
    for (size_t v = 0; v < labels.size(); ++v)
        if (labels[v] == position) virtual_rank_ = static_cast<int>(v);
}

int HalvingDoublingPattern::exchange_partner(int mask) const {
    if (pairing_.partner_by_bit.empty()) return active_rank(virtual_rank_ ^ mask);
    int bit = 0;
    while ((1 << bit) < mask) ++bit;
    return active_rank_at(pairing_.partner_by_bit[static_cast<size_t>(bit)]);
}

DoubleTreePattern::DoubleTreePattern(int nranks, int root, int which, int rank) {
    const bool rooted = root >= 0;
    const int members = rooted ? nranks - 1 : nranks; // the ranks binary_tree() arranges
    auto rank_of = [&](int index) { return rooted ? (root + 1 + index) % nranks : index; };
    std::vector<int> order(static_cast<size_t>(members));
    std::iota(order.begin(), order.end(), 0);
    const std::vector<int> shape = members > 0 ? binary_tree(order, which) : std::vector<int>{};
    // Rank-indexed parents, with the rooted trees' tops hung from the root.
    std::vector<int> parent_of(static_cast<size_t>(nranks), -1);
    for (int i = 0; i < members; ++i) {
        const int up = shape[static_cast<size_t>(i)];
        parent_of[static_cast<size_t>(rank_of(i))] = up >= 0 ? rank_of(up) : rooted ? root : -1;
    }
    for (int r = 0; r < nranks; ++r) {
        int depth = 0;
        for (int up = parent_of[static_cast<size_t>(r)]; up >= 0; up = parent_of[static_cast<size_t>(up)]) ++depth;
        height_ = std::max(height_, depth);
        if (r == rank) depth_ = depth;
        if (parent_of[static_cast<size_t>(r)] == rank) children_.push_back(r);
    }
    parent_ = parent_of[static_cast<size_t>(rank)];
}

std::vector<int> torus_row(int x, int rank, bool reversed) {
    std::vector<int> ring(static_cast<size_t>(x));
    const int row_start = rank - rank % x;
    for (int i = 0; i < x; ++i) ring[static_cast<size_t>(i)] = row_start + (reversed ? x - 1 - i : i);
    return ring;
}

std::vector<int> torus_column(int x, int y, int rank, bool reversed) {
    std::vector<int> ring(static_cast<size_t>(y));
    for (int j = 0; j < y; ++j) ring[static_cast<size_t>(j)] = rank % x + x * (reversed ? y - 1 - j : j);
    return ring;
}

} // namespace nnpccl
