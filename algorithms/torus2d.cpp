// 2D torus (hierarchical) allreduce on an x·y grid of ranks (grid[i + j·x]
// is the rank at (i, j); rank r at (r % x, r / x) unless a grid is given).
// X first: a ring reduce-scatter along each X ring (row) leaves rank (i, j)
// with piece i of its row's sum, a ring allreduce along each Y ring
// (column) sums piece i over the rows, and a ring allgather along X spreads
// it. Y first: the same on the transposed grid. Four channels, a quarter of
// the data each: X first forward, X first backward, Y first forward, Y
// first backward, so a chip's four ports (X+, X-, Y+, Y-) all carry data in
// every phase. Every message is one piece of at most a chunk: data goes in
// slices of up to x·y chunks, a slice around the rows in t row slices.
//
// p = x·y ranks, n bytes, α per message, β per byte of one port, γ per byte
// reduced, C bytes per chunk. A channel along a (first) by b (second): s =
// ceil(n / (4·p·C)) slices, t the least divisor of b that is at least
// ceil(slice / (a·C)) (1 while a slice is at most a chunks per row, b for
// full slices):
//
//   allreduce   s·(2t(a-1) + 2(b-1))·α  per channel (= 2(x+y-2)·α for
//                 n <= 4·min(x,y)·C: the point of the torus, x+y-2 hops
//                 instead of the ring's p-1)
//               + max(2(p-1)/p·(n/4)·β,  a channel's own bytes, one port at a time
//                     (L-1)(S+1)/p·(n/2)·β)  the busiest port, L >= S the sides
//               + (p-1)/p·nγ
//
// A channel carries 2(a-1)/a·(n/4) on its first dimension and 2(b-1)/(ab)·
// (n/4) on its second, 2(p-1)/p·(n/4) in all. Why equal quarters: a
// channel is a chain of steps that each wait for the one before, so no
// share can beat its own bytes crossing one port at a time, and quarters
// put every channel at the allreduce bound 2(p-1)/p·n/(4 ports). The ports
// are then even only on a square grid: on 8x4 the X ports carry 35/31 of
// the bound. Evening out the ports instead (X first taking 17/42 of the
// data on 8x4) leaves the Y first channels 19% over the bound. In a
// message-level simulation of 8x4 (1 µs hops, 56 GB/s ports, 512 KiB
// chunks, 1 GiB) equal quarters finish at 1.22x the bound, even ports at
// 1.42x. Each element is reduced once, on its column ring, and copied from
// there: all ranks hold the same bits.
#include <algorithm>
#include <numeric>
#include <utility>

#include "builders.hpp"
#include "patterns.hpp"
#include "step_list.hpp"

namespace nnpccl {

namespace {

int wrap(int a, int p) { return ((a % p) + p) % p; }

// Steps on one ring (a row or a column) of one channel: receive from the
// previous rank, send to the next. The rank at ring position k finishes
// piece k; a piece is one message, so every step of the ring needs one
// free slot and one message, as the ring's own do (two slots per stream
// keep it moving).
class RingPhase {
public:
    RingPhase(const RingPattern &ring, std::vector<ElemRange> pieces, std::vector<Step> &out)
        : ring_(ring), pieces_(std::move(pieces)), steps_(out) {}

    int me() const { return ring_.position(); }
    const ElemRange &piece(int pos) const { return pieces_[static_cast<size_t>(wrap(pos, ring_.size()))]; }

