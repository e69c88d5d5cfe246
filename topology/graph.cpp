#include "graph.hpp"

#include <algorithm>
#include <deque>

namespace nnpccl {

void UndirectedGraph::add_edge(int a, int b) {
    if (a == b || has_edge(a, b)) return;
    auto insert = [](std::vector<int> &list, int v) { list.insert(std::lower_bound(list.begin(), list.end(), v), v); };
    insert(adjacent_[static_cast<size_t>(a)], b);
    insert(adjacent_[static_cast<size_t>(b)], a);
}

bool UndirectedGraph::has_edge(int a, int b) const {
    const auto &list = adjacent_[static_cast<size_t>(a)];
    return std::binary_search(list.begin(), list.end(), b);
}

int UndirectedGraph::min_degree() const {
    int d = size() > 0 ? degree(0) : 0;
    for (int v = 1; v < size(); ++v) d = std::min(d, degree(v));
    return d;
}

long UndirectedGraph::edge_count() const {
    long twice = 0;
    for (const auto &list : adjacent_) twice += static_cast<long>(list.size());
    return twice / 2;
}

bool UndirectedGraph::is_complete() const { return edge_count() == static_cast<long>(size()) * (size() - 1) / 2; }

bool UndirectedGraph::is_connected() const {
    if (size() == 0) return true;
    std::vector<char> seen(static_cast<size_t>(size()), 0);
    std::deque<int> queue{0};
    seen[0] = 1;
    int reached = 1;
    while (!queue.empty()) {
        int v = queue.front();
        queue.pop_front();
        for (int u : neighbours(v))
            if (!seen[static_cast<size_t>(u)]) {
                seen[static_cast<size_t>(u)] = 1;
                ++reached;
                queue.push_back(u);
            }
    }
    return reached == size();
}

bool UndirectedGraph::is_bipartite() const {
    std::vector<int> colour(static_cast<size_t>(size()), -1);
    for (int s = 0; s < size(); ++s) {
        if (colour[static_cast<size_t>(s)] >= 0) continue;
        colour[static_cast<size_t>(s)] = 0;
        std::deque<int> queue{s};
        while (!queue.empty()) {
            int v = queue.front();
            queue.pop_front();
            for (int u : neighbours(v)) {
                int &c = colour[static_cast<size_t>(u)];
                if (c < 0) {
                    c = 1 - colour[static_cast<size_t>(v)];
                    queue.push_back(u);
                } else if (c == colour[static_cast<size_t>(v)]) {
                    return false;
                }
            }
        }
    }
    return true;
}

} // namespace nnpccl
