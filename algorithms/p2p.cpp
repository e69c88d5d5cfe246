// Point-to-point send and recv: one stream of chunks from the sender's send
// buffer into the receiver's receive buffer, on one channel. m bytes, α per
// message, β per byte: α + mβ, the chunks pipelining through the stream's
// slots. The peer is CollectiveArgs::root. A send finishes once its last
// chunk is in a slot, so a message larger than the stream's slots holds the
// sender until the matching recv runs: two ranks that each send to the
// other before receiving wait for each other forever (as in NCCL without a
// group). An exchange needs one side to receive first, or both ranks'
// sends and receives pending at once (the engine runs pending sends and
// receives side by side when their streams differ).
//
// A message of no elements is still one (empty) message: it carries the
// operation's descriptor, so every send pairs with exactly one recv and a
// recv that expects data from an empty send is caught at once, as any
// other mismatch, instead of waiting for the sender's next message.
#include <algorithm>

#include "builders.hpp"
#include "cost_terms.hpp"
#include "registry.hpp"
#include "patterns.hpp"
#include "step_list.hpp"

namespace nnpccl {

namespace {

// A peer of our own is not a transfer: the two halves would be two
// operations of one rank, run one after the other.
bool valid_peer(const CollectiveArgs &args) {
    return args.root >= 0 && args.root < args.nranks && args.root != args.rank;
}

// StepList leaves empty steps out; this one is the message.
Step empty_message(StepFlag direction, int peer) {
    Step s;
    s.flags = direction;
    s.recv_peer = direction == kRecv ? peer : -1;
    s.send_peer = direction == kSend ? peer : -1;
    return s;
}

} // namespace

Schedule build_send(const CollectiveArgs &args) {
    Schedule sched;
    sched.algorithm = "p2p";
    if (args.collective != Collective::Send || !valid_peer(args)) return sched; // not served: see builders.hpp
    sched.channels.resize(1);
    if (args.count == 0) {
        sched.channels[0].push_back(empty_message(kSend, args.root));
        return sched;
    }
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
    if (args.count == 0) {
        sched.channels[0].push_back(empty_message(kRecv, args.root));
        return sched;
    }
    StepList steps(sched.channels[0]);
    for (const ElemRange &c : chunked(0, args.count, std::max<size_t>(1, args.chunk_elems)))
        steps.add(kRecv | kStore, args.root, -1, {}, BufRef{Buf::Recv, c.begin}, c.size());
    return sched;
}

// Its entry in the registry (registry.cpp): its cost, how it is built on a
// topology and how many channels it takes.
namespace {

// Send and recv (p2p.cpp): α + mβ over the route between the two ranks, the
// chunks pipelining through the stream's slots.
double predict_p2p_us(const CollectiveArgs &args, const Topology &t, const CostInputs &) {
    if (args.root < 0 || args.root >= args.nranks || args.root == args.rank) return 0;
    const Route r = args.collective == Collective::Send ? t.route(args.rank, args.root) : t.route(args.root, args.rank);
    return r.latency_us + us_for(static_cast<double>(call_bytes(args)), r.gbps);
}

Schedule build_on(const CollectiveArgs &args, const Topology &) {
    return args.collective == Collective::Send ? build_send(args) : build_recv(args);
}

} // namespace

const AlgorithmInfo &p2p_algorithm() {
    static const AlgorithmInfo info{"p2p",
                                    "one chunked stream from the sender to the receiver",
                                    "the peer is another rank",
                                    {Collective::Send, Collective::Recv},
                                    build_on,
                                    applies_with_valid_root,
                                    predict_p2p_us,
                                    one_channel};
    return info;
}

} // namespace nnpccl
