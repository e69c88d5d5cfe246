// Point-to-point send and recv: one stream of chunks from the sender's send
// buffer into the receiver's receive buffer, on one channel. m bytes, α per
// message, β per byte: α + mβ, the chunks pipelining through the stream's
// slots. The peer is CollectiveArgs::root. A send finishes once its last
// chunk is in a slot, so a message larger than the stream's slots holds the
// sender until the matching recv runs: two ranks that each send to the
// other before receiving wait for each other forever (as in NCCL without a
// group). An exchange needs one side to receive first, or a fused
// send-recv operation whose schedule interleaves the two streams.
#include <algorithm>

#include "builders.hpp"
#include "patterns.hpp"
#include "step_list.hpp"

namespace nnpccl {

namespace {

// A peer of our own is not a transfer: the two halves would be two
// operations of one rank, run one after the other.
bool valid_peer(const CollectiveArgs &args) {
    return args.root >= 0 && args.root < args.nranks && args.root != args.rank;
}

} // namespace

Schedule build_send(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "p2p";
    if (args.collective != Collective::Send || !valid_peer(args)) return sched; // not served: see builders.hpp
    sched.channels.resize(1);
    StepList steps(sched.channels[0]);
    for (const ElemRange &c : chunked(0, args.count, std::max<size_t>(1, args.chunk_elems)))
        steps.add(kSend, -1, args.root, BufRef{Buf::Send, c.begin}, {}, c.size());
    return sched;
}

Schedule build_recv(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "p2p";
    if (args.collective != Collective::Recv || !valid_peer(args)) return sched; // not served: see builders.hpp
    sched.channels.resize(1);
    StepList steps(sched.channels[0]);
    for (const ElemRange &c : chunked(0, args.count, std::max<size_t>(1, args.chunk_elems)))
        steps.add(kRecv | kStore, args.root, -1, {}, BufRef{Buf::Recv, c.begin}, c.size());
    return sched;
}

} // namespace nnpccl
