// The algorithm registry: every schedule nnpccl can run, by name, with the
// collectives it serves, when it applies, how to build it and what it
// costs. Each algorithm's file defines its entry; registry.cpp lists them
// in one table, which the selector, the NNPCCL_ALGO parser and
// nnpccl_inspect.h read (docs/design.md, "Adding an algorithm").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "collective.hpp"
#include "cost_model.hpp"
#include "schedule.hpp"
#include "topology.hpp"

namespace nnpccl {

struct AlgorithmInfo {
    const char *name;
    const char *summary;     // one line for --list-algos
    const char *constraints; // when it applies, in words ("" = always)
    std::vector<Collective> serves;

    // This rank's schedule for a call the algorithm serves and applies to.
    Schedule (*build)(const CollectiveArgs &args, const Topology &topology);
    // Whether it can run the call on the topology; when not, *why_not (if
    // not null) says why, as a phrase ("needs a torus topology ...").
    bool (*applies)(const CollectiveArgs &args, const Topology &topology, std::string *why_not);
    // Its predicted time in µs (cost_model.hpp) for a call it applies to.
    double (*predict_us)(const CollectiveArgs &args, const Topology &topology, const CostInputs &inputs);
    // The most channels its schedules use on the topology.
    int (*channels)(const Topology &topology);

    // The elements per message it runs the call in: on a machine of links
    // the model's choice for it (chunk_choice.hpp), else args.chunk_elems.
    size_t message_elems(const CollectiveArgs &args, const Topology &topology) const;
    // The call as it runs it: args with message_elems() per message.
    CollectiveArgs planned(const CollectiveArgs &args, const Topology &topology) const;
    // Its schedule and its prediction for the call in those messages: what
    // the selector, nnpccl_explain and ccl-sim build and show.
    Schedule build_planned(const CollectiveArgs &args, const Topology &topology) const {
        return build(planned(args, topology), topology);
    }
    double predict_planned_us(const CollectiveArgs &args, const Topology &topology, const CostInputs &inputs) const {
        return predict_us(planned(args, topology), topology, inputs);
    }

    bool serves_collective(Collective c) const;
};

const std::vector<AlgorithmInfo> &algorithm_registry();

// For entries: applies wherever the call's root (or peer) is a rank, and a
// peer not this one; and a schedule of one channel.
bool applies_with_valid_root(const CollectiveArgs &args, const Topology &topology, std::string *why_not);
int one_channel(const Topology &topology);

// nullptr when no algorithm has that name.
const AlgorithmInfo *find_algorithm(std::string_view name);

// The algorithm serving `c` that `name` means: its full name, or a short
// name that fits exactly one of them, a word of its name or its initials
// ("tree" and "dbt" for double_binary_tree, "hd" for halving_doubling).
// nullptr when none does, or when the short name fits several.
const AlgorithmInfo *find_algorithm_for(Collective c, std::string_view name);

// "ring, direct, ..." for error messages: the algorithms serving `c`.
std::string algorithm_names_for(Collective c);

// The most channels any algorithm's schedule uses on `topology`: how many
// streams per peer and direction the transports must open.
int max_schedule_channels(const Topology &topology);

} // namespace nnpccl
