// Ring algorithms. p ranks on a ring, n bytes, α per message, β per byte,
// γ per byte reduced; data is cut into chunks so the ring pipelines, and k
// channels each take 1/k of the data (the registry runs the topology's
// Topology::ring_channels(): on NNP-T every edge-disjoint ring both ways,
// every port of a chip, where one way would leave half of them idle; and
// there two channels on each, lanes_per_ring()).
//
//   allreduce      reduce-scatter then allgather:  2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ
//   reduce-scatter (p-1)α + (p-1)/p·nβ + (p-1)/p·nγ   (n = the whole send buffer)
//   allgather      (p-1)α + (p-1)/p·nβ                 (n = the whole receive buffer)
//   broadcast      pipelined chain from the root: (p-1)α + nβ·(1+(p-2)/c) for c chunks
//                  (on a host, where α is the rank's own work, (p-2+c)α)
//   reduce         pipelined chain into the root: the same plus nγ
//
// Positions, not ranks, drive the arithmetic: the rank at ring position k
// owns piece k of a slice after the reduce-scatter phase.
#include <algorithm>

#include "builders.hpp"
#include "cost_terms.hpp"
#include "registry.hpp"
#include "patterns.hpp"

namespace nnpccl {

namespace {

int mod(int a, int p) { return ((a % p) + p) % p; }

struct RingEmitter {
    const RingPattern &ring;
    std::vector<Step> &out;

