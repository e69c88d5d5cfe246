#include "planner.hpp"

#include <algorithm>

namespace nnpccl {

namespace {

std::string describe_call(const CollectiveArgs &args, const Topology &topology) {
    return std::string(collective_name(args.collective)) + " of " + std::to_string(call_bytes(args)) +
           " bytes on " + std::to_string(args.nranks) + " ranks of '" + topology.name() + "'";
}

} // namespace

std::vector<Prediction> predict_all(const CollectiveArgs &args, const Topology &topology, const CostInputs &costs) {
    std::vector<Prediction> all;
    const double bytes = static_cast<double>(call_bytes(args));
    for (const AlgorithmInfo &a : algorithm_registry()) {
        if (!a.serves_collective(args.collective)) continue;
        Prediction p;
        p.algorithm = &a;
        p.applies = a.applies(args, topology, &p.why_not);
        if (p.applies) {
            p.chunk_elems = a.message_elems(args, topology);
            p.time_us = a.predict_planned_us(args, topology, costs);
            // GB/s = 1e3 bytes per µs.
            p.busbw_gbps = p.time_us > 0 ? bytes / (p.time_us * 1e3) * bus_bandwidth_factor(args.collective, args.nranks)
                                         : 0;
        }
        all.push_back(std::move(p));
    }
    return all;
}

Status choose_algorithm(const CollectiveArgs &args, const Topology &topology, const PlanOptions &options,
                        const AlgorithmInfo **out, std::vector<Prediction> *considered) {
    return choose_algorithm(args, call_bytes(args), topology, options, out, considered);
}

Status choose_algorithm(const CollectiveArgs &args, size_t bytes, const Topology &topology, const PlanOptions &options,
                        const AlgorithmInfo **out, std::vector<Prediction> *considered) {
    *out = nullptr;
    if (considered != nullptr) considered->clear();
    if (const std::string *forced = options.algo_override.pick(args.collective, bytes)) {
        const AlgorithmInfo *a = find_algorithm(*forced);
        std::string why_not;
        const char *source = options.algo_override.source().c_str();
        if (a == nullptr || !a->serves_collective(args.collective)) // the parser lets neither through
            return invalid_usage("%s forces '%s', which does not serve %s", source, forced->c_str(),
                                 collective_name(args.collective));
        if (a->applies(args, topology, &why_not)) {
            *out = a;
            return Status::ok();
        }
        // A call of no elements moves nothing whichever algorithm runs it
        // (and the C API returns from most without planning them), so it is
        // not refused for the choice: the model picks, as on every rank.
        if (bytes > 0)
            return invalid_usage("%s forces %s for this %s, but it does not apply: %s", source, forced->c_str(),
                                 describe_call(args, topology).c_str(), why_not.c_str());
    }
    std::vector<Prediction> local;
    std::vector<Prediction> &predictions = considered != nullptr ? *considered : local;
    predictions = predict_all(args, topology, options.costs);
    const Prediction *best = nullptr;
    const std::string *preferred = options.preferred.pick(args.collective, bytes);
    for (const Prediction &p : predictions)
        if (p.applies && preferred != nullptr && *preferred == p.algorithm->name) best = &p;
    if (best == nullptr)
        for (const Prediction &p : predictions)
            if (p.applies && (best == nullptr || p.time_us < best->time_us)) best = &p;
    if (best == nullptr) {
        std::string why = "no algorithm applies to this " + describe_call(args, topology);
        for (const Prediction &p : predictions) why += std::string("; ") + p.algorithm->name + ": " + p.why_not;
        return Status(NNPCCL_ERR_INVALID_USAGE, why);
    }
    *out = best->algorithm;
    return Status::ok();
}

std::vector<const AlgorithmInfo *> close_candidates(const std::vector<Prediction> &predictions, double window) {
    std::vector<const Prediction *> close;
    for (const Prediction &p : predictions)
        if (p.applies) close.push_back(&p);
    std::stable_sort(close.begin(), close.end(),
                     [](const Prediction *a, const Prediction *b) { return a->time_us < b->time_us; });
    std::vector<const AlgorithmInfo *> out;
    for (const Prediction *p : close)
        if (out.empty() || (close.front()->time_us > 0 && p->time_us <= window * close.front()->time_us))
            out.push_back(p->algorithm);
    return out;
}

Status plan_schedule(const CollectiveArgs &args, const Topology &topology, const PlanOptions &options,
                     std::shared_ptr<const Schedule> *schedule, std::vector<Prediction> *considered) {
    const AlgorithmInfo *a = nullptr;
    NNPCCL_TRY(choose_algorithm(args, topology, options, &a, considered));
    *schedule = std::make_shared<const Schedule>(a->build_planned(args, topology));
    return Status::ok();
}

} // namespace nnpccl
