// include/nnpccl_inspect.h: the selector's choices and the cost model's
// figures, from the planning path the communicator's selector takes
// (algorithms/planning.hpp).
#include <algorithm>
#include <cstring>
#include <iterator>

#include "api_support.hpp"
#include "dtype.hpp"
#include "host.hpp"
#include "nnpccl_inspect.h"
#include "planning.hpp"
#include "reduce.hpp"

using namespace nnpccl;

static_assert(static_cast<int>(NNPCCL_COLL_ALLREDUCE) == static_cast<int>(Collective::Allreduce) &&
                  static_cast<int>(NNPCCL_COLL_REDUCE_SCATTER) == static_cast<int>(Collective::ReduceScatter) &&
                  static_cast<int>(NNPCCL_COLL_ALLGATHER) == static_cast<int>(Collective::Allgather) &&
                  static_cast<int>(NNPCCL_COLL_BROADCAST) == static_cast<int>(Collective::Broadcast) &&
                  static_cast<int>(NNPCCL_COLL_REDUCE) == static_cast<int>(Collective::Reduce) &&
                  static_cast<int>(NNPCCL_COLL_BARRIER) == static_cast<int>(Collective::Barrier) &&
                  static_cast<int>(NNPCCL_COLL_GATHER) == static_cast<int>(Collective::Gather) &&
                  static_cast<int>(NNPCCL_COLL_SCATTER) == static_cast<int>(Collective::Scatter) &&
                  static_cast<int>(NNPCCL_COLL_ALLTOALL) == static_cast<int>(Collective::Alltoall) &&
                  static_cast<int>(NNPCCL_COLL_SEND) == static_cast<int>(Collective::Send) &&
                  static_cast<int>(NNPCCL_COLL_RECV) == static_cast<int>(Collective::Recv) &&
                  static_cast<size_t>(NNPCCL_NUM_COLLECTIVES) == std::size(kAllCollectives),
              "nnpccl_collective_t mirrors nnpccl::Collective");

