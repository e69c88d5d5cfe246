// Ring algorithms. p ranks on a ring, n bytes, α per message, β per byte,
// γ per byte reduced; data is cut into chunks so the ring pipelines, and k
// channels each take 1/k of the data (the registry runs the topology's
// Topology::ring_channels(): on NNP-T every edge-disjoint ring both ways,
// every port of a chip, where one way would leave half of them idle).
//
//   allreduce      reduce-scatter then allgather:  2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ
//   reduce-scatter (p-1)α + (p-1)/p·nβ + (p-1)/p·nγ   (n = the whole send buffer)
//   allgather      (p-1)α + (p-1)/p·nβ                 (n = the whole receive buffer)
//   broadcast      pipelined chain from the root: (p-1+c)α + nβ·(1+(p-2)/c) for c chunks
//   reduce         pipelined chain into the root: the same plus nγ
//
// Positions, not ranks, drive the arithmetic: the rank at ring position k
// owns piece k of a slice after the reduce-scatter phase.
#include <algorithm>

#include "builders.hpp"
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

} // namespace nnpccl
