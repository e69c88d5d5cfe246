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
void log_plan(const CollectiveArgs &args, size_t bytes, const Schedule &chosen, const PlanExplanation &plan,
              const std::string &forced_by) {
    const std::string how = plan.forced      ? " (forced by " + forced_by + ")"
                            : plan.preferred ? " (NNPCCL_TUNING_FILE's); predicted: "
                                             : "; predicted: ";
    LOG_INFO("%s of %zu bytes: %s%s%s; messages of up to %zu bytes", collective_name(args.collective), bytes,
             chosen.algorithm.c_str(), how.c_str(), plan.forced ? "" : list_predictions(plan.predictions, true).c_str(),
             plan.chunk_bytes);
}

// INFO: which algorithms the tuner measures for a size class, and the model's figures.
void log_tuning(const CollectiveArgs &args, size_t bytes, const TuningEntry &entry,
                const std::vector<Prediction> &predictions) {
    std::string measured;
    for (const AlgorithmInfo *a : entry.candidates()) measured += (measured.empty() ? "" : ", ") + std::string(a->name);
    LOG_INFO("%s of %zu bytes: measuring %s, %d rounds of %d calls each; predicted: %s",
             collective_name(args.collective), bytes, measured.c_str(), kTuningRounds, entry.batch(),
             list_predictions(predictions, false).c_str());
}

} // namespace

Selector::Selector(const Topology &topology, int rank, PlanningInputs inputs)
    : topology_(topology), rank_(rank), inputs_(std::move(inputs)) {}

// The tuning entry of the call's size class, made on first sight; null
// where the model (or NNPCCL_ALGO) decides: the tuner may not measure the
// call, the communicator is still in its first calls, or the model sees
// only one algorithm close to its fastest.
std::shared_ptr<TuningEntry> Selector::tuning_entry(const CollectiveArgs &args, size_t bytes,
                                                    uint64_t collectives_issued) {
    if (!may_measure(args, bytes, topology_, inputs_) || collectives_issued < kTuningAfterCalls) return nullptr;
    const Tuner::Key key = Tuner::key_for(args, bytes);
    std::shared_ptr<TuningEntry> entry = tuner_.find(key);
    if (entry == nullptr && !tuner_.model_decides(key)) {
        const std::vector<Prediction> predictions = predict_all(args, topology_, inputs_.costs);
        entry = tuner_.add(key, predictions);
        if (entry != nullptr && rank_ == 0 && log_level() >= LogLevel::Info)
            log_tuning(args, bytes, *entry, predictions);
    }
    return entry;
}

Status Selector::choose(const CollectiveArgs &args, uint64_t collectives_issued, Plan *out) {
    *out = Plan{};
    const size_t bytes = call_bytes(args);
    if (std::shared_ptr<TuningEntry> entry = tuning_entry(args, bytes, collectives_issued)) {
        out->tuning = entry;
        const AlgorithmInfo *algorithm = entry->next(&out->trial, &out->sync_before, &out->agree_after);
        return algorithm != nullptr ? schedule_with(*algorithm, args, &out->schedule) : Status::ok();
    }
    return model_schedule(args, bytes, &out->schedule);
}

// The forced or the model's schedule. A forced algorithm's plan is cached
// under its name, so that a communicator whose forced algorithms change
// (nnpccl_comm_set_algorithms) never runs another's plan.
Status Selector::model_schedule(const CollectiveArgs &args, size_t bytes, std::shared_ptr<const Schedule> *out) {
    const std::string *forced = inputs_.forced != nullptr ? inputs_.forced->pick(args.collective, bytes) : nullptr;
    std::lock_guard<std::mutex> lock(plan_mutex_);
    const ScheduleCache::Key key = ScheduleCache::key_for(args, forced != nullptr ? find_algorithm(*forced) : nullptr);
    std::shared_ptr<const Schedule> schedule = cache_.find(key);
    if (schedule == nullptr) {
        const PlanExplanation plan = plan_call(args, bytes, topology_, inputs_);
        NNPCCL_TRY(plan.status);
        schedule = std::make_shared<const Schedule>(plan.chosen->build_planned(args, topology_));
        // Rank 0 logs each collective's choice once per power-of-two size.
        if (rank_ == 0 && log_level() >= LogLevel::Info &&
            logged_.insert({static_cast<int>(args.collective), size_class(bytes)}).second)
            log_plan(args, bytes, *schedule, plan,
                     inputs_.forced != nullptr ? inputs_.forced->source() : std::string());
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
        schedule = std::make_shared<const Schedule>(algorithm.build_planned(args, topology_));
        cache_.insert(key, schedule);
    }
    *out = std::move(schedule);
    return Status::ok();
}

Status Selector::model_choice(const CollectiveArgs &args, const AlgorithmInfo **out) const {
    PlanOptions options;
    options.costs = inputs_.costs;
    if (Status chosen = choose_algorithm(args, topology_, options, out); !chosen)
        return internal_error("%s", chosen.message().c_str());
    return Status::ok();
}

Status Selector::next_algorithm(const CollectiveArgs &args, uint64_t collectives_issued, std::string *name,
                                size_t *tuning_calls_left) {
    const size_t bytes = call_bytes(args);
    if (std::shared_ptr<TuningEntry> entry = tuning_entry(args, bytes, collectives_issued)) {
        const AlgorithmInfo *decided = entry->decided();
        *name = decided != nullptr ? decided->name : "";
        *tuning_calls_left = entry->trials_left();
        return Status::ok();
    }
    // Still in the first calls, where an entry may yet be made: one more.
    *tuning_calls_left = may_measure(args, bytes, topology_, inputs_) && collectives_issued < kTuningAfterCalls ? 1 : 0;
    std::shared_ptr<const Schedule> schedule;
    NNPCCL_TRY(model_schedule(args, bytes, &schedule));
    *name = schedule->algorithm;
    return Status::ok();
}

} // namespace nnpccl
