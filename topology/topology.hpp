// The machine a communicator plans on. For now the `flat` model: every pair
// of ranks linked, one ring in rank order. (The simulated NNP-T presets and
// the hwloc host view build on this interface.)
#pragma once

#include <string>
#include <vector>

namespace nnpccl {

class Topology {
public:
    static Topology flat(int nranks);

    const std::string &name() const { return name_; }
    int nranks() const { return nranks_; }
    // Hamiltonian rings over the ranks, each as the sequence of ranks around it.
    const std::vector<std::vector<int>> &rings() const { return rings_; }

private:
    std::string name_;
    int nranks_ = 0;
    std::vector<std::vector<int>> rings_;
};

} // namespace nnpccl
