// ccl-sim: runs the schedules nnpccl would run for a collective, on every
// rank of a topology at once, in virtual time (simulator.hpp says what is
// modelled), and prints per size the simulated time, algbw and busbw in
// ccl-bench's (nccl-tests') columns next to the cost model's prediction
// (the number ccl-bench --explain prints) and the lower bound. Run
// `ccl-sim --help`.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "ccl-topo-draw.hpp"
#include "chrome_trace.hpp"
#include "config.hpp"
#include "cost_model.hpp"
#include "cost_terms.hpp"
#include "dtype.hpp"
#include "host.hpp"
#include "parse_size.hpp"
#include "planner.hpp"
#include "reduce.hpp"
#include "sim_call.hpp"
#include "simulator.hpp"
#include "tuning_file.hpp"

namespace {

using namespace nnpccl;
using namespace nnpccl::sim;

// Differences between the simulation and the model beyond this are marked.
constexpr double kDisagreement = 0.10;

struct Options {
    std::string collective;
    std::string topo = "flat";
    int np = 0;
    size_t min_bytes = 32 << 20, max_bytes = 32 << 20;
    size_t step_factor = 1, step_bytes = 0;
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
};

// One line, exit status 2, as ccl-bench's usage errors.
[[noreturn]] void usage_error(const std::string &why) {
    std::fprintf(stderr, "ccl-sim: %s (see ccl-sim --help)\n", why.c_str());
    std::exit(2);
}

CLI::Validator size_value() {
    return CLI::Validator(
        [](std::string &text) {
            std::optional<size_t> bytes = nnpccl_bench::parse_size(text);
            if (!bytes) return text + " is not a size (bytes, or with a K, M or G suffix)";
            text = std::to_string(*bytes);
            return std::string();
        },
        "");
}

// Decimal only: CLI11 alone reads "010" as octal.
CLI::Validator whole_number(long min) {
    return CLI::Validator(
        [min](std::string &text) {
            errno = 0;
            char *end = nullptr;
            long v = std::strtol(text.c_str(), &end, 10);
            if (text.empty() || *end != '\0' || errno != 0 || v < min || v > 1 << 30)
                return text + " is not a whole number >= " + std::to_string(min);
            text = std::to_string(v);
            return std::string();
        },
        "");
}

Options parse_options(int argc, char **argv) {
    Options o;
    CLI::App app{"ccl-sim COLLECTIVE [options]: simulate nnpccl's schedules for COLLECTIVE on every rank of a\n"
                 "topology in virtual time (no processes): per size the simulated time, algbw and busbw next to\n"
                 "the cost model's prediction (ccl-bench --explain) and the lower bound.\n",
                 "ccl-sim"};
    app.footer("Links are FIFO servers at their bandwidth and latency, messages follow their routes cut-through,\n"
               "each chip reduces at the cost model's speed, steps wait for their messages and a free slot as\n"
               "the executor's do. NNPCCL_CHUNK_SIZE, NNPCCL_SHM_SLOTS, NNPCCL_ALGO, NNPCCL_TUNING_FILE and\n"
               "NNPCCL_TUNE are read as by the library. busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n for\n"
               "reduce_scatter, allgather, gather, scatter and alltoall (size: the whole buffer), 1 otherwise.\n"
               "presets:\n" +
               describe_presets());
    app.get_formatter()->column_width(26);
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_option("COLLECTIVE", o.collective,
                   "allreduce | reduce_scatter | allgather | broadcast | reduce | gather |\n"
                   "scatter | alltoall | sendrecv (each rank sends to rank+1 and receives\n"
                   "from rank-1) | barrier")
        ->check(CLI::Validator(
            [](std::string &name) {
                return find_sim_collective(name) != nullptr
                           ? std::string()
                           : "unknown collective '" + name + "' (" + sim_collective_names() + ")";
            },
            ""))
        ->type_name("NAME");
    app.add_option("--topo", o.topo, "the machine: a preset or a topology file (default flat, which needs --np)")
        ->type_name("T");
    app.add_option("--np", o.np, "ranks (default: one per chip of the topology)")
        ->transform(whole_number(1))
        ->type_name("N");
    app.add_option("-b,--minbytes", o.min_bytes, "smallest size in bytes (K, M, G suffixes), default 32M")
        ->transform(size_value())
        ->type_name("SIZE");
    app.add_option("-e,--maxbytes", o.max_bytes, "largest size, default 32M")
        ->transform(size_value())
        ->type_name("SIZE");
    CLI::Option *factor = app.add_option("-f,--stepfactor", o.step_factor,
                                         "multiply the size by this each step, default 1 (2 when -e > -b)")
                              ->transform(whole_number(1))
                              ->type_name("N");
    app.add_option("-i,--stepbytes", o.step_bytes, "add this many bytes each step instead")
        ->transform(size_value())
        ->type_name("SIZE");
    app.add_option_function<std::string>(
           "-d,--datatype", [&o](const std::string &name) { parse_datatype(name.c_str(), &o.datatype); },
           "int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double")
        ->check(CLI::Validator(
            [](std::string &name) {
                nnpccl_datatype_t dt;
                return parse_datatype(name.c_str(), &dt) ? std::string() : "unknown datatype '" + name + "'";
            },
            ""))
        ->type_name("TYPE");
    app.add_option_function<std::string>(
           "-o,--op", [&o](const std::string &name) { parse_redop(name.c_str(), &o.op); },
           "sum prod min max avg (the same time: shown in the table only)")
        ->check(CLI::Validator(
            [](std::string &name) {
                nnpccl_redop_t op;
                return parse_redop(name.c_str(), &op) ? std::string() : "unknown op '" + name + "'";
            },
            ""))
        ->type_name("OP");
    app.add_option("-r,--root", o.root, "root rank of broadcast, reduce, gather and scatter, default 0")
        ->transform(whole_number(0))
        ->type_name("RANK");
    app.add_flag("--in-place", o.in_place, "simulate the in-place call (default: out of place)");
    CLI::Option *algo = app.add_option("--algo", o.algo,
                                       "simulate algorithm NAME (or a short name, as NNPCCL_ALGO takes it)\n"
                                       "instead of the selector's choice; an error where it does not apply")
                            ->type_name("NAME");
    CLI::Option *all = app.add_flag("--all-algos", o.all_algos,
                                    "simulate every algorithm that applies, side by side, with the\n"
                                    "model's choice and the fastest simulated one");
    algo->excludes(all);
    app.add_option("--chunk", o.chunk_bytes, "bytes per message (default NNPCCL_CHUNK_SIZE, else 512K)")
        ->transform(size_value())
        ->type_name("SIZE");
    app.add_option("--slots", o.slots,
                   "messages a stream holds before a send waits (default NNPCCL_SHM_SLOTS,\n"
                   "else 8); 0: no limit")
        ->transform(whole_number(0))
        ->type_name("N");
    app.add_option("--trace", o.trace_path,
                   "write the run (one size, one algorithm) as a Chrome trace-event file\n"
                   "(Perfetto, chrome://tracing): pid = rank, tid = channel, one event per step")
        ->type_name("FILE");
    app.add_option("--svg", o.svg_path,
                   "draw the topology (one size, one algorithm) with each link coloured by\n"
                   "its utilisation over the collective")
        ->type_name("FILE");
    app.add_option("--max-hops", o.max_hops,
                   "simulate message by message up to about this many message-link\n"
                   "crossings (K, M, G suffixes; default 64M); larger calls are\n"
                   "extrapolated from the same call at 1/2^k of the size (marked ~)")
        ->transform(size_value())
        ->type_name("N");
    app.add_flag("--exact", o.exact, "never extrapolate, however long it takes");
    app.add_option("-j,--jobs", o.jobs, "simulations run at once (default: the cores)")
        ->transform(whole_number(1))
        ->type_name("N");

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp &) {
        std::fputs(app.help().c_str(), stdout);
        std::exit(0);
    } catch (const CLI::ParseError &e) {
        usage_error(e.what());
    }
    if (o.collective.empty()) usage_error("name a collective (" + sim_collective_names() + ")");
    if (o.max_bytes < o.min_bytes) usage_error("-e is smaller than -b");
    if (factor->count() == 0 && o.step_bytes == 0 && o.max_bytes > o.min_bytes) o.step_factor = 2;
    if (o.exact) o.max_hops = 0;
    return o;
}

