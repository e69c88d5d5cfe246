// The planner: which algorithm serves a call on a topology, and its
// schedule. NNPCCL_ALGO may force one (algo_override.hpp), and a tuning
// file prefer one where it applies (tuning_file.hpp); otherwise every
// registered algorithm that serves and applies to the call is predicted
// (cost_model.hpp) and the fastest wins, ties going to the one the
// registry lists first.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "algo_override.hpp"
#include "cost_model.hpp"
#include "registry.hpp"
#include "status.hpp"

namespace nnpccl {

struct PlanOptions {
    AlgoOverride algo_override; // may be empty
    // NNPCCL_TUNING_FILE's choices (tuning_file.hpp): used where they apply.
    AlgoOverride preferred;
    CostInputs costs;
};

// One algorithm's prediction for a call.
struct Prediction {
    const AlgorithmInfo *algorithm = nullptr;
    bool applies = false;
    std::string why_not; // when it does not apply
    double time_us = 0;   // when it does
    size_t chunk_elems = 0; // when it does: the elements per message it runs in (AlgorithmInfo::message_elems)
    double busbw_gbps = 0;
};

// Every algorithm serving args.collective, in registry order: whether it
// applies, and if so its predicted time and bus bandwidth. Same numbers on
// every rank (the rank does not enter, p2p aside).
std::vector<Prediction> predict_all(const CollectiveArgs &args, const Topology &topology, const CostInputs &costs);

// The algorithm a call gets: the override's for this collective and size
// (call_bytes()) when there is one, else the preferred one where it
// applies, else the fastest applicable one. A
// forced algorithm that does not apply, or no algorithm that does, is an
// invalid usage naming the algorithm and why. `considered`, when given,
// receives predict_all()'s list (empty when forced).
Status choose_algorithm(const CollectiveArgs &args, const Topology &topology, const PlanOptions &options,
                        const AlgorithmInfo **out, std::vector<Prediction> *considered = nullptr);
// The same, for a caller that has `bytes` (call_bytes(args)) already.
Status choose_algorithm(const CollectiveArgs &args, size_t bytes, const Topology &topology, const PlanOptions &options,
                        const AlgorithmInfo **out, std::vector<Prediction> *considered = nullptr);

// The algorithms the model cannot tell apart from its choice: every
// applicable one predicted within `window` times the fastest (only the
// fastest where that takes no time), fastest first, ties in registry order.
// Measured tuning (src/tuner.hpp) tries them on the host.
std::vector<const AlgorithmInfo *> close_candidates(const std::vector<Prediction> &predictions, double window);

// The schedule this rank runs for `args` on `topology`: choose_algorithm()
// then its builder.
Status plan_schedule(const CollectiveArgs &args, const Topology &topology, const PlanOptions &options,
                     std::shared_ptr<const Schedule> *schedule, std::vector<Prediction> *considered = nullptr);

} // namespace nnpccl
