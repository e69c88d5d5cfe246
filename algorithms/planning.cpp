#include "planning.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

#include "host.hpp"
#include "reduce.hpp"
#include "tuning_file.hpp"

namespace nnpccl {

PlanOptions PlanningInputs::plan_options() const {
    PlanOptions options;
    if (forced != nullptr) options.algo_override = *forced;
    if (preferred != nullptr) options.preferred = *preferred;
    options.costs = costs;
    return options;
}

Status parse_forced_algorithms(const PlanningOptions &planning, std::shared_ptr<const AlgoOverride> *out) {
    out->reset();
    if (planning.algorithms.empty()) return Status::ok();
    auto rules = std::make_shared<AlgoOverride>();
    NNPCCL_TRY(rules->parse(planning.algorithms, planning.algorithms_source));
    *out = std::move(rules);
    return Status::ok();
}

Status local_planning_facts(const PlanningOptions &planning, const TuningOptions &tuning, int nranks,
                            bool host_over_network, PlanningFacts *out) {
    *out = PlanningFacts{};
    out->tune = tuning.enabled;
    if (out->tune) {
        const HostReduceSpeed &speed = host_reduce_speed();
        std::copy(std::begin(speed.us_per_byte), std::end(speed.us_per_byte), out->costs.host_reduce_us_per_byte);
    }
    HostInfo host;
    if (discover_host(&host) && host.cores > 0)
        out->costs.host_ranks_per_core = std::max(1.0, static_cast<double>(nranks) / host.cores);
    out->costs.host_over_network = host_over_network;
    const std::string &path = planning.tuning_file;
    if (path.empty()) return Status::ok();
    std::ifstream in(path, std::ios::binary);
    if (!in) return invalid_argument("NNPCCL_TUNING_FILE=%s: cannot open it", path.c_str());
    std::ostringstream text;
    text << in.rdbuf();
    out->has_tuning_file = true;
    out->tuning_file_text = text.str();
    out->tuning_file_source = "NNPCCL_TUNING_FILE=" + path;
    return Status::ok();
}

Status build_planning_inputs(const PlanningOptions &planning, const PlanningFacts &facts, const Topology &topology,
                             PlanningInputs *out, std::string *ignored_tuning_file) {
    *out = PlanningInputs{};
    if (ignored_tuning_file != nullptr) ignored_tuning_file->clear();
    out->costs = facts.costs;
    out->tune = facts.tune;
    out->chunk_bytes = planning.chunk_bytes;
    NNPCCL_TRY(parse_forced_algorithms(planning, &out->forced));
    if (!facts.has_tuning_file) return Status::ok();
    TuningFile file;
    NNPCCL_TRY(parse_tuning_file(facts.tuning_file_text, facts.tuning_file_source, &file));
    if (file.nranks == topology.nranks() && file.topology == topology.name())
        out->preferred = std::make_shared<const AlgoOverride>(std::move(file.choices));
    else if (ignored_tuning_file != nullptr)
        *ignored_tuning_file = format("%s was measured for %d ranks on %s, not %d on %s: the model chooses",
                                      facts.tuning_file_source.c_str(), file.nranks, file.topology.c_str(),
                                      topology.nranks(), topology.name().c_str());
    return Status::ok();
}

bool may_measure(const CollectiveArgs &args, size_t bytes, const Topology &topology, const PlanningInputs &inputs) {
    if (!inputs.tune || args.nranks <= 1 || args.count == 0 || is_point_to_point(args.collective) ||
        args.collective == Collective::Barrier || topology.machine().shape() != Shape::Flat)
        return false;
    if (inputs.preferred != nullptr && inputs.preferred->pick(args.collective, bytes) != nullptr) return false;
    return inputs.forced == nullptr || inputs.forced->pick(args.collective, bytes) == nullptr;
}

PlanExplanation plan_call(const CollectiveArgs &args, size_t bytes, const Topology &topology,
                          const PlanningInputs &inputs) {
    PlanExplanation e;
    e.chunk_bytes = inputs.chunk_bytes;
    e.status = choose_algorithm(args, bytes, topology, inputs.plan_options(), &e.chosen, &e.predictions);
    // The forcing rules choose without predicting: the explanation still shows every prediction.
    e.forced = e.chosen != nullptr && e.predictions.empty();
    if (e.forced || e.chosen == nullptr) e.predictions = predict_all(args, topology, inputs.costs);
    if (e.chosen != nullptr && !e.forced && inputs.preferred != nullptr) {
        const std::string *preferred = inputs.preferred->pick(args.collective, bytes);
        e.preferred = preferred != nullptr && *preferred == e.chosen->name;
    }
    if (e.chosen != nullptr) e.chunk_bytes = e.chosen->message_elems(args, topology) * args.elem_size;
    if (!e.forced && e.chosen != nullptr && may_measure(args, bytes, topology, inputs)) {
        e.measured = close_candidates(e.predictions, kTuningWindow);
        if (e.measured.size() < 2) e.measured.clear();
    }
    return e;
}

} // namespace nnpccl
