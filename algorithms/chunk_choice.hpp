// The message size an algorithm runs a call in. On a machine of chips and
// links the model picks it with the algorithm: the call's chunk
// (NNPCCL_CHUNK_SIZE, the largest message a transport slot takes) or a
// half, quarter, ... of it down to kLeastPlannedChunkBytes, whichever the
// algorithm's own prediction has fastest. Smaller messages fill a pipeline
// sooner (a ring's or a torus phase's first message crosses every hop
// before the last rank starts) and pay α more often; which wins depends on
// the algorithm, the size and the machine (on nnpt-pod32 the 2D torus at
// 16-64 MiB runs faster in 128 KiB messages than in 512 KiB ones). On the
// host (`flat`, and jobs across hosts) the chunk stays the configured one:
// there the model's α is the host's own per-message work, which it does not
// weigh against a pipeline's depth, and measured tuning compares
// algorithms at that chunk.
#pragma once

#include <cstddef>

#include "collective.hpp"
#include "topology.hpp"

namespace nnpccl {

struct AlgorithmInfo;

// The least message size the model considers (a candidate is never below
// it unless the call's chunk is), and how many sizes it tries at most.
constexpr size_t kLeastPlannedChunkBytes = 8 * 1024;
constexpr int kMostChunkCandidates = 7;
// A smaller message must be predicted this much faster to be chosen: ties
// and the model's rounding keep the larger one, fewer messages.
constexpr double kSmallerChunkGain = 0.01;

// The elements per message `algorithm` runs `args` in on `topology` (at
// most args.chunk_elems). The same on every rank: the rank does not enter,
// and no measured figure does (CostInputs' host figures play no part off
// the host). Remembered per call shape, since ccl-sim builds every rank's
// schedule of a call.
size_t planned_chunk_elems(const AlgorithmInfo &algorithm, const CollectiveArgs &args, const Topology &topology);

} // namespace nnpccl
