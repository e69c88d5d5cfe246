// Direct (one-shot) schedules: one round, every rank sending straight to
// every rank that needs its data, chunk by chunk; the "direct" algorithm of
// every collective it serves. p ranks, α per message, β per byte, γ per
// byte reduced; n bytes is the allreduce buffer, the allgather output or
// the reduce-scatter input (p blocks of n/p), m bytes a block of gather,
// scatter or alltoall:
//
//   allreduce       every rank sends its whole buffer to every other rank,
//                   then folds all p contributions into the output in rank
//                   order 0, 1, ..., p-1:
//                   α + (p-1)·nβ + (p-1)·nγ. One message latency instead of
//                   the ring's 2(p-1), at p-1 times the traffic.
//   allgather       every rank sends its block to every other rank and
//                   copies its own (in place it is there already):
//                   α + (p-1)/p·nβ, the ring's traffic in one round.
//   reduce-scatter  every rank sends block j of its input to rank j; rank j
//                   folds the p contributions to its block into the output
//                   in rank order:
//                   α + (p-1)/p·nβ + (p-1)/p·nγ.
//   gather          every rank sends its block to the root: α + (p-1)·mβ
//   scatter         the root sends block q to rank q:       α + (p-1)·mβ
//                   (linear: the root exchanges one block with every other
//                   rank itself, taking the ranks in turn for each chunk,
//                   root+1, root+2, ..., so that every link carries a
//                   stream at once instead of one rank's whole block after
//                   another's. The (p-1)·m bytes all pass the root's one
//                   injection port, which a tree cannot avoid either: a
//                   binomial tree saves latency, log2 p·α, not bandwidth.)
//   alltoall        for each chunk, send it to all p-1 peers, then receive
//                   it from all of them: α + (p-1)·mβ, saving pairwise's
//                   (p-2)α (pairwise.cpp). It needs one slot per stream:
//                   every stream carries at most one message its receiver
//                   has not reached. In place it sends from copies in
//                   scratch (alltoall_in_place.hpp).
//
// Each receiver takes p-1 streams at once (incast) and the chunk rounds run
// in lock step, so these are for small messages; a block larger than a
// chunk costs one α per chunk, most of it hidden by the chunk in flight.
// Folding in the same order everywhere gives every rank of an allreduce the
// same bits (floating-point sums are not associative), in place or not, and
// a reduce-scatter the bits a direct allreduce of the same data has there.
// In place (the output is our own input, or our block of it) the fold goes
// to scratch and is copied out at the end, so that nothing is overwritten
// that is still to be read; out of place it goes straight to the output,
// which saves a pass over the result (reduce-scatter of 256 KiB on 2 ranks:
// 26.6 us with the copy out, 16-17.5 us without; the ring's 14).
#include <algorithm>

#include "alltoall_in_place.hpp"
#include "builders.hpp"
#include "cost_terms.hpp"
#include "patterns.hpp"
#include "registry.hpp"
#include "step_list.hpp"

