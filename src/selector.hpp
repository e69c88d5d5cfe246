// The selector: which algorithm, and so which schedule, each call of a
// communicator runs (docs/design.md, "Life of a call"). In order:
//   1. NNPCCL_ALGO's (or config->algorithms') forced choice for the
//      collective and size;
//   2. measured tuning (tuner.hpp), where the call runs on the host itself
//      (`flat`) and the cost model predicts several algorithms close to its
//      fastest: the ranks time them on the first calls of the size class
//      and agree on the fastest;
//   3. the cost model's fastest prediction.
// Schedules are cached, so a repeated call (a training loop) plans nothing.
// The communicator asks it through choose(); ccl-bench --explain, through
// the public nnpccl_explain, asks explain(), which reads the same rules
// without running or measuring anything.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "algo_override.hpp"
#include "planner.hpp"
#include "planning.hpp"
#include "schedule_cache.hpp"
#include "status.hpp"
#include "topology.hpp"
#include "tuner.hpp"

namespace nnpccl {

// How one call is to run.
struct Plan {
    // Null when the tuner will have decided by the time the call reaches
    // the front of the engine's queue (the agreement ahead of it decides):
    // the caller plans it then, with schedule_with(tuning->decided()).
    std::shared_ptr<const Schedule> schedule;
    std::shared_ptr<TuningEntry> tuning; // set while the tuner owns the call's size class
    int trial = -1;            // a timed trial: its time goes to tuning->record(trial, us)
    bool sync_before = false;  // the caller issues a barrier ahead of the call (a timed batch starts)
    bool agree_after = false;  // the caller issues the tuner's agreement behind it (the last trial)
};

class Selector {
public:
    // Plans for this rank on `topology`, which must outlive the selector.
    // `inputs` are the ones every rank agreed on (build_planning_inputs()).
    Selector(const Topology &topology, int rank, PlanningInputs inputs);

    // The plan of the next call like `args`; `collectives_issued` is how
    // many collectives the communicator numbered before it (the tuner
    // leaves a communicator's first ones to the model). Not thread-safe:
    // the communicator's issuing thread calls it.
    Status choose(const CollectiveArgs &args, uint64_t collectives_issued, Plan *out);
    // The schedule of `args` by `algorithm` (a decision the tuner made late,
    // or the agreement's); cached alike. Any thread.
    Status schedule_with(const AlgorithmInfo &algorithm, const CollectiveArgs &args,
                         std::shared_ptr<const Schedule> *out);
    // The cost model's fastest algorithm, whatever is forced or measured.
    Status model_choice(const CollectiveArgs &args, const AlgorithmInfo **out) const;

    // What choose() would do with `args`, from the model's side: its
    // predictions, choice, and the algorithms the ranks would measure.
    PlanExplanation explain(const CollectiveArgs &args) const {
        return plan_call(args, call_bytes(args), topology_, inputs_);
    }
    // The name of the algorithm the next call like `args` runs ("" while
    // the ranks are measuring) and how many more such calls the tuner will
    // spend measuring (an upper bound during the communicator's first
    // collectives).
    Status next_algorithm(const CollectiveArgs &args, uint64_t collectives_issued, std::string *name,
                          size_t *tuning_calls_left);

    // Whether every call like `args` gets the same schedule from choose()
    // for as long as generation() stays: nothing is measured for it.
    bool settled(const CollectiveArgs &args) const { return !may_measure(args, call_bytes(args), topology_, inputs_); }
    // Changes whenever the rules choose() follows do (force).
    uint64_t generation() const { return generation_; }

    // Replaces the forced algorithms between calls, on every rank alike.
    void force(std::shared_ptr<const AlgoOverride> rules) {
        inputs_.forced = std::move(rules);
        ++generation_;
    }
    const std::shared_ptr<const AlgoOverride> &forced() const { return inputs_.forced; }
    const CostInputs &costs() const { return inputs_.costs; }

private:
    std::shared_ptr<TuningEntry> tuning_entry(const CollectiveArgs &args, size_t bytes, uint64_t collectives_issued);
    Status model_schedule(const CollectiveArgs &args, size_t bytes, std::shared_ptr<const Schedule> *out);

    const Topology &topology_;
    int rank_;
    PlanningInputs inputs_;
    uint64_t generation_ = 0;
    Tuner tuner_; // the issuing thread's

    // Schedules are planned by the issuing thread and, for calls the tuner
    // decides late, by the thread that drives the engine.
    std::mutex plan_mutex_;
    ScheduleCache cache_; // under plan_mutex_
    // (collective, size class) whose choice INFO has logged; under plan_mutex_.
    std::set<std::pair<int, int>> logged_;
};

} // namespace nnpccl
