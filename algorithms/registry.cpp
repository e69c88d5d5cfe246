#include "registry.hpp"

#include <algorithm>
#include <string>

#include "chunk_choice.hpp"

namespace nnpccl {

bool applies_with_valid_root(const CollectiveArgs &args, const Topology &, std::string *why_not) {
    const bool peer = is_point_to_point(args.collective);
    if (!has_root(args.collective) && !peer) return true;
    if (args.root >= 0 && args.root < args.nranks && !(peer && args.root == args.rank)) return true;
    if (why_not != nullptr)
        *why_not = std::string(peer ? "the peer " : "the root ") + std::to_string(args.root) +
                   (peer && args.root == args.rank ? " is the rank itself"
                                                   : " is not a rank of " + std::to_string(args.nranks));
    return false;
}

int one_channel(const Topology &) { return 1; }

bool AlgorithmInfo::serves_collective(Collective c) const {
    return std::find(serves.begin(), serves.end(), c) != serves.end();
}

size_t AlgorithmInfo::message_elems(const CollectiveArgs &args, const Topology &topology) const {
    return planned_chunk_elems(*this, args, topology);
}

CollectiveArgs AlgorithmInfo::planned(const CollectiveArgs &args, const Topology &topology) const {
    CollectiveArgs out = args;
    out.chunk_elems = message_elems(args, topology);
    return out;
}

// Each algorithm's entry, defined in its own file.
const AlgorithmInfo &ring_algorithm();
const AlgorithmInfo &torus2d_algorithm();
const AlgorithmInfo &hierarchical_algorithm();
const AlgorithmInfo &double_binary_tree_algorithm();
const AlgorithmInfo &halving_doubling_algorithm();
const AlgorithmInfo &swing_algorithm();
const AlgorithmInfo &swing_latency_algorithm();
const AlgorithmInfo &swing_binomial_algorithm();
const AlgorithmInfo &torus_relay_algorithm();
const AlgorithmInfo &torus_trees_algorithm();
const AlgorithmInfo &direct_algorithm();
const AlgorithmInfo &pairwise_algorithm();
const AlgorithmInfo &p2p_algorithm();
const AlgorithmInfo &dissemination_algorithm();

// The table: in order of preference when predictions tie.
const std::vector<AlgorithmInfo> &algorithm_registry() {
    static const std::vector<AlgorithmInfo> registry = {
        ring_algorithm(),
        torus2d_algorithm(),
        hierarchical_algorithm(),
        double_binary_tree_algorithm(),
        halving_doubling_algorithm(),
        swing_algorithm(),
        swing_latency_algorithm(),
        swing_binomial_algorithm(),
        torus_relay_algorithm(),
        torus_trees_algorithm(),
        direct_algorithm(),
        pairwise_algorithm(),
        p2p_algorithm(),
        dissemination_algorithm(),
    };
    return registry;
}

const AlgorithmInfo *find_algorithm(std::string_view name) {
    for (const AlgorithmInfo &a : algorithm_registry())
        if (name == a.name) return &a;
    return nullptr;
}

namespace {

// Whether `name` is a word of `full` ("tree" in "double_binary_tree") or its
// initials ("dbt").
bool short_name_of(std::string_view name, std::string_view full) {
    if (name.empty()) return false;
    std::string initials;
    size_t start = 0;
    while (start <= full.size()) {
        const size_t end = std::min(full.find('_', start), full.size());
        const std::string_view word = full.substr(start, end - start);
        if (word == name) return true;
        if (!word.empty()) initials += word[0];
        start = end + 1;
    }
    return initials.size() > 1 && initials == name;
}

} // namespace

const AlgorithmInfo *find_algorithm_for(Collective c, std::string_view name) {
    if (const AlgorithmInfo *exact = find_algorithm(name)) return exact;
    const AlgorithmInfo *fits = nullptr;
    for (const AlgorithmInfo &a : algorithm_registry()) {
        if (!a.serves_collective(c) || !short_name_of(name, a.name)) continue;
        if (fits != nullptr) return nullptr; // ambiguous
        fits = &a;
    }
    return fits;
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

int max_schedule_channels(const Topology &topology) {
    int most = 1;
    for (const AlgorithmInfo &a : algorithm_registry()) most = std::max(most, a.channels(topology));
    return most;
}

} // namespace nnpccl
