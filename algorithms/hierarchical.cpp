// Hierarchical (two-level) algorithms for a job on several hosts: the ranks
// of a host combine their data over shared memory before it crosses the
// network, so each host's link carries the least the collective needs.
// h hosts, l ranks per host (p = h·l), n bytes, α/β within a host, A/B
// across (B is a host's whole link, shared by its ranks):
//
//   allreduce       2(l-1)α + 2(h-1)A + 2(l-1)/l·nβ + 2(h-1)/h·nB
//                   (the flat ring: 2(p-1)A + 2(p-1)/p·nB: 1.75x the bytes
//                   through each host's link on 2 hosts of 4)
//   reduce-scatter  (l-1)α + (h-1)A + (l-1)/l·nβ + (h-1)/h·nB
//   allgather       the same, network first
//   broadcast       a chain across the hosts' leaders, under a binary tree
//                   within each host, pipelined in c chunks:
//                   (h-2+c)(A + n/c·B) + log2(l)α + 2n·β (a parent sends to two)
//   reduce          the same, trees first, plus the sums
//
// The data is cut into p blocks (reduce-scatter and allgather: the ranks'
// own blocks). Block b belongs to rank b; on every other host g one rank,
// its agent a_g(b) (the rank of g whose place among g's ranks is b's place
// among its own, modulo g's rank count), stands for g in b's exchanges
// across the network. A rank's column is the blocks it is the agent of
// (its own among them). So each of a host's ranks talks to its own
// counterparts on the other hosts: every rank's connection carries a share.
//
//   allreduce       reduce-scatter within each host, the columns as the
//                   ring's pieces; each block's host partials reduced along a
//                   chain of its agents across the hosts, ending at its rank
//                   (the ring's reduce-scatter across hosts), and the result
//                   sent back along the chain (its allgather); allgather of
//                   the columns within each host.
//   reduce-scatter  the first two of these.
//   allgather       each block along the chain of its agents across the
//                   hosts, then allgather of the columns within each host.
//
// Uneven hosts (3+1 ranks) work alike: a host of fewer ranks has wider
// columns. Steps are emitted in one order on every rank (phase, chunk,
// hop, block), and each message is received one hop after it was sent, so
// no rank waits for a step that comes after its own.
#include <algorithm>
#include <functional>

#include "builders.hpp"
#include "cost_terms.hpp"
#include "patterns.hpp"
#include "registry.hpp"
#include "step_list.hpp"

namespace nnpccl {

namespace {

BufRef at(Buf b, size_t offset) { return BufRef{b, offset}; }

// The job's hosts as a schedule sees them, from this rank's side.
struct HostLayout {
    const std::vector<std::vector<int>> &groups;
    std::vector<int> host_of;  // by rank
    std::vector<int> place_of; // by rank: its place among its host's ranks

    explicit HostLayout(const std::vector<std::vector<int>> &host_groups) : groups(host_groups) {
        size_t p = 0;
        for (const auto &g : groups) p += g.size();
        host_of.assign(p, 0);
        place_of.assign(p, 0);
        for (size_t g = 0; g < groups.size(); ++g)
            for (size_t i = 0; i < groups[g].size(); ++i) {
                host_of[static_cast<size_t>(groups[g][i])] = static_cast<int>(g);
                place_of[static_cast<size_t>(groups[g][i])] = static_cast<int>(i);
            }
    }
    int hosts() const { return static_cast<int>(groups.size()); }
    const std::vector<int> &ranks_of(int host) const { return groups[static_cast<size_t>(host)]; }
    // The rank of `host` that stands for block b there.
    int agent(int host, int block) const {
        const std::vector<int> &ranks = ranks_of(host);
        return ranks[static_cast<size_t>(place_of[static_cast<size_t>(block)]) % ranks.size()];
    }
    // The hosts along block b's chain across the network: the one after
    // b's, and on round, ending at b's own.
    int chain_host(int block, int hop) const { return (host_of[static_cast<size_t>(block)] + 1 + hop) % hosts(); }
    // The blocks `rank` is the agent of, ascending.
    std::vector<int> column(int rank) const {
        std::vector<int> blocks;
        const int g = host_of[static_cast<size_t>(rank)];
        for (int b = 0; b < static_cast<int>(host_of.size()); ++b)
            if (agent(g, b) == rank) blocks.push_back(b);
        return blocks;
    }
};

// Where block b's elements sit in a buffer, and how the schedule cuts them.
// A channel takes the part [lo, hi) of the data (of each rank's block,
// for reduce-scatter and allgather).
struct Blocks {
    // Allreduce: p balanced pieces of [lo, hi). Reduce-scatter and
    // allgather: [lo, hi) of rank b's block [b·count, (b+1)·count).
    bool whole_buffer = true;
    size_t count = 0;
    size_t lo = 0, hi = 0;
    int p = 1;
    size_t chunk = 1;

