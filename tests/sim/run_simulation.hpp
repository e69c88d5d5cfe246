// The simulator tests' way to run a call: on a fresh Network of `t`,
// requiring the run to succeed (its message shown when it does not).
#pragma once

#include <catch2/catch.hpp>

#include "simulator.hpp"

namespace nnpccl::sim::test {

inline SimResult run_simulation(const Topology &t, const ProgramSource &source, const SimOptions &options = {}) {
    Network network(t);
    SimResult r;
    const Status s = simulate(network, source, options, &r);
    INFO(s.message());
    REQUIRE(s.is_ok());
    return r;
}

} // namespace nnpccl::sim::test