// nccl-tests' number formatting (bench/sweep.cpp): as many decimals as the
// width allows.
std::string fmt_num(double v, int width) {
    char buf[40];
    int power = 0;
    for (double p = 1; v >= p && power < 30; p *= 10) ++power;
    if (power < width - 2)
        std::snprintf(buf, sizeof buf, "%*.2f", width, v);
    else if (power < width - 1)
        std::snprintf(buf, sizeof buf, "%*.1f", width, v);
    else if (power < width + 1)
        std::snprintf(buf, sizeof buf, "%*.0f", width, v);
    else
        std::snprintf(buf, sizeof buf, "%*.1e", width, v);
    return buf;
}

// GB/s of `bytes` in `us` (1 GB/s = 1e3 bytes per µs).
double gbps(double bytes, double us) { return us > 0 ? bytes / (us * 1e3) : 0; }

// The sizes of the sweep in bytes, rounded down to whole elements (whole
// blocks for the block-wise collectives), as ccl-bench runs them.
std::vector<size_t> sweep(const Options &o, size_t unit) {
    std::vector<size_t> sizes;
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes;) {
        sizes.push_back(bytes / unit * unit);
        const size_t next = o.step_bytes != 0 ? bytes + o.step_bytes : bytes * o.step_factor;
        if (next <= bytes) break;
        bytes = next;
    }
    return sizes;
}

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
// (src/inspect.cpp does the same for ccl-bench --explain).
struct Planning {
    PlanOptions plan;
    Settings settings;
};

