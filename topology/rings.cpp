#include "rings.hpp"

#include <algorithm>
#include <functional>
#include <set>
#include <utility>

namespace nnpccl {

void rotate_to_smallest(VertexRing *ring) {
    if (ring->empty()) return;
    std::rotate(ring->begin(), std::min_element(ring->begin(), ring->end()), ring->end());
}

bool is_hamiltonian_ring(const UndirectedGraph &g, const VertexRing &ring) {
    if (static_cast<int>(ring.size()) != g.size()) return false;
    std::vector<char> seen(ring.size(), 0);
    for (size_t i = 0; i < ring.size(); ++i) {
        int v = ring[i];
        if (v < 0 || v >= g.size() || seen[static_cast<size_t>(v)]) return false;
        seen[static_cast<size_t>(v)] = 1;
        if (ring.size() > 1 && !g.has_edge(v, ring[(i + 1) % ring.size()])) return false;
    }
    return true;
}

// Walecki's decomposition. Put vertex n-1 ("the hub") in the middle and the
// other c = n-1 on a circle. Ring i runs hub, i, i+1, i-1, i+2, i-2, ...
// (mod c) until it has visited the whole circle, and back to the hub. Every
// circle edge of ring i has its two ends summing to 2i or 2i+1 (mod c), so
// rings with different i share no circle edge, and ring i's hub edges go to
// i and to the far end of its zigzag, distinct for each i. O(n²).
std::vector<VertexRing> complete_graph_rings(int n) {
    if (n <= 0) return {};
    if (n <= 2) {
        VertexRing ring;
        for (int v = 0; v < n; ++v) ring.push_back(v);
        return {ring};
    }
    const int hub = n - 1, c = n - 1;
    std::vector<VertexRing> rings;
    for (int i = 0; i < (n - 1) / 2; ++i) {
        VertexRing ring{hub};
        for (int k = 0; k < c; ++k) {
            int offset = (k % 2 == 1) ? (k + 1) / 2 : -(k / 2);
            ring.push_back(((i + offset) % c + c) % c);
        }
        rotate_to_smallest(&ring);
        rings.push_back(std::move(ring));
    }
    return rings;
}

namespace {

// The "row snake" of a torus with `cols` columns and `rows` rows: row r is
// entered at column s_r and run through in full, then the ring drops to row
// r+1 at the column where it stopped, s_{r+1} = s_r + step[r]; running the
// row in direction -step[r] makes it stop there. It is a Hamiltonian ring
// when the steps add up to a multiple of `cols`. `id(col, row)` names the
// vertex. O(cols·rows).
template <typename Id>
VertexRing row_snake(int cols, int rows, const std::vector<int> &step, Id id) {
    VertexRing ring;
    int s = 0;
    for (int r = 0; r < rows; ++r) {
        int direction = -step[static_cast<size_t>(r)];
        for (int k = 0; k < cols; ++k) ring.push_back(id(((s + k * direction) % cols + cols) % cols, r));
        s = ((s + step[static_cast<size_t>(r)]) % cols + cols) % cols;
    }
    return ring;
}

// In a 4-regular graph, the edges a Hamiltonian ring leaves unused give
// every vertex degree 2 again; walks them from vertex 0. The result is a
// second Hamiltonian ring if the walk covers every vertex, else empty. O(n).
VertexRing complement_ring(const UndirectedGraph &g, const VertexRing &ring) {
    const size_t n = ring.size();
    std::vector<std::pair<int, int>> on_ring(n);
    for (size_t i = 0; i < n; ++i)
        on_ring[static_cast<size_t>(ring[i])] = {ring[(i + n - 1) % n], ring[(i + 1) % n]};
    auto other_edges = [&](int v) {
        std::vector<int> rest;
        for (int u : g.neighbours(v))
            if (u != on_ring[static_cast<size_t>(v)].first && u != on_ring[static_cast<size_t>(v)].second)
                rest.push_back(u);
        return rest;
    };
    VertexRing walk{0};
    int prev = -1, at = 0;
    for (;;) {
        std::vector<int> next = other_edges(at);
        if (next.size() != 2) return {};
        int to = next[0] != prev ? next[0] : next[1];
        if (to == 0) break;
        if (walk.size() == n) return {};
        walk.push_back(to);
        prev = at;
        at = to;
    }
    return walk.size() == n ? walk : VertexRing{};
}

UndirectedGraph torus_graph(int x, int y) {
    UndirectedGraph g(x * y);
    for (int j = 0; j < y; ++j)
        for (int i = 0; i < x; ++i) {
            if (x > 1) g.add_edge(i + j * x, (i + 1) % x + j * x);
            if (y > 1) g.add_edge(i + j * x, i + ((j + 1) % y) * x);
        }
    return g;
}

} // namespace

// Two edge-disjoint rings (both sizes >= 3, same parity): let a <= b be the
// sizes and snake over the b rows of length a with steps -1 (a times) and
// then +1, -1 pairs: they add up to -a, so the snake closes. Its unused
// edges form the second ring: each column breaks into segments at the rows
// where the snake dropped through it, and a row's one unused edge joins the
// end of one segment to the start of the next; the walk visits all of them
// in one cycle for this step pattern (checked for every size up to 40 in
// the tests). Otherwise one snake: alternate steps when there is an even
// number of rows (transposing if needed). O(x·y).
std::vector<VertexRing> torus_rings(int x, int y) {
    if (x < 1 || y < 1) return {};
    if (x == 1 || y == 1) {
        VertexRing ring;
        for (int v = 0; v < x * y; ++v) ring.push_back(v);
        return {ring};
    }
    // Snake along rows of length `cols`; `transposed` swaps the roles of x and y.
    auto snake = [&](bool transposed, const std::vector<int> &step) {
        int cols = transposed ? y : x, rows = transposed ? x : y;
        return row_snake(cols, rows, step,
                         [&](int col, int row) { return transposed ? row + col * x : col + row * x; });
    };
    std::vector<VertexRing> rings;
    if (x >= 3 && y >= 3 && x % 2 == y % 2) {
        bool transposed = x > y; // rows must be the shorter side
        int a = std::min(x, y), b = std::max(x, y);
        std::vector<int> step(static_cast<size_t>(a), -1);
        for (int k = 0; k < (b - a) / 2; ++k) {
            step.push_back(+1);
            step.push_back(-1);
        }
        rings.push_back(snake(transposed, step));
        VertexRing second = complement_ring(torus_graph(x, y), rings[0]);
        if (!second.empty()) rings.push_back(second);
    } else {
        bool transposed = y % 2 != 0; // needs an even number of rows
        std::vector<int> step(static_cast<size_t>(transposed ? x : y));
        for (size_t r = 0; r < step.size(); ++r) step[r] = r % 2 == 0 ? -1 : +1;
        rings.push_back(snake(transposed, step));
    }
    for (VertexRing &r : rings) rotate_to_smallest(&r);
    return rings;
}

// With h even: along row 0, then back and forth over columns 1..w-1 row by
// row, ending at (1, h-1), and up column 0 home. With w even the same on
// the transposed grid. O(w·h).
VertexRing grid_ring(int w, int h) {
    if (w * h <= 2) {
        VertexRing ring;
        for (int v = 0; v < w * h; ++v) ring.push_back(v);
        return ring;
    }
    if (w < 2 || h < 2) return {};
    bool transposed = h % 2 != 0;
    if (transposed && w % 2 != 0) return {};
    int cols = transposed ? h : w, rows = transposed ? w : h;
    auto id = [&](int col, int row) { return transposed ? row + col * w : col + row * w; };
    VertexRing ring;
    for (int c = 0; c < cols; ++c) ring.push_back(id(c, 0));
    for (int r = 1; r < rows; ++r)
        for (int k = 0; k < cols - 1; ++k) ring.push_back(id(r % 2 == 1 ? cols - 1 - k : 1 + k, r));
    for (int r = rows - 1; r >= 1; --r) ring.push_back(id(0, r));
    return ring;
}

namespace {

// Depth-first search for simple cycles through `start` over the edges not
// yet used by earlier rings. Shares one step budget across every call.
class CycleSearch {
public:
    CycleSearch(const UndirectedGraph &g, long steps) : g_(g), steps_(steps) {}

