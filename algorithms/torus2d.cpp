// 2D torus (hierarchical) allreduce on an x·y grid of ranks (grid[i + j·x]
// is the rank at (i, j); rank r at (r % x, r / x) unless a grid is given).
// X first: a ring reduce-scatter along each X ring (row) leaves rank (i, j)
// with piece i of its row's sum, a ring allreduce along each Y ring
// (column) sums piece i over the rows, and a ring allgather along X spreads
// it. Y first: the same on the transposed grid. Every message is one piece
// of at most a chunk: data goes in slices of up to x·y chunks, a slice
// around the rows in t row slices.
//
// Eight channels (torus2d_layout()): X first forward, X first backward, Y
// first forward, Y first backward, two channels of each, so a chip's four
// ports (X+, X-, Y+, Y-) all carry data and each carries two channels.
// Why two: a channel is a chain of steps that each wait for the message
// before, so alone on a port it leaves the port idle for α after every
// message (1 µs after each 9.36 µs chunk on NNP-T); with a second channel
// on the port, one's message crosses while the other's waits. Why the
// second of each pair starts with half a slice: otherwise the two run in
// step, reach the same dimension at the same moment, and leave the other
// dimension's ports idle meanwhile.
//
// Why the X-first channels take f = (xy-2x+1) / (2(x-1)(y-1)) of the data
// (17/42 on 8x4, 1/2 on a square grid): an X-first channel moves 2(x-1)/x
// of its bytes on X ports and 2(y-1)/(xy) on Y ports, a Y-first one the
// mirror, and that f loads X and Y ports with the same bytes, 2(p-1)/p·n/4
// each: the allreduce bound. Equal shares put 35/31 of the bound on the X
// ports of 8x4. The cost model simulates these channels message by message
// (cost_model.cpp): on nnpt-pod32 (8x4, 56 GB/s ports, 1 µs hops, 512 KiB
// chunks) at 1 GiB they come to 92% of the bound's busbw, where four
// channels of equal quarters came to 82% and eight of equal shares to 88%
// (the X ports the bottleneck). From 16 to 256 MiB a channel has few
// slices and the ports idle at its start and end: there the ring both ways
// does better (below, the torus's fewer hops win).
//
// Both ways round (Torus2dRings): a ring phase may send half its pieces'
// partial sums forward and half backward, piece q summed at position q
// from the a/2 positions before it and the a-1-a/2 after it, one message
// each way per round: a/2 rounds where one way takes a-1 steps, the same
// bytes split over the dimension's two ports. The channel's two ways are
// two chains of steps interleaved, each waiting only for its own way's
// message, so their latencies overlap (two phases of different message
// sizes interleaved would not: the larger sets both paces). The columns'
// phase, small and latency-bound where a channel has one slice, gains
// most (nnpt-pod1024 at 64 MiB: its 2 x 31 one-hop steps, 62 µs in which
// the rows' ports idle, become 2 x 16); the rows too where their messages
// are small. The model predicts the three (one way, the columns both ways,
// both) and the builder runs the fastest (fastest_rings()).
//
// p = x·y ranks, n bytes, α per message, β per byte of one port, γ per byte
// reduced, C bytes per chunk. A channel along a (first) by b (second): s
// slices of its share, t the least divisor of b that is at least
// ceil(slice / (a·C)) (1 while a slice is at most a chunks per row, b for
// full slices); a' = a-1 steps one way, a/2 both ways (b' alike):
//
//   allreduce   s·(2t·a' + 2b')·α  per channel (= 2(x+y-2)·α one way for
//                 small n, the point of the torus, x+y-2 hops instead of
//                 the ring's p-1; (x+y)·α both ways)
//               + 2(p-1)/p·(n/4)·β  per port, once the channels keep it busy
//               + (p-1)/p·nγ
//
// Each element is reduced once, at its owner on its column ring, and
// copied from there: all ranks hold the same bits.
//
// Reduce-scatter and allgather (torus2d_blocks.cpp), count m elements per block,
// block r of rank r. A group is the b blocks of one column's ranks. Reduce-
// scatter, X first: a ring reduce-scatter along each row whose pieces are
// the groups (the rank at column i ends with its row's sum of group i),
// then one along each column whose pieces are the group's blocks (the rank
// ends with its own block's sum). Allgather: the mirror, the column's
// blocks along the column, then whole groups along the rows. Y first: the
// transposed grid. A group is b ranges of the send (receive) buffer, not
// one: in slices of a chunk or more of each block every block's range goes
// as its own messages (no copy); a smaller slice is packed, its blocks'
// ranges copied to scratch group by group so that a message carries the
// whole group (torus2d_packs()), one message per hop where the ring would send b.
// Partial sums wait in scratch, p·m elements.
//
// The share: an X-first channel sends (x-1)·y·m' elements on X ports and
// (y-1)·m' on Y ports for its m' of each block, a Y-first one
// (y-1)·x·m' on Y and (x-1)·m' on X. Equal X and Y loads,
// (x-1)(y·f + 1-f) = (y-1)(f + x(1-f)), give the allreduce's
// f = (xy-2x+1) / (2(x-1)(y-1)), and each port (p-1)/p·n/4: the bound.
//
//   reduce-scatter  per channel, per slice of m elements of each block,
//                   (a-1)·q1 + (b-1)·q2 messages, q2 = ceil(m/C), q1 =
//                   ceil(b·m/C) packed, b·q2 not (= (x+y-2)·α for small n
//                   where the ring pays (p-1)·α)
//                   + (p-1)/p·(n/4)·β per port + (p-1)/p·nγ  (n the send buffer)
//   allgather       the same without γ (n the receive buffer)
#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "builders.hpp"
#include "cost_terms.hpp"
#include "patterns.hpp"
#include "registry.hpp"
#include "step_list.hpp"
#include "torus2d_grid.hpp"

