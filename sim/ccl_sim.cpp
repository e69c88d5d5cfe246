// ccl-sim: runs the schedules nnpccl would run for a collective, on every
// rank of a topology at once, in virtual time (simulator.hpp says what is
// modelled), and prints per size the simulated time, algbw and busbw in
// ccl-bench's (nccl-tests') columns next to the cost model's prediction
// (the number ccl-bench --explain prints) and the lower bound. Run
// `ccl-sim --help`.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ccl_sim.hpp"
#include "cost_model.hpp"
#include "cost_terms.hpp"
#include "dtype.hpp"
#include "host.hpp"
#include "planning.hpp"
#include "reduce.hpp"

namespace nnpccl::sim {

namespace {

bool blockwise(Collective c) {
    return c == Collective::ReduceScatter || c == Collective::Allgather || c == Collective::Gather ||
           c == Collective::Scatter || c == Collective::Alltoall;
}

// Runs the tasks on `jobs` threads; each task writes only its own results.
void run_all(const std::vector<std::function<void()>> &tasks, int jobs) {
    std::atomic<size_t> next{0};
    auto worker = [&] {
        for (size_t i; (i = next++) < tasks.size();) tasks[i]();
    };
    std::vector<std::thread> threads;
    for (int j = 1; j < std::min<int>(jobs, static_cast<int>(tasks.size())); ++j) threads.emplace_back(worker);
    worker();
    for (std::thread &t : threads) t.join();
}

// The planner's inputs as a communicator of this job would have them
// (build_planning_inputs(), as nnpccl_explain's).
Status planning_for(const Topology &topology, Planning *out) {
    NNPCCL_TRY(resolve_planning_options(nullptr, &out->options));
    NNPCCL_TRY(resolve_tuning_options(&out->tuning));
    NNPCCL_TRY(resolve_stream_slots(&out->slots));
    PlanningFacts facts;
    // The simulator plans the host as shared memory.
    NNPCCL_TRY(local_planning_facts(out->options, out->tuning, topology.nranks(), /*host_over_network=*/false, &facts));
    return build_planning_inputs(out->options, facts, topology, &out->inputs);
}

// The machine and the planner's inputs, each a usage error where it does not load.
void load_machine(Run *run) {
    const Options &o = run->o;
    MachineOptions machine;
    if (Status s = resolve_machine_options(&machine); !s) usage_error(s.message());
    // The simulator plans the host as shared memory (its CostInputs say so too).
    const TopologyOptions machine_options = topology_options(machine, /*host_over_network=*/false);
    if (Status s = load_topology(o.topo, o.np, machine_options, &run->topology); !s)
        usage_error("--topo " + o.topo + ": " + s.message() +
                    (o.np == 0 && o.topo == "flat" ? " (give the number of ranks with --np N)" : ""));
    if (o.what_if.any())
        if (Status s = apply_what_if(o.what_if, &run->topology, &run->what_if_summary); !s) usage_error(s.message());
    run->p = run->topology.nranks();
    if (Status s = planning_for(run->topology, &run->planning); !s) usage_error(s.message());
}

// --algo's algorithm, and every algorithm that serves the collective.
void choose_algorithms(Run *run) {
    const Options &o = run->o;
    const Collective c = run->c;
    if (!o.algo.empty()) {
        run->forced = find_algorithm_for(c, o.algo);
        if (run->forced != nullptr && !run->forced->serves_collective(c))
            usage_error("--algo " + o.algo + ": " + run->forced->name + " does not serve " + o.collective + " (" +
                        algorithm_names_for(c) + ")");
        if (run->forced == nullptr)
            usage_error("--algo " + o.algo + ": no algorithm of that name serves " + o.collective + " (" +
                        algorithm_names_for(c) + ")");
    }
    for (const AlgorithmInfo &a : algorithm_registry())
        if (a.serves_collective(c)) run->candidates.push_back(&a);
}

// Everything the sizes share: the machine, the algorithms, the call's shape,
// the sizes and the simulator's settings.
void set_up(Run *run) {
    const Options &o = run->o;
    run->what = find_sim_collective(o.collective);
    run->c = run->what->collective;
    const Collective c = run->c;
    load_machine(run);
    const int p = run->p;
    if (has_root(c) && o.root >= p)
        usage_error("-r " + std::to_string(o.root) + " is not a rank of " + std::to_string(p));
    if (run->what->exchange && p < 2) usage_error("sendrecv needs 2 ranks or more (a rank cannot send to itself)");
    choose_algorithms(run);

    SimCall &call = run->call;
    call.what = *run->what;
    call.elem_size = c == Collective::Barrier ? 1 : datatype_size(o.datatype);
    call.root = has_root(c) ? o.root : -1;
    call.in_place = o.in_place;
    call.chunk_bytes = o.chunk_bytes != 0 ? o.chunk_bytes : run->planning.inputs.chunk_bytes;

    // The sizes in bytes, rounded down to whole elements (whole blocks for
    // the block-wise collectives), as ccl-bench runs them.
    run->unit = call.elem_size * (blockwise(c) ? static_cast<size_t>(p) : 1);
    run->sizes = c == Collective::Barrier ? std::vector<size_t>{0} : nnpccl_tools::sweep_sizes(o.sweep, run->unit);
    const bool one_run = !o.trace_path.empty() || !o.svg_path.empty() || !o.links_csv.empty() || o.report;
    if (one_run && (run->sizes.size() != 1 || o.all_algos))
        usage_error("--trace, --svg, --links-csv and --report show one run: give one size (-b = -e) and no "
                    "--all-algos");

    run->options.slots = o.slots >= 0 ? o.slots : run->planning.slots;
    // γ as the cost model applies it to this machine's chips.
    run->options.reduce_us_per_byte =
        with_reduction(run->topology, run->planning.inputs.costs, call.elem_size, 0.0, 1.0);
    run->options.critical_path = o.report;
    if (o.credits) {
        run->options.fidelity.credit_bytes = o.credit_bytes >= 0 ? o.credit_bytes : kDefaultCreditBytes;
        run->options.fidelity.message_overhead_us =
            o.message_overhead_us >= 0 ? o.message_overhead_us : kDefaultMessageOverheadUs;
        char note[160];
        std::snprintf(note, sizeof note, "fidelity credits: %.6g B of buffer per link, %.3g us per message",
                      run->options.fidelity.credit_bytes, run->options.fidelity.message_overhead_us);
        run->fidelity_note = note;
    }
    run->budget.max_hops = o.max_hops;
    run->jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// One cell's simulation, with its trace when --trace asks for one.
void simulate_cell(const Run &run, const Network &network, Cell *cell) {
    std::unique_ptr<ChromeTrace> trace;
    if (!run.o.trace_path.empty()) {
        trace = std::make_unique<ChromeTrace>(run.o.trace_path, cell->algorithm->name, [&run](int rank, int op) {
            return operation(run.o, run.call, rank, op, run.p);
        });
        cell->status = trace->opened();
        if (!cell->status) return;
    }
    SimCall call = run.call;
    call.chunk_bytes = cell->chunk_bytes;
    cell->status = simulate_call(network, *cell->algorithm, call, run.options, run.budget, &cell->sim, trace.get());
    if (cell->status && trace != nullptr) cell->status = trace->finish();
    cell->simulated = cell->status.is_ok();
}

// One size: its cells simulated and the model's figures beside them.
struct SizeResult {
    std::vector<Cell> cells;
    const AlgorithmInfo *choice = nullptr; // the selector's, or the model's with --all-algos
};

// Which algorithms this size simulates: --algo's, the selector's choice, or
// every candidate. False when the selector finds none.
bool pick_cells(const Run &run, const CollectiveArgs &args, SizeResult *size, Status *chosen,
                std::vector<Prediction> *predictions) {
    if (run.forced != nullptr) {
        size->cells.emplace_back(run.forced);
    } else if (!run.o.all_algos) {
        PlanExplanation plan = plan_call(args, call_bytes(args), run.topology, run.planning.inputs);
        *chosen = plan.status;
        if (!*chosen) return false;
        size->choice = plan.chosen;
        *predictions = std::move(plan.predictions);
        size->cells.emplace_back(size->choice);
    } else {
        for (const AlgorithmInfo *a : run.candidates) size->cells.emplace_back(a);
    }
    return true;
}

// Simulates the size's cells on run.jobs threads, the model's figures
// alongside. Returns 2 when the selector finds no algorithm, else 0.
int simulate_size(const Run &run, const Network &network, const CollectiveArgs &args, SizeResult *size,
                  Totals *totals) {
    Status chosen;
    std::vector<Prediction> predictions;
    if (!pick_cells(run, args, size, &chosen, &predictions)) {
        std::fprintf(stderr, "ccl-sim: %s\n", chosen.message().c_str());
        return 2;
    }
    // The largest simulations first, so that the last to end is small.
    std::vector<std::pair<uint64_t, std::function<void()>>> work;
    for (Cell &cell : size->cells) {
        cell.applies = cell.algorithm->applies(args, run.topology, &cell.why_not);
        if (!cell.applies) {
            if (run.forced != nullptr)
                usage_error("--algo " + run.o.algo + ": " + cell.algorithm->name + " does not apply to " +
                            run.o.collective + " on " + run.topology.name() + " with " + std::to_string(run.p) +
                            " ranks: " + cell.why_not);
            totals->not_applying.push_back({cell.algorithm->name, cell.why_not});
            continue;
        }
        cell.chunk_bytes = cell.algorithm->message_elems(args, run.topology) * args.elem_size;
        if (cell.chunk_bytes != args.chunk_elems * args.elem_size) {
            size_t &largest = totals->own_chunk[cell.algorithm->name];
            largest = std::max(largest, cell.chunk_bytes);
        }
        SimCall call = run.call;
        call.chunk_bytes = cell.chunk_bytes;
        work.emplace_back(size->cells.size() > 1 ? estimate_hops(network, *cell.algorithm, call) : 0,
                          [&run, &network, &cell] { simulate_cell(run, network, &cell); });
    }
    std::stable_sort(work.begin(), work.end(), [](const auto &a, const auto &b) { return a.first > b.first; });
    std::vector<std::function<void()>> tasks;
    // The model's figures: from the selector's own pass where it made one,
    // else predicted here, alongside the simulations.
    if (run.o.all_algos)
        tasks.push_back([&] {
            PlanExplanation plan = plan_call(args, call_bytes(args), run.topology, run.planning.inputs);
            chosen = plan.status;
            size->choice = plan.chosen;
            predictions = std::move(plan.predictions);
        });
    else if (run.forced != nullptr)
        tasks.push_back([&] {
            size->cells[0].model_us =
                size->cells[0].algorithm->predict_planned_us(args, run.topology, run.planning.inputs.costs);
        });
    for (auto &w : work) tasks.push_back(std::move(w.second));
    run_all(tasks, run.jobs);
    if (run.o.all_algos && !chosen.is_ok()) size->choice = nullptr;
    for (Cell &cell : size->cells)
        for (const Prediction &pr : predictions)
            if (pr.algorithm == cell.algorithm && pr.applies) cell.model_us = pr.time_us;
    return 0;
}

// Adds the size's cells to the totals; failures go to stderr.
void count_cells(const SizeResult &size, size_t bytes, Totals *totals) {
    for (const Cell &cell : size.cells) {
        if (!cell.status) {
            std::fprintf(stderr, "ccl-sim: %s at %zu B: %s\n", cell.algorithm->name, bytes,
                         cell.status.message().c_str());
            totals->status = 1;
        }
        if (!cell.simulated) continue;
        totals->steps += cell.sim.result.steps;
        totals->messages += cell.sim.result.messages;
        totals->hops += cell.sim.result.hops;
        if (cell.sim.extrapolated) totals->notes.push_back(extrapolation_note(cell, bytes));
    }
}

// --links-csv and --report of the one run they ask for.
void write_planning(const Run &run, const Network &network, const Cell &cell, Totals *totals) {
    if (!run.o.links_csv.empty()) {
        if (Status s = write_links_csv(run.o.links_csv, network, cell); !s) {
            std::fprintf(stderr, "ccl-sim: %s\n", s.message().c_str());
            totals->status = 1;
        }
    }
    if (run.o.report) print_report(run, network, cell);
}

int run_sim(const Options &o) {
    Run run(o);
    set_up(&run);
    const Network network(run.topology);
    print_header(run);
    const auto started = std::chrono::steady_clock::now();
    Totals totals;
    for (size_t bytes : run.sizes) {
        run.call.count = bytes / run.unit;
        const CollectiveArgs args = collective_args(run.call, 0, run.p);
        RowFigures row;
        row.bytes = bytes;
        row.bus = bus_bandwidth_factor(run.c, run.p);
        row.total = static_cast<double>(call_bytes(args));
        row.bound = lower_bound_us(args, run.topology);
        SizeResult size;
        if (int failed = simulate_size(run, network, args, &size, &totals); failed != 0) return failed;
        count_cells(size, bytes, &totals);
        if (o.all_algos)
            print_row_of_all(run, row, size.cells, size.choice,
                             size.choice != nullptr ? size.choice->message_elems(args, run.topology) * args.elem_size
                                                    : 0);
        else
            print_row_of_one(run, network, row, size.cells[0], &totals);
        if (!o.all_algos && size.cells[0].simulated) write_planning(run, network, size.cells[0], &totals);
        std::fflush(stdout);
    }
    print_footer(run, totals, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    return totals.status;
}

} // namespace

} // namespace nnpccl::sim

int main(int argc, char **argv) { return nnpccl::sim::run_sim(nnpccl::sim::parse_options(argc, argv)); }