    bool exhausted() const { return steps_ <= 0; }
    bool free_edge(int a, int b) const { return used_.count(edge(a, b)) == 0; }
    void use(const VertexRing &ring, bool used) {
        for (size_t i = 0; i < ring.size() && ring.size() > 2; ++i) {
            auto e = edge(ring[i], ring[(i + 1) % ring.size()]);
            if (used)
                used_.insert(e);
            else
                used_.erase(e);
        }
    }

    // Calls `found` with each cycle of `length` vertices through `start`
    // (each undirected cycle once) until it returns true or the budget runs
    // out; returns whether `found` accepted one.
    bool cycles(int length, int start, const std::function<bool(const VertexRing &)> &found) {
        closed_ = true;
        return search(length, start, found);
    }
    // The same for open paths of `length` vertices from `start`.
    bool paths(int length, int start, const std::function<bool(const VertexRing &)> &found) {
        closed_ = false;
        return search(length, start, found);
    }

private:
    bool search(int length, int start, const std::function<bool(const VertexRing &)> &found) {
        std::vector<char> on_path(static_cast<size_t>(g_.size()), 0);
        VertexRing path{start};
        on_path[static_cast<size_t>(start)] = 1;
        return extend(length, &path, &on_path, found);
    }

    static std::pair<int, int> edge(int a, int b) { return {std::min(a, b), std::max(a, b)}; }