    void emit(uint8_t flags, Buf src, Buf dst, int pos, bool finalize = false) {
        const ElemRange &c = piece(pos);
        steps_.add(flags, ring_.prev(), ring_.next(), src == Buf::None ? BufRef{} : BufRef{src, c.begin},
                   dst == Buf::None ? BufRef{} : BufRef{dst, c.begin}, c.size(), finalize);
    }
    // Reduce-scatter of `operand` into the receive buffer's piece me().
    void reduce_scatter(Buf operand, bool finalize) {
        const int p = ring_.size();
        emit(kSend, operand, Buf::None, me() - 1);
        for (int s = 1; s <= p - 2; ++s) emit(kRecv | kReduce | kSend, operand, Buf::None, me() - 1 - s);
        emit(kRecv | kReduce | kStore, operand, Buf::Recv, me(), finalize);
    }
    // Allgather of the receive buffer's pieces.
    void allgather() {
        const int p = ring_.size();
        emit(kSend, Buf::Recv, Buf::None, me());
        for (int s = 1; s <= p - 2; ++s) emit(kRecv | kStore | kSend, Buf::None, Buf::Recv, me() - s);
        emit(kRecv | kStore, Buf::None, Buf::Recv, me() + 1);
    }
    // Reduce-scatter fused into allgather: the finished piece goes straight on.
    void allreduce(Buf operand) {
        const int p = ring_.size();
        emit(kSend, operand, Buf::None, me() - 1);
        for (int s = 1; s <= p - 2; ++s) emit(kRecv | kReduce | kSend, operand, Buf::None, me() - 1 - s);
        emit(kRecv | kReduce | kStore | kSend, operand, Buf::Recv, me(), true);
        for (int s = 1; s <= p - 2; ++s) emit(kRecv | kStore | kSend, Buf::None, Buf::Recv, me() - s);
        emit(kRecv | kStore, Buf::None, Buf::Recv, me() + 1);
    }

private:
    const RingPattern &ring_;
    std::vector<ElemRange> pieces_;
    StepList steps_;
};

// [begin, end) cut into `n` balanced pieces.
std::vector<ElemRange> split(size_t begin, size_t end, size_t n) {
    std::vector<ElemRange> pieces;
    for (size_t i = 0; i < n; ++i) {
        const size_t first = begin + piece_begin(end - begin, n, i);
        pieces.push_back(ElemRange{first, first + piece_size(end - begin, n, i)});
    }
    return pieces;
}

size_t smallest_divisor_at_least(int y, size_t least) {
    size_t d = std::max<size_t>(1, least);
    while (static_cast<size_t>(y) % d != 0) ++d;
    return d;
}


// Ranks on a grid whose rows run along the channel's first dimension:
// rank_at[i + j·width] is at (i, j).
struct ChannelGrid {
    int width = 0;  // the first dimension: a row's length
    int height = 0; // the second: a column's length
    std::vector<int> rank_at;

