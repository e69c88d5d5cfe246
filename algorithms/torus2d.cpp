// 2D torus (hierarchical) allreduce on x·y ranks, rank r at (r % x, r / x):
// a ring reduce-scatter along each X ring (row) leaves rank (i, j) with
// piece i of its row's sum, a ring allreduce along each Y ring (column)
// sums piece i over the rows, and a ring allgather along X spreads it. Two
// channels, each with half the data, run the rings in opposite directions.
// Every message is one piece of at most a chunk: data goes in slices of up
// to x·y chunks, a slice around the rows in t row slices (see below).
//
// p = x·y ranks, n bytes, α per message, β per byte, γ per byte reduced,
// C bytes per chunk, s = ceil(n / (2·p·C)) slices per channel, t the least
// divisor of y that is at least ceil(slice / (x·C)) (1 while a channel's
// slice is at most x chunks, y for full slices):
//
//   allreduce   s·(2t(x-1) + 2(y-1))·α + 2(p-1)/p·nβ/b + (p-1)/p·nγ
//               = 2(x+y-2)·α + ... for n <= 2·x·C (the point of the torus:
//               the ring's bandwidth for x+y-2 hops instead of p-1)
//
// b = 2 where the two directions of a link are independent (each carries
// one channel), 1 where one memory system carries both. Of the bytes, rows
// carry 2(x-1)/x·n and columns 2(y-1)/(xy)·n. Each element is reduced once,
// on its column ring, and copied from there: all ranks hold the same bits.
#include <algorithm>
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

} // namespace

Schedule build_torus2d(const CollectiveArgs &args, int x, int y) {
    Schedule sched;
    sched.algorithm = "torus2d";
    if (args.collective != Collective::Allreduce || x < 1 || y < 1 || x * y != args.nranks)
        return sched; // not served: see builders.hpp
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    sched.channels.resize(2);
    for (int direction = 0; direction < 2; ++direction) {
        std::vector<Step> &out = sched.channels[static_cast<size_t>(direction)];
        const bool reversed = direction == 1;
        const RingPattern row(torus_row(x, args.rank, reversed), args.rank);
        const RingPattern column(torus_column(x, y, args.rank, reversed), args.rank);
        const size_t lo = piece_begin(args.count, 2, static_cast<size_t>(direction));
        const size_t len = piece_size(args.count, 2, static_cast<size_t>(direction));
        const auto row_size = static_cast<size_t>(x);
        const size_t slices = balanced_pieces(len, chunk * row_size * static_cast<size_t>(y));
        for (size_t k = 0; k < slices; ++k) {
            const size_t first = lo + piece_begin(len, slices, k);
            const size_t last = first + piece_size(len, slices, k);
            if (x == 1 && y == 1) {
                StepList(out).add(kStore, -1, -1, BufRef{Buf::Send, first}, BufRef{Buf::Recv, first}, last - first,
                                  true);
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
    return sched;
}

} // namespace nnpccl