    void emit(uint8_t flags, BufRef src, BufRef dst, size_t count, bool finalize = false) {
        if (count == 0) return; // both ends skip an empty piece alike
        Step s;
        s.flags = flags;
        s.finalize = finalize;
        s.recv_peer = (flags & kRecv) ? ring.prev() : -1;
        s.send_peer = (flags & kSend) ? ring.next() : -1;
        s.src = src;
        s.dst = dst;
        s.count = count;
        out.push_back(s);
    }
};

BufRef at(Buf b, size_t offset) { return BufRef{b, offset}; }

// Allreduce of [base, base + count) in slices of p chunks.
void ring_allreduce(const RingPattern &ring, size_t base, size_t count, size_t chunk, std::vector<Step> &out) {
    RingEmitter e{ring, out};
    const int p = ring.size(), me = ring.position();
    if (p == 1) {
        e.emit(kStore, at(Buf::Send, base), at(Buf::Recv, base), count, true);
        return;
    }
    const size_t slices = balanced_pieces(count, chunk * static_cast<size_t>(p));
    for (size_t k = 0; k < slices; ++k) {
        const size_t off = base + piece_begin(count, slices, k);
        const size_t len = piece_size(count, slices, k);
        auto piece = [&](int pos) { return off + piece_begin(len, static_cast<size_t>(p), static_cast<size_t>(mod(pos, p))); };
        auto size = [&](int pos) { return piece_size(len, static_cast<size_t>(p), static_cast<size_t>(mod(pos, p))); };
        e.emit(kSend, at(Buf::Send, piece(me - 1)), {}, size(me - 1));
        for (int s = 1; s <= p - 2; ++s)
            e.emit(kRecv | kReduce | kSend, at(Buf::Send, piece(me - 1 - s)), {}, size(me - 1 - s));
        e.emit(kRecv | kReduce | kStore | kSend, at(Buf::Send, piece(me)), at(Buf::Recv, piece(me)), size(me), true);
        for (int s = 1; s <= p - 2; ++s)
            e.emit(kRecv | kStore | kSend, {}, at(Buf::Recv, piece(me - s)), size(me - s));
        e.emit(kRecv | kStore, {}, at(Buf::Recv, piece(me + 1)), size(me + 1));
    }
}

// Reduce-scatter: rank R's result block is [R*block, (R+1)*block) of the send buffer.
void ring_reduce_scatter(const RingPattern &ring, size_t block, size_t lo, size_t hi, size_t chunk,
                         std::vector<Step> &out) {
    RingEmitter e{ring, out};
    const int p = ring.size(), me = ring.position();
    auto src = [&](int pos, size_t off) { return at(Buf::Send, static_cast<size_t>(ring.rank_at(pos)) * block + off); };
    for (size_t k = 0, n = balanced_pieces(hi - lo, chunk); k < n; ++k) {
        const size_t off = lo + piece_begin(hi - lo, n, k);
        const size_t len = piece_size(hi - lo, n, k);
        if (p == 1) {
            e.emit(kStore, src(me, off), at(Buf::Recv, off), len, true);
            continue;
        }
        e.emit(kSend, src(me - 1, off), {}, len);
        for (int s = 1; s <= p - 2; ++s) e.emit(kRecv | kReduce | kSend, src(me - 1 - s, off), {}, len);
        e.emit(kRecv | kReduce | kStore, src(me, off), at(Buf::Recv, off), len, true);
    }
}

// Allgather: rank R's block lands at [R*block, (R+1)*block) of the receive buffer.
void ring_allgather(const RingPattern &ring, size_t block, size_t lo, size_t hi, size_t chunk, bool in_place,
                    std::vector<Step> &out) {
    RingEmitter e{ring, out};
    const int p = ring.size(), me = ring.position();
    auto dst = [&](int pos, size_t off) { return at(Buf::Recv, static_cast<size_t>(ring.rank_at(pos)) * block + off); };
    for (size_t k = 0, n = balanced_pieces(hi - lo, chunk); k < n; ++k) {
        const size_t off = lo + piece_begin(hi - lo, n, k);
        const size_t len = piece_size(hi - lo, n, k);
        // In place, the send buffer already is our block of the receive buffer.
        uint8_t first = static_cast<uint8_t>((p > 1 ? kSend : 0) | (in_place ? 0 : kStore));
        if (first != 0) e.emit(first, at(Buf::Send, off), dst(me, off), len);
        if (p == 1) continue;
        for (int s = 1; s <= p - 2; ++s) e.emit(kRecv | kStore | kSend, {}, dst(me - s, off), len);
        e.emit(kRecv | kStore, {}, dst(me + 1, off), len);
    }
}

// Broadcast down the chain root, root+1, ..., root+p-1 (ring positions).
void ring_broadcast(const RingPattern &ring, int root, size_t lo, size_t hi, size_t chunk, bool in_place,
                    std::vector<Step> &out) {
    RingEmitter e{ring, out};
    const int p = ring.size();
    int root_pos = 0;
    for (int k = 0; k < p; ++k)
        if (ring.rank_at(k) == root) root_pos = k;
    const int d = mod(ring.position() - root_pos, p);
    for (size_t k = 0, n = balanced_pieces(hi - lo, chunk); k < n; ++k) {
        const size_t off = lo + piece_begin(hi - lo, n, k);
        const size_t len = piece_size(hi - lo, n, k);
        if (d == 0) {
            uint8_t flags = static_cast<uint8_t>((p > 1 ? kSend : 0) | (in_place ? 0 : kStore));
            if (flags != 0) e.emit(flags, at(Buf::Send, off), at(Buf::Recv, off), len);
        } else if (d < p - 1) {
            e.emit(kRecv | kStore | kSend, {}, at(Buf::Recv, off), len);
        } else {
            e.emit(kRecv | kStore, {}, at(Buf::Recv, off), len);
        }
    }
}

// Reduce along the chain root+1, ..., root+p-1, root (ring positions).
void ring_reduce(const RingPattern &ring, int root, size_t lo, size_t hi, size_t chunk, std::vector<Step> &out) {
    RingEmitter e{ring, out};
    const int p = ring.size();
    int root_pos = 0;
    for (int k = 0; k < p; ++k)
        if (ring.rank_at(k) == root) root_pos = k;
    const int d = mod(ring.position() - root_pos, p);
    for (size_t k = 0, n = balanced_pieces(hi - lo, chunk); k < n; ++k) {
        const size_t off = lo + piece_begin(hi - lo, n, k);
        const size_t len = piece_size(hi - lo, n, k);
        if (p == 1)
            e.emit(kStore, at(Buf::Send, off), at(Buf::Recv, off), len, true);
        else if (d == 1)
            e.emit(kSend, at(Buf::Send, off), {}, len);
        else if (d != 0)
            e.emit(kRecv | kReduce | kSend, at(Buf::Send, off), {}, len);
        else
            e.emit(kRecv | kReduce | kStore, at(Buf::Send, off), at(Buf::Recv, off), len, true);
    }
}

} // namespace

Schedule build_ring(const CollectiveArgs &args, const std::vector<std::vector<int>> &rings) {
    Schedule sched;
    sched.algorithm = "ring";
    const size_t k = rings.size();
    sched.channels.resize(k);
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    for (size_t c = 0; c < k; ++c) {
        RingPattern ring(rings[c], args.rank);
        std::vector<Step> &out = sched.channels[c];
        // Channel c takes piece c of the data (of each block, for the block-wise collectives).
        size_t lo = piece_begin(args.count, k, c), hi = lo + piece_size(args.count, k, c);
        switch (args.collective) {
        case Collective::Allreduce: ring_allreduce(ring, lo, hi - lo, chunk, out); break;
        case Collective::ReduceScatter: ring_reduce_scatter(ring, args.count, lo, hi, chunk, out); break;
        case Collective::Allgather: ring_allgather(ring, args.count, lo, hi, chunk, args.in_place, out); break;
        case Collective::Broadcast: ring_broadcast(ring, args.root, lo, hi, chunk, args.in_place, out); break;
        case Collective::Reduce: ring_reduce(ring, args.root, lo, hi, chunk, out); break;
        case Collective::Barrier:
        case Collective::Gather:
        case Collective::Scatter:
        case Collective::Alltoall:
        case Collective::Send:
        case Collective::Recv: break; // not served: their channels stay empty
        }
    }
    return sched;
}

// Its entry in the registry (registry.cpp): its cost, how it is built on a
// topology and how many channels it takes.
namespace {

// Channels per ring and direction: on a machine of links two, each half
// of that ring's share, so that while one waits out its message's α and
// reduces it (a ring step sends only what it has reduced), the other's
// message crosses the port; the link serves the two in turn, which keeps
// them out of step. One channel alone leaves the port idle for α + Cγ
// after every message: on nnpt-pod32 at 64 MiB the ring ran at 82% of
// the bound with one and at 99.8% with two (ccl-sim). On the host the
// links share one memory system, and a rank's one thread does every
// channel's α: one.
int lanes_per_ring(const Topology &t) { return t.machine().shape() == Shape::Flat ? 1 : 2; }

std::vector<std::vector<int>> ring_lanes(const Topology &t) {
    std::vector<std::vector<int>> lanes;
    for (const std::vector<int> &ring : t.ring_channels())
        for (int k = 0; k < lanes_per_ring(t); ++k) lanes.push_back(ring);
    return lanes;
}

// Ring (ring.cpp), k = the topology's ring channels (each ring, and
// backward too where Topology::rings_both_ways()) times lanes_per_ring(),
// each with S/k:
//   allreduce       2(p-1)·s messages, s = ceil(S/k / (p·C)) slices; 2(p-1)/p·S/k bytes per hop
//   reduce-scatter, allgather  (p-1)·ceil(S/(k·p) / C) messages; (p-1)/p·S/k bytes per hop
//   broadcast, reduce  a chain from (into) the root, c = ceil(S/k / C) chunks:
//                      (p-1)·α + (p-2+c)·S/(k·c)·β on NNP-T (reduce: + (p-1)·γ·S/(k·c)),
//                      (p-2+c)·(α + S/(k·c)·β) on the host
// A channel takes its messages' α plus its bytes over the ring's slowest
// hop; rings that share links (routed hops, or `flat`'s one memory system)
// share them (concurrent()).
double predict_ring_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    if (p <= 1) return 0;
    const double total = static_cast<double>(call_bytes(args)), chunk = chunk_bytes(args);
    // A ring's embedding costs both directions (its slowest hop either
    // way), so the backward channel takes the same α and β over the
    // reversed ranks.
    struct Channel {
        const RingEmbedding *ring;
        std::vector<int> ranks;
    };
    std::vector<Channel> channels;
    for (const RingEmbedding &ring : t.ring_embeddings())
        for (int lane = 0; lane < lanes_per_ring(t); ++lane) {
            channels.push_back({&ring, ring.ranks});
            if (t.rings_both_ways() && ring.ranks.size() > 2)
                channels.push_back({&ring, std::vector<int>(ring.ranks.rbegin(), ring.ranks.rend())});
        }
    const double share = total / static_cast<double>(channels.size());
    std::vector<Flow> flows;
    // Per channel, its messages' α and its bytes' time on the critical path.
    double slowest_channel = 0, slowest_bytes = 0, every_alpha = 0, critical_reduce = 0;
    const bool chain = args.collective == Collective::Broadcast || args.collective == Collective::Reduce;
    const bool host = t.machine().shape() == Shape::Flat;
    for (const Channel &channel : channels) {
        const std::vector<int> &ranks = channel.ranks;
        const double alpha = channel.ring->hop_latency_us, gbps = channel.ring->bottleneck_gbps;
        double alpha_us = 0, bytes_us = 0, hop_bytes = 0;
        int root_position = 0;
        switch (args.collective) {
        case Collective::Allreduce:
            hop_bytes = 2.0 * (p - 1) / p * share;
            alpha_us = 2.0 * (p - 1) * messages(share, p * chunk) * alpha;
            bytes_us = us_for(hop_bytes, gbps);
            break;
        case Collective::ReduceScatter:
        case Collective::Allgather:
            hop_bytes = (p - 1.0) / p * share;
            alpha_us = (p - 1.0) * messages(share / p, chunk) * alpha;
            bytes_us = us_for(hop_bytes, gbps);
            break;
        default: { // broadcast, reduce: a pipelined chain
            const double pieces = messages(share, chunk);
            hop_bytes = share;
            // On the host every message's α is the rank's work; on NNP-T it
            // is the link's latency, which the chunks behind the first, out
            // back to back through the stream's slots, overlap: the first
            // chunk's α per hop (and, into a reduce's root, its reduction at
            // each hop before it is forwarded).
            if (host)
                alpha_us = (p - 2 + pieces) * alpha;
            else
                alpha_us = (p - 1) * (alpha + (args.collective == Collective::Reduce
                                                   ? with_reduction(t, inputs, args.elem_size, 0, share / pieces)
                                                   : 0));
            bytes_us = (p - 2 + pieces) * us_for(share / pieces, gbps);
            root_position = static_cast<int>(std::find(ranks.begin(), ranks.end(), args.root) - ranks.begin());
            break;
        }
        }
        // On NNP-T a reduce-scatter step sends only what it has reduced, so
        // the chunk's reduction is on the channel's critical path, step
        // after step, not overlapped with its transfer (the host's γ is
        // added whole below).
        double reduce_us = 0;
        if (!host && (args.collective == Collective::Allreduce || args.collective == Collective::ReduceScatter))
            reduce_us = with_reduction(t, inputs, args.elem_size, 0, (p - 1.0) / p * share);
        critical_reduce = std::max(critical_reduce, reduce_us);
        slowest_channel = std::max(slowest_channel, alpha_us + bytes_us + reduce_us);
        slowest_bytes = std::max(slowest_bytes, bytes_us);
        every_alpha += alpha_us;
        for (int i = 0; i < p; ++i) {
            // A chain has no hop back into its start (broadcast: the root; reduce: the one after it).
            if (chain && (i + 1) % p == (args.collective == Collective::Broadcast ? root_position : (root_position + 1) % p))
                continue;
            flows.push_back({ranks[static_cast<size_t>(i)], ranks[static_cast<size_t>((i + 1) % p)], hop_bytes});
        }
    }
    const double through_links = concurrent(t, flows).transfer_us;
    // A chain's piece moves one hop at a time: its α do not wait their turn.
    const bool flat = t.machine().shape() == Shape::Flat;
    const double host_alpha = chain ? every_alpha : host_lockstep(t, inputs, every_alpha);
    const double host_bytes = std::max(slowest_bytes, through_links);
    const double transfer = flat ? host_alpha + host_bytes : std::max(slowest_channel, through_links + critical_reduce);
    double reduced = 0;
    if (args.collective == Collective::Allreduce || args.collective == Collective::ReduceScatter)
        reduced = (p - 1.0) / p * total;
    if (args.collective == Collective::Reduce) reduced = total;
    // Over a network transport within the host nothing of a ring whose
    // every rank works in every step escapes the ranks sharing a core:
    // every α, byte and reduction (CostInputs). A chain's piece still moves
    // a hop at a time; with no measurement of chains over TCP, they keep
    // the shared-memory terms.
    if (flat && inputs.host_over_network && !chain)
        return host_lockstep(t, inputs, with_reduction(t, inputs, args.elem_size, every_alpha + host_bytes, reduced));
    return with_reduction(t, inputs, args.elem_size, transfer, reduced);
}

Schedule build_on(const CollectiveArgs &args, const Topology &t) { return build_ring(args, ring_lanes(t)); }

int channels_on(const Topology &t) { return static_cast<int>(ring_lanes(t).size()); }

} // namespace

const AlgorithmInfo &ring_algorithm() {
    static const AlgorithmInfo info{
        "ring",
        "pipelined ring on each edge-disjoint Hamiltonian ring of the topology, both directions of each where that "
        "adds bandwidth (not on flat), one channel per ring and direction, data split across them",
        "",
        {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather, Collective::Broadcast,
         Collective::Reduce},
        build_on,
        applies_with_valid_root,
        predict_ring_us,
        channels_on};
    return info;
}

} // namespace nnpccl