namespace nnpccl {

namespace {

// Steps on one ring (a row or a column) of one channel: one way, receive
// from the previous rank and send to the next; both ways, also the
// reverse. The rank at ring position k finishes piece k; a piece is one
// message, so every step of the ring needs one free slot and one message,
// as the ring's own do (two slots per stream keep it moving).
class RingPhase {
public:
    RingPhase(const RingPattern &ring, std::vector<ElemRange> pieces, std::vector<Step> &out)
        : ring_(ring), pieces_(std::move(pieces)), steps_(out) {}

    int me() const { return ring_.position(); }
    const ElemRange &piece(int pos) const { return pieces_[static_cast<size_t>(wrap(pos, ring_.size()))]; }

    void emit(uint8_t flags, Buf src, Buf dst, int pos, bool finalize = false, bool backward = false) {
        const ElemRange &c = piece(pos);
        steps_.add(flags, backward ? ring_.next() : ring_.prev(), backward ? ring_.prev() : ring_.next(),
                   src == Buf::None ? BufRef{} : BufRef{src, c.begin},
                   dst == Buf::None ? BufRef{} : BufRef{dst, c.begin}, c.size(), finalize);
    }
    // Reduce-scatter both ways round the ring: piece q's partial sums come
    // to position q from the p/2 positions before it (forward) and the
    // p-1-p/2 after it (backward), a message each way per round, so the
    // phase takes p/2 rounds where one way takes p-1 steps.
    void reduce_scatter_both_ways(Buf operand, bool finalize) {
        const int p = ring_.size(), ahead = p / 2, behind = p - 1 - ahead;
        for (int r = 1; r <= std::max(ahead, behind); ++r) {
            const uint8_t relay = r == 1 ? kSend : kRecv | kReduce | kSend;
            if (r <= ahead) emit(relay, operand, Buf::None, me() + ahead - r + 1);
            if (r <= behind) emit(relay, operand, Buf::None, me() - behind + r - 1, false, true);
        }
        if (ahead > 0) emit(kRecv | kReduce | kStore, operand, Buf::Recv, me(), finalize && behind == 0);
        if (behind > 0)
            emit(kRecv | kReduce | kStore, ahead > 0 ? Buf::Recv : operand, Buf::Recv, me(), finalize, true);
    }
    // Allgather both ways: our piece goes p/2 positions forward and
    // p-1-p/2 backward.
    void allgather_both_ways() {
        const int p = ring_.size(), ahead = p / 2, behind = p - 1 - ahead;
        if (ahead > 0) emit(kSend, Buf::Recv, Buf::None, me());
        if (behind > 0) emit(kSend, Buf::Recv, Buf::None, me(), false, true);
        for (int r = 1; r <= std::max(ahead, behind); ++r) {
            if (r <= ahead) emit(kRecv | kStore | (r < ahead ? kSend : 0), Buf::None, Buf::Recv, me() - r);
            if (r <= behind)
                emit(kRecv | kStore | (r < behind ? kSend : 0), Buf::None, Buf::Recv, me() + r, false, true);
        }
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

// Allreduce of one channel's elements along the rows of `grid`, then its
// columns, then its rows again, every ring forward or every ring `reversed`.
void allreduce_on_grid(const ChannelGrid &grid, int rank, const Torus2dChannel &channel, size_t chunk,
                       Torus2dRings rings, std::vector<Step> &out) {
    const int x = grid.width, y = grid.height;
    const auto here = std::find(grid.rank_at.begin(), grid.rank_at.end(), rank) - grid.rank_at.begin();
    const int mine_i = static_cast<int>(here) % x, mine_j = static_cast<int>(here) / x;
    const RingPattern row(grid.row(mine_j, channel.reversed), rank);
    const RingPattern column(grid.column(mine_i, channel.reversed), rank);
    const auto row_size = static_cast<size_t>(x);
    const size_t end = channel.begin + channel.count, rest = channel.begin + channel.lead;
    std::vector<ElemRange> slices;
    if (channel.lead > 0) slices.push_back(ElemRange{channel.begin, rest});
    for (const ElemRange &s : split(rest, end, balanced_pieces(end - rest, chunk * row_size * static_cast<size_t>(y))))
        slices.push_back(s);
    for (const ElemRange &slice : slices) {
        const size_t first = slice.begin, last = slice.end;
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
        const bool rows_both_ways = rings == Torus2dRings::BothWays;
        if (x > 1) {
            for (RingPhase &phase : along_x) {
                if (rows_both_ways)
                    phase.reduce_scatter_both_ways(Buf::Send, y == 1);
                else
                    phase.reduce_scatter(Buf::Send, y == 1);
            }
            partial = Buf::Recv;
        }
        if (y > 1) {
            RingPhase along_y(column, column_pieces, out);
            if (rings == Torus2dRings::OneWay) {
                along_y.allreduce(partial);
            } else {
                along_y.reduce_scatter_both_ways(partial, true);
                along_y.allgather_both_ways();
            }
        }
        if (x > 1)
            for (RingPhase &phase : along_x) {
                if (rows_both_ways)
                    phase.allgather_both_ways();
                else
                    phase.allgather();
            }
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

namespace {

// The channels of `count` elements in slices of up to `slice`.
std::vector<Torus2dChannel> layout_in_slices(size_t count, int x, int y, size_t slice) {
    // The share of the X-first channels that loads X and Y ports alike:
    // f·2(x-1)/x + (1-f)·2(x-1)/(xy) = f·2(y-1)/(xy) + (1-f)·2(y-1)/y.
    // (Reduce-scatter and allgather carry half of each side: the same f.)
    size_t num = 1, den = 2;
    if (x > 1 && y > 1) {
        num = static_cast<size_t>(x * y - 2 * x + 1);
        den = 2 * static_cast<size_t>(x - 1) * static_cast<size_t>(y - 1);
    }
    const size_t x_first = count / den * num + count % den * num / den;
    std::vector<Torus2dChannel> layout;
    for (size_t c = 0; c < kTorus2dChannels; ++c) {
        Torus2dChannel ch;
        ch.x_first = c < kTorus2dChannels / 2;
        ch.reversed = c % 4 >= 2;
        const size_t lo = ch.x_first ? 0 : x_first, hi = ch.x_first ? x_first : count;
        ch.begin = lo + piece_begin(hi - lo, 4, c % 4);
        ch.count = piece_size(hi - lo, 4, c % 4);
        // The second channel of each pair starts half a slice out of step.
        if (c % 2 == 1 && ch.count > slice) ch.lead = slice / 2;
        layout.push_back(ch);
    }
    return layout;
}

} // namespace

std::vector<Torus2dChannel> torus2d_layout(size_t count, int x, int y, size_t chunk) {
    return layout_in_slices(count, x, y, std::max<size_t>(1, chunk) * static_cast<size_t>(x) * static_cast<size_t>(y));
}

std::vector<Torus2dChannel> torus2d_block_layout(size_t count, int x, int y, size_t chunk) {
    return layout_in_slices(count, x, y, std::max<size_t>(1, chunk));
}

Schedule build_torus2d(const CollectiveArgs &args, int x, int y, const std::vector<int> &grid, Torus2dRings rings) {
    Schedule sched;
    sched.algorithm = "torus2d";
    const bool block_wise = args.collective == Collective::ReduceScatter || args.collective == Collective::Allgather;
    if ((args.collective != Collective::Allreduce && !block_wise) || x < 1 || y < 1 || x * y != args.nranks ||
        !is_permutation_of_ranks(grid, args.nranks))
        return sched; // not served: see builders.hpp
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    const ChannelGrid by_rows{x, y, grid};
    const ChannelGrid by_columns = by_rows.transposed();
    if (!block_wise) {
        const std::vector<Torus2dChannel> layout = torus2d_layout(args.count, x, y, chunk);
        sched.channels.resize(layout.size());
        for (size_t c = 0; c < layout.size(); ++c)
            allreduce_on_grid(layout[c].x_first ? by_rows : by_columns, args.rank, layout[c], chunk, rings,
                              sched.channels[c]);
        return sched;
    }
    const std::vector<Torus2dChannel> layout = torus2d_block_layout(args.count, x, y, chunk);
    sched.channels.resize(layout.size());
    for (size_t c = 0; c < layout.size(); ++c)
        blocks_on_grid(layout[c].x_first ? by_rows : by_columns, args, layout[c], chunk, sched.channels[c]);
    // Scratch holds partial sums, and packed slices: p·count elements
    // where any step uses it (torus2d_blocks.cpp).
    for (const auto &channel : sched.channels)
        for (const Step &step : channel)
            if (step.src.buf == Buf::Scratch || step.dst.buf == Buf::Scratch)
                sched.scratch_elems = args.count * static_cast<size_t>(args.nranks);
    return sched;
}

Schedule build_torus2d(const CollectiveArgs &args, int x, int y) {
    std::vector<int> grid(static_cast<size_t>(std::max(0, x * y)));
    std::iota(grid.begin(), grid.end(), 0);
    return build_torus2d(args, x, y, grid);
}

// Its entry in the registry (registry.cpp): its cost, how it is built on a
// topology and how many channels it takes.
namespace {

// A rank's four ports; forward and backward along a dimension differ in
// the lowest bit.
enum Port { XForward, XBackward, YForward, YBackward };

// A ring phase of `size` positions, `times` over, its pieces each one
// message of `bytes`: one way size-1 of them, both ways size/2 forward and
// the rest backward beside them.
void add_ring_phase(int port, int size, size_t times, double bytes, bool both_ways, std::vector<PortMessage> &out) {
    const int ahead = both_ways ? size / 2 : size - 1, behind = size - 1 - ahead;
    for (size_t k = 0; k < times; ++k)
        for (int r = 1; r <= ahead; ++r) {
            out.push_back(PortMessage{port, bytes, r <= behind});
            if (r <= behind) out.push_back(PortMessage{port ^ 1, bytes});
        }
}

// A reduce-scatter's slice of m elements of each block (elem bytes each):
// its groups along the first dimension, then its blocks along the second;
// an allgather's the other way round.
void add_block_slice(Collective collective, double m, double elem, int a, int b, size_t chunk, int first, int second,
                     std::vector<PortMessage> &out) {
    const double q2 = messages(m, static_cast<double>(chunk));
    const bool packed = a > 1 && torus2d_packs(static_cast<size_t>(std::llround(m)), b, chunk);
    const double q1 = packed ? messages(b * m, static_cast<double>(chunk)) : b * q2;
    const auto along_first = static_cast<size_t>(q1) * static_cast<size_t>(a - 1);
    const auto along_second = static_cast<size_t>(q2) * static_cast<size_t>(b - 1);
    const PortMessage group_piece{first, q1 > 0 ? b * m * elem / q1 : 0};
    const PortMessage block_piece{second, q2 > 0 ? m * elem / q2 : 0};
    if (collective == Collective::ReduceScatter) {
        out.insert(out.end(), along_first, group_piece);
        out.insert(out.end(), along_second, block_piece);
    } else {
        out.insert(out.end(), along_second, block_piece);
        out.insert(out.end(), along_first, group_piece);
    }
}

// 2D torus (torus2d.cpp): the channels of torus2d_layout(), each a chain of
// messages on a rank's four ports X+, X-, Y+, Y- (see simulate_ports()):
// allreduce, per slice of E elements t(a-1) messages of E/(t·a) along the
// first dimension, 2(b-1) of E/(a·b) along the second, t(a-1) along the
// first again (a ring phase both ways: a/2 rounds of a message forward
// and one backward side by side, the last a-1-a/2 rounds in pairs);
// reduce-scatter, per slice of m elements of each block, q1(a-1)
// messages of b·m/q1 along the first and q2(b-1) of m/q2 along the second
// (allgather the other way round), q2 = ceil(m/C), q1 = ceil(b·m/C) packed,
// b·q2 not (torus2d_packs()). The ports take the latency and bandwidth of the
// grid's first row and column.
double predict_rings_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs, Torus2dRings rings) {
    const int p = args.nranks;
    const RankGrid *grid = t.torus();
    if (p <= 1 || grid == nullptr) return p <= 1 ? 0 : kInfinity;
    const double total = static_cast<double>(call_bytes(args)), elem = static_cast<double>(args.elem_size);
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    std::vector<int> row, column;
    for (int i = 0; i < grid->x; ++i) row.push_back(grid->rank(i, 0));
    for (int j = 0; j < grid->y; ++j) column.push_back(grid->rank(0, j));
    const RingEmbedding along_x = t.embed_ring(row), along_y = t.embed_ring(column);
    const std::vector<double> gbps = {along_x.bottleneck_gbps, along_x.bottleneck_gbps, along_y.bottleneck_gbps,
                                      along_y.bottleneck_gbps};
    const std::vector<double> latency = {along_x.hop_latency_us, along_x.hop_latency_us, along_y.hop_latency_us,
                                         along_y.hop_latency_us};
    const bool block_wise = args.collective != Collective::Allreduce;
    const std::vector<Torus2dChannel> layout = block_wise ? torus2d_block_layout(args.count, grid->x, grid->y, chunk)
                                                          : torus2d_layout(args.count, grid->x, grid->y, chunk);
    const size_t slice_elems = block_wise ? chunk : chunk * static_cast<size_t>(p);
    // Per channel: its full slices after the lead one, and their size.
    std::vector<size_t> full(layout.size());
    double most = 0;
    for (size_t c = 0; c < layout.size(); ++c) {
        full[c] = messages(static_cast<double>(layout[c].count - layout[c].lead), static_cast<double>(slice_elems));
        most = std::max(most, static_cast<double>(full[c]));
    }
    // Runs every channel with `scale` of its full slices. A ring phase run
    // both ways sends a message forward and one backward each round, side
    // by side (each way's next waits only for its own way's message: the
    // pair's later arrival is a little late for the other).
    auto simulate = [&](double scale) {
        std::vector<std::vector<PortMessage>> channels(layout.size());
        for (size_t c = 0; c < layout.size(); ++c) {
            const Torus2dChannel &ch = layout[c];
            const int a = ch.x_first ? grid->x : grid->y, b = ch.x_first ? grid->y : grid->x;
            const int first = ch.x_first ? (ch.reversed ? XBackward : XForward) : (ch.reversed ? YBackward : YForward);
            const int second = ch.x_first ? (ch.reversed ? YBackward : YForward) : (ch.reversed ? XBackward : XForward);
            auto add_slice = [&](double elems) {
                if (block_wise) {
                    add_block_slice(args.collective, elems, elem, a, b, chunk, first, second, channels[c]);
                    return;
                }
                const size_t row_slices = smallest_divisor_at_least(b, messages(elems, static_cast<double>(a) * chunk));
                const double row_piece = elems * elem / static_cast<double>(row_slices * static_cast<size_t>(a));
                const double column_piece = elems * elem / p;
                const bool rows_both_ways = rings == Torus2dRings::BothWays;
                add_ring_phase(first, a, row_slices, row_piece, rows_both_ways, channels[c]); // reduce-scatter
                add_ring_phase(second, b, 2, column_piece, rings != Torus2dRings::OneWay, channels[c]); // allreduce
                add_ring_phase(first, a, row_slices, row_piece, rows_both_ways, channels[c]); // allgather
            };
            if (ch.lead > 0) add_slice(static_cast<double>(ch.lead));
            if (full[c] == 0) continue;
            const double size = static_cast<double>(ch.count - ch.lead) / static_cast<double>(full[c]);
            const auto run = static_cast<size_t>(std::max(1.0, std::round(static_cast<double>(full[c]) * scale)));
            for (size_t k = 0; k < run; ++k) add_slice(size);
        }
        // A ring of two positions has one neighbour both ways: its forward
        // and backward messages share one directed link.
        for (auto &chain : channels)
            for (PortMessage &m : chain) {
                if (grid->x == 2 && m.port == XBackward) m.port = XForward;
                if (grid->y == 2 && m.port == YBackward) m.port = YForward;
            }
        return simulate_ports(channels, gbps, latency);
    };
    double transfer = 0;
    const double simulated = static_cast<double>(kSimulatedSlices);
    if (most <= simulated) {
        transfer = simulate(1.0);
    } else {
        // Full slices repeat: time grows by the same step per slice.
        const double many = simulate(simulated / most), half = simulate(simulated / 2 / most);
        transfer = many + (most - simulated) * (many - half) / (simulated / 2);
    }
    const bool reduced = args.collective != Collective::Allgather;
    return with_reduction(t, inputs, args.elem_size, transfer, reduced ? (p - 1.0) / p * total : 0.0);
}

// Allreduce's rings as the model has them fastest (ties to the fewer ways
// round), and their time; reduce-scatter and allgather run theirs one way.
std::pair<Torus2dRings, double> fastest_rings(const CollectiveArgs &args, const Topology &t,
                                              const CostInputs &inputs) {
    std::pair<Torus2dRings, double> best{Torus2dRings::OneWay, predict_rings_us(args, t, inputs, Torus2dRings::OneWay)};
    if (args.collective == Collective::Allreduce)
        for (Torus2dRings rings : {Torus2dRings::ColumnsBothWays, Torus2dRings::BothWays}) {
            const double rings_us = predict_rings_us(args, t, inputs, rings);
            if (rings_us < best.second) best = {rings, rings_us};
        }
    return best;
}

double predict_torus2d_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    return fastest_rings(args, t, inputs).second;
}

bool applies_on(const CollectiveArgs &args, const Topology &t, std::string *why_not) {
    const RankGrid *grid = t.torus();
    if (grid != nullptr && grid->x * grid->y == args.nranks) return true;
    if (why_not != nullptr)
        *why_not = grid == nullptr ? "needs ranks that fill a 2D torus or a block of one; topology '" + t.name() +
                                         "' has no torus grid"
                                   : "the ranks' grid is " + std::to_string(grid->x) + "x" + std::to_string(grid->y) +
                                         ", not " + std::to_string(args.nranks) + " ranks";
    return false;
}

Schedule build_on(const CollectiveArgs &args, const Topology &t) {
    const RankGrid *grid = t.torus();
    // Off the host, where the torus is, no figure of CostInputs enters a prediction.
    return build_torus2d(args, grid->x, grid->y, grid->rank_at, fastest_rings(args, t, CostInputs()).first);
}

int channels_on(const Topology &t) { return t.torus() != nullptr ? static_cast<int>(kTorus2dChannels) : 0; }

} // namespace

const AlgorithmInfo &torus2d_algorithm() {
    static const AlgorithmInfo info{
        "torus2d",
        "rings along X, then Y, then X, and along Y, X, Y on the transposed grid, both directions, two channels "
        "each (eight): 2(x+y-2) steps instead of the ring's 2(p-1); reduce-scatter along X then Y, allgather Y then X: "
        "x+y-2 steps instead of p-1",
        "a 2D torus whose rank grid x*y holds every rank (torus:XxY, nnpt-pod32, nnpt-pod1024)",
        {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather},
        build_on,
        applies_on,
        predict_torus2d_us,
        channels_on};
    return info;
}

} // namespace nnpccl
