// The 2D torus's reduce-scatter and allgather (torus2d.cpp's header has
// the layout, the shares and the cost): per channel, slices of each block
// along the channel's first dimension as groups of the column's blocks,
// then along the second as the blocks themselves (allgather the other way
// round), on rings of parts that each go round on their own.
#include <algorithm>
#include <utility>

#include "patterns.hpp"
#include "step_list.hpp"
#include "torus2d_grid.hpp"

namespace nnpccl {

// Whether a slice of `slice` elements of each block travels its first
// dimension packed: its b blocks' parts one after another in scratch, so
// that a message carries all of them (ceil(b·slice / C) messages per hop
// instead of b·ceil(slice / C)). Packing costs a copy of the slice of
// every block, so only where it saves messages: small slices, where the
// hops' α is the time.
bool torus2d_packs(size_t slice, int b, size_t chunk) {
    const auto blocks = static_cast<size_t>(b);
    return b > 1 && balanced_pieces(blocks * slice, chunk) < blocks * balanced_pieces(slice, chunk);
}

namespace {

// One message of a reduce-scatter or allgather phase: this rank's copy of
// its elements (`mine`: the operand it adds, or what it sends first) and
// where they land (`out`: the partial or the result). `copy_mine`: an
// allgather's first send also stores `mine` at `out`.
struct Part {
    BufRef mine;
    BufRef out;
    size_t count = 0;
    bool copy_mine = false;
};
using Piece = std::vector<Part>; // the parts of one ring position, the same sizes at every position

// A ring's reduce-scatter and allgather over pieces of several parts:
// each part goes round the ring on its own, as the ring's chunks do
// (hierarchical.cpp's host ring alike), so one message is in flight per
// stream and two slots keep it moving.
class PartRing {
public:
    PartRing(const RingPattern &ring, std::vector<Piece> pieces, std::vector<Step> &out)
        : ring_(ring), pieces_(std::move(pieces)), steps_(out) {}

    void reduce_scatter(bool finalize) {
        const int p = ring_.size(), me = ring_.position();
        for (size_t k = 0; k < pieces_.front().size(); ++k) {
            add(kSend, part(me - 1, k).mine, {}, part(me - 1, k).count);
            for (int s = 1; s <= p - 2; ++s)
                add(kRecv | kReduce | kSend, part(me - 1 - s, k).mine, {}, part(me - 1 - s, k).count);
            const Part &last = part(me, k);
            add(kRecv | kReduce | kStore, last.mine, last.out, last.count, finalize);
        }
    }
    void allgather() {
        const int p = ring_.size(), me = ring_.position();
        for (size_t k = 0; k < pieces_.front().size(); ++k) {
            const Part &own = part(me, k);
            add(static_cast<uint8_t>(kSend | (own.copy_mine ? kStore : 0)), own.mine, own.out, own.count);
            for (int s = 1; s <= p - 2; ++s)
                add(kRecv | kStore | kSend, {}, part(me - s, k).out, part(me - s, k).count);
            add(kRecv | kStore, {}, part(me + 1, k).out, part(me + 1, k).count);
        }
    }

private:
    const Part &part(int pos, size_t k) const { return pieces_[static_cast<size_t>(wrap(pos, ring_.size()))][k]; }
    void add(uint8_t flags, BufRef src, BufRef dst, size_t count, bool finalize = false) {
        steps_.add(flags, ring_.prev(), ring_.next(), src, dst, count, finalize);
    }
    const RingPattern &ring_;
    std::vector<Piece> pieces_;
    StepList steps_;
};

// A channel's slices of its elements of each block: the short lead one
// (the second channel of a pair), then slices of at most a chunk: one
// slice below a chunk of each block (packed, x+y-2 messages where it fits
// one), which ran faster in ccl-sim than slices of a chunk of a group,
// whose second-dimension messages are b times more.
std::vector<ElemRange> block_slices(const Torus2dChannel &channel, size_t chunk) {
    std::vector<ElemRange> slices;
    const size_t end = channel.begin + channel.count, rest = channel.begin + channel.lead;
    if (channel.lead > 0) slices.push_back(ElemRange{channel.begin, rest});
    for (const ElemRange &s : chunked(rest, end, chunk)) slices.push_back(s);
    return slices;
}

// Reduce-scatter and allgather of one channel's elements [begin, end) of
// every block (block b of the send, or receive, buffer at b·count) on
// `grid`: a group is the b blocks of the ranks of one column (first
// coordinate i), the blocks that column's ring reduces or gathers; the
// rows move whole groups. For slice [sb, se) of m elements, block (i, j)'s
// part sits in scratch at p·sb + (i·b + j)·m: the slices of all channels
// tile p·count elements, and a group's parts are one range.
class BlockPhases {
public:
    BlockPhases(const ChannelGrid &grid, const CollectiveArgs &args, size_t chunk, std::vector<Step> &out)
        : grid_(grid), args_(args), chunk_(chunk), out_(out) {
        const auto here = std::find(grid.rank_at.begin(), grid.rank_at.end(), args.rank) - grid.rank_at.begin();
        i_ = static_cast<int>(here) % grid.width;
        j_ = static_cast<int>(here) / grid.width;
    }

