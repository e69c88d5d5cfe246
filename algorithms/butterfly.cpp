// The butterfly of recursive halving-doubling, on a pairing given by a
// HalvingDoublingPattern and a part of the data (butterfly.hpp).
#include "butterfly.hpp"

#include <algorithm>

#include "step_list.hpp"

namespace nnpccl {

namespace {

using Chunks = std::vector<ElemRange>;

class Butterfly {
public:
    Butterfly(const CollectiveArgs &args, const HalvingDoublingPattern &pattern, ButterflyPart part,
              std::vector<Step> &out)
        : args_(args), hd_(pattern), part_(part), steps_(out), chunk_(std::max<size_t>(1, args.chunk_elems)) {}

    void allreduce();
    void doubling_allreduce();
    void reduce_scatter();
    void allgather();

private:
    bool blockwise() const { return args_.collective != Collective::Allreduce; }
    size_t part_size() const { return part_.hi - part_.lo; }
    // Where virtual rank v's piece of an allreduce's part starts.
    size_t piece_start(int v) const {
        return part_.lo + piece_begin(part_size(), static_cast<size_t>(hd_.active_count()), static_cast<size_t>(v));
    }
    Chunks chunks(size_t begin, size_t end) const { return chunked(begin, end, chunk_); }
    // The shares of virtual ranks [lo, hi) as messages: a run of pieces of
    // an allreduce; for the block-wise collectives, the part of each block
    // of the ranks they stand for, blocks that touch in one run.
    Chunks units(int lo, int hi) const {
        if (!blockwise()) return chunks(piece_start(lo), piece_start(hi));
        std::vector<ElemRange> runs;
        for (int v = lo; v < hi; ++v)
            for (int q = hd_.first_rank_of(v); q <= hd_.last_rank_of(v); ++q) {
                const ElemRange r = block_part(q);
                if (!runs.empty() && runs.back().end == r.begin)
                    runs.back().end = r.end;
                else
                    runs.push_back(r);
            }
        Chunks out;
        for (const ElemRange &r : runs) {
            Chunks c = chunks(r.begin, r.end);
            out.insert(out.end(), c.begin(), c.end());
        }
        return out;
    }
    ElemRange block_part(int q) const {
        const size_t start = static_cast<size_t>(q) * args_.count;
        return ElemRange{start + part_.lo, start + part_.hi};
    }
    // Virtual rank v's share cut at its ranks' block boundaries, so that
    // no message of the last halving round mixes two ranks' results.
    Chunks blocks_of(int v) const {
        Chunks out;
        for (int q = hd_.first_rank_of(v); q <= hd_.last_rank_of(v); ++q) {
            Chunks c = block_chunks(q);
            out.insert(out.end(), c.begin(), c.end());
        }
        return out;
    }
    Chunks block_chunks(int q) const {
        const ElemRange r = block_part(q);
        return chunks(r.begin, r.end);
    }
    // The virtual ranks whose shares the round of `mask` swaps during the
    // doubling: ours gathered so far, and the partner's.
    static int group_start(int v, int mask) { return v & ~(mask - 1); }

    // Sends `outgoing` from `from` to `peer` while receiving `incoming` from
    // it, message by message, each send part.sends_ahead messages ahead of
    // its receive: with both partners sending first, sends_ahead + 1 free
    // slots per stream are enough for the swap to progress.
    template <typename OnReceive>
    void exchange(int peer, const Chunks &outgoing, Buf from, const Chunks &incoming, OnReceive on_receive) {
        size_t sent = 0;
        auto send_up_to = [&](size_t last) {
            for (; sent < outgoing.size() && sent <= last; ++sent)
                steps_.add(kSend, -1, peer, BufRef{from, outgoing[sent].begin}, {}, outgoing[sent].size());
        };
        for (size_t i = 0; i < incoming.size(); ++i) {
            send_up_to(i + part_.sends_ahead);
            on_receive(incoming[i]);
        }
        send_up_to(outgoing.size());
    }

