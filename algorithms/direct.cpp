// Direct (one-shot) schedules: one round, every rank sending straight to
// every rank that needs its data, chunk by chunk. p ranks, α per message, β
// per byte, γ per byte reduced; n bytes is the allreduce buffer, the
// allgather output or the reduce-scatter input (p blocks of n/p):
//
//   allreduce       every rank sends its whole buffer to every other rank,
//                   then folds all p contributions into scratch in rank
//                   order 0, 1, ..., p-1 and copies the result out:
//                   α + (p-1)·nβ + (p-1)·nγ. One message latency instead of
//                   the ring's 2(p-1), at p-1 times the traffic.
//   allgather       every rank sends its block to every other rank and
//                   copies its own (in place it is there already):
//                   α + (p-1)/p·nβ, the ring's traffic in one round.
//   reduce-scatter  every rank sends block j of its input to rank j; rank j
//                   folds the p contributions to its block into scratch in
//                   rank order and copies the result out:
//                   α + (p-1)/p·nβ + (p-1)/p·nγ.
//
// Each receiver takes p-1 streams at once (incast) and the chunk rounds run
// in lock step, so these are for small messages; a block larger than a
// chunk costs one α per chunk, most of it hidden by the chunk in flight.
// Folding in the same order everywhere gives every rank of an allreduce the
// same bits (floating-point sums are not associative), in place or not, and
// a reduce-scatter the bits a direct allreduce of the same data has there.
// The fold goes to scratch before the output is written, so in place (the
// output is our own block of the input) nothing is overwritten that is
// still to be read.
#include <algorithm>

#include "builders.hpp"
#include "patterns.hpp"
#include "step_list.hpp"

namespace nnpccl {

namespace {

// Folds the p contributions to one piece into `acc` in rank order 0..p-1:
// ours from `mine`, the others' as they arrive.
void fold_in_rank_order(StepList &steps, int p, int me, BufRef mine, BufRef acc, size_t len) {
    for (int q = 0; q < p; ++q) {
        if (q == 0) {
            if (q == me) steps.add(kStore, -1, -1, mine, acc, len);
            else steps.add(kRecv | kStore, q, -1, {}, acc, len);
        } else if (q == me) {
            steps.add(kReduce | kStore, -1, -1, mine, acc, len);
        } else {
            steps.add(kRecv | kReduce | kStore, q, -1, acc, acc, len);
        }
    }
}

} // namespace

Schedule build_direct_allreduce(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "direct";
    sched.channels.resize(1);
    sched.scratch_elems = args.count;
    StepList steps(sched.channels[0]);
    const int p = args.nranks, me = args.rank;
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    for (size_t k = 0, n = balanced_pieces(args.count, chunk); k < n; ++k) {
        const size_t off = piece_begin(args.count, n, k);
        const size_t len = piece_size(args.count, n, k);
        const BufRef mine{Buf::Send, off}, acc{Buf::Scratch, off};
        // Sends first: they copy our data out before anything is written.
        for (int j = 1; j < p; ++j) steps.add(kSend, -1, (me + j) % p, mine, {}, len);
        fold_in_rank_order(steps, p, me, mine, acc, len);
        // The copy out finishes avg: the divide happens once, here.
        steps.add(kStore, -1, -1, acc, BufRef{Buf::Recv, off}, len, true);
    }
    return sched;
}

Schedule build_direct_allgather(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "direct";
    if (args.collective != Collective::Allgather) return sched; // not served: see builders.hpp
    sched.channels.resize(1);
    StepList steps(sched.channels[0]);
    const int p = args.nranks, me = args.rank;
    auto peer = [&](int offset) { return ((me + offset) % p + p) % p; };
    auto block = [&](int rank) { return static_cast<size_t>(rank) * args.count; };
    // Our own block: in place (send == recv + me·count) it is there already;
    // else the copy overlaps the first messages' flight.
    if (!args.in_place) steps.add(kStore, -1, -1, BufRef{Buf::Send, 0}, BufRef{Buf::Recv, block(me)}, args.count);
    for (const ElemRange &c : chunked(0, args.count, std::max<size_t>(1, args.chunk_elems))) {
        // Each rank starts with the rank after it, so the ranks' first
        // messages of a round go to p different receivers, not all to one;
        // and it first takes the message of the rank before it, which that
        // rank sent first.
        for (int k = 1; k < p; ++k) steps.add(kSend, -1, peer(k), BufRef{Buf::Send, c.begin}, {}, c.size());
        for (int k = 1; k < p; ++k)
            steps.add(kRecv | kStore, peer(-k), -1, {}, BufRef{Buf::Recv, block(peer(-k)) + c.begin}, c.size());
    }
    return sched;
}

Schedule build_direct_reduce_scatter(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "direct";
    if (args.collective != Collective::ReduceScatter) return sched; // not served: see builders.hpp
    sched.channels.resize(1);
    sched.scratch_elems = args.count;
    StepList steps(sched.channels[0]);
    const int p = args.nranks, me = args.rank;
    auto block = [&](int rank) { return static_cast<size_t>(rank) * args.count; };
    for (const ElemRange &c : chunked(0, args.count, std::max<size_t>(1, args.chunk_elems))) {
        const BufRef mine{Buf::Send, block(me) + c.begin}, acc{Buf::Scratch, c.begin};
        const size_t len = c.size();
        // Sends first, each rank starting with the rank after it: they read
        // only the other ranks' blocks, which nothing here writes.
        for (int k = 1; k < p; ++k) {
            const int to = (me + k) % p;
            steps.add(kSend, -1, to, BufRef{Buf::Send, block(to) + c.begin}, {}, len);
        }
        fold_in_rank_order(steps, p, me, mine, acc, len);
        // The copy out finishes avg: the divide happens once, here. In
        // place it overwrites our block of the input, read above.
        steps.add(kStore, -1, -1, acc, BufRef{Buf::Recv, c.begin}, len, true);
    }
    return sched;
}

} // namespace nnpccl
