// The cost model: how long each algorithm takes for one call on a topology,
// from the α-β-γ cost its builder's header states. α and β come from the
// topology: the latency and bandwidth of the rings, trees and routes the
// schedule uses, with links that several transfers cross at once shared
// between them. γ, the host's reduction speed, comes from the caller
// (CostInputs). Times are µs; 1 GB/s is 1e3 bytes per µs.
//
// A prediction is a function of the call's shape (collective, count,
// element size, root, chunk, ranks) and of the topology, never of the rank
// asking (p2p aside, which has nothing to choose between): every rank of a
// communicator computes the same numbers and so picks the same algorithm.
//
// Two rules hold throughout. A message is α plus its bytes over the link:
// a ring or tree step forwards what it received, so the α of every chunk
// lies on the critical path, and an algorithm cut into m messages per rank
// pays m·α (only channels sharing a link hide each other's α). And the
// host reduces on the thread that moves the data, so γ adds to the
// transfers on `flat`; an NNP-T chip reduces in its compute engines at HBM
// speed while its ports move the next chunk, so there γ overlaps them.
#pragma once

#include <cstddef>

#include "collective.hpp"
#include "topology.hpp"

namespace nnpccl {

// What the model cannot read from the topology: how fast the host reduces.
// The caller measures it once per process (src/reduce.hpp); the ranks of a
// communicator use rank 0's figures, so they agree on every choice.
struct CostInputs {
    // γ of the host: µs per byte of output of a sum, by element size 1, 2,
    // 4 and 8 bytes (the slowest datatype of each size: float16 and
    // bfloat16 convert to float32 and back). The defaults, a modest host,
    // serve callers that measure nothing (tests).
    double host_reduce_us_per_byte[4] = {1e-4, 4e-4, 1e-4, 1e-4};
    // Ranks per core on the most crowded host (1 when every rank has a
    // core of its own). See host_lockstep() in cost_model.cpp.
    double host_ranks_per_core = 1;
    // Whether the ranks of a host reach each other over a network
    // transport (NNPCCL_TRANSPORT=socket or ofi) rather than shared
    // memory. The kernel then copies every message on the sender's core
    // and again on the receiver's, so the ring's bytes wait for the ranks
    // sharing a core as every other algorithm's do (host_lockstep()).
    bool host_over_network = false;

    double host_reduce_us(size_t elem_size) const;
};

// The least time any algorithm can take for the call: its bus bytes over
// the slowest chip's injection bandwidth (for allreduce 2(p-1)/p·n / B),
// and on several hosts the bus bytes of h ranks over a host's network link.
double lower_bound_us(const CollectiveArgs &args, const Topology &topology);

} // namespace nnpccl