namespace {

bool valid_collective(int c) { return c >= 0 && c < NNPCCL_NUM_COLLECTIVES; }

template <size_t N> void copy_text(char (&out)[N], const std::string &text) {
    const size_t n = std::min(N - 1, text.size());
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
}

// The call `c` describes, before the communicator completes it.
Status read_call(const nnpccl_call_t *c, Call *out) {
    if (c == nullptr) return invalid_argument("call is NULL");
    if (!valid_collective(c->collective))
        return invalid_argument("call->collective=%d is not an nnpccl_collective_t (0..%d)",
                                static_cast<int>(c->collective), NNPCCL_NUM_COLLECTIVES - 1);
    const Collective collective = static_cast<Collective>(c->collective);
    if (collective != Collective::Barrier && !valid_datatype(c->datatype))
        return invalid_argument("call->datatype=%d is not an nnpccl_datatype_t (0..%d)",
                                static_cast<int>(c->datatype), NNPCCL_NUM_DATATYPES - 1);
    if (reduces(collective) && !valid_redop(c->op))
        return invalid_argument("call->op=%d is not an nnpccl_redop_t (0..%d)", static_cast<int>(c->op),
                                NNPCCL_NUM_OPS - 1);
    *out = Call{};
    out->collective = collective;
    out->send = c->sendbuf;
    out->recv = c->recvbuf;
    out->count = c->count;
    out->datatype = collective == Collective::Barrier ? NNPCCL_UINT8 : c->datatype;
    out->op = reduces(collective) ? c->op : NNPCCL_SUM;
    out->root = has_root(collective) || is_point_to_point(collective) ? c->root : -1;
    return Status::ok();
}

Status check_root(const Call &call, int nranks) {
    if ((has_root(call.collective) || is_point_to_point(call.collective)) && (call.root < 0 || call.root >= nranks))
        return invalid_argument("call->root=%d is out of range: the communicator has ranks 0..%d", call.root,
                                nranks - 1);
    return Status::ok();
}

// `rules`, when not NULL, stand in for NNPCCL_ALGO.
Status explain(const char *topology_spec, int nranks, const nnpccl_call_t *c, const char *rules,
               nnpccl_prediction_t *predictions, int capacity, int *count, nnpccl_explanation_t *out) {
    if (predictions == nullptr && capacity > 0) return invalid_argument("predictions is NULL with capacity=%d", capacity);
    if (capacity < 0) return invalid_argument("capacity=%d is negative", capacity);
    if (count == nullptr) return invalid_argument("count (the output pointer) is NULL");
    if (out == nullptr) return invalid_argument("explanation (the output pointer) is NULL");
    if (nranks < 0) return invalid_argument("nranks=%d is negative", nranks);
    Call call;
    NNPCCL_TRY(read_call(c, &call));
    Settings settings;
    NNPCCL_TRY(resolve_settings(nullptr, &settings));
    if (rules != nullptr) {
        settings.planning.algorithms = rules;
        settings.planning.algorithms_source = "NNPCCL_ALGO";
    }
    const std::string spec = topology_spec != nullptr ? topology_spec : "";
    Topology topology;
    const bool host_over_network = network_only(settings.transport);
    if (Status loaded = load_topology(spec, nranks, topology_options(settings.planning, host_over_network), &topology);
        !loaded) {
        const std::string named = "topology '" + (spec.empty() ? std::string("flat") : spec) + "'";
        if (loaded.message().find(named) != std::string::npos) return invalid_argument("%s", loaded.message().c_str());
        return invalid_argument("%s: %s", named.c_str(), loaded.message().c_str());
    }
    NNPCCL_TRY(check_root(call, topology.nranks()));
    // Buffers are not read here: two NULLs are a call out of place.
    const bool no_buffers = call.send == nullptr && call.recv == nullptr;
    complete_call(&call, 0, topology.nranks(), settings.planning.chunk_bytes);
    if (no_buffers) call.in_place = false;

    const size_t bytes = call_bytes(call);
    PlanningFacts facts;
    NNPCCL_TRY(local_planning_facts(settings.planning, settings.tuning, topology.nranks(), host_over_network, &facts));
    PlanningInputs inputs;
    NNPCCL_TRY(build_planning_inputs(settings.planning, facts, topology, &inputs));
    const PlanExplanation e = plan_call(call, bytes, topology, inputs);
    *out = nnpccl_explanation_t{};
    copy_text(out->topology, topology.name());
    out->nranks = topology.nranks();
    out->chunk_bytes = e.chunk_bytes;
    out->host_reduce_us_per_byte = inputs.costs.host_reduce_us(call.elem_size);
    out->ranks_per_core = inputs.costs.host_ranks_per_core;
    out->algorithms_forced = inputs.forced != nullptr ? 1 : 0;
    out->tunes = inputs.tune && topology.nranks() > 1 && topology.machine().shape() == Shape::Flat;
    out->forced = e.forced ? 1 : 0;
    copy_text(out->chosen, e.chosen != nullptr ? e.chosen->name : "");
    copy_text(out->error, e.status.is_ok() ? std::string() : e.status.message());
    out->injection_gbps = topology.min_injection_gbps();
    out->lower_bound_us = lower_bound_us(call, topology);
    out->lower_bound_busbw_gbps = out->lower_bound_us > 0 ? static_cast<double>(bytes) / (out->lower_bound_us * 1e3) *
                                                                bus_bandwidth_factor(call.collective, topology.nranks())
                                                          : 0;
    *count = 0;
    for (const Prediction &p : e.predictions) {
        if (*count >= capacity) break;
        nnpccl_prediction_t &row = predictions[(*count)++];
        row = nnpccl_prediction_t{};
        row.algorithm = p.algorithm->name;
        row.applies = p.applies ? 1 : 0;
        row.time_us = p.time_us;
        row.busbw_gbps = p.busbw_gbps;
        row.chosen = p.algorithm == e.chosen ? 1 : 0;
        row.measured = std::find(e.measured.begin(), e.measured.end(), p.algorithm) != e.measured.end() ? 1 : 0;
        copy_text(row.why_not, p.why_not);
    }
    return Status::ok();
}

} // namespace