    ChannelGrid transposed() const {
        ChannelGrid t{height, width, std::vector<int>(rank_at.size())};
        for (int j = 0; j < height; ++j)
            for (int i = 0; i < width; ++i) t.rank_at[static_cast<size_t>(j + i * height)] = at(i, j);
        return t;
    }
    int at(int i, int j) const { return rank_at[static_cast<size_t>(i + j * width)]; }
    // The ring through row j (or column i), in increasing order or, when
    // reversed, decreasing: the other direction of the same links.
    std::vector<int> row(int j, bool reversed) const {
        std::vector<int> ring;
        for (int k = 0; k < width; ++k) ring.push_back(at(reversed ? width - 1 - k : k, j));
        return ring;
    }
    std::vector<int> column(int i, bool reversed) const {
        std::vector<int> ring;
        for (int k = 0; k < height; ++k) ring.push_back(at(i, reversed ? height - 1 - k : k));
        return ring;
    }
};

// Allreduce of the elements [lo, lo + len) on one channel: along the rows
// of `grid`, then its columns, then its rows again, every ring forward or
// every ring `reversed`.
void allreduce_on_grid(const ChannelGrid &grid, int rank, bool reversed, size_t lo, size_t len, size_t chunk,
                       std::vector<Step> &out) {
    const int x = grid.width, y = grid.height;
    const auto here = std::find(grid.rank_at.begin(), grid.rank_at.end(), rank) - grid.rank_at.begin();
    const int mine_i = static_cast<int>(here) % x, mine_j = static_cast<int>(here) / x;
    const RingPattern row(grid.row(mine_j, reversed), rank);
    const RingPattern column(grid.column(mine_i, reversed), rank);
    const auto row_size = static_cast<size_t>(x);
    const size_t slices = balanced_pieces(len, chunk * row_size * static_cast<size_t>(y));
    for (size_t k = 0; k < slices; ++k) {
        const size_t first = lo + piece_begin(len, slices, k);
        const size_t last = first + piece_size(len, slices, k);
        if (x == 1 && y == 1) {
            StepList(out).add(kStore, -1, -1, BufRef{Buf::Send, first}, BufRef{Buf::Recv, first}, last - first, true);
            continue;
        }
        // The slice goes around the rows as t row slices of at most x
        // chunks (t divides y), and row slice u leaves piece i of it
        // with the rank at row position i. The column through that
        // rank cuts each of its t pieces into y/t, one per column
        // position. Few row slices keep small slices to 2(x+y-2)
        // messages; y of them keep large ones' column messages a chunk.
        const size_t row_slices = smallest_divisor_at_least(y, balanced_pieces(last - first, chunk * row_size));
        std::vector<RingPhase> along_x;
        std::vector<ElemRange> column_pieces;
        for (const ElemRange &row_slice : split(first, last, row_slices)) {
            along_x.emplace_back(row, split(row_slice.begin, row_slice.end, row_size), out);
            const ElemRange &mine = along_x.back().piece(row.position());
            for (const ElemRange &c : split(mine.begin, mine.end, static_cast<size_t>(y) / row_slices))
                column_pieces.push_back(c);
        }
        // The row's partial sums of our pieces: in the receive buffer
        // after a row reduce-scatter, our own data when the row is us.
        Buf partial = Buf::Send;
        if (x > 1) {
            for (RingPhase &phase : along_x) phase.reduce_scatter(Buf::Send, y == 1);
            partial = Buf::Recv;
        }
        if (y > 1) RingPhase(column, column_pieces, out).allreduce(partial);
        if (x > 1)
            for (RingPhase &phase : along_x) phase.allgather();
    }
}

bool is_permutation_of_ranks(const std::vector<int> &grid, int nranks) {
    std::vector<char> seen(static_cast<size_t>(nranks), 0);
    for (int r : grid) {
        if (r < 0 || r >= nranks || seen[static_cast<size_t>(r)]) return false;
        seen[static_cast<size_t>(r)] = 1;
    }
    return grid.size() == static_cast<size_t>(nranks);
}

} // namespace

Schedule build_torus2d(const CollectiveArgs &args, int x, int y, const std::vector<int> &grid) {
    Schedule sched;
    sched.algorithm = "torus2d";
    if (args.collective != Collective::Allreduce || x < 1 || y < 1 || x * y != args.nranks ||
        !is_permutation_of_ranks(grid, args.nranks))
        return sched; // not served: see builders.hpp
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    const ChannelGrid by_rows{x, y, grid};
    const ChannelGrid by_columns = by_rows.transposed();
    sched.channels.resize(kTorus2dChannels);
    for (size_t c = 0; c < kTorus2dChannels; ++c) {
        const bool x_first = c < 2, reversed = c % 2 == 1;
        allreduce_on_grid(x_first ? by_rows : by_columns, args.rank, reversed,
                          piece_begin(args.count, kTorus2dChannels, c), piece_size(args.count, kTorus2dChannels, c),
                          chunk, sched.channels[c]);
    }
    return sched;
}

Schedule build_torus2d(const CollectiveArgs &args, int x, int y) {
    std::vector<int> grid(static_cast<size_t>(std::max(0, x * y)));
    std::iota(grid.begin(), grid.end(), 0);
    return build_torus2d(args, x, y, grid);
}

} // namespace nnpccl
