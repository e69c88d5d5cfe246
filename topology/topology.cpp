#include "topology.hpp"

#include <numeric>

namespace nnpccl {

Topology Topology::flat(int nranks) {
    Topology t;
    t.name_ = "flat";
    t.nranks_ = nranks;
    std::vector<int> order(static_cast<size_t>(nranks));
    std::iota(order.begin(), order.end(), 0);
    t.rings_.push_back(order);
    return t;
}

} // namespace nnpccl