    // Where rank b's block starts (reduce-scatter and allgather).
    size_t base(int b) const { return whole_buffer ? 0 : static_cast<size_t>(b) * count; }
    size_t begin(int b) const {
        return whole_buffer ? lo + piece_begin(hi - lo, static_cast<size_t>(p), static_cast<size_t>(b)) : base(b) + lo;
    }
    size_t size(int b) const {
        return whole_buffer ? piece_size(hi - lo, static_cast<size_t>(p), static_cast<size_t>(b)) : hi - lo;
    }
    std::vector<ElemRange> chunks(int b) const { return chunked(begin(b), begin(b) + size(b), chunk); }
};

// Where a chunk of block b sits in one of the operation's buffers.
using Where = std::function<BufRef(int block, const ElemRange &chunk)>;

// A column's chunks in order: its blocks' chunks one after another.
struct ColumnChunk {
    int block;
    ElemRange range;
};
std::vector<ColumnChunk> column_chunks(const Blocks &blocks, const std::vector<int> &column) {
    std::vector<ColumnChunk> out;
    for (int b : column)
        for (const ElemRange &r : blocks.chunks(b)) out.push_back({b, r});
    return out;
}

// The ring over a host's ranks, its pieces the columns: what the
// reduce-scatter and allgather within a host need.
struct HostRing {
    const std::vector<int> &ranks;
    int me = 0; // this rank's place
    std::vector<std::vector<ColumnChunk>> pieces;