Status planning_for(const Topology &topology, Planning *out) {
    NNPCCL_TRY(resolve_settings(nullptr, &out->settings));
    const PlanningOptions &p = out->settings.planning;
    if (!p.algorithms.empty()) NNPCCL_TRY(out->plan.algo_override.parse(p.algorithms, p.algorithms_source));
    if (!p.tuning_file.empty()) {
        std::ifstream in(p.tuning_file, std::ios::binary);
        if (!in) return invalid_argument("NNPCCL_TUNING_FILE=%s: cannot open it", p.tuning_file.c_str());
        std::ostringstream text;
        text << in.rdbuf();
        TuningFile file;
        NNPCCL_TRY(parse_tuning_file(text.str(), "NNPCCL_TUNING_FILE=" + p.tuning_file, &file));
        if (file.nranks == topology.nranks() && file.topology == topology.name()) out->plan.preferred = file.choices;
    }
    CostInputs &costs = out->plan.costs;
    if (out->settings.tuning.enabled) {
        const HostReduceSpeed &speed = host_reduce_speed();
        std::copy(std::begin(speed.us_per_byte), std::end(speed.us_per_byte), costs.host_reduce_us_per_byte);
    }
    HostInfo host;
    if (discover_host(&host) && host.cores > 0)
        costs.host_ranks_per_core = std::max(1.0, static_cast<double>(topology.nranks()) / host.cores);
    return Status::ok();
}

// One algorithm at one size.
struct Cell {
    explicit Cell(const AlgorithmInfo *a) : algorithm(a) {}
    const AlgorithmInfo *algorithm = nullptr;
    bool applies = false;
    std::string why_not;
    double model_us = 0;
    Outcome sim;
    Status status;
    bool simulated = false;
};

