// The butterfly exchanges of recursive halving-doubling, for any pairing
// of ranks that forms a hypercube (HalvingDoublingPattern: Rabenseifner's
// XOR of rank bits, or Swing's short-cuts across a torus), on the part of
// the data [lo, hi): of the buffer for an allreduce, of each rank's block
// for a reduce-scatter or allgather, so that several channels can each
// run the butterfly on a piece. See halving_doubling.cpp for the shape and
// cost, swing.cpp for the pairing on a torus.
#pragma once

#include <vector>

#include "collective.hpp"
#include "patterns.hpp"
#include "schedule.hpp"

namespace nnpccl {

struct ButterflyPart {
    size_t lo = 0;
    size_t hi = 0;
    // How many messages of an exchange a rank sends before it waits for
    // its partner's first: one more keeps a link busy while the rank
    // reduces what came in, and needs sends_ahead + 1 slots per stream.
    size_t sends_ahead = 0;
};

// Reduce-scatter by recursive halving, then allgather by recursive
// doubling (bandwidth-optimal: each rank sends (p2-1)/p2 of the data twice).
void butterfly_allreduce(const CollectiveArgs &args, const HalvingDoublingPattern &pattern, ButterflyPart part,
                         std::vector<Step> &out);
// Recursive doubling of the whole part (latency-optimal: log2 p2 messages,
// each the whole part). Every rank combines the same partial sums in each
// round, its own and its partner's, so all hold the same bits. Needs
// 2 * args.count elements of scratch.
void butterfly_doubling_allreduce(const CollectiveArgs &args, const HalvingDoublingPattern &pattern, ButterflyPart part,
                                  std::vector<Step> &out);
// Reduce-scatter by recursive halving; its partial sums live in scratch at
// the send buffer's offsets (args.count * nranks elements).
void butterfly_reduce_scatter(const CollectiveArgs &args, const HalvingDoublingPattern &pattern, ButterflyPart part,
                              std::vector<Step> &out);
// Allgather by recursive doubling.
void butterfly_allgather(const CollectiveArgs &args, const HalvingDoublingPattern &pattern, ButterflyPart part,
                         std::vector<Step> &out);

} // namespace nnpccl