    // Free edges from v to vertices off the path (plus the path's ends,
    // which may still close a cycle through v).
    int onward(int v, const std::vector<char> &on_path, int end, int start) const {
        int n = 0;
        for (int u : g_.neighbours(v))
            if (free_edge(v, u) && (!on_path[static_cast<size_t>(u)] || u == end || u == start)) ++n;
        return n;
    }

    bool extend(int length, VertexRing *path, std::vector<char> *on_path,
                const std::function<bool(const VertexRing &)> &found) {
        if (--steps_ <= 0) return false;
        const int start = path->front(), end = path->back();
        if (static_cast<int>(path->size()) == length) {
            if (!closed_) return found(*path);
            // Each cycle is seen in both directions; keep the one whose
            // second vertex is the smaller neighbour of the start.
            if (length >= 3 && free_edge(end, start) && g_.has_edge(end, start) && (*path)[1] < end)
                return found(*path);
            return false;
        }
        const bool hamiltonian = length == g_.size();
        std::vector<std::pair<int, int>> next; // (onward choices, vertex)
        for (int u : g_.neighbours(end))
            if (!(*on_path)[static_cast<size_t>(u)] && free_edge(end, u))
                next.push_back({onward(u, *on_path, end, start), u});
        std::sort(next.begin(), next.end()); // Warnsdorff: most constrained first
        for (const auto &candidate : next) {
            int u = candidate.second;
            path->push_back(u);
            (*on_path)[static_cast<size_t>(u)] = 1;
            // A Hamiltonian cycle must still pass through every vertex off the
            // path; one left with fewer than two ways in and out is a dead end
            // (for an open path, with none: it could still be the last).
            bool dead = false;
            const int needed = closed_ ? 2 : 1;
            if (hamiltonian)
                for (int w : g_.neighbours(end))
                    if (!(*on_path)[static_cast<size_t>(w)] && onward(w, *on_path, u, start) < needed) {
                        dead = true;
                        break;
                    }
            bool done = !dead && extend(length, path, on_path, found);
            (*on_path)[static_cast<size_t>(u)] = 0;
            path->pop_back();
            if (done) return true;
            if (exhausted()) return false;
        }
        return false;
    }

    const UndirectedGraph &g_;
    long steps_;
    bool closed_ = true;
    std::set<std::pair<int, int>> used_;
};

} // namespace

std::vector<VertexRing> find_disjoint_rings(const UndirectedGraph &g, int want, std::vector<VertexRing> seed,
                                            long steps) {
    const int n = g.size();
    if (static_cast<int>(seed.size()) >= want || n < 3) return seed;
    CycleSearch search(g, steps);
    for (const VertexRing &r : seed) search.use(r, true);
    std::vector<VertexRing> current = seed, best = seed;
    // Depth-first over ring choices: a ring that leaves no room for the next
    // one is given up for the next candidate, within the shared budget.
    std::function<bool()> more = [&]() {
        return search.cycles(n, 0, [&](const VertexRing &ring) {
            current.push_back(ring);
            search.use(ring, true);
            if (current.size() > best.size()) best = current;
            bool done = static_cast<int>(current.size()) >= want || more();
            search.use(ring, false);
            current.pop_back();
            return done;
        });
    };
    more();
    for (VertexRing &r : best) rotate_to_smallest(&r);
    return best;
}

VertexRing find_cycle(const UndirectedGraph &g, int length, int start, long steps) {
    if (length < 3 || length > g.size()) return {};
    CycleSearch search(g, steps);
    VertexRing result;
    search.cycles(length, start, [&](const VertexRing &ring) {
        result = ring;
        return true;
    });
    return result;
}

// Tries up to 8 starting vertices, those of least degree first (a path's
// ends are best placed where the graph offers the fewest ways through),
// each with an equal share of the budget.
VertexRing find_hamiltonian_path(const UndirectedGraph &g, long steps, const std::function<int(int, int)> &closing_cost,
                                 int good_enough) {
    std::vector<int> starts;
    for (int v = 0; v < g.size(); ++v) starts.push_back(v);
    std::stable_sort(starts.begin(), starts.end(), [&](int a, int b) { return g.degree(a) < g.degree(b); });
    starts.resize(std::min<size_t>(starts.size(), 8));
    VertexRing best;
    int best_cost = 0;
    for (int start : starts) {
        CycleSearch search(g, steps / static_cast<long>(starts.size()));
        bool done = search.paths(g.size(), start, [&](const VertexRing &path) {
            int cost = closing_cost(path.back(), path.front());
            if (best.empty() || cost < best_cost) {
                best = path;
                best_cost = cost;
            }
            return cost <= good_enough;
        });
        if (done) break;
    }
    return best;
}

} // namespace nnpccl