    // Recursive halving from `local`; the receive of each chunk is emitted
    // by reduce_chunk(chunk, partner, local, last_round).
    template <typename ReduceChunk> void halving(Buf local, Buf accumulator, ReduceChunk reduce_chunk) {
        const int v = hd_.virtual_rank();
        int lo = 0, hi = hd_.active_count();
        for (int mask = hd_.active_count() / 2; mask >= 1; mask /= 2) {
            const int mid = lo + mask;
            const bool upper = (v & mask) != 0;
            const int keep_lo = upper ? mid : lo, keep_hi = upper ? hi : mid;
            const int give_lo = upper ? lo : mid, give_hi = upper ? mid : hi;
            const bool last = mask == 1;
            const int partner = hd_.exchange_partner(mask);
            const Chunks give = last && blockwise() ? blocks_of(give_lo) : units(give_lo, give_hi);
            const Chunks keep = last && blockwise() ? blocks_of(keep_lo) : units(keep_lo, keep_hi);
            exchange(partner, give, local, keep, [&](const ElemRange &c) { reduce_chunk(c, partner, local, last); });
            local = accumulator;
            lo = keep_lo;
            hi = keep_hi;
        }
    }

    // Recursive doubling in the receive buffer; every chunk that arrives
    // is forwarded to `forward_to` too when it is a rank.
    void doubling(int forward_to) {
        const int v = hd_.virtual_rank();
        const uint8_t forward = forward_to >= 0 ? kSend : 0;
        for (int mask = 1; mask < hd_.active_count(); mask *= 2) {
            const int mine = group_start(v, mask), theirs = group_start(v ^ mask, mask);
            const int partner = hd_.exchange_partner(mask);
            auto receive = [&](const ElemRange &c) {
                steps_.add(kRecv | kStore | forward, partner, forward_to, {}, BufRef{Buf::Recv, c.begin}, c.size());
            };
            exchange(partner, units(mine, mine + mask), Buf::Recv, units(theirs, theirs + mask), receive);
        }
    }

    // An extra rank's side of doubling(): the same chunks, in the order its
    // active rank forwards them.
    void receive_doubling_from(int active) {
        const int v = hd_.virtual_rank();
        for (int mask = 1; mask < hd_.active_count(); mask *= 2) {
            const int theirs = group_start(v ^ mask, mask);
            for (const ElemRange &c : units(theirs, theirs + mask))
                steps_.add(kRecv | kStore, active, -1, {}, BufRef{Buf::Recv, c.begin}, c.size());
        }
    }

    // One rank alone: its data is the result.
    void copy_alone() {
        for (const ElemRange &c : chunks(part_.lo, part_.hi))
            steps_.add(kStore, -1, -1, BufRef{Buf::Send, c.begin}, BufRef{Buf::Recv, c.begin}, c.size(), true);
    }

    // An extra rank of an allreduce: its data to its active rank, whose
    // result comes back in the order given.
    template <typename ReceiveResult> void extra_allreduce(ReceiveResult receive_result) {
        for (const ElemRange &c : chunks(part_.lo, part_.hi))
            steps_.add(kSend, -1, hd_.fold_partner(), BufRef{Buf::Send, c.begin}, {}, c.size());
        receive_result();
    }

    // An active rank with an extra takes the extra's data into its own,
    // in the receive buffer; returns where its partial sums are.
    Buf fold_in() {
        const int partner = hd_.fold_partner();
        if (partner < 0) return Buf::Send;
        for (const ElemRange &c : chunks(part_.lo, part_.hi))
            steps_.add(kRecv | kReduce | kStore, partner, -1, BufRef{Buf::Send, c.begin}, BufRef{Buf::Recv, c.begin},
                       c.size());
        return Buf::Recv;
    }

