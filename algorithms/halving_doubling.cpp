// Recursive halving-doubling (Rabenseifner). The p2 = 2^floor(log2 p)
// active ranks reduce-scatter by recursive halving (each round, swap half of
// the range still being reduced with the partner whose virtual rank differs
// in one bit, farthest bit first, and keep reducing the other half) and
// allgather by recursive doubling (the same pairs in reverse, each round
// swapping everything gathered so far). The r = p - p2 extra ranks fold
// their data into a neighbour first and get their result from it last (see
// HalvingDoublingPattern). p ranks, n bytes, α per message, β per byte, γ
// per byte reduced; exchanges run both directions at once:
//
//   allreduce       2·log2(p2)·α + 2(p2-1)/p2·nβ + (p2-1)/p2·nγ
//                   r > 0 adds α + nβ + nγ (fold in) and α + nβ (result
//                   back, forwarded chunk by chunk as it arrives, so it
//                   overlaps the allgather unless one NIC carries both)
//   reduce-scatter  log2(p2)·α + (p2-1)/p2·nβ + (p2-1)/p2·nγ  (n = whole send buffer)
//                   r > 0 adds α + nβ + nγ (fold in) and α + (n/p)β (block back)
//   allgather       log2(p2)·α + (p2-1)/p2·nβ               (n = whole receive buffer)
//                   r > 0 adds α + (n/p)β (block in) and α + (p-1)/p·nβ (forwarded back)
//
// Every message is at most a chunk, so an exchange of b bytes costs
// ceil(b / chunk) α, not one: the α terms above hold for n up to about
// p·chunk bytes. Each element is reduced in exactly one place and copied
// from there, so all ranks hold the same bits; the order of the combines
// differs from element to element (as the ring's does): exact for integer
// types, min and max, and the checks' integer-valued floats, and otherwise
// the usual floating-point reassociation, fixed for a given p and count.
#include <algorithm>

#include "builders.hpp"
#include "cost_terms.hpp"
#include "registry.hpp"
#include "patterns.hpp"
#include "step_list.hpp"

namespace nnpccl {

namespace {

using Chunks = std::vector<ElemRange>;

class HalvingDoubling {
public:
    HalvingDoubling(const CollectiveArgs &args, std::vector<Step> &out)
        : args_(args), hd_(args.nranks, args.rank), steps_(out), chunk_(std::max<size_t>(1, args.chunk_elems)) {}

    void allreduce();
    void reduce_scatter();
    void allgather();

private:
    bool blockwise() const { return args_.collective != Collective::Allreduce; }
    // Where virtual rank v's share of the buffer starts: a balanced piece
    // for allreduce, the blocks of the ranks it stands for otherwise.
    size_t unit_begin(int v) const {
        if (!blockwise())
            return piece_begin(args_.count, static_cast<size_t>(hd_.active_count()), static_cast<size_t>(v));
        return static_cast<size_t>(hd_.first_rank_of(v)) * args_.count;
    }
    Chunks chunks(size_t begin, size_t end) const { return chunked(begin, end, chunk_); }
    // The shares of virtual ranks [lo, hi) as messages.
    Chunks units(int lo, int hi) const { return chunks(unit_begin(lo), unit_begin(hi)); }
    // Virtual rank v's share cut at its ranks' block boundaries, so that
    // no message of the last halving round mixes two ranks' results.
    Chunks blocks_of(int v) const {
        Chunks out;
        for (int q = hd_.first_rank_of(v); q < hd_.first_rank_of(v + 1); ++q) {
            Chunks c = block_chunks(q);
            out.insert(out.end(), c.begin(), c.end());
        }
        return out;
    }
    Chunks block_chunks(int q) const {
        return chunks(static_cast<size_t>(q) * args_.count, static_cast<size_t>(q + 1) * args_.count);
    }
    // The virtual ranks whose shares the round of `mask` swaps during the
    // doubling: ours gathered so far, and the partner's.
    int group_start(int v, int mask) const { return v & ~(mask - 1); }

