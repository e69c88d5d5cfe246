#include "registry.hpp"

#include <string>

namespace nnpccl {

bool AlgorithmInfo::serves_collective(Collective c) const {
    for (Collective s : serves)
        if (s == c) return true;
    return false;
}

const std::vector<AlgorithmInfo> &algorithm_registry() {
    using C = Collective;
    static const std::vector<AlgorithmInfo> registry = {
        {"ring", "pipelined ring on every edge-disjoint ring of the topology, both directions, data split across them",
         "", {C::Allreduce, C::ReduceScatter, C::Allgather, C::Broadcast, C::Reduce}},
        {"direct", "one-shot: every rank sends its data to every other rank in one round",
         "small messages (p-1 times the ring's traffic)", {C::Allreduce}},
        {"dissemination", "ceil(log2 p) rounds of zero-byte messages", "", {C::Barrier}},
    };
    return registry;
}

const AlgorithmInfo *find_algorithm(std::string_view name) {
    for (const AlgorithmInfo &a : algorithm_registry())
        if (name == a.name) return &a;
    return nullptr;
}

std::string algorithm_names_for(Collective c) {
    std::string names;
    for (const AlgorithmInfo &a : algorithm_registry()) {
        if (!a.serves_collective(c)) continue;
        if (!names.empty()) names += ", ";
        names += a.name;
    }
    return names;
}

} // namespace nnpccl
