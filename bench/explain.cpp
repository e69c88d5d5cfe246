#include "explain.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config.hpp"
#include "dtype.hpp"
#include "host.hpp"
#include "planner.hpp"
#include "reduce.hpp"
#include "topology.hpp"
#include "tuner.hpp"

namespace nnpccl_bench {

using namespace nnpccl;

namespace {

// Widths of one candidate's two columns, time (µs) and busbw (GB/s).
constexpr int kTimeWidth = 11;
constexpr int kBusbwWidth = 8;
constexpr int kCandidateWidth = kTimeWidth + 1 + kBusbwWidth + 2;

// As many decimals as the width allows, as nccl-tests prints its numbers.
std::string number(double v, int width) {
    char buf[32];
    if (v < 1e4) std::snprintf(buf, sizeof buf, "%.2f", v);
    else if (v < 1e7) std::snprintf(buf, sizeof buf, "%.0f", v);
    else std::snprintf(buf, sizeof buf, "%.3e", v);
    std::string s = buf;
    return std::string(static_cast<size_t>(std::max(0, width - static_cast<int>(s.size()))), ' ') + s;
}

std::string collectives_of(const AlgorithmInfo &a) {
    std::string list;
    for (Collective c : a.serves) list += (list.empty() ? "" : ", ") + std::string(collective_name(c));
    return list;
}

// The sweep's sizes in bytes, rounded down to whole elements (and whole
// blocks for the block-wise collectives), as the benchmark runs them.
std::vector<size_t> sweep(const ExplainRequest &r, size_t unit) {
    std::vector<size_t> sizes;
    for (size_t bytes = r.min_bytes; bytes <= r.max_bytes;) {
        sizes.push_back(bytes / unit * unit);
        const size_t next = r.step_bytes != 0 ? bytes + r.step_bytes : bytes * r.step_factor;
        if (next <= bytes) break;
        bytes = next;
    }
    return sizes;
}

} // namespace

void print_algorithm_list() {
    std::printf("# nnpccl algorithms; force one with NNPCCL_ALGO=collective:algorithm[:low-high],... or --algo\n");
    for (const AlgorithmInfo &a : algorithm_registry()) {
        std::printf("%-20s serves:  %s\n", a.name, collectives_of(a).c_str());
        std::printf("%-20s applies: %s\n", "", a.constraints[0] != '\0' ? a.constraints : "always");
        std::printf("%-20s %s\n", "", a.summary);
    }
}

bool check_algorithm_name(Collective collective, const std::string &name, std::string *error) {
    const AlgorithmInfo *a = find_algorithm(name);
    if (a != nullptr && a->serves_collective(collective)) return true;
    *error = (a == nullptr ? "unknown algorithm '" + name + "'" : "algorithm '" + name + "' does not serve " +
                                                                      collective_name(collective)) +
             " (" + collective_name(collective) + " has: " + algorithm_names_for(collective) +
             "; see --list-algos)";
    return false;
}

int explain_plans(const ExplainRequest &request) {
    Settings settings;
    Status st = resolve_settings(nullptr, &settings);
    if (!st) {
        std::fprintf(stderr, "ccl-bench: %s\n", st.message().c_str());
        return 2;
    }
    Topology topology;
    std::string error;
    const std::string spec = request.topology.empty() ? "flat" : request.topology;
    if (!load_topology(spec, request.nranks, &topology, &error)) {
        std::fprintf(stderr, "ccl-bench: --explain: %s%s\n", error.c_str(),
                     request.nranks <= 0 ? " (give the number of ranks with --np N)" : "");
        return 2;
    }
    const int p = topology.nranks();
    const size_t elem = datatype_size(request.datatype);
    PlanOptions options;
    if (!settings.planning.algorithms.empty() &&
        !options.algo_override.parse(settings.planning.algorithms, &error, settings.planning.algorithms_source)) {
        std::fprintf(stderr, "ccl-bench: %s\n", error.c_str());
        return 2;
    }
    const HostReduceSpeed &speed = host_reduce_speed();
    std::copy(std::begin(speed.us_per_byte), std::end(speed.us_per_byte), options.costs.host_reduce_us_per_byte);
    // As if the ranks ran on this host, as ccl-bench --np runs them.
    HostInfo host;
    std::string host_error;
    if (discover_host(&host, &host_error) && host.cores > 0)
        options.costs.host_ranks_per_core = std::max(1.0, static_cast<double>(p) / host.cores);

    CollectiveArgs args;
    args.collective = request.collective;
    args.nranks = p;
    args.rank = 0;
    args.root = request.root;
    args.elem_size = elem;
    args.chunk_elems = std::max<size_t>(1, settings.planning.chunk_bytes / elem);
    const bool blockwise = request.collective == Collective::ReduceScatter || request.collective == Collective::Allgather;
    const std::vector<size_t> sizes = sweep(request, elem * (blockwise ? static_cast<size_t>(p) : 1));

    std::printf("# ccl-bench %s --explain: predictions on %s, %d ranks; no ranks run\n",
                collective_name(request.collective), topology.name().c_str(), p);
    std::printf("# %s (%zu B), chunk %zu B, host reduction %.3g ns/B (%zu-byte sums), %.3g ranks per core, "
                "NNPCCL_ALGO %s\n",
                datatype_name(request.datatype), elem, settings.planning.chunk_bytes,
                options.costs.host_reduce_us(elem) * 1e3, elem, options.costs.host_ranks_per_core,
                options.algo_override.empty() ? "unset" : "set");
    std::printf("# time in us, busbw in GB/s; * marks the choice; bound: the bus bytes at the slowest chip's "
                "injection, %g GB/s\n", topology.min_injection_gbps());
    const bool tunes = settings.tuning.enabled && p > 1 && topology.machine().shape() == Shape::Flat;
    if (tunes)
        std::printf("# on flat the ranks measure the algorithms predicted within %gx of the fastest at each size's "
                    "first calls and run the fastest measured (NNPCCL_TUNE=0: the model alone)\n",
                    kTuningWindow);
    std::vector<const AlgorithmInfo *> candidates;
    for (const AlgorithmInfo &a : algorithm_registry())
        if (a.serves_collective(request.collective)) candidates.push_back(&a);
    std::printf("#       size         count");
    for (const AlgorithmInfo *a : candidates) std::printf("  %-*s", kCandidateWidth - 2, a->name);
    std::printf("  %-*s  choice\n", kCandidateWidth - 2, "bound");
    std::printf("#        (B)    (elements)");
    for (size_t i = 0; i <= candidates.size(); ++i) std::printf("  %*s %*s", kTimeWidth, "time", kBusbwWidth, "busbw");
    std::printf("\n");

    std::set<std::pair<std::string, std::string>> not_applying; // (algorithm, why), noted once each
    int status = 0;
    for (size_t bytes : sizes) {
        args.count = bytes / elem / (blockwise ? static_cast<size_t>(p) : 1);
        std::vector<Prediction> considered;
        const AlgorithmInfo *chosen = choose_algorithm(args, topology, options, &error, &considered);
        const bool forced = chosen != nullptr && considered.empty();
        if (forced || chosen == nullptr) considered = predict_all(args, topology, options.costs);
        std::printf("%12zu  %12zu", bytes, args.count);
        for (const Prediction &pr : considered) {
            if (!pr.applies) {
                not_applying.insert({pr.algorithm->name, pr.why_not});
                std::printf("  %*s %*s", kTimeWidth, "n/a", kBusbwWidth, "");
                continue;
            }
            const std::string time = number(pr.time_us, kTimeWidth - 1) + (pr.algorithm == chosen ? "*" : " ");
            std::printf("  %s %s", time.c_str(), number(pr.busbw_gbps, kBusbwWidth).c_str());
        }
        const double bound = lower_bound_us(args, topology);
        const double bound_busbw =
            bound > 0 ? static_cast<double>(bytes) / (bound * 1e3) * bus_bandwidth_factor(args.collective, p) : 0;
        std::printf("  %s  %s", number(bound, kTimeWidth).c_str(), number(bound_busbw, kBusbwWidth).c_str());
        if (chosen == nullptr) {
            std::printf("  none: %s\n", error.c_str());
            status = 2;
        } else {
            // Where the ranks would measure instead of trusting the model (src/tuner.hpp).
            std::string measured;
            if (!forced && tunes) {
                const std::vector<const AlgorithmInfo *> close = close_candidates(considered, kTuningWindow);
                for (size_t i = 0; close.size() > 1 && i < close.size(); ++i)
                    measured += std::string(i == 0 ? " (tuner measures " : ", ") + close[i]->name;
                if (!measured.empty()) measured += ")";
            }
            std::printf("  %s%s%s\n", chosen->name, forced ? " (NNPCCL_ALGO)" : "", measured.c_str());
        }
    }
    for (const auto &[name, why] : not_applying) std::printf("# %s does not apply: %s\n", name.c_str(), why.c_str());
    std::fflush(stdout);
    return status;
}

} // namespace nnpccl_bench
