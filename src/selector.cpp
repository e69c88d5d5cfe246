#include "selector.hpp"

#include "log.hpp"

namespace nnpccl {

namespace {

std::string list_predictions(const std::vector<Prediction> &predictions, bool with_reasons) {
    std::string list;
    for (const Prediction &p : predictions) {
        if (!p.applies && !with_reasons) continue;
        list += list.empty() ? "" : ", ";
        list += p.applies ? format("%s %.1f us", p.algorithm->name, p.time_us)
                          : format("%s n/a (%s)", p.algorithm->name, p.why_not.c_str());
    }
    return list;
}

// INFO: which algorithm a call got and what the others would have taken.
void log_plan(const CollectiveArgs &args, const Schedule &chosen, const std::vector<Prediction> &considered,
              bool from_tuning_file, const std::string &forced_by) {
    const std::string how = considered.empty() ? " (forced by " + forced_by + ")"
                            : from_tuning_file ? " (NNPCCL_TUNING_FILE's); predicted: "
                                               : "; predicted: ";
    LOG_INFO("%s of %zu bytes: %s%s%s", collective_name(args.collective), call_bytes(args), chosen.algorithm.c_str(),
             how.c_str(), list_predictions(considered, true).c_str());
}

// INFO: which algorithms the tuner measures for a size class, and the model's figures.
void log_tuning(const CollectiveArgs &args, const TuningEntry &entry, const std::vector<Prediction> &predictions) {
    std::string measured;
    for (const AlgorithmInfo *a : entry.candidates()) measured += (measured.empty() ? "" : ", ") + std::string(a->name);
    LOG_INFO("%s of %zu bytes: measuring %s, %d rounds of %d calls each; predicted: %s",
             collective_name(args.collective), call_bytes(args), measured.c_str(), kTuningRounds, entry.batch(),
             list_predictions(predictions, false).c_str());
}

} // namespace

Status parse_forced_algorithms(const PlanningOptions &planning, std::shared_ptr<const AlgoOverride> *out) {
    out->reset();
    if (planning.algorithms.empty()) return Status::ok();
    auto rules = std::make_shared<AlgoOverride>();
    NNPCCL_TRY(rules->parse(planning.algorithms, planning.algorithms_source));
    *out = std::move(rules);
    return Status::ok();
}

Selector::Selector(const Topology &topology, int rank, const CostInputs &costs, bool tune,
                   std::shared_ptr<const AlgoOverride> forced)
    : topology_(topology), rank_(rank), costs_(costs), tune_(tune), forced_(std::move(forced)) {}

PlanOptions Selector::plan_options() const {
    PlanOptions options;
    if (forced_ != nullptr) options.algo_override = *forced_;
    if (preferred_ != nullptr) options.preferred = *preferred_;
    options.costs = costs_;
    return options;
}

const std::string *Selector::forced_name(const CollectiveArgs &args) const {
    return forced_ != nullptr ? forced_->pick(args.collective, call_bytes(args)) : nullptr;
}

// Measured tuning needs a choice to make and a machine to measure it on:
// a collective with several algorithms, more than one rank, the host itself
// rather than a simulated machine (whose speed this host's timings do not
// show), and nothing forced or fixed by a tuning file. Never a call of no
// elements: there is nothing to measure, and the C API returns from most
// such calls without planning them, so a trial's synchronisation would
// wait for ranks that never come.
bool Selector::may_tune(const CollectiveArgs &args) const {
    if (!tune_ || args.nranks <= 1 || args.count == 0 || is_point_to_point(args.collective) ||
        args.collective == Collective::Barrier ||
        topology_.machine().shape() != Shape::Flat)
        return false;
    if (preferred_ != nullptr && preferred_->pick(args.collective, call_bytes(args)) != nullptr) return false;
    return forced_name(args) == nullptr;
}

// The tuning entry of the call's size class, made on first sight; null
// where the model (or NNPCCL_ALGO) decides: the tuner may not measure the
// call, the communicator is still in its first calls, or the model sees
// only one algorithm close to its fastest.
std::shared_ptr<TuningEntry> Selector::tuning_entry(const CollectiveArgs &args, uint64_t collectives_issued) {
    if (!may_tune(args) || collectives_issued < kTuningAfterCalls) return nullptr;
    const Tuner::Key key = Tuner::key_for(args);
    std::shared_ptr<TuningEntry> entry = tuner_.find(key);
    if (entry == nullptr && !tuner_.model_decides(key)) {
        const std::vector<Prediction> predictions = predict_all(args, topology_, costs_);
        entry = tuner_.add(key, predictions);
        if (entry != nullptr && rank_ == 0 && log_level() >= LogLevel::Info) log_tuning(args, *entry, predictions);
    }
    return entry;
}

Status Selector::choose(const CollectiveArgs &args, uint64_t collectives_issued, Plan *out) {
    *out = Plan{};
    if (std::shared_ptr<TuningEntry> entry = tuning_entry(args, collectives_issued)) {
        out->tuning = entry;
        const AlgorithmInfo *algorithm = entry->next(&out->trial, &out->sync_before, &out->agree_after);
        return algorithm != nullptr ? schedule_with(*algorithm, args, &out->schedule) : Status::ok();
    }
    return model_schedule(args, &out->schedule);
}

// The forced or the model's schedule. A forced algorithm's plan is cached
// under its name, so that a communicator whose forced algorithms change
// (nnpccl_comm_set_algorithms) never runs another's plan.
Status Selector::model_schedule(const CollectiveArgs &args, std::shared_ptr<const Schedule> *out) {
    const std::string *forced = forced_name(args);
    std::lock_guard<std::mutex> lock(plan_mutex_);
    const ScheduleCache::Key key = ScheduleCache::key_for(args, forced != nullptr ? find_algorithm(*forced) : nullptr);
    std::shared_ptr<const Schedule> schedule = cache_.find(key);
    if (schedule == nullptr) {
        // Rank 0 logs each collective's choice once per power-of-two size.
        const bool log = rank_ == 0 && log_level() >= LogLevel::Info &&
                         logged_.insert({static_cast<int>(args.collective), size_class(call_bytes(args))}).second;
        std::vector<Prediction> considered;
        NNPCCL_TRY(plan_schedule(args, topology_, plan_options(), &schedule, log ? &considered : nullptr));
        if (log) {
            const std::string *preferred =
                preferred_ != nullptr ? preferred_->pick(args.collective, call_bytes(args)) : nullptr;
            log_plan(args, *schedule, considered, preferred != nullptr && *preferred == schedule->algorithm,
                     forced_ != nullptr ? forced_->source() : std::string());
        }
        cache_.insert(key, schedule);
    }
    *out = std::move(schedule);
    return Status::ok();
}

Status Selector::schedule_with(const AlgorithmInfo &algorithm, const CollectiveArgs &args,
                               std::shared_ptr<const Schedule> *out) {
    std::lock_guard<std::mutex> lock(plan_mutex_);
    const ScheduleCache::Key key = ScheduleCache::key_for(args, &algorithm);
    std::shared_ptr<const Schedule> schedule = cache_.find(key);
    if (schedule == nullptr) {
        std::string why_not;
        if (!algorithm.applies(args, topology_, &why_not))
            return internal_error("%s was chosen for %s but does not apply: %s", algorithm.name,
                                  collective_name(args.collective), why_not.c_str());
        schedule = std::make_shared<const Schedule>(algorithm.build(args, topology_));
        cache_.insert(key, schedule);
    }
    *out = std::move(schedule);
    return Status::ok();
}

Status Selector::model_choice(const CollectiveArgs &args, const AlgorithmInfo **out) const {
    PlanOptions options;
    options.costs = costs_;
    if (Status chosen = choose_algorithm(args, topology_, options, out); !chosen)
        return internal_error("%s", chosen.message().c_str());
    return Status::ok();
}

Explanation Selector::explain(const CollectiveArgs &args) const {
    Explanation e;
    if (Status chosen = choose_algorithm(args, topology_, plan_options(), &e.chosen, &e.predictions); !chosen)
        e.error = chosen.message();
    e.forced = e.chosen != nullptr && e.predictions.empty();
    if (e.forced || e.chosen == nullptr) e.predictions = predict_all(args, topology_, costs_);
    if (!e.forced && e.chosen != nullptr && may_tune(args)) {
        e.measured = close_candidates(e.predictions, kTuningWindow);
        if (e.measured.size() < 2) e.measured.clear();
    }
    return e;
}

Status Selector::next_algorithm(const CollectiveArgs &args, uint64_t collectives_issued, std::string *name,
                                size_t *tuning_calls_left) {
    if (std::shared_ptr<TuningEntry> entry = tuning_entry(args, collectives_issued)) {
        const AlgorithmInfo *decided = entry->decided();
        *name = decided != nullptr ? decided->name : "";
        *tuning_calls_left = entry->trials_left();
        return Status::ok();
    }
    // Still in the first calls, where an entry may yet be made: one more.
    *tuning_calls_left = may_tune(args) && collectives_issued < kTuningAfterCalls ? 1 : 0;
    std::shared_ptr<const Schedule> schedule;
    NNPCCL_TRY(model_schedule(args, &schedule));
    *name = schedule->algorithm;
    return Status::ok();
}

} // namespace nnpccl
