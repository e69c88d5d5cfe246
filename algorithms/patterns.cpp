#include "patterns.hpp"

#include <algorithm>
#include <numeric>

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

HalvingDoublingPattern::HalvingDoublingPattern(int nranks, int rank) {
    while (active_ * 2 <= nranks) {
        active_ *= 2;
        ++rounds_;
    }
    folded_ = nranks - active_;
    if (rank < 2 * folded_) {
        extra_ = rank % 2 == 0;
        fold_partner_ = extra_ ? rank + 1 : rank - 1;
        virtual_rank_ = rank / 2;
    } else {
        virtual_rank_ = rank - folded_;
    }
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