    void reduce_scatter(const ElemRange &slice) {
        const int a = grid_.width, b = grid_.height;
        const bool packed = a > 1 && torus2d_packs(slice.size(), b, chunk_);
        if (a == 1 && b == 1) {
            StepList(out_).add(kStore, -1, -1, block(args_.rank, slice.begin), BufRef{Buf::Recv, slice.begin},
                               slice.size(), true);
            return;
        }
        if (packed)
            for (int i = 0; i < a; ++i)
                for (int j = 0; j < b; ++j)
                    StepList(out_).add(kStore, -1, -1, block(grid_.at(i, j), slice.begin),
                                       scratch(slice, i, j, slice.begin), slice.size());
        // Along the first dimension: the rank at i ends with its row's sum
        // of group i, in scratch (the receive buffer when the group is one block).
        if (a > 1) {
            std::vector<Piece> groups = row_groups(slice, packed, [&](int i, int j, const ElemRange &r) {
                return Part{block(grid_.at(i, j), r.begin),
                            b > 1 ? scratch(slice, i, j, r.begin) : BufRef{Buf::Recv, r.begin}, r.size()};
            });
            const RingPattern row(grid_.row(j_, reversed_), args_.rank);
            PartRing(row, by_position(std::move(groups)), out_).reduce_scatter(b == 1);
        }
        // Along the second: the column's ring sums each block's row partials into its rank.
        if (b > 1) {
            std::vector<Piece> blocks;
            for (int j = 0; j < b; ++j) {
                Piece piece;
                for (const ElemRange &r : chunked(slice.begin, slice.end, chunk_))
                    piece.push_back({a > 1 ? scratch(slice, i_, j, r.begin) : block(grid_.at(i_, j), r.begin),
                                     BufRef{Buf::Recv, r.begin}, r.size()});
                blocks.push_back(std::move(piece));
            }
            const RingPattern column(grid_.column(i_, reversed_), args_.rank);
            PartRing(column, by_position(std::move(blocks)), out_).reduce_scatter(true);
        }
    }

