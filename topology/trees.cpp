#include "trees.hpp"

#include <deque>

namespace nnpccl {

std::vector<int> bfs_tree(const UndirectedGraph &g, int root) {
    std::vector<int> parent(static_cast<size_t>(g.size()), -2);
    parent[static_cast<size_t>(root)] = -1;
    std::deque<int> queue{root};
    while (!queue.empty()) {
        int v = queue.front();
        queue.pop_front();
        for (int u : g.neighbours(v))
            if (parent[static_cast<size_t>(u)] == -2) {
                parent[static_cast<size_t>(u)] = v;
                queue.push_back(u);
            }
    }
    return parent;
}

std::vector<int> binary_tree(const std::vector<int> &order, int which) {
    const long p = static_cast<long>(order.size());
    std::vector<int> parent(order.size(), -1);
    auto vertex = [&](long index) { return order[static_cast<size_t>(which == 0 ? index - 1 : index % p)]; };
    long root = 1;
    while (root * 2 <= p) root *= 2;
    for (long i = 1; i <= p; ++i) {
        if (i == root) continue;
        long up = i; // every position below p lies under the root, so this climb ends there at the latest
        do {
            long low = up & -up; // 2^k
            up = ((up / low) % 4 == 1) ? up + low : up - low;
        } while (up > p);
        parent[static_cast<size_t>(vertex(i))] = vertex(up);
    }
    return parent;
}

std::vector<std::vector<int>> children_of(const std::vector<int> &parent) {
    std::vector<std::vector<int>> children(parent.size());
    for (size_t v = 0; v < parent.size(); ++v)
        if (parent[v] >= 0) children[static_cast<size_t>(parent[v])].push_back(static_cast<int>(v));
    return children;
}

} // namespace nnpccl