namespace nnpccl {

namespace {

// Folds the p contributions to one piece into `acc` in rank order 0..p-1:
// ours from `mine`, the others' as they arrive. The last fold divides an
// avg when `finalize` (else the copy out of scratch does).
void fold_in_rank_order(StepList &steps, int p, int me, BufRef mine, BufRef acc, size_t len, bool finalize) {
    for (int q = 0; q < p; ++q) {
        const bool last = finalize && q == p - 1;
        if (q == 0) {
            if (q == me) steps.add(kStore, -1, -1, mine, acc, len, last);
            else steps.add(kRecv | kStore, q, -1, {}, acc, len, last);
        } else if (q == me) {
            steps.add(kReduce | kStore, -1, -1, mine, acc, len, last);
        } else {
            steps.add(kRecv | kReduce | kStore, q, -1, acc, acc, len, last);
        }
    }
}

// Where the fold of the piece at `offset` goes: see the file comment.
BufRef fold_target(const CollectiveArgs &args, size_t offset) {
    return args.in_place ? BufRef{Buf::Scratch, offset} : BufRef{Buf::Recv, offset};
}

bool valid_root(const CollectiveArgs &args) { return args.root >= 0 && args.root < args.nranks; }

// The rank `i` places after the root, wrapping.
int after_root(const CollectiveArgs &args, int i) { return (args.root + i) % args.nranks; }

size_t block_begin(const CollectiveArgs &args, int rank) { return static_cast<size_t>(rank) * args.count; }

} // namespace

Schedule build_direct_allreduce(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "direct";
    sched.channels.resize(1);
    sched.scratch_elems = args.in_place ? args.count : 0;
    StepList steps(sched.channels[0]);
    const int p = args.nranks, me = args.rank;
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    for (size_t k = 0, n = balanced_pieces(args.count, chunk); k < n; ++k) {
        const size_t off = piece_begin(args.count, n, k);
        const size_t len = piece_size(args.count, n, k);
        const BufRef mine{Buf::Send, off}, acc = fold_target(args, off);
        // Sends first: they copy our data out before anything is written.
        for (int j = 1; j < p; ++j) steps.add(kSend, -1, (me + j) % p, mine, {}, len);
        fold_in_rank_order(steps, p, me, mine, acc, len, !args.in_place);
        // In place the copy out finishes avg: the divide happens once, here.
        if (args.in_place) steps.add(kStore, -1, -1, acc, BufRef{Buf::Recv, off}, len, true);
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
    sched.scratch_elems = args.in_place ? args.count : 0;
    StepList steps(sched.channels[0]);
    const int p = args.nranks, me = args.rank;
    auto block = [&](int rank) { return static_cast<size_t>(rank) * args.count; };
    for (const ElemRange &c : chunked(0, args.count, std::max<size_t>(1, args.chunk_elems))) {
        const BufRef mine{Buf::Send, block(me) + c.begin}, acc = fold_target(args, c.begin);
        const size_t len = c.size();
        // Sends first, each rank starting with the rank after it: they read
        // only the other ranks' blocks, which nothing here writes.
        for (int k = 1; k < p; ++k) {
            const int to = (me + k) % p;
            steps.add(kSend, -1, to, BufRef{Buf::Send, block(to) + c.begin}, {}, len);
        }
        fold_in_rank_order(steps, p, me, mine, acc, len, !args.in_place);
        // In place the copy out finishes avg (the divide happens once,
        // here) and overwrites our block of the input, read above.
        if (args.in_place) steps.add(kStore, -1, -1, acc, BufRef{Buf::Recv, c.begin}, len, true);
    }
    return sched;
}

Schedule build_linear_gather(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "direct";
    if (args.collective != Collective::Gather || !valid_root(args)) return sched; // not served: see builders.hpp
    sched.channels.resize(1);
    StepList steps(sched.channels[0]);
    const std::vector<ElemRange> pieces = chunked(0, args.count, std::max<size_t>(1, args.chunk_elems));
    if (args.rank != args.root) {
        for (const ElemRange &c : pieces) steps.add(kSend, -1, args.root, BufRef{Buf::Send, c.begin}, {}, c.size());
        return sched;
    }
    // Our own block first: the copy overlaps the first messages' flight.
    if (!args.in_place)
        steps.add(kStore, -1, -1, BufRef{Buf::Send, 0}, BufRef{Buf::Recv, block_begin(args, args.rank)}, args.count);
    for (const ElemRange &c : pieces)
        for (int i = 1; i < args.nranks; ++i) {
            const int from = after_root(args, i);
            steps.add(kRecv | kStore, from, -1, {}, BufRef{Buf::Recv, block_begin(args, from) + c.begin}, c.size());
        }
    return sched;
}

Schedule build_linear_scatter(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "direct";
    if (args.collective != Collective::Scatter || !valid_root(args)) return sched; // not served: see builders.hpp
    sched.channels.resize(1);
    StepList steps(sched.channels[0]);
    const std::vector<ElemRange> pieces = chunked(0, args.count, std::max<size_t>(1, args.chunk_elems));
    if (args.rank != args.root) {
        for (const ElemRange &c : pieces)
            steps.add(kRecv | kStore, args.root, -1, {}, BufRef{Buf::Recv, c.begin}, c.size());
        return sched;
    }
    for (const ElemRange &c : pieces)
        for (int i = 1; i < args.nranks; ++i) {
            const int to = after_root(args, i);
            steps.add(kSend, -1, to, BufRef{Buf::Send, block_begin(args, to) + c.begin}, {}, c.size());
        }
    // Our own block last: the copy overlaps the last messages' flight.
    if (!args.in_place)
        steps.add(kStore, -1, -1, BufRef{Buf::Send, block_begin(args, args.rank)}, BufRef{Buf::Recv, 0}, args.count);
    return sched;
}

Schedule build_direct_alltoall(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "direct";
    if (args.collective != Collective::Alltoall) return sched; // not served: see builders.hpp
    sched.channels.resize(1);
    copy_own_alltoall_block(args, sched);
    StepList steps(sched.channels[0]);
    const int p = args.nranks, me = args.rank;
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    auto peer = [&](int offset) { return ((me + offset) % p + p) % p; };
    auto block = [&](int rank) { return block_begin(args, rank); };
    // Chunk c's copies go to set c % 2; one set when a block is one chunk.
    const size_t sets = args.count > chunk ? 2 : 1;
    size_t set = 0;
    for (const ElemRange &c : chunked(0, args.count, chunk)) {
        // Each rank starts with the rank after it, so the ranks' first
        // messages of a round go to p different receivers, not all to one.
        for (int k = 1; k < p; ++k) {
            const BufRef from{args.in_place ? Buf::Recv : Buf::Send, block(peer(k)) + c.begin};
            if (args.in_place)
                send_from_copy(steps, peer(k), from, c.size(),
                               alltoall_copy_slot(args, chunk, sched, set, sets, k - 1, p - 1));
            else
                steps.add(kSend, -1, peer(k), from, {}, c.size());
        }
        set ^= 1;
        for (int k = 1; k < p; ++k)
            steps.add(kRecv | kStore, peer(-k), -1, {}, BufRef{Buf::Recv, block(peer(-k)) + c.begin}, c.size());
    }
    return sched;
}

// Its entry in the registry (registry.cpp): its cost, how it is built on a
// topology and how many channels it takes.
namespace {

// Direct: per chunk every transfer
// starts at once and the next chunk waits for them, so c = ceil(m / C)
// rounds of α (over a network transport within the host a rank's p - 1
// messages each pay it: round_alpha_us()) plus every byte through the most
// loaded link or port:
//   allreduce   c·α + (p-1)·Sβ (everyone's buffer to everyone) + (p-1)·Sγ
//   allgather   c·α + (p-1)·mβ out of and into every rank, m = S/p per rank
//   reduce-scatter  the same + (p-1)·mγ, each rank folding its block
//   gather      c·α + (p-1)·mβ into the root, m = S/p per rank (α once on
//               NNP-T: a sender's chunks stream back to back)
//   scatter     the same out of the root
//   alltoall    c·α + (p-1)·mβ out of and into every rank, m = S/p per pair
double predict_direct_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    if (p <= 1) return 0;
    const double total = static_cast<double>(call_bytes(args)), chunk = chunk_bytes(args);
    const double per_pair = args.collective == Collective::Allreduce ? total : total / p;
    // Every rank sends to every other but in gather and scatter: there only
    // the traced sources' p - 1 transfers each are built (all p(p-1) on
    // 16,384 ranks would take 6 GB), and every rank's ports carry the same.
    const bool to_all = args.collective != Collective::Gather && args.collective != Collective::Scatter;
    const int stride = to_all ? tracing_stride(p, p - 1.0) : 1;
    std::vector<Flow> flows;
    flows.reserve(to_all ? static_cast<size_t>((p + stride - 1) / stride) * static_cast<size_t>(p - 1)
                         : static_cast<size_t>(p - 1));
    for (int a = 0; a < p; a += stride)
        for (int b = 0; b < p; ++b) {
            if (a == b) continue;
            const bool wanted = args.collective == Collective::Gather    ? b == args.root
                                : args.collective == Collective::Scatter ? a == args.root
                                                                         : true;
            if (wanted) flows.push_back({a, b, per_pair});
        }
    const FlowCost cost = concurrent(t, flows);
    // Gather's senders and scatter's root send their chunks back to back
    // through the streams' slots, so on NNP-T, where α is the links'
    // latency, only the first chunk's is exposed; the other collectives'
    // chunk rounds run in lock step, each waiting for the last.
    const bool streams = args.collective == Collective::Gather || args.collective == Collective::Scatter;
    const double rounds = streams && t.machine().shape() != Shape::Flat ? 1 : messages(per_pair, chunk);
    const double transfer = rounds * round_alpha_us(t, inputs, flows, cost.latency_us) + cost.transfer_us;
    const double reduced = args.collective == Collective::Allreduce       ? (p - 1.0) * total
                           : args.collective == Collective::ReduceScatter ? (p - 1.0) * per_pair
                                                                          : 0;
    return host_lockstep(t, inputs, with_reduction(t, inputs, args.elem_size, transfer, reduced));
}

Schedule build_on(const CollectiveArgs &args, const Topology &) {
    switch (args.collective) {
    case Collective::Gather: return build_linear_gather(args);
    case Collective::Scatter: return build_linear_scatter(args);
    case Collective::Alltoall: return build_direct_alltoall(args);
    case Collective::Allgather: return build_direct_allgather(args);
    case Collective::ReduceScatter: return build_direct_reduce_scatter(args);
    default: return build_direct_allreduce(args);
    }
}

} // namespace

const AlgorithmInfo &direct_algorithm() {
    static const AlgorithmInfo info{
        "direct",
        "one round: every rank sends straight to every rank that needs its data (allreduce: its whole buffer to all; "
        "allgather: its block to all; reduce-scatter: block j to rank j; gather, scatter: to or from the root; "
        "alltoall: every block at once)",
        "",
        {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather, Collective::Gather,
         Collective::Scatter, Collective::Alltoall},
        build_on,
        applies_with_valid_root,
        predict_direct_us,
        one_channel};
    return info;
}

} // namespace nnpccl
