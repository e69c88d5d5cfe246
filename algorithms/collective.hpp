// What a builder is asked to plan: one collective call as seen by one rank.
#pragma once

#include <cstddef>
#include <string_view>

namespace nnpccl {

enum class Collective {
    Allreduce,
    ReduceScatter,
    Allgather,
    Broadcast,
    Reduce,
    Barrier,
    Gather,
    Scatter,
    Alltoall,
    Send,
    Recv,
};

constexpr Collective kAllCollectives[] = {
    Collective::Allreduce, Collective::ReduceScatter, Collective::Allgather, Collective::Broadcast,
    Collective::Reduce,    Collective::Barrier,       Collective::Gather,    Collective::Scatter,
    Collective::Alltoall,  Collective::Send,          Collective::Recv};

// Combines the ranks' data with an op.
constexpr bool reduces(Collective c) {
    return c == Collective::Allreduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}
// A send or recv: `root` is its peer.
constexpr bool is_point_to_point(Collective c) { return c == Collective::Send || c == Collective::Recv; }
// Has a root rank proper (broadcast, reduce, gather, scatter).
constexpr bool has_root(Collective c) {
    return c == Collective::Broadcast || c == Collective::Reduce || c == Collective::Gather || c == Collective::Scatter;
}

const char *collective_name(Collective c);
// The collective whose collective_name() is `name`; false when none is.
bool collective_from_name(std::string_view name, Collective *out);

struct CollectiveArgs {
    Collective collective = Collective::Allreduce;
    // Elements, as NCCL and MPI count them:
    //   allreduce, broadcast, reduce   the whole buffer
    //   reduce-scatter                 the per-rank block (recvcount)
    //   allgather                      the per-rank block (sendcount)
    //   gather                         the per-rank block: every rank sends count, the root receives p·count
    //   scatter                        the per-rank block: the root sends p·count, every rank receives count
    //   alltoall                       the per-pair block: every rank sends and receives p·count
    //   send, recv                     the message
    size_t count = 0;
    // The root of broadcast, reduce, gather and scatter; for send and recv
    // the peer (the destination of a send, the source of a recv).
    int root = -1;
    // In place by pointer equality, as docs/design.md ("Public C API") has it
    // for the other collectives; for gather and scatter only the root's
    // pointers count (every other rank either reads or writes, never both):
    //   gather     the root's send == recv + root·count
    //   scatter    the root's recv == send + root·count
    //   alltoall   send == recv. NCCL has no in-place alltoall, MPI_IN_PLACE
    //              has: the builders stage the send buffer in scratch first
    //              (one more pass over the send buffer, as much scratch)
    //   send, recv never: each has one buffer
    bool in_place = false;
    int rank = 0;
    int nranks = 1;
    size_t chunk_elems = 1; // the most elements one message may carry
    size_t elem_size = 4;   // bytes per element (the planner weighs bytes, not elements)
};

// The bytes of a call as ccl-bench prints them (its size column, and what
// NNPCCL_ALGO size ranges are over): the whole buffer of allreduce,
// broadcast and reduce; p blocks for reduce-scatter, allgather, gather,
// scatter and alltoall; the message of send and recv.
size_t call_bytes(const CollectiveArgs &args);

// busbw = algbw x this (docs/design.md, "Benchmark output"): 2(p-1)/p for
// allreduce, (p-1)/p for the block-wise collectives, 1 otherwise.
double bus_bandwidth_factor(Collective c, int nranks);

} // namespace nnpccl