std::string extrapolation_note(const Cell &c, size_t bytes) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "# ~ %s at %zu B: about %.3g link crossings; extrapolated from the call cut to %zu and to %zu "
                  "elements, at the pace of the last %zu (the first %zu's %.1f%% off it)\n",
                  c.algorithm->name, bytes, static_cast<double>(c.sim.estimated_hops), c.sim.counts[0], c.sim.counts[1],
                  c.sim.counts[1] - c.sim.counts[0], c.sim.counts[0], 100 * c.sim.slope_spread);
    return buf;
}

// A rank's operation as real runs' traces name it (src/executor.cpp's
// describe(): "allreduce #1 (count 6, float, sum)"); every simulated call is
// the first.
TraceOperation operation(const Options &o, const SimCall &call, int rank, int op, int nranks) {
    const Collective c = call.what.exchange ? (op == 0 ? Collective::Send : Collective::Recv) : call.what.collective;
    const CollectiveArgs args = collective_args(call, rank, nranks);
    TraceOperation t;
    t.short_name = std::string(collective_name(c)) + " #1";
    t.name = t.short_name + " (count " + std::to_string(args.count);
    // As the runtime describes a call: a barrier's datatype is uint8, and a
    // collective that reduces nothing carries sum.
    t.name += std::string(", ") + datatype_name(c == Collective::Barrier ? NNPCCL_UINT8 : o.datatype);
    t.name += std::string(", ") + redop_name(reduces(c) ? o.op : NNPCCL_SUM);
    if (c == Collective::Send) {
        const std::string to = " to rank " + std::to_string((rank + 1) % nranks);
        t.name += "," + to;
        t.short_name += to;
    } else if (c == Collective::Recv) {
        const std::string from = " from rank " + std::to_string((rank + nranks - 1) % nranks);
        t.name += "," + from;
        t.short_name += from;
    } else if (has_root(c)) {
        t.name += ", root " + std::to_string(call.root);
    }
    t.name += ")";
    t.bytes = call_bytes(args);
    return t;
}

// Utilisation from pale (idle) through yellow to red (busy all along).
std::string utilisation_colour(double u) {
    u = std::clamp(u, 0.0, 1.0);
    const double stops[3][3] = {{205, 214, 224}, {240, 180, 0}, {190, 0, 0}};
    const int k = u < 0.5 ? 0 : 1;
    const double f = u < 0.5 ? u / 0.5 : (u - 0.5) / 0.5;
    char buf[16];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x",
                  static_cast<int>(std::lround(stops[k][0] + f * (stops[k + 1][0] - stops[k][0]))),
                  static_cast<int>(std::lround(stops[k][1] + f * (stops[k + 1][1] - stops[k][1]))),
                  static_cast<int>(std::lround(stops[k][2] + f * (stops[k + 1][2] - stops[k][2]))));
    return buf;
}

