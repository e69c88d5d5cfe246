// Dissemination barrier: in round k every rank signals the rank 2^k places
// ahead and waits for the one 2^k places behind. ceil(log2 p) rounds, so
// ceil(log2 p)·α, and no rank leaves before all have arrived.
#include "builders.hpp"
#include "patterns.hpp"

namespace nnpccl {

Schedule build_dissemination_barrier(const CollectiveArgs &args, const std::vector<int> &ring_order) {
    Schedule sched;
    sched.algorithm = "dissemination";
    sched.channels.resize(1);
    RingPattern ring(ring_order, args.rank);
    const int rounds = ceil_log2(ring.size());
    for (int k = 0; k < rounds; ++k) {
        int distance = 1 << k;
        Step signal;
        signal.flags = kSend;
        signal.send_peer = ring.rank_at(ring.position() + distance);
        Step wait;
        wait.flags = kRecv;
        wait.recv_peer = ring.rank_at(ring.position() - distance);
        // Send first: a rank that waited before signalling would wait forever.
        sched.channels[0].push_back(signal);
        sched.channels[0].push_back(wait);
    }
    return sched;
}

} // namespace nnpccl