    // Sends `outgoing` from `from` to `peer` while receiving `incoming` from
    // it, alternating message by message: with both partners sending first,
    // a single free slot per stream is enough for the swap to progress.
    template <typename OnReceive>
    void exchange(int peer, const Chunks &outgoing, Buf from, const Chunks &incoming, OnReceive on_receive) {
        for (size_t i = 0; i < std::max(outgoing.size(), incoming.size()); ++i) {
            if (i < outgoing.size())
                steps_.add(kSend, -1, peer, BufRef{from, outgoing[i].begin}, {}, outgoing[i].size());
            if (i < incoming.size()) on_receive(incoming[i]);
        }
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

    const CollectiveArgs &args_;
    HalvingDoublingPattern hd_;
    StepList steps_;
    size_t chunk_;
};

void HalvingDoubling::allreduce() {
    if (args_.nranks == 1) {
        for (const ElemRange &c : chunks(0, args_.count))
            steps_.add(kStore, -1, -1, BufRef{Buf::Send, c.begin}, BufRef{Buf::Recv, c.begin}, c.size(), true);
        return;
    }
    const int partner = hd_.fold_partner();
    if (hd_.is_extra()) {
        for (const ElemRange &c : chunks(0, args_.count))
            steps_.add(kSend, -1, partner, BufRef{Buf::Send, c.begin}, {}, c.size());
        // The result comes back as the active rank finishes it: its own
        // share from the last halving round, then each doubling round's.
        const int v = hd_.virtual_rank();
        for (const ElemRange &c : units(v, v + 1))
            steps_.add(kRecv | kStore, partner, -1, {}, BufRef{Buf::Recv, c.begin}, c.size());
        receive_doubling_from(partner);
        return;
    }
    Buf local = Buf::Send;
    if (partner >= 0) {
        for (const ElemRange &c : chunks(0, args_.count))
            steps_.add(kRecv | kReduce | kStore, partner, -1, BufRef{Buf::Send, c.begin}, BufRef{Buf::Recv, c.begin},
                       c.size());
        local = Buf::Recv;
    }
    const uint8_t forward = partner >= 0 ? kSend : 0;
    halving(local, Buf::Recv, [&](const ElemRange &c, int from, Buf operand, bool last) {
        steps_.add(static_cast<uint8_t>(kRecv | kReduce | kStore | (last ? forward : 0)), from, partner,
                   BufRef{operand, c.begin}, BufRef{Buf::Recv, c.begin}, c.size(), last);
    });
    doubling(partner);
}

void HalvingDoubling::reduce_scatter() {
    const size_t block = args_.count;
    const size_t mine = static_cast<size_t>(args_.rank) * block;
    if (args_.nranks == 1) {
        for (const ElemRange &c : chunks(0, block))
            steps_.add(kStore, -1, -1, BufRef{Buf::Send, c.begin}, BufRef{Buf::Recv, c.begin}, c.size(), true);
        return;
    }
    const size_t total = block * static_cast<size_t>(args_.nranks);
    const int partner = hd_.fold_partner();
    if (hd_.is_extra()) {
        for (const ElemRange &c : chunks(0, total))
            steps_.add(kSend, -1, partner, BufRef{Buf::Send, c.begin}, {}, c.size());
        for (const ElemRange &c : block_chunks(args_.rank))
            steps_.add(kRecv | kStore, partner, -1, {}, BufRef{Buf::Recv, c.begin - mine}, c.size());
        return;
    }
    // Partial sums live in scratch: the receive buffer is one block, and in
    // place it is part of the send buffer the exchanges still read.
    Buf local = Buf::Send;
    if (partner >= 0) {
        for (const ElemRange &c : chunks(0, total))
            steps_.add(kRecv | kReduce | kStore, partner, -1, BufRef{Buf::Send, c.begin},
                       BufRef{Buf::Scratch, c.begin}, c.size());
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

void HalvingDoubling::allgather() {
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

Schedule build_halving_doubling(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "halving_doubling";
    const Collective coll = args.collective;
    if (coll != Collective::Allreduce && coll != Collective::ReduceScatter && coll != Collective::Allgather)
        return sched; // not served: see builders.hpp
    sched.channels.resize(1);
    HalvingDoubling hd(args, sched.channels[0]);
    if (coll == Collective::Allreduce) {
        hd.allreduce();
    } else if (coll == Collective::ReduceScatter) {
        if (args.nranks > 1) sched.scratch_elems = args.count * static_cast<size_t>(args.nranks);
        hd.reduce_scatter();
    } else {
        hd.allgather();
    }
    return sched;
}

// Its entry in the registry (registry.cpp): its cost, how it is built on a
// topology and how many channels it takes.
namespace {

// Halving-doubling (halving_doubling.cpp): p2 = 2^floor(log2 p) active
// ranks, log2 p2 rounds per phase; in halving round j (partners differ in
// bit p2/2^(j+1)) every active rank swaps S/2^(j+1) with its partner, at
// ceil(that / C)·α plus the swap's bytes through the links their routes
// share; doubling runs the rounds backwards. The r = p - p2 extra ranks
// fold into a neighbour first (α + Sβ + Sγ) and get their result after:
// on the host that adds its bytes, on NNP-T it trails the allgather chunk
// by chunk and adds one chunk.
double predict_halving_doubling_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    if (p <= 1) return 0;
    const double total = static_cast<double>(call_bytes(args)), chunk = chunk_bytes(args);
    const HalvingDoublingPattern pattern(p, 0);
    const int active = pattern.active_count(), extras = p - active;
    const bool host = t.machine().shape() == Shape::Flat;
    auto exchange = [&](int mask, double bytes) {
        std::vector<Flow> flows;
        for (int v = 0; v < active; ++v) flows.push_back({pattern.active_rank(v), pattern.active_rank(v ^ mask), bytes});
        return flows;
    };
    auto fold = [&](double bytes, bool into_active) {
        std::vector<Flow> flows;
        for (int v = 0; v < extras; ++v)
            flows.push_back(into_active ? Flow{2 * v, 2 * v + 1, bytes} : Flow{2 * v + 1, 2 * v, bytes});
        return flows;
    };
    // Every partner's route, one search per rank.
    std::vector<Flow> partners = fold(0, true), back = fold(0, false);
    partners.insert(partners.end(), back.begin(), back.end());
    for (int mask = 1; mask < active; mask <<= 1) {
        const std::vector<Flow> round = exchange(mask, 0);
        partners.insert(partners.end(), round.begin(), round.end());
    }
    RouteTable routes(t);
    routes.trace(partners);
    auto time_us = [&](const std::vector<Flow> &flows) {
        const FlowCost cost = concurrent(t, flows, &routes);
        return flows.empty() ? 0 : messages(flows.front().bytes, chunk) * cost.latency_us + cost.transfer_us;
    };
    const bool halving = args.collective != Collective::Allgather;
    const bool doubling = args.collective != Collective::ReduceScatter;
    double us = 0;
    for (int j = 0; j < pattern.rounds(); ++j) {
        if (halving) us += time_us(exchange(active >> (j + 1), total / (2 << j))); // S/2, S/4, ...
        if (doubling) us += time_us(exchange(1 << j, total / active * (1 << j)));   // S/p2, 2S/p2, ...
    }
    double reduced = halving ? (active - 1.0) / active * total : 0;
    if (extras > 0) {
        // What goes to the active rank first, and what comes back last.
        const double in = args.collective == Collective::Allgather ? total / p : total;
        const double back = args.collective == Collective::Allreduce       ? total
                            : args.collective == Collective::ReduceScatter ? total / p
                                                                           : (p - 1.0) / p * total;
        us += time_us(fold(in, true));
        us += time_us(fold(host ? back : std::min(back, chunk), false));
        if (args.collective != Collective::Allgather) reduced += total;
    }
    return host_lockstep(t, inputs, with_reduction(t, inputs, args.elem_size, us, reduced));
}

Schedule build_on(const CollectiveArgs &args, const Topology &) { return build_halving_doubling(args); }

} // namespace

const AlgorithmInfo &halving_doubling_algorithm() {
    static const AlgorithmInfo info{
        "halving_doubling",
        "recursive halving then doubling (Rabenseifner): log2 p exchanges per phase; ranks beyond a power of two "
        "fold into a neighbour",
        "",
        {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather},
        build_on,
        applies_with_valid_root,
        predict_halving_doubling_us,
        one_channel};
    return info;
}

} // namespace nnpccl
