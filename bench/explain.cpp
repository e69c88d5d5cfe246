#include "explain.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "check_data.hpp"
#include "nnpccl_inspect.h"

namespace nnpccl_bench {

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

// Every algorithm of the registry (nnpccl_inspect.h).
std::vector<nnpccl_algorithm_info_t> registry() {
    std::vector<nnpccl_algorithm_info_t> all(static_cast<size_t>(nnpccl_algorithm_count()));
    for (size_t i = 0; i < all.size(); ++i) nnpccl_algorithm_get(static_cast<int>(i), &all[i]);
    return all;
}

bool serves(const nnpccl_algorithm_info_t &a, nnpccl_collective_t c) {
    return (a.serves & (1u << static_cast<unsigned>(c))) != 0;
}

std::string collectives_of(const nnpccl_algorithm_info_t &a) {
    std::string list;
    for (int c = 0; c < NNPCCL_NUM_COLLECTIVES; ++c)
        if (serves(a, static_cast<nnpccl_collective_t>(c)))
            list += (list.empty() ? "" : ", ") + std::string(nnpccl_collective_name(static_cast<nnpccl_collective_t>(c)));
    return list;
}

} // namespace

void print_algorithm_list() {
    std::printf("# nnpccl algorithms; force one with NNPCCL_ALGO=collective:algorithm[:low-high],... or --algo\n");
    for (const nnpccl_algorithm_info_t &a : registry()) {
        std::printf("%-20s serves:  %s\n", a.name, collectives_of(a).c_str());
        std::printf("%-20s applies: %s\n", "", a.constraints[0] != '\0' ? a.constraints : "always");
        std::printf("%-20s %s\n", "", a.summary);
    }
}

// The library's own parser decides, through nnpccl_explain_with_rules, so
// that ccl-bench takes exactly the names (and short names) that NNPCCL_ALGO
// takes.
bool check_algorithm_name(nnpccl_collective_t collective, const std::string &name, std::string *error) {
    const std::string rules = std::string(nnpccl_collective_name(collective)) + ":" + name;
    nnpccl_call_t call{};
    call.collective = collective;
    call.count = 1;
    call.datatype = NNPCCL_FLOAT32;
    call.op = NNPCCL_SUM;
    call.root = collective == NNPCCL_COLL_SEND || collective == NNPCCL_COLL_RECV ? 1 : 0;
    std::vector<nnpccl_prediction_t> predictions(registry().size());
    int count = 0;
    nnpccl_explanation_t e{};
    const nnpccl_result_t rc = nnpccl_explain_with_rules("", 2, &call, rules.c_str(), predictions.data(),
                                                         static_cast<int>(predictions.size()), &count, &e);
    if (rc == NNPCCL_SUCCESS) return true;
    *error = std::string(nnpccl_get_last_error(nullptr)) + "; see --list-algos";
    return false;
}