    void allgather(const ElemRange &slice) {
        const int a = grid_.width, b = grid_.height;
        const bool packed = a > 1 && torus2d_packs(slice.size(), b, chunk_);
        const bool in_place = args_.in_place;
        if (a == 1 && b == 1) {
            if (!in_place)
                StepList(out_).add(kStore, -1, -1, BufRef{Buf::Send, slice.begin}, gathered(args_.rank, slice.begin),
                                   slice.size());
            return;
        }
        // Where block (i, j)'s part lands first: scratch when packed, else its place in the receive buffer.
        auto landing = [&](int i, int j, size_t e) {
            return packed ? scratch(slice, i, j, e) : gathered(grid_.at(i, j), e);
        };
        // Along the second dimension: the column's blocks, this rank's from its send buffer.
        if (b > 1) {
            std::vector<Piece> blocks;
            for (int j = 0; j < b; ++j) {
                Piece piece;
                for (const ElemRange &r : chunked(slice.begin, slice.end, chunk_))
                    piece.push_back(
                        {BufRef{Buf::Send, r.begin}, landing(i_, j, r.begin), r.size(), packed || !in_place});
                blocks.push_back(std::move(piece));
            }
            const RingPattern column(grid_.column(i_, reversed_), args_.rank);
            PartRing(column, by_position(std::move(blocks)), out_).allgather();
        }
        // Along the first: whole groups.
        if (a > 1) {
            std::vector<Piece> groups = row_groups(slice, packed, [&](int i, int j, const ElemRange &r) {
                // The rank's own block is in its send buffer still when no column went first.
                const bool own = b == 1 && i == i_;
                return Part{own ? BufRef{Buf::Send, r.begin} : landing(i, j, r.begin), landing(i, j, r.begin), r.size(),
                            own && !in_place};
            });
            const RingPattern row(grid_.row(j_, reversed_), args_.rank);
            PartRing(row, by_position(std::move(groups)), out_).allgather();
        }
        if (packed)
            for (int i = 0; i < a; ++i)
                for (int j = 0; j < b; ++j)
                    if (!(in_place && grid_.at(i, j) == args_.rank))
                        StepList(out_).add(kStore, -1, -1, scratch(slice, i, j, slice.begin),
                                           gathered(grid_.at(i, j), slice.begin), slice.size());
    }

    void set_reversed(bool reversed) { reversed_ = reversed; }

private:
    // Pieces by coordinate as pieces by ring position: a reversed ring
    // runs through the coordinates from the last.
    std::vector<Piece> by_position(std::vector<Piece> pieces) const {
        if (reversed_) std::reverse(pieces.begin(), pieces.end());
        return pieces;
    }
    BufRef block(int owner, size_t e) const { return BufRef{Buf::Send, static_cast<size_t>(owner) * args_.count + e}; }
    BufRef gathered(int owner, size_t e) const {
        return BufRef{Buf::Recv, static_cast<size_t>(owner) * args_.count + e};
    }
    BufRef scratch(const ElemRange &slice, int i, int j, size_t e) const {
        const auto p = static_cast<size_t>(args_.nranks);
        const size_t group = static_cast<size_t>(i) * static_cast<size_t>(grid_.height) + static_cast<size_t>(j);
        return BufRef{Buf::Scratch, p * slice.begin + group * slice.size() + (e - slice.begin)};
    }
    // The groups a row's ring moves, group i holding the slice's part of
    // blocks (i, 0..b-1): packed, one after another in scratch as chunks
    // that stay where they are; else each block's chunks as `part(i, j, r)`
    // says.
    template <class PartOf> std::vector<Piece> row_groups(const ElemRange &slice, bool packed, PartOf part) const {
        const int a = grid_.width, b = grid_.height;
        std::vector<Piece> groups(static_cast<size_t>(a));
        for (int i = 0; i < a; ++i) {
            Piece &piece = groups[static_cast<size_t>(i)];
            if (packed) {
                const size_t first = scratch(slice, i, 0, slice.begin).offset;
                for (const ElemRange &r : chunked(first, first + static_cast<size_t>(b) * slice.size(), chunk_))
                    piece.push_back({BufRef{Buf::Scratch, r.begin}, BufRef{Buf::Scratch, r.begin}, r.size()});
                continue;
            }
            for (int j = 0; j < b; ++j)
                for (const ElemRange &r : chunked(slice.begin, slice.end, chunk_)) piece.push_back(part(i, j, r));
        }
        return groups;
    }

    const ChannelGrid &grid_;
    const CollectiveArgs &args_;
    size_t chunk_;
    std::vector<Step> &out_;
    int i_ = 0, j_ = 0;
    bool reversed_ = false;
};

} // namespace

void blocks_on_grid(const ChannelGrid &grid, const CollectiveArgs &args, const Torus2dChannel &channel, size_t chunk,
                    std::vector<Step> &out) {
    BlockPhases phases(grid, args, chunk, out);
    phases.set_reversed(channel.reversed);
    for (const ElemRange &slice : block_slices(channel, chunk)) {
        if (args.collective == Collective::ReduceScatter)
            phases.reduce_scatter(slice);
        else
            phases.allgather(slice);
    }
}

} // namespace nnpccl