Status write_svg(const std::string &path, const Network &network, const Cell &cell, const std::string &what) {
    const Topology &t = network.topology();
    const std::vector<Link> &links = t.machine().links();
    const SimResult &r = cell.sim.result;
    ccl_topo::LinkOverlay overlay;
    double busiest = 0, sum = 0;
    size_t busiest_link = 0;
    for (size_t l = 0; l < links.size(); ++l) {
        const double u = r.time_us > 0 ? r.busy_us[l] / r.time_us : 0;
        if (u > busiest) {
            busiest = u;
            busiest_link = l;
        }
        sum += u;
        char tip[160];
        std::snprintf(tip, sizeof tip, "chip %d -> chip %d: %.1f%% busy (%.6g of %.6g us), %g GB/s, %g us",
                      links[l].from, links[l].to, 100 * u, r.busy_us[l], r.time_us, links[l].gbps, links[l].latency_us);
        overlay.colour.push_back(u > 0 ? utilisation_colour(u) : "");
        overlay.tooltip.push_back(tip);
    }
    char line[256];
    overlay.legend.push_back({"", what});
    std::snprintf(line, sizeof line, "link utilisation: busy time over the collective's %.6g us (virtual)%s", r.time_us,
                  cell.sim.extrapolated ? ", extrapolated" : "");
    overlay.legend.push_back({"", line});
    if (!links.empty()) {
        std::snprintf(line, sizeof line, "mean %.1f%%; busiest chip %d -> chip %d, %.1f%%",
                      100 * sum / static_cast<double>(links.size()), links[busiest_link].from, links[busiest_link].to,
                      100 * busiest);
        overlay.legend.push_back({"", line});
    }
    for (int pct : {0, 25, 50, 75, 100})
        overlay.legend.push_back(
            {utilisation_colour(pct / 100.0), std::to_string(pct) + "%" + (pct == 0 ? " (grey: idle)" : "")});
    std::ofstream out(path, std::ios::binary);
    out << ccl_topo::render_svg(t, &overlay);
    out.close();
    if (!out) return system_error("--svg %s: cannot write it", path.c_str());
    return Status::ok();
}