int explain_plans(const ExplainRequest &request) {
    const size_t elem = nnpccl_datatype_size(request.datatype);
    // As the benchmark counts (and ccl-sim): a size is the whole buffer, of
    // p blocks for the collectives whose count is a rank's block.
    nnpccl_check::CallShape shape;
    shape.collective = request.collective;
    const bool blockwise = shape.blockwise();
    nnpccl_call_t call{};
    call.collective = request.collective;
    call.datatype = request.datatype;
    call.op = NNPCCL_SUM;
    call.root = request.root;
    std::vector<nnpccl_prediction_t> predictions(static_cast<size_t>(nnpccl_algorithm_count()));
    int count = 0;
    nnpccl_explanation_t e;
    // The first size tells what the machine is (and whether it loads at all).
    auto plan = [&](size_t elements) {
        call.count = elements;
        return nnpccl_explain(request.topology.c_str(), request.nranks > 0 ? request.nranks : 0, &call,
                              predictions.data(), static_cast<int>(predictions.size()), &count, &e);
    };
    if (plan(0) != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "ccl-bench: --explain: %s%s\n", nnpccl_get_last_error(nullptr),
                     request.nranks <= 0 ? " (give the number of ranks with --np N)" : "");
        return 2;
    }
    const int p = e.nranks;
    // As the benchmark runs them: rounded down to whole elements (and whole blocks).
    const std::vector<size_t> sizes =
        nnpccl_tools::sweep_sizes(request.sizes, elem * (blockwise ? static_cast<size_t>(p) : 1));

    std::printf("# ccl-bench %s --explain: predictions on %s, %d ranks; no ranks run\n",
                nnpccl_collective_name(request.collective), e.topology, p);
    std::printf("# %s (%zu B), chunk %zu B, host reduction %.3g ns/B (%zu-byte sums), %.3g ranks per core, "
                "NNPCCL_ALGO %s\n",
                nnpccl_datatype_name(request.datatype), elem, e.chunk_bytes, e.host_reduce_us_per_byte * 1e3, elem,
                e.ranks_per_core, e.algorithms_forced ? "set" : "unset");
    std::printf("# time in us, busbw in GB/s; * marks the choice; bound: the bus bytes at the slowest chip's "
                "injection, %g GB/s%s\n",
                e.injection_gbps,
                std::strncmp(e.topology, "hosts:", 6) == 0 ? ", or of the hosts at a host's network link" : "");
    if (e.tunes)
        std::printf("# on flat the ranks measure the algorithms predicted within 2x of the fastest at each size's "
                    "first calls and run the fastest measured (NNPCCL_TUNE=1; results may then differ between runs)\n");
    std::printf("#       size         count");
    for (int i = 0; i < count; ++i) std::printf("  %-*s", kCandidateWidth - 2, predictions[static_cast<size_t>(i)].algorithm);
    std::printf("  %-*s  choice\n", kCandidateWidth - 2, "bound");
    std::printf("#        (B)    (elements)");
    for (int i = 0; i <= count; ++i) std::printf("  %*s %*s", kTimeWidth, "time", kBusbwWidth, "busbw");
    std::printf("\n");

    std::set<std::pair<std::string, std::string>> not_applying; // (algorithm, why), noted once each
    int status = 0;
    std::string messages; // the choice's message size per size: the model picks it on a machine of links
    for (size_t bytes : sizes) {
        const size_t elements = bytes / elem / (blockwise ? static_cast<size_t>(p) : 1);
        if (plan(elements) != NNPCCL_SUCCESS) {
            std::fprintf(stderr, "ccl-bench: --explain: %s\n", nnpccl_get_last_error(nullptr));
            return 2;
        }
        std::printf("%12zu  %12zu", bytes, elements);
        std::vector<const nnpccl_prediction_t *> measured; // fastest first, as the tuner orders them
        for (int i = 0; i < count; ++i) {
            const nnpccl_prediction_t &pr = predictions[static_cast<size_t>(i)];
            if (!pr.applies) {
                not_applying.insert({pr.algorithm, pr.why_not});
                std::printf("  %*s %*s", kTimeWidth, "n/a", kBusbwWidth, "");
                continue;
            }
            const std::string time = number(pr.time_us, kTimeWidth - 1) + (pr.chosen ? "*" : " ");
            std::printf("  %s %s", time.c_str(), number(pr.busbw_gbps, kBusbwWidth).c_str());
            if (pr.measured) measured.push_back(&pr);
        }
        std::printf("  %s  %s", number(e.lower_bound_us, kTimeWidth).c_str(),
                    number(e.lower_bound_busbw_gbps, kBusbwWidth).c_str());
        if (e.chosen[0] == '\0') {
            std::printf("  none: %s\n", e.error);
            status = 2;
        } else {
            // Where the ranks would measure instead of trusting the model (src/tuner.hpp).
            std::stable_sort(measured.begin(), measured.end(),
                             [](const nnpccl_prediction_t *a, const nnpccl_prediction_t *b) { return a->time_us < b->time_us; });
            std::string measuring;
            for (const nnpccl_prediction_t *pr : measured)
                measuring += std::string(measuring.empty() ? " (tuner measures " : ", ") + pr->algorithm;
            if (!measuring.empty()) measuring += ")";
            std::printf("  %s%s%s\n", e.chosen, e.forced ? " (NNPCCL_ALGO)" : "", measuring.c_str());
            messages += (messages.empty() ? "" : ", ") + std::to_string(bytes) + " B: " + std::to_string(e.chunk_bytes);
        }
    }
    for (const auto &[name, why] : not_applying) std::printf("# %s does not apply: %s\n", name.c_str(), why.c_str());
    if (!messages.empty()) std::printf("# the choice's messages, at most (B), by size: %s\n", messages.c_str());
    std::fflush(stdout);
    return status;
}

} // namespace nnpccl_bench
