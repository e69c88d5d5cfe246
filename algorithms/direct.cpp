// Direct (one-shot) allreduce: every rank sends its whole buffer to every
// other rank, then folds all p contributions into a scratch buffer in rank
// order 0, 1, ..., p-1 and copies the result out. Folding in the same order
// everywhere gives every rank the same bits (floating-point sums are not
// associative), in place or not.
//
// Cost: α + (p-1)·nβ + (p-1)·nγ. One message latency instead of the ring's
// 2(p-1), at p-1 times the traffic: the choice for tiny messages.
#include <algorithm>

#include "builders.hpp"
#include "patterns.hpp"

namespace nnpccl {

Schedule build_direct_allreduce(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "direct";
    sched.channels.resize(1);
    sched.scratch_elems = args.count;
    std::vector<Step> &out = sched.channels[0];
    const int p = args.nranks, me = args.rank;
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    auto step = [&](uint8_t flags, int peer, BufRef src, BufRef dst, size_t count, bool finalize) {
        Step s;
        s.flags = flags;
        s.recv_peer = (flags & kRecv) ? peer : -1;
        s.send_peer = (flags & kSend) ? peer : -1;
        s.src = src;
        s.dst = dst;
        s.count = count;
        s.finalize = finalize;
        out.push_back(s);
    };
    for (size_t k = 0, n = balanced_pieces(args.count, chunk); k < n; ++k) {
        const size_t off = piece_begin(args.count, n, k);
        const size_t len = piece_size(args.count, n, k);
        const BufRef mine{Buf::Send, off}, acc{Buf::Scratch, off};
        // Sends first: they copy our data out before anything is written.
        for (int k = 1; k < p; ++k) step(kSend, (me + k) % p, mine, {}, len, false);
        for (int q = 0; q < p; ++q) {
            if (q == 0) {
                if (q == me) step(kStore, -1, mine, acc, len, false);
                else step(kRecv | kStore, q, {}, acc, len, false);
            } else if (q == me) {
                step(kReduce | kStore, -1, mine, acc, len, false);
            } else {
                step(kRecv | kReduce | kStore, q, acc, acc, len, false);
            }
        }
        // The copy out finishes avg: the divide happens once, here.
        step(kStore, -1, acc, BufRef{Buf::Recv, off}, len, true);
    }
    return sched;
}

} // namespace nnpccl