int run(const Options &o) {
    const SimCollective *what = find_sim_collective(o.collective);
    const Collective c = what->collective;
    Topology topology;
    Settings settings;
    if (Status s = resolve_settings(nullptr, &settings); !s) usage_error(s.message());
    // The simulator plans the host as shared memory (its CostInputs say so too).
    const TopologyOptions machine_options = topology_options(settings.planning, /*host_over_network=*/false);
    if (Status s = load_topology(o.topo, o.np, machine_options, &topology); !s)
        usage_error("--topo " + o.topo + ": " + s.message() +
                    (o.np == 0 && o.topo == "flat" ? " (give the number of ranks with --np N)" : ""));
    const int p = topology.nranks();
    Planning planning;
    if (Status s = planning_for(topology, &planning); !s) usage_error(s.message());
    if (has_root(c) && o.root >= p)
        usage_error("-r " + std::to_string(o.root) + " is not a rank of " + std::to_string(p));
    if (what->exchange && p < 2) usage_error("sendrecv needs 2 ranks or more (a rank cannot send to itself)");

    const AlgorithmInfo *forced = nullptr;
    if (!o.algo.empty()) {
        forced = find_algorithm_for(c, o.algo);
        if (forced != nullptr && !forced->serves_collective(c))
            usage_error("--algo " + o.algo + ": " + forced->name + " does not serve " + o.collective + " (" +
                        algorithm_names_for(c) + ")");
        if (forced == nullptr)
            usage_error("--algo " + o.algo + ": no algorithm of that name serves " + o.collective + " (" +
                        algorithm_names_for(c) + ")");
    }
    std::vector<const AlgorithmInfo *> candidates;
    for (const AlgorithmInfo &a : algorithm_registry())
        if (a.serves_collective(c)) candidates.push_back(&a);

    SimCall call;
    call.what = *what;
    call.elem_size = c == Collective::Barrier ? 1 : datatype_size(o.datatype);
    call.root = has_root(c) ? o.root : -1;
    call.in_place = o.in_place;
    call.chunk_bytes = o.chunk_bytes != 0 ? o.chunk_bytes : planning.settings.planning.chunk_bytes;

    const size_t unit = call.elem_size * (blockwise(c) ? static_cast<size_t>(p) : 1);
    const std::vector<size_t> sizes = c == Collective::Barrier ? std::vector<size_t>{0} : sweep(o, unit);
    if ((!o.trace_path.empty() || !o.svg_path.empty()) && (sizes.size() != 1 || o.all_algos))
        usage_error("--trace and --svg draw one run: give one size (-b = -e) and no --all-algos");

    Network network(topology);
    SimOptions options;
    options.slots = o.slots >= 0 ? o.slots : planning.settings.shm.slots;
    // γ as the cost model applies it to this machine's chips.
    options.reduce_us_per_byte = with_reduction(topology, planning.plan.costs, call.elem_size, 0.0, 1.0);
    Budget budget;
    budget.max_hops = o.max_hops;
    const int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

    std::printf("# ccl-sim %s: simulated on %s, %d ranks, %s (%zu B), chunk %zu B, %s; virtual time, no ranks "
                "run\n",
                o.collective.c_str(), topology.name().c_str(), p, datatype_name(o.datatype), call.elem_size,
                call.chunk_bytes,
                options.slots > 0 ? (std::to_string(options.slots) + " slots per stream").c_str()
                                  : "unlimited slots per stream");
    std::printf("# links: FIFO servers at their bandwidth and latency, cut-through along each route; reduction "
                "%.3g ns/B per chip%s%s\n",
                options.reduce_us_per_byte * 1e3,
                topology.machine().shape() == Shape::Flat ? " (the host's, added to its transfers)" : " (NNP-T HBM)",
                forced != nullptr ? ""
                : !o.all_algos    ? "; the algorithm: the selector's choice"
                                  : "");
    if (topology.machine().shape() == Shape::Flat && planning.plan.costs.host_ranks_per_core > 1)
        std::printf("# the model counts %.3g ranks per core on this host (its lockstep factor); the simulation gives "
                    "every rank a core\n",
                    planning.plan.costs.host_ranks_per_core);
    std::printf("# time in us, algbw and busbw in GB/s; model: the cost model's prediction (ccl-bench --explain); "
                "bound: the bus bytes at the slowest chip's injection, %g GB/s\n",
                topology.min_injection_gbps());
    std::printf("# ~ marks a time extrapolated from smaller calls (--max-hops); ! marks a model more than %.0f%% "
                "from the simulation\n",
                100 * kDisagreement);

    const int name_width = 20;
    if (o.all_algos) {
        std::printf("#       size         count");
        for (const AlgorithmInfo *a : candidates) std::printf("  %-29s", a->name);
        std::printf("  %-18s  %-20s  %s\n", "bound", "model's choice", "fastest simulated");
        std::printf("#        (B)    (elements)");
        for (size_t i = 0; i < candidates.size(); ++i) std::printf("  %10s %7s %10s", "time", "busbw", "model");
        std::printf("  %10s %7s\n", "time", "busbw");
    } else {
        std::printf("#       size         count      type   redop    root  %-*s  %10s  %7s  %7s  %10s  %9s  %10s  "
                    "%7s\n",
                    name_width, "algorithm", "time", "algbw", "busbw", "model", "sim/model", "bound", "busbw");
        std::printf("#        (B)    (elements)                            %-*s  %10s  %7s  %7s  %10s  %9s  %10s  "
                    "%7s\n",
                    name_width, "", "(us)", "(GB/s)", "(GB/s)", "(us)", "", "(us)", "(GB/s)");
    }

    const auto started = std::chrono::steady_clock::now();
    std::vector<std::string> notes;
    std::vector<std::pair<std::string, std::string>> not_applying;
    std::map<std::string, size_t> own_chunk; // algorithms whose messages are smaller than --chunk: their largest
    uint64_t steps = 0, messages = 0, hops = 0;
    int status = 0;
    for (size_t bytes : sizes) {
        call.count = bytes / unit;
        const CollectiveArgs args = collective_args(call, 0, p);
        const double bus = bus_bandwidth_factor(c, p);
        const double total = static_cast<double>(call_bytes(args));
        const double bound = lower_bound_us(args, topology);

        std::vector<Cell> cells;
        const AlgorithmInfo *choice = nullptr;
        Status chosen;
        std::vector<Prediction> predictions;
        auto choose = [&] { chosen = choose_algorithm(args, topology, planning.plan, &choice, &predictions); };
        if (forced != nullptr) {
            cells.emplace_back(forced);
        } else if (!o.all_algos) {
            choose();
            if (!chosen) {
                std::fprintf(stderr, "ccl-sim: %s\n", chosen.message().c_str());
                return 2;
            }
            cells.emplace_back(choice);
        } else {
            for (const AlgorithmInfo *a : candidates) cells.emplace_back(a);
        }
        // The largest simulations first, so that the last to end is small.
        std::vector<std::pair<uint64_t, std::function<void()>>> work;
        for (Cell &cell : cells) {
            cell.applies = cell.algorithm->applies(args, topology, &cell.why_not);
            if (!cell.applies) {
                if (forced != nullptr)
                    usage_error("--algo " + o.algo + ": " + cell.algorithm->name + " does not apply to " +
                                o.collective + " on " + topology.name() + " with " + std::to_string(p) +
                                " ranks: " + cell.why_not);
                not_applying.push_back({cell.algorithm->name, cell.why_not});
                continue;
            }
            if (const size_t elems = cell.algorithm->message_elems(args, topology); elems != args.chunk_elems)
                own_chunk[cell.algorithm->name] = std::max(own_chunk[cell.algorithm->name], elems * args.elem_size);
            work.emplace_back(cells.size() > 1 ? estimate_hops(network, *cell.algorithm, call) : 0,
                              [&cell, &network, &call, &options, &budget, &o, &topology, p] {
                                  std::unique_ptr<ChromeTrace> trace;
                                  if (!o.trace_path.empty()) {
                                      trace = std::make_unique<ChromeTrace>(
                                          o.trace_path, cell.algorithm->name,
                                          [&](int rank, int op) { return operation(o, call, rank, op, p); });
                                      cell.status = trace->opened();
                                      if (!cell.status) return;
                                  }
                                  cell.status = simulate_call(network, *cell.algorithm, call, options, budget,
                                                              &cell.sim, trace.get());
                                  if (cell.status && trace != nullptr) cell.status = trace->finish();
                                  cell.simulated = cell.status.is_ok();
                              });
        }
        std::stable_sort(work.begin(), work.end(), [](const auto &a, const auto &b) { return a.first > b.first; });
        std::vector<std::function<void()>> tasks;
        // The model's figures: from the selector's own pass where it made
        // one, else predicted here, alongside the simulations.
        if (o.all_algos)
            tasks.push_back(choose);
        else if (forced != nullptr)
            tasks.push_back(
                [&] { cells[0].model_us = cells[0].algorithm->predict_us(args, topology, planning.plan.costs); });
        for (auto &w : work) tasks.push_back(std::move(w.second));
        run_all(tasks, jobs);
        if (o.all_algos && !chosen.is_ok()) choice = nullptr;
        // NNPCCL_ALGO's choice comes without the model's figures.
        if (forced == nullptr && predictions.empty()) predictions = predict_all(args, topology, planning.plan.costs);
        for (Cell &cell : cells) {
            for (const Prediction &pr : predictions)
                if (pr.algorithm == cell.algorithm && pr.applies) cell.model_us = pr.time_us;
            if (!cell.status) {
                std::fprintf(stderr, "ccl-sim: %s at %zu B: %s\n", cell.algorithm->name, bytes,
                             cell.status.message().c_str());
                status = 1;
            }
            if (!cell.simulated) continue;
            steps += cell.sim.result.steps;
            messages += cell.sim.result.messages;
            hops += cell.sim.result.hops;
            if (cell.sim.extrapolated) notes.push_back(extrapolation_note(cell, bytes));
        }

        auto time_text = [](const Cell &cell) {
            return fmt_num(cell.sim.result.time_us, 9) + (cell.sim.extrapolated ? "~" : " ");
        };
        auto model_text = [](const Cell &cell, int width) {
            const double t = cell.sim.result.time_us;
            const bool off = t > 0 ? std::fabs(cell.model_us - t) > kDisagreement * t : cell.model_us > 0;
            return fmt_num(cell.model_us, width - 1) + (off ? "!" : " ");
        };
        if (o.all_algos) {
            std::printf("%12zu  %12zu", bytes, call.count);
            const Cell *fastest = nullptr;
            for (const Cell &cell : cells) {
                if (!cell.simulated) {
                    std::printf("  %10s %7s %10s", cell.applies ? "failed" : "n/a", "", "");
                    continue;
                }
                const double t = cell.sim.result.time_us;
                std::printf("  %s %s %s", time_text(cell).c_str(), fmt_num(gbps(total, t) * bus, 7).c_str(),
                            model_text(cell, 10).c_str());
                if (fastest == nullptr || t < fastest->sim.result.time_us) fastest = &cell;
            }
            std::printf("  %10s %7s  %-20s  %s\n", fmt_num(bound, 10).c_str(),
                        fmt_num(gbps(total, bound) * bus, 7).c_str(), choice != nullptr ? choice->name : "none",
                        fastest != nullptr ? fastest->algorithm->name : "-");
        } else {
            const Cell &cell = cells[0];
            const char *op = reduces(c) ? redop_name(o.op) : "none";
            std::printf("%12zu  %12zu  %8s  %6s  %6d  %-*s", bytes, call.count, datatype_name(o.datatype), op,
                        has_root(c) ? o.root : -1, name_width, cell.algorithm->name);
            if (!cell.simulated) {
                std::printf("  %10s\n", "failed");
                continue;
            }
            const double t = cell.sim.result.time_us;
            char ratio[16];
            std::snprintf(ratio, sizeof ratio, "%.2f", cell.model_us > 0 ? t / cell.model_us : 0.0);
            std::printf("  %s  %s  %s  %s  %9s  %s  %s\n", time_text(cell).c_str(), fmt_num(gbps(total, t), 7).c_str(),
                        fmt_num(gbps(total, t) * bus, 7).c_str(), model_text(cell, 10).c_str(), ratio,
                        fmt_num(bound, 10).c_str(), fmt_num(gbps(total, bound) * bus, 7).c_str());
            if (!o.svg_path.empty()) {
                const std::string label = std::string(cell.algorithm->name) + " " + o.collective + " of " +
                                          std::to_string(bytes) + " B on " + std::to_string(p) + " ranks";
                if (Status s = write_svg(o.svg_path, network, cell, label); !s) {
                    std::fprintf(stderr, "ccl-sim: %s\n", s.message().c_str());
                    status = 1;
                }
            }
        }
        std::fflush(stdout);
    }
    for (const std::string &n : notes) std::fputs(n.c_str(), stdout);
    std::sort(not_applying.begin(), not_applying.end());
    not_applying.erase(std::unique(not_applying.begin(), not_applying.end()), not_applying.end());
    for (const auto &[name, why] : not_applying) std::printf("# %s does not apply: %s\n", name.c_str(), why.c_str());
    for (const auto &[name, bytes] : own_chunk)
        std::printf("# %s picks its own chunk: messages of at most %zu B\n", name.c_str(), bytes);
    if (!o.trace_path.empty() && status == 0)
        std::printf("# trace: %s, %llu step events (one per step)\n", o.trace_path.c_str(),
                    static_cast<unsigned long long>(steps));
    if (!o.svg_path.empty() && status == 0) std::printf("# link utilisation drawn to %s\n", o.svg_path.c_str());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("# simulated %llu steps, %llu messages, %llu link crossings in %.1f s\n",
                static_cast<unsigned long long>(steps), static_cast<unsigned long long>(messages),
                static_cast<unsigned long long>(hops), seconds);
    return status;
}

} // namespace

int main(int argc, char **argv) { return run(parse_options(argc, argv)); }
