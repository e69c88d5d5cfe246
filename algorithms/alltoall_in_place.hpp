// What both alltoall algorithms (pairwise.cpp, direct.cpp) share: the
// rank's own block, and sending in place from copies in scratch.
//
// In place (send == recv, as MPI_IN_PLACE; NCCL has no in-place alltoall)
// a rank receives chunk c of block j where it sent chunk c of block j
// from. A transport that sends from the user's memory (sends_in_place)
// keeps that place busy until the peer has taken the chunk, which the peer
// does only once its own send to us has been taken: each would wait for the
// other. So in place every chunk is first copied to scratch and sent from
// there, into two alternating sets of scratch (a set's sends finish while
// the other set's go out; direct's one set when a block is one chunk):
// (p-1)·m bytes of memcpy, and for direct 2(p-1) chunks of scratch, for
// pairwise 2 (its sets alternate across rounds too), where
// both used to hold a copy of the whole call (64 MiB resident at 64 MiB).
#pragma once

#include <algorithm>

#include "collective.hpp"
#include "schedule.hpp"
#include "step_list.hpp"

namespace nnpccl {

inline size_t alltoall_block_begin(const CollectiveArgs &args, int rank) {
    return static_cast<size_t>(rank) * args.count;
}

// Our own block goes straight across (or stays, in place).
inline void copy_own_alltoall_block(const CollectiveArgs &args, Schedule &sched) {
    if (args.in_place) return;
    const size_t mine = alltoall_block_begin(args, args.rank);
    StepList(sched.channels[0]).add(kStore, -1, -1, BufRef{Buf::Send, mine}, BufRef{Buf::Recv, mine}, args.count);
}

// In place: chunk `index` of `per_set` in scratch set `set` (of `sets`),
// scratch grown to hold them all; `chunk` is the largest chunk.
inline BufRef alltoall_copy_slot(const CollectiveArgs &args, size_t chunk, Schedule &sched, size_t set, size_t sets,
                                 int index, int per_set) {
    const size_t slot = std::min(chunk, args.count);
    sched.scratch_elems = std::max(sched.scratch_elems, sets * static_cast<size_t>(per_set) * slot);
    return BufRef{Buf::Scratch, (set * static_cast<size_t>(per_set) + static_cast<size_t>(index)) * slot};
}

// Two steps, not one store-and-send: a transport that sends in place
// would send a plain copy's source, the user's memory.
inline void send_from_copy(StepList &steps, int to, const BufRef &from, size_t count, const BufRef &copy) {
    steps.add(kStore, -1, -1, from, copy, count);
    steps.add(kSend, -1, to, copy, {}, count);
}

} // namespace nnpccl