    const CollectiveArgs &args_;
    const HalvingDoublingPattern &hd_;
    ButterflyPart part_;
    StepList steps_;
    size_t chunk_;
};

void Butterfly::allreduce() {
    if (args_.nranks == 1) return copy_alone();
    const int partner = hd_.fold_partner();
    if (hd_.is_extra()) {
        // The result comes back as the active rank finishes it: its own
        // share from the last halving round, then each doubling round's.
        return extra_allreduce([&] {
            const int v = hd_.virtual_rank();
            for (const ElemRange &c : units(v, v + 1))
                steps_.add(kRecv | kStore, partner, -1, {}, BufRef{Buf::Recv, c.begin}, c.size());
            receive_doubling_from(partner);
        });
    }
    const Buf local = fold_in();
    const uint8_t forward = partner >= 0 ? kSend : 0;
    halving(local, Buf::Recv, [&](const ElemRange &c, int from, Buf operand, bool last) {
        steps_.add(static_cast<uint8_t>(kRecv | kReduce | kStore | (last ? forward : 0)), from, partner,
                   BufRef{operand, c.begin}, BufRef{Buf::Recv, c.begin}, c.size(), last);
    });
    doubling(partner);
}

void Butterfly::doubling_allreduce() {
    if (args_.nranks == 1) return copy_alone();
    const int partner = hd_.fold_partner();
    const Chunks all = chunks(part_.lo, part_.hi);
    if (hd_.is_extra()) {
        return extra_allreduce([&] {
            for (const ElemRange &c : all)
                steps_.add(kRecv | kStore, partner, -1, {}, BufRef{Buf::Recv, c.begin}, c.size());
        });
    }
    // Each round reads the partial sum it sends and writes the next one
    // elsewhere: a transport may still be sending the chunk from where it
    // lies (in place, from the caller's buffer), and the partner frees it
    // only in the same round. Rounds alternate between two scratch areas;
    // the last writes the receive buffer unless the round's input lies there.
    BufRef in{fold_in(), 0};
    const uint8_t forward = partner >= 0 ? kSend : 0;
    int round = 0;
    // The doubling's rounds: each rank's partial sum covers the labels of
    // its group, as in the allgather, so no contribution is counted twice.
    for (int mask = 1; mask < hd_.active_count(); mask *= 2, ++round) {
        const bool last = 2 * mask == hd_.active_count();
        const bool input_in_recv = in.buf == Buf::Recv || (in.buf == Buf::Send && args_.in_place);
        const bool into_recv = last && !input_in_recv;
        const BufRef out =
            into_recv ? BufRef{Buf::Recv, 0} : BufRef{Buf::Scratch, static_cast<size_t>(round % 2) * args_.count};
        const int peer = hd_.exchange_partner(mask);
        // Each chunk is sent before the partner's same chunk is combined.
        for (const ElemRange &c : all) {
            steps_.add(kSend, -1, peer, BufRef{in.buf, in.offset + c.begin}, {}, c.size());
            steps_.add(static_cast<uint8_t>(kRecv | kReduce | kStore | (into_recv ? forward : 0)), peer, partner,
                       BufRef{in.buf, in.offset + c.begin}, BufRef{out.buf, out.offset + c.begin}, c.size(), last);
        }
        in = out;
    }
    if (in.buf == Buf::Recv) return;
    for (const ElemRange &c : all)
        steps_.add(static_cast<uint8_t>(kStore | forward), -1, partner, BufRef{in.buf, in.offset + c.begin},
                   BufRef{Buf::Recv, c.begin}, c.size());
}

void Butterfly::reduce_scatter() {
    const size_t block = args_.count;
    const size_t mine = static_cast<size_t>(args_.rank) * block;
    if (args_.nranks == 1) {
        for (const ElemRange &c : block_chunks(0))
            steps_.add(kStore, -1, -1, BufRef{Buf::Send, c.begin}, BufRef{Buf::Recv, c.begin}, c.size(), true);
        return;
    }
    const int partner = hd_.fold_partner();
    if (hd_.is_extra()) {
        for (const ElemRange &c : units(0, hd_.active_count()))
            steps_.add(kSend, -1, partner, BufRef{Buf::Send, c.begin}, {}, c.size());
        for (const ElemRange &c : block_chunks(args_.rank))
            steps_.add(kRecv | kStore, partner, -1, {}, BufRef{Buf::Recv, c.begin - mine}, c.size());
        return;
    }
    // Partial sums live in scratch: the receive buffer is one block, and in
    // place it is part of the send buffer the exchanges still read.
    Buf local = Buf::Send;
    if (partner >= 0) {
        for (const ElemRange &c : units(0, hd_.active_count()))
            steps_.add(kRecv | kReduce | kStore, partner, -1, BufRef{Buf::Send, c.begin}, BufRef{Buf::Scratch, c.begin},
                       c.size());
        local = Buf::Scratch;
    }
    halving(local, Buf::Scratch, [&](const ElemRange &c, int from, Buf operand, bool last) {
        const BufRef src{operand, c.begin};
        if (!last)
            steps_.add(kRecv | kReduce | kStore, from, -1, src, BufRef{Buf::Scratch, c.begin}, c.size());
        else if (c.begin >= mine && c.begin < mine + block)
            steps_.add(kRecv | kReduce | kStore, from, -1, src, BufRef{Buf::Recv, c.begin - mine}, c.size(), true);
        else // the extra rank's block, finished on its way there
            steps_.add(kRecv | kReduce | kSend, from, partner, src, {}, c.size(), true);
    });
}

void Butterfly::allgather() {
    const size_t block = args_.count;
    const size_t mine = static_cast<size_t>(args_.rank) * block;
    // In place, the send buffer already is our block of the receive buffer.
    const uint8_t copy_own = args_.in_place ? 0 : kStore;
    const int partner = hd_.fold_partner();
    if (hd_.is_extra()) {
        for (const ElemRange &c : block_chunks(args_.rank))
            steps_.add(kSend | copy_own, -1, partner, BufRef{Buf::Send, c.begin - mine}, BufRef{Buf::Recv, c.begin},
                       c.size());
        for (const ElemRange &c : block_chunks(partner))
            steps_.add(kRecv | kStore, partner, -1, {}, BufRef{Buf::Recv, c.begin}, c.size());
        receive_doubling_from(partner);
        return;
    }
    if (partner >= 0)
        for (const ElemRange &c : block_chunks(partner))
            steps_.add(kRecv | kStore, partner, -1, {}, BufRef{Buf::Recv, c.begin}, c.size());
    const uint8_t own = static_cast<uint8_t>(copy_own | (partner >= 0 ? kSend : 0));
    if (own != 0)
        for (const ElemRange &c : block_chunks(args_.rank))
            steps_.add(own, -1, partner, BufRef{Buf::Send, c.begin - mine}, BufRef{Buf::Recv, c.begin}, c.size());
    doubling(partner);
}

} // namespace

void butterfly_allreduce(const CollectiveArgs &args, const HalvingDoublingPattern &pattern, ButterflyPart part,
                         std::vector<Step> &out) {
    Butterfly(args, pattern, part, out).allreduce();
}

void butterfly_doubling_allreduce(const CollectiveArgs &args, const HalvingDoublingPattern &pattern, ButterflyPart part,
                                  std::vector<Step> &out) {
    Butterfly(args, pattern, part, out).doubling_allreduce();
}

void butterfly_reduce_scatter(const CollectiveArgs &args, const HalvingDoublingPattern &pattern, ButterflyPart part,
                              std::vector<Step> &out) {
    Butterfly(args, pattern, part, out).reduce_scatter();
}

void butterfly_allgather(const CollectiveArgs &args, const HalvingDoublingPattern &pattern, ButterflyPart part,
                         std::vector<Step> &out) {
    Butterfly(args, pattern, part, out).allgather();
}

} // namespace nnpccl
