#include "patterns.hpp"

namespace nnpccl {

RingPattern::RingPattern(const std::vector<int> &order, int rank) : order_(order) {
    for (size_t i = 0; i < order_.size(); ++i)
        if (order_[i] == rank) position_ = static_cast<int>(i);
}

int RingPattern::rank_at(int offset) const {
    int p = size();
    return order_[static_cast<size_t>(((offset % p) + p) % p)];
}

} // namespace nnpccl