    HostRing(const HostLayout &layout, const Blocks &blocks, int rank)
        : ranks(layout.ranks_of(layout.host_of[static_cast<size_t>(rank)])) {
        me = layout.place_of[static_cast<size_t>(rank)];
        for (int r : ranks) pieces.push_back(column_chunks(blocks, layout.column(r)));
    }
    int size() const { return static_cast<int>(ranks.size()); }
    int next() const { return ranks[static_cast<size_t>((me + 1) % size())]; }
    int prev() const { return ranks[static_cast<size_t>((me + size() - 1) % size())]; }
    const std::vector<ColumnChunk> &piece(int place) const {
        return pieces[static_cast<size_t>(((place % size()) + size()) % size())];
    }
    size_t most_chunks() const {
        size_t most = 0;
        for (const auto &p : pieces) most = std::max(most, p.size());
        return most;
    }
};

// Reduce-scatter within the host: the piece of place q travels q+1, q+2,
// ..., q, gathering each rank's contribution from `src`, and lands where
// `partial` says at its column's rank.
void host_reduce_scatter(const HostRing &ring, Buf src, Where partial, StepList &out) {
    const int l = ring.size(), me = ring.me;
    if (l == 1) return;
    for (size_t k = 0, n = ring.most_chunks(); k < n; ++k) {
        for (int s = 0; s <= l - 1; ++s) {
            const int place = me - 1 - s;
            const std::vector<ColumnChunk> &piece = ring.piece(place);
            if (k >= piece.size()) continue;
            const ColumnChunk &c = piece[k];
            const size_t len = c.range.size();
            if (s == 0)
                out.add(kSend, -1, ring.next(), at(src, c.range.begin), {}, len);
            else if (s < l - 1)
                out.add(kRecv | kReduce | kSend, ring.prev(), ring.next(), at(src, c.range.begin), {}, len);
            else
                out.add(kRecv | kReduce | kStore, ring.prev(), -1, at(src, c.range.begin), partial(c.block, c.range),
                        len);
        }
    }
}

// Allgather within the host: the piece of place q, in the receive buffer
// at its column's rank, travels q+1, ..., q-1.
void host_allgather(const HostRing &ring, StepList &out) {
    const int l = ring.size(), me = ring.me;
    if (l == 1) return;
    for (size_t k = 0, n = ring.most_chunks(); k < n; ++k) {
        for (int s = 0; s <= l - 2; ++s) {
            const std::vector<ColumnChunk> &piece = ring.piece(me - s);
            if (k >= piece.size()) continue;
            const ElemRange &r = piece[k].range;
            if (s == 0)
                out.add(kSend, -1, ring.next(), at(Buf::Recv, r.begin), {}, r.size());
            else
                out.add(kRecv | kStore | kSend, ring.prev(), ring.next(), {}, at(Buf::Recv, r.begin), r.size());
        }
        const std::vector<ColumnChunk> &last = ring.piece(me + 1);
        if (k < last.size())
            out.add(kRecv | kStore, ring.prev(), -1, {}, at(Buf::Recv, last[k].range.begin), last[k].range.size());
    }
}

// Every block's chunks, and the most any block has: the chains' chunk loop.
std::vector<std::vector<ElemRange>> every_block_chunks(const Blocks &blocks) {
    std::vector<std::vector<ElemRange>> all;
    for (int b = 0; b < blocks.p; ++b) all.push_back(blocks.chunks(b));
    return all;
}
size_t most_chunks(const std::vector<std::vector<ElemRange>> &chunks_of) {
    size_t most = 0;
    for (const auto &c : chunks_of) most = std::max(most, c.size());
    return most;
}

// This rank's steps along the chains across the hosts, one per block,
// where host_at(b, i) is the host at place i of block b's chain: for every
// chunk index, every place, every block whose agent this rank is there,
// visit(b, i, prev, next, chunk) with the agents before and after it (-1
// at the ends). The order every rank emits in (docs at the top).
template <typename HostAt, typename Visit>
void for_each_chain_step(const HostLayout &layout, const Blocks &blocks, int rank, HostAt host_at, Visit visit) {
    const int h = layout.hosts();
    const std::vector<std::vector<ElemRange>> chunks_of = every_block_chunks(blocks);
    for (size_t k = 0, n = most_chunks(chunks_of); k < n; ++k)
        for (int hop = 0; hop < h; ++hop)
            for (int b = 0; b < blocks.p; ++b) {
                if (layout.agent(host_at(b, hop), b) != rank) continue;
                const std::vector<ElemRange> &chunks = chunks_of[static_cast<size_t>(b)];
                if (k >= chunks.size()) continue;
                const int prev = hop > 0 ? layout.agent(host_at(b, hop - 1), b) : -1;
                const int next = hop < h - 1 ? layout.agent(host_at(b, hop + 1), b) : -1;
                visit(b, hop, prev, next, chunks[k]);
            }
}

// Each block's host partials reduced along its agents' chain across the
// hosts into its rank, which stores the total at `total` (divided there,
// for avg).
void network_reduce(const HostLayout &layout, const Blocks &blocks, int rank, Where partial, Where total,
                    StepList &out) {
    const int h = layout.hosts();
    auto host_at = [&](int b, int hop) { return layout.chain_host(b, hop); };
    for_each_chain_step(layout, blocks, rank, host_at, [&](int b, int hop, int prev, int next, const ElemRange &r) {
        if (hop == 0)
            out.add(kSend, -1, next, partial(b, r), {}, r.size());
        else if (hop < h - 1)
            out.add(kRecv | kReduce | kSend, prev, next, partial(b, r), {}, r.size());
        else
            out.add(kRecv | kReduce | kStore, prev, -1, partial(b, r), total(b, r), r.size(), true);
    });
}

// Each block from its rank along its agents' chain across the hosts, into
// the receive buffer of each. The rank sends from `own` (and stores it in
// the receive buffer too unless it is there already).
void network_broadcast(const HostLayout &layout, const Blocks &blocks, int rank, Where own, bool own_in_recv,
                       StepList &out) {
    const int h = layout.hosts();
    // Place 0 is b itself, then the hosts after b's.
    auto host_at = [&](int b, int hop) {
        return hop == 0 ? layout.host_of[static_cast<size_t>(b)] : layout.chain_host(b, hop - 1);
    };
    for_each_chain_step(layout, blocks, rank, host_at, [&](int b, int hop, int prev, int next, const ElemRange &r) {
        if (hop == 0)
            out.add(static_cast<uint8_t>(kSend | (own_in_recv ? 0 : kStore)), -1, next, own(b, r),
                    at(Buf::Recv, r.begin), r.size());
        else if (hop < h - 1)
            out.add(kRecv | kStore | kSend, prev, next, {}, at(Buf::Recv, r.begin), r.size());
        else
            out.add(kRecv | kStore, prev, -1, {}, at(Buf::Recv, r.begin), r.size());
    });
}

void build_allreduce(const CollectiveArgs &args, const HostLayout &layout, const Blocks &blocks, Schedule &sched) {
    sched.channels.emplace_back();
    StepList out(sched.channels.back());
    const HostRing ring(layout, blocks, args.rank);
    // A host's partial of a block: in the receive buffer where the host has
    // ranks to reduce with, else the rank's own data.
    const Buf partial_buf = ring.size() > 1 ? Buf::Recv : Buf::Send;
    auto partial = [&](int, const ElemRange &r) { return at(partial_buf, r.begin); };
    auto recv_at = [](int, const ElemRange &r) { return at(Buf::Recv, r.begin); };
    host_reduce_scatter(ring, Buf::Send, recv_at, out);
    network_reduce(layout, blocks, args.rank, partial, recv_at, out);
    network_broadcast(layout, blocks, args.rank, recv_at, true, out);
    host_allgather(ring, out);
}

void build_reduce_scatter(const CollectiveArgs &args, const HostLayout &layout, const Blocks &blocks, Schedule &sched) {
    sched.channels.emplace_back();
    StepList out(sched.channels.back());
    const HostRing ring(layout, blocks, args.rank);
    // The host partials of the column's other blocks wait in scratch, one
    // block each; the rank's own block's in its receive buffer.
    std::vector<int> others;
    for (int b : layout.column(args.rank))
        if (b != args.rank) others.push_back(b);
    // A host's lone rank reduces straight from its send buffer.
    sched.scratch_elems = ring.size() > 1 ? others.size() * blocks.count : 0;
    auto partial = [&](int b, const ElemRange &r) {
        const size_t within = r.begin - blocks.base(b);
        if (ring.size() == 1) return at(Buf::Send, r.begin);
        if (b == args.rank) return at(Buf::Recv, within);
        const auto slot = static_cast<size_t>(std::find(others.begin(), others.end(), b) - others.begin());
        return at(Buf::Scratch, slot * blocks.count + within);
    };
    auto total = [&](int b, const ElemRange &r) { return at(Buf::Recv, r.begin - blocks.base(b)); };
    host_reduce_scatter(ring, Buf::Send, partial, out);
    network_reduce(layout, blocks, args.rank, partial, total, out);
}

void build_allgather(const CollectiveArgs &args, const HostLayout &layout, const Blocks &blocks, Schedule &sched) {
    sched.channels.emplace_back();
    StepList out(sched.channels.back());
    const HostRing ring(layout, blocks, args.rank);
    // The rank's block is the send buffer (the receive buffer's block, in place).
    auto own = [&](int b, const ElemRange &r) {
        return args.in_place ? at(Buf::Recv, r.begin) : at(Buf::Send, r.begin - blocks.base(b));
    };
    network_broadcast(layout, blocks, args.rank, own, args.in_place, out);
    host_allgather(ring, out);
}

// Broadcast and reduce: a chain across the hosts' leaders (the root on its
// host, the agent of the root's block on the others), under a binary tree
// within each host rooted at its leader.
struct LeaderTree {
    int parent = -1;
    std::vector<int> children;
    int leader = 0;
    int chain_prev = -1, chain_next = -1; // leaders, broadcast's way round
};

LeaderTree leader_tree(const HostLayout &layout, int root, int rank) {
    LeaderTree t;
    const int h = layout.hosts(), g = layout.host_of[static_cast<size_t>(rank)];
    const std::vector<int> &ranks = layout.ranks_of(g);
    const int l = static_cast<int>(ranks.size());
    t.leader = layout.agent(g, root);
    const int leader_place = layout.place_of[static_cast<size_t>(t.leader)];
    // Places counted from the leader: the tree's heap order.
    const int d = (layout.place_of[static_cast<size_t>(rank)] - leader_place + l) % l;
    auto rank_at = [&](int dist) { return ranks[static_cast<size_t>((leader_place + dist) % l)]; };
    if (d > 0) t.parent = rank_at((d - 1) / 2);
    for (int c = 2 * d + 1; c <= 2 * d + 2 && c < l; ++c) t.children.push_back(rank_at(c));
    if (rank == t.leader) {
        // Chain position of this host: the root's host first.
        const int root_host = layout.host_of[static_cast<size_t>(root)];
        const int pos = (g - root_host + h) % h;
        if (pos > 0) t.chain_prev = layout.agent((g + h - 1) % h, root);
        if (pos < h - 1) t.chain_next = layout.agent((g + 1) % h, root);
    }
    return t;
}

void build_broadcast(const CollectiveArgs &args, const HostLayout &layout, size_t lo, size_t hi, Schedule &sched) {
    sched.channels.emplace_back();
    StepList out(sched.channels.back());
    const LeaderTree t = leader_tree(layout, args.root, args.rank);
    const bool root = args.rank == args.root;
    for (const ElemRange &r : chunked(lo, hi, std::max<size_t>(1, args.chunk_elems))) {
        const size_t len = r.size();
        // What comes in: from the previous leader, from the tree's parent, or the root's own data.
        const int from = t.parent >= 0 ? t.parent : t.chain_prev;
        const int first_to = t.chain_next >= 0 ? t.chain_next : t.children.empty() ? -1 : t.children[0];
        const uint8_t forward = first_to >= 0 ? kSend : 0;
        if (root) {
            const uint8_t flags = static_cast<uint8_t>(forward | (args.in_place ? 0 : kStore));
            if (flags != 0) out.add(flags, -1, first_to, at(Buf::Send, r.begin), at(Buf::Recv, r.begin), len);
        } else {
            out.add(static_cast<uint8_t>(kRecv | kStore | forward), from, first_to, {}, at(Buf::Recv, r.begin), len);
        }
        const Buf from_buf = root ? Buf::Send : Buf::Recv;
        for (size_t i = 0; i < t.children.size(); ++i) {
            if (t.chain_next < 0 && i == 0) continue; // the step above sent to it
            out.add(kSend, -1, t.children[i], at(from_buf, r.begin), {}, len);
        }
    }
}

void build_reduce(const CollectiveArgs &args, const HostLayout &layout, size_t lo, size_t hi, Schedule &sched) {
    sched.channels.emplace_back();
    StepList out(sched.channels.back());
    const LeaderTree t = leader_tree(layout, args.root, args.rank);
    const bool root = args.rank == args.root, leader = args.rank == t.leader;
    sched.scratch_elems = t.children.empty() ? 0 : args.count;
    for (const ElemRange &r : chunked(lo, hi, std::max<size_t>(1, args.chunk_elems))) {
        const size_t len = r.size();
        // The subtree's sum: folded into scratch child by child, sent up
        // with the last child's fold unless the rank is its host's leader.
        BufRef sum = at(Buf::Send, r.begin);
        for (size_t i = 0; i < t.children.size(); ++i) {
            const bool last = i + 1 == t.children.size();
            if (last && !leader)
                out.add(kRecv | kReduce | kSend, t.children[i], t.parent, sum, {}, len);
            else
                out.add(kRecv | kReduce | kStore, t.children[i], -1, sum, at(Buf::Scratch, r.begin), len);
            sum = at(Buf::Scratch, r.begin);
        }
        if (!leader) {
            if (t.children.empty()) out.add(kSend, -1, t.parent, sum, {}, len);
            continue;
        }
        // Across the hosts, into the root's host last: the broadcast's chain backwards.
        if (root)
            out.add(kRecv | kReduce | kStore, t.chain_next, -1, sum, at(Buf::Recv, r.begin), len, true);
        else if (t.chain_next >= 0 && t.chain_prev >= 0)
            out.add(kRecv | kReduce | kSend, t.chain_next, t.chain_prev, sum, {}, len);
        else // the last host of the broadcast's chain starts the reduce's
            out.add(kSend, -1, t.chain_prev, sum, {}, len);
    }
}

// Every rank 0..p-1 in exactly one group, no group empty.
bool is_partition_of_ranks(const std::vector<std::vector<int>> &groups, int nranks) {
    std::vector<char> seen(static_cast<size_t>(std::max(nranks, 0)), 0);
    size_t placed = 0;
    for (const std::vector<int> &g : groups) {
        if (g.empty()) return false;
        for (int r : g) {
            if (r < 0 || r >= nranks || seen[static_cast<size_t>(r)]) return false;
            seen[static_cast<size_t>(r)] = 1;
            ++placed;
        }
    }
    return placed == static_cast<size_t>(nranks);
}

bool serves_hierarchical(Collective c) {
    return c == Collective::Allreduce || c == Collective::ReduceScatter || c == Collective::Allgather ||
           c == Collective::Broadcast || c == Collective::Reduce;
}

} // namespace

size_t hierarchical_channels(const CollectiveArgs &args) {
    return call_bytes(args) >= kHierarchicalSplitBytes ? kHierarchicalChannels : 1;
}

Schedule build_hierarchical(const CollectiveArgs &args, const std::vector<std::vector<int>> &host_groups) {
    Schedule sched;
    sched.algorithm = "hierarchical";
    if (host_groups.size() < 2 || !is_partition_of_ranks(host_groups, args.nranks)) return sched;
    if (has_root(args.collective) && (args.root < 0 || args.root >= args.nranks)) return sched;
    const HostLayout layout(host_groups);
    if (!serves_hierarchical(args.collective)) return sched;
    // Channels run side by side, so one channel's exchanges within a host
    // overlap another's across the network; a call too small to keep two
    // busy takes one.
    const size_t k = hierarchical_channels(args);
    for (size_t c = 0; c < k; ++c) {
        const size_t lo = piece_begin(args.count, k, c), hi = lo + piece_size(args.count, k, c);
        Blocks blocks;
        blocks.whole_buffer = args.collective == Collective::Allreduce;
        blocks.count = args.count;
        blocks.lo = lo;
        blocks.hi = hi;
        blocks.p = args.nranks;
        blocks.chunk = std::max<size_t>(1, args.chunk_elems);
        switch (args.collective) {
        case Collective::Allreduce: build_allreduce(args, layout, blocks, sched); break;
        case Collective::ReduceScatter: build_reduce_scatter(args, layout, blocks, sched); break;
        case Collective::Allgather: build_allgather(args, layout, blocks, sched); break;
        case Collective::Broadcast: build_broadcast(args, layout, lo, hi, sched); break;
        case Collective::Reduce: build_reduce(args, layout, lo, hi, sched); break;
        default: break;
        }
    }
    return sched;
}

namespace {

bool applies_on_hosts(const CollectiveArgs &args, const Topology &t, std::string *why_not) {
    if (!t.spans_hosts()) {
        if (why_not != nullptr)
            *why_not = "needs ranks on two or more hosts of a host model (a multi-host job, or NNPCCL_TOPO=hosts:...)";
        return false;
    }
    return applies_with_valid_root(args, t, why_not);
}

// The cost, phase by phase (the phases do not overlap): each phase's
// messages' α along its longest chain of hops, plus its flows through the
// machine at once (concurrent(): the busiest link, which for the network
// phases is a host's link shared by its ranks).
double predict_hierarchical_us(const CollectiveArgs &args, const Topology &t, const CostInputs &inputs) {
    const int p = args.nranks;
    if (p <= 1 || !t.spans_hosts()) return kInfinity;
    const std::vector<std::vector<int>> &groups = t.host_groups();
    const int h = static_cast<int>(groups.size());
    size_t most_local = 1;
    for (const auto &g : groups) most_local = std::max(most_local, g.size());
    const double l = static_cast<double>(most_local);
    const double total = static_cast<double>(call_bytes(args)), chunk = chunk_bytes(args);
    const Collective c = args.collective;
    // α within a host and across: the slowest route of each kind.
    double alpha_host = 0, alpha_net = 0;
    for (const auto &g : groups)
        if (g.size() > 1) alpha_host = std::max(alpha_host, t.route(g[0], g[1]).latency_us);
    alpha_net = t.route(groups[0][0], groups[1][0]).latency_us;
    const HostLayout layout(groups);

    std::vector<Flow> host_flows, net_flows;
    double host_alpha = 0, net_alpha = 0;
    if (c == Collective::Allreduce || c == Collective::ReduceScatter || c == Collective::Allgather) {
        // Within each host: a ring whose hops carry (l-1)/l of the data;
        // across: every block crosses h-1 hops of its chain.
        const double block = total / p;
        for (const auto &g : groups)
            for (size_t i = 0; g.size() > 1 && i < g.size(); ++i)
                host_flows.push_back({g[i], g[(i + 1) % g.size()], (g.size() - 1.0) / g.size() * total});
        for (int b = 0; b < p; ++b)
            for (int hop = 0; hop + 1 < h; ++hop)
                net_flows.push_back({layout.agent(layout.chain_host(b, hop), b),
                                     layout.agent(layout.chain_host(b, hop + 1), b), block});
        const double host_pieces = messages(total / l, chunk), block_pieces = messages(block, chunk);
        host_alpha = (l - 1) * host_pieces * alpha_host;
        net_alpha = (h - 1 + block_pieces - 1) * alpha_net;
    } else {
        // A chain across the leaders and a tree within each host, pipelined.
        const double pieces = messages(total, chunk);
        for (int g = 0; g + 1 < h; ++g) net_flows.push_back({groups[g][0], groups[g + 1][0], total});
        for (const auto &g : groups)
            for (size_t i = 1; i < g.size(); ++i) host_flows.push_back({g[(i - 1) / 2], g[i], total});
        host_alpha = (ceil_log2(static_cast<int>(l) + 1) + pieces - 1) * alpha_host;
        net_alpha = (h - 1 + pieces - 1) * alpha_net;
    }
    // Over a network transport the host's bytes take turns on its cores as
    // its α do (CostInputs::host_over_network).
    const double host_bytes_us = concurrent(t, host_flows).transfer_us;
    const double host_us = inputs.host_over_network ? host_lockstep(t, inputs, host_alpha + host_bytes_us)
                                                    : host_lockstep(t, inputs, host_alpha) + host_bytes_us;
    const double net_us = net_alpha + concurrent(t, net_flows).transfer_us;
    double transfer = host_us + net_us;
    if (c == Collective::Allreduce) transfer = 2 * transfer; // each phase again the other way
    double reduced = 0;
    if (c == Collective::Allreduce || c == Collective::ReduceScatter) reduced = (p - 1.0) / p * total;
    if (c == Collective::Reduce) reduced = total;
    return with_reduction(t, inputs, args.elem_size, transfer, reduced);
}

Schedule build_on(const CollectiveArgs &args, const Topology &t) { return build_hierarchical(args, t.host_groups()); }

// Streams per peer the transports open for it: none beyond the one every
// algorithm takes where it cannot run.
int hierarchical_channels_on(const Topology &t) {
    return t.spans_hosts() ? static_cast<int>(kHierarchicalChannels) : 1;
}

} // namespace

const AlgorithmInfo &hierarchical_algorithm() {
    static const AlgorithmInfo info{
        "hierarchical",
        "two levels for a job on several hosts: within each host a ring over shared memory, across hosts a chain "
        "per block between each rank and its counterparts (broadcast and reduce: a chain of the hosts' leaders "
        "under a tree in each host), so each host's network link carries the least",
        "the ranks run on two or more hosts (a multi-host job, or NNPCCL_TOPO=hosts:...)",
        {Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather, Collective::Broadcast,
         Collective::Reduce},
        build_on,
        applies_on_hosts,
        predict_hierarchical_us,
        hierarchical_channels_on};
    return info;
}

} // namespace nnpccl
