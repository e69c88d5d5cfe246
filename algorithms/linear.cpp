// Linear (direct) gather and scatter: the root exchanges one block with
// every other rank itself, chunk by chunk, taking the ranks in turn for
// each chunk (root+1, root+2, ...) so that every link carries a stream at
// once instead of one rank's whole block after another's. p ranks, m bytes
// per block, α per message, β per byte:
//
//   gather   every rank sends its block to the root:   α + (p-1)·mβ
//   scatter  the root sends block q to rank q:         α + (p-1)·mβ
//
// The (p-1)·m bytes all pass the root's one injection port (its receive
// side for gather, its send side for scatter), which a tree cannot avoid
// either: a binomial tree saves latency (log2 p·α) but not bandwidth. The
// α term holds for blocks up to a chunk; each further chunk of a block adds
// a message, most of whose latency the next chunk in flight hides.
#include <algorithm>

#include "builders.hpp"
#include "patterns.hpp"
#include "step_list.hpp"

namespace nnpccl {

namespace {

bool valid_root(const CollectiveArgs &args) { return args.root >= 0 && args.root < args.nranks; }

// The rank `i` places after the root, wrapping.
int after_root(const CollectiveArgs &args, int i) { return (args.root + i) % args.nranks; }

size_t block_begin(const CollectiveArgs &args, int rank) { return static_cast<size_t>(rank) * args.count; }

} // namespace

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

} // namespace nnpccl
