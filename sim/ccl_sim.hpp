// ccl-sim's pieces (the tool itself: ccl_sim.cpp says what it does):
// its options (ccl_sim_options.cpp), and what it prints and draws
// (ccl_sim_output.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "chrome_trace.hpp"
#include "config.hpp"
#include "planning.hpp"
#include "sim_call.hpp"
#include "simulator.hpp"
#include "size_sweep.hpp"
#include "what_if.hpp"

namespace nnpccl::sim {

// Differences between the simulation and the model beyond this are marked.
constexpr double kDisagreement = 0.10;

// --fidelity credits' defaults (SimOptions::fidelity), from link emulation
// (docs/simulation.md, "The credits fidelity mode").
constexpr double kDefaultCreditBytes = 512 * 1024;
constexpr double kDefaultMessageOverheadUs = 0.2;

struct Options {
    std::string collective;
    std::string topo = "flat";
    int np = 0;
    nnpccl_tools::SizeSweep sweep;
    nnpccl_datatype_t datatype = NNPCCL_FLOAT32;
    nnpccl_redop_t op = NNPCCL_SUM;
    int root = 0;
    bool in_place = false;
    std::string algo;
    bool all_algos = false;
    size_t chunk_bytes = 0; // 0: NNPCCL_CHUNK_SIZE or the library's default
    int slots = -1;         // -1: NNPCCL_SHM_SLOTS or the library's default
    std::string trace_path, svg_path;
    uint64_t max_hops = 64ull << 20;
    bool exact = false;
    int jobs = 0;
    // Planning: the per-link table, the report, the what-ifs and the fidelity mode.
    std::string links_csv;
    bool report = false;
    int top = 10;
    WhatIf what_if;
    bool credits = false;            // --fidelity credits
    double credit_bytes = -1;        // < 0: kDefaultCreditBytes
    double message_overhead_us = -1; // < 0: kDefaultMessageOverheadUs
};

Options parse_options(int argc, char **argv);
// One line, exit status 2, as ccl-bench's usage errors.
[[noreturn]] void usage_error(const std::string &why);

// The planner's inputs as a communicator of this job would have them.
struct Planning {
    PlanningInputs inputs;
    PlanningOptions options;
    TuningOptions tuning;
    int slots = kDefaultStreamSlots; // NNPCCL_SHM_SLOTS
};

// One algorithm at one size.
struct Cell {
    explicit Cell(const AlgorithmInfo *a) : algorithm(a) {}
    const AlgorithmInfo *algorithm = nullptr;
    bool applies = false;
    std::string why_not;
    double model_us = 0;
    size_t chunk_bytes = 0; // its messages' size: the model's choice for it (AlgorithmInfo::message_elems)
    Outcome sim;
    Status status;
    bool simulated = false;
};

// Everything one run shares across its sizes.
struct Run {
    explicit Run(const Options &options) : o(options) {}
    const Options &o;
    const SimCollective *what = nullptr;
    Collective c = Collective::Allreduce;
    Topology topology;
    int p = 0;
    Planning planning;
    const AlgorithmInfo *forced = nullptr;         // --algo
    std::vector<const AlgorithmInfo *> candidates; // every algorithm serving the collective
    SimCall call;
    size_t unit = 1; // bytes of the smallest step: an element, or one per rank for the block-wise
    std::vector<size_t> sizes;
    SimOptions options;
    Budget budget;
    int jobs = 1;
    std::string what_if_summary; // what the what-if flags changed, or empty
    std::string fidelity_note;   // the credits mode's figures, or empty
};

// What the run found over all its sizes, for the lines after the table.
struct Totals {
    std::vector<std::string> notes;
    std::vector<std::pair<std::string, std::string>> not_applying; // algorithm, why
    // Algorithms the model runs in messages smaller than --chunk: their largest, in bytes.
    std::map<std::string, size_t> own_chunk;
    uint64_t steps = 0, messages = 0, hops = 0;
    int status = 0;
};

// The figures of one size's row.
struct RowFigures {
    size_t bytes = 0;
    double bus = 1;   // busbw over algbw
    double total = 0; // the call's bytes
    double bound = 0; // µs
};

void print_header(const Run &run);
void print_row_of_all(const Run &run, const RowFigures &row, const std::vector<Cell> &cells,
                      const AlgorithmInfo *choice, size_t choice_chunk_bytes);
// Writes --svg too, and counts a failure to write it in *totals.
void print_row_of_one(const Run &run, const Network &network, const RowFigures &row, const Cell &cell, Totals *totals);
void print_footer(const Run &run, const Totals &totals, double seconds);
std::string extrapolation_note(const Cell &c, size_t bytes);
// --links-csv: one row per directed link of the machine (ccl_sim_report.cpp).
Status write_links_csv(const std::string &path, const Network &network, const Cell &cell);
// --report: the bottleneck links and the critical path, as # lines.
void print_report(const Run &run, const Network &network, const Cell &cell);
// A rank's operation as real runs' traces name it.
TraceOperation operation(const Options &o, const SimCall &call, int rank, int op, int nranks);

} // namespace nnpccl::sim
