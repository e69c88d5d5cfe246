// One planning path (docs/design.md, "Life of a call", step 3): the planning
// inputs are built once, by build_planning_inputs(), from the options and
// the facts of the hosts (agreed by every rank in init, this host's alone in
// the tools), and plan_call() turns a call, a machine and those inputs into
// the plan with its explanation. The communicator's selector, nnpccl_explain
// (and so ccl-bench --explain) and ccl-sim all go through these two, so the
// rules (forced, then the tuning file's, then the model's fastest; measured
// where several are close) are written here only.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "algo_override.hpp"
#include "planner.hpp"
#include "planning_options.hpp"
#include "status.hpp"
#include "topology.hpp"

namespace nnpccl {

// Candidates predicted within this factor of the fastest are measured:
// wide enough for the model's worst misses on a host with more ranks than
// cores, where it has ranked halving-doubling at twice the ring's time and
// seen it run faster.
constexpr double kTuningWindow = 2.0;

// What the hosts tell the planner: the cost model's inputs, NNPCCL_TUNE,
// and the tuning file's text. A communicator's ranks agree on them (rank
// 0's tune and file, the most crowded host's ranks per core); a tool takes
// this host's (local_planning_facts()).
struct PlanningFacts {
    CostInputs costs;
    bool tune = false;
    bool has_tuning_file = false;
    std::string tuning_file_text;
    std::string tuning_file_source; // how errors and warnings name it
};

// Everything a plan depends on besides the call and the machine.
struct PlanningInputs {
    CostInputs costs;
    bool tune = false;                             // measured tuning may decide (NNPCCL_TUNE=1)
    std::shared_ptr<const AlgoOverride> forced;    // NNPCCL_ALGO's (or the config's), or null
    std::shared_ptr<const AlgoOverride> preferred; // the tuning file's, where it fits the job; or null
    size_t chunk_bytes = 0;

    PlanOptions plan_options() const;
};

// The algorithms `planning` forces (NNPCCL_ALGO's syntax); null when none.
// A bad token is an invalid argument naming it and where it came from.
Status parse_forced_algorithms(const PlanningOptions &planning, std::shared_ptr<const AlgoOverride> *out);

// This host's facts for a job of `nranks` ranks, as a tool sees them: its
// ranks per core and, with NNPCCL_TUNE=1, its measured reduction speed
// (else the model's fixed figures); NNPCCL_TUNING_FILE read from disk.
Status local_planning_facts(const PlanningOptions &planning, const TuningOptions &tuning, int nranks,
                            bool host_over_network, PlanningFacts *out);

// The planning inputs of a job on `topology`. A tuning file measured for
// another job size or topology is left out, and `ignored_tuning_file`
// (when given) says why; otherwise it is cleared.
Status build_planning_inputs(const PlanningOptions &planning, const PlanningFacts &facts, const Topology &topology,
                             PlanningInputs *out, std::string *ignored_tuning_file = nullptr);

// Whether the ranks may time several algorithms for calls like `args`: a
// collective with several algorithms, more than one rank, the host itself
// rather than a simulated machine (whose speed this host's timings do not
// show), and nothing forced or fixed by a tuning file. Never a call of no
// elements: there is nothing to measure, and the C API returns from most
// such calls without planning them, so a trial's synchronisation would
// wait for ranks that never come.
bool may_measure(const CollectiveArgs &args, size_t bytes, const Topology &topology, const PlanningInputs &inputs);

// A call's plan and why.
struct PlanExplanation {
    Status status; // why nothing was chosen, when nothing was
    const AlgorithmInfo *chosen = nullptr;
    std::vector<Prediction> predictions; // every algorithm serving the collective, in registry order
    bool forced = false;                 // the forcing rules chose
    bool preferred = false;              // the tuning file chose
    // The algorithms the ranks would time before choosing (two or more), or none.
    std::vector<const AlgorithmInfo *> measured;
    size_t chunk_bytes = 0; // the chosen algorithm's message size (the configured chunk when none is chosen)
};

// The plan of `args` (whose bytes are `bytes`, call_bytes(args)) on
// `topology` with `inputs`: the algorithm, every prediction (also when a
// rule forced the choice), which rule chose, and what would be measured.
PlanExplanation plan_call(const CollectiveArgs &args, size_t bytes, const Topology &topology,
                          const PlanningInputs &inputs);

} // namespace nnpccl