extern "C" {

const char *nnpccl_collective_name(nnpccl_collective_t collective) {
    return valid_collective(collective) ? collective_name(static_cast<Collective>(collective)) : nullptr;
}

nnpccl_result_t nnpccl_collective_from_name(const char *name, nnpccl_collective_t *collective) {
    if (name == nullptr) return report(nullptr, invalid_argument("name is NULL"));
    if (collective == nullptr) return report(nullptr, invalid_argument("collective (the output pointer) is NULL"));
    Collective c;
    if (!collective_from_name(name, &c)) return report(nullptr, invalid_argument("'%s' is no collective", name));
    *collective = static_cast<nnpccl_collective_t>(c);
    return NNPCCL_SUCCESS;
}

size_t nnpccl_datatype_size(nnpccl_datatype_t datatype) {
    return valid_datatype(datatype) ? datatype_size(datatype) : 0;
}

const char *nnpccl_datatype_name(nnpccl_datatype_t datatype) {
    return valid_datatype(datatype) ? datatype_name(datatype) : nullptr;
}

nnpccl_result_t nnpccl_datatype_from_name(const char *name, nnpccl_datatype_t *datatype) {
    if (name == nullptr) return report(nullptr, invalid_argument("name is NULL"));
    if (datatype == nullptr) return report(nullptr, invalid_argument("datatype (the output pointer) is NULL"));
    if (!parse_datatype(name, datatype)) return report(nullptr, invalid_argument("'%s' is no datatype", name));
    return NNPCCL_SUCCESS;
}

const char *nnpccl_redop_name(nnpccl_redop_t op) { return valid_redop(op) ? redop_name(op) : nullptr; }

nnpccl_result_t nnpccl_redop_from_name(const char *name, nnpccl_redop_t *op) {
    if (name == nullptr) return report(nullptr, invalid_argument("name is NULL"));
    if (op == nullptr) return report(nullptr, invalid_argument("op (the output pointer) is NULL"));
    if (!parse_redop(name, op)) return report(nullptr, invalid_argument("'%s' is no reduction op", name));
    return NNPCCL_SUCCESS;
}

int nnpccl_algorithm_count(void) { return static_cast<int>(algorithm_registry().size()); }

nnpccl_result_t nnpccl_algorithm_get(int index, nnpccl_algorithm_info_t *info) {
    const std::vector<AlgorithmInfo> &all = algorithm_registry();
    if (index < 0 || static_cast<size_t>(index) >= all.size())
        return report(nullptr, invalid_argument("index=%d is out of range: the registry has algorithms 0..%zu", index,
                                                all.size() - 1));
    if (info == nullptr) return report(nullptr, invalid_argument("info (the output pointer) is NULL"));
    const AlgorithmInfo &a = all[static_cast<size_t>(index)];
    info->name = a.name;
    info->summary = a.summary;
    info->constraints = a.constraints;
    info->serves = 0;
    for (Collective c : a.serves) info->serves |= 1u << static_cast<unsigned>(c);
    return NNPCCL_SUCCESS;
}

nnpccl_result_t nnpccl_comm_set_algorithms(nnpccl_comm_t comm, const char *rules) {
    CallGuard guard(comm);
    NNPCCL_TRY_REPORT(nullptr, guard.check_live());
    if (used_after_fork(comm)) return report_forked(comm);
    NNPCCL_TRY_REPORT(comm, guard.check_open());
    NNPCCL_TRY_REPORT(comm, check_ready(comm));
    std::shared_ptr<const AlgoOverride> forced = comm->configured_algorithms();
    if (rules != nullptr) {
        PlanningOptions planning;
        planning.algorithms = rules;
        planning.algorithms_source = "nnpccl_comm_set_algorithms";
        NNPCCL_TRY_REPORT(comm, parse_forced_algorithms(planning, &forced));
    }
    comm->force_algorithms(std::move(forced));
    return NNPCCL_SUCCESS;
}

nnpccl_result_t nnpccl_comm_get_algorithm(nnpccl_comm_t comm, const nnpccl_call_t *call, char *name,
                                          size_t name_bytes, size_t *tuning_calls_left) {
    CallGuard guard(comm);
    NNPCCL_TRY_REPORT(nullptr, guard.check_live());
    if (used_after_fork(comm)) return report_forked(comm);
    NNPCCL_TRY_REPORT(comm, guard.check_open());
    NNPCCL_TRY_REPORT(comm, check_ready(comm));
    if (name == nullptr || name_bytes == 0)
        return report(comm, invalid_argument("name is NULL or name_bytes is 0: there is nowhere to write the name"));
    Call planned;
    NNPCCL_TRY_REPORT(comm, read_call(call, &planned));
    NNPCCL_TRY_REPORT(comm, check_root(planned, comm->nranks()));
    comm->complete(&planned);
    std::string chosen;
    size_t left = 0;
    NNPCCL_TRY_REPORT(comm, comm->next_algorithm(planned, &chosen, &left));
    if (chosen.size() >= name_bytes)
        return report(comm, invalid_argument("name_bytes=%zu cannot hold '%s'", name_bytes, chosen.c_str()));
    std::memcpy(name, chosen.c_str(), chosen.size() + 1);
    if (tuning_calls_left != nullptr) *tuning_calls_left = left;
    return NNPCCL_SUCCESS;
}

nnpccl_result_t nnpccl_explain(const char *topology, int nranks, const nnpccl_call_t *call,
                               nnpccl_prediction_t *predictions, int capacity, int *count,
                               nnpccl_explanation_t *explanation) {
    return report(nullptr, explain(topology, nranks, call, nullptr, predictions, capacity, count, explanation));
}

nnpccl_result_t nnpccl_explain_with_rules(const char *topology, int nranks, const nnpccl_call_t *call,
                                          const char *rules, nnpccl_prediction_t *predictions, int capacity,
                                          int *count, nnpccl_explanation_t *explanation) {
    return report(nullptr, explain(topology, nranks, call, rules, predictions, capacity, count, explanation));
}

} // extern "C"
