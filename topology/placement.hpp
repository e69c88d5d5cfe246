// Placement: which chip each rank runs on. NNP-T jobs on ICL rings and
// meshes must use adjacent chips, so a job smaller than the machine gets a
// connected set of chips, chosen so that a ring can close over links where
// the machine allows it.
#pragma once

#include <string>
#include <vector>

#include "status.hpp"

#include "graph.hpp"
#include "machine.hpp"

namespace nnpccl {

// Sets (*chips)[r] to the chip of rank r for `nranks` ranks on `machine`.
//  - `requested` not empty (a file's placement list): rank r on requested[r].
//  - all chips used: rank r on chip r.
//  - a torus: the most compact block of chips with a Hamiltonian ring (an
//    even-sized block, or whole rows/columns); for an odd count where the
//    torus has no odd ring, a block whose best path closes in two hops;
//    rank r at row-major position r (placement.cpp lists the order of choice).
//  - any other machine: for small machines (up to 64 chips) the chips of a
//    cycle of nranks chips through chip 0, found by bounded search; failing
//    that, a connected set grown from chip 0, taking next the chip with most
//    links into the set (ties: lowest id). Ranks take those chips in id order.
// More ranks than chips, or than the list names, is an error that says so.
Status place_ranks(const Machine &machine, int nranks, const std::vector<int> &requested, std::vector<int> *chips);

// The duplex-link graph of `machine` (vertices are chips).
UndirectedGraph link_graph(const Machine &machine);

} // namespace nnpccl
