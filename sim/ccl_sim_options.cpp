#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

#include "ccl_sim.hpp"
#include "command_line.hpp"
#include "dtype.hpp"
#include "presets.hpp"

namespace nnpccl::sim {

namespace {

const nnpccl_tools::Usage kUsage("ccl-sim", "ccl-sim --help");

const char kDescription[] =
    "ccl-sim COLLECTIVE [options]: simulate nnpccl's schedules for COLLECTIVE on every rank of a\n"
    "topology in virtual time (no processes): per size the simulated time, algbw and busbw next to\n"
    "the cost model's prediction (ccl-bench --explain) and the lower bound.\n";
const char kFooter[] =
    "Links are FIFO servers at their bandwidth and latency, messages follow their routes cut-through,\n"
    "each chip reduces at the cost model's speed, steps wait for their messages and a free slot as\n"
    "the executor's do. NNPCCL_CHUNK_SIZE, NNPCCL_SHM_SLOTS, NNPCCL_ALGO, NNPCCL_TUNING_FILE and\n"
    "NNPCCL_TUNE are read as by the library. busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n for\n"
    "reduce_scatter, allgather, gather, scatter and alltoall (size: the whole buffer), 1 otherwise.\n"
    "Planning a job (docs/simulation.md, \"Planning a POD job\"): --report and --links-csv say where\n"
    "one call's time goes; --link-gbps, --link-latency, --fail-link and --fail-chip change the\n"
    "machine without a file (another shape: --topo torus:XxY); --fidelity credits adds finite link\n"
    "buffers and a per-message overhead the default model leaves out.\n"
    "presets:\n";

bool read_datatype(const char *text, nnpccl_datatype_t *out) { return parse_datatype(text, out); }

// A finite decimal number, > 0 (or >= 0 where zero means something).
bool read_number(const char *text, double *out, bool zero_ok) {
    char *end = nullptr;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || !std::isfinite(v) || v < 0 || (v == 0 && !zero_ok)) return false;
    *out = v;
    return true;
}
bool read_positive(const char *text, double *out) { return read_number(text, out, false); }
bool read_non_negative(const char *text, double *out) { return read_number(text, out, true); }
bool read_pair(const char *text, std::pair<int, int> *out) { return parse_chip_pair(text, out); }
bool read_chip(const char *text, int *out) {
    double v;
    if (!read_number(text, &v, true) || v != std::floor(v) || v > 1e9) return false;
    *out = static_cast<int>(v);
    return true;
}
bool read_fidelity(const char *text, bool *credits) {
    const std::string t = text;
    if (t != "default" && t != "credits") return false;
    *credits = t == "credits";
    return true;
}
bool read_redop(const char *text, nnpccl_redop_t *out) { return parse_redop(text, out); }

// The call: which collective, its sizes, datatype, op, root and placement.
// Returns -f's option.
CLI::Option *add_call_options(CLI::App &app, Options *o) {
    app.add_option("COLLECTIVE", o->collective,
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
    app.add_option("--topo", o->topo, "the machine: a preset or a topology file (default flat, which needs --np)")
        ->type_name("T");
    app.add_option("--np", o->np, "ranks (default: one per chip of the topology)")
        ->transform(nnpccl_tools::whole_number(1))
        ->type_name("N");
    CLI::Option *factor = nnpccl_tools::add_sweep_options(app, &o->sweep);
    nnpccl_tools::add_parsed(app, "-d,--datatype", &o->datatype, read_datatype, nnpccl_tools::unknown("datatype"),
                             "int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double", "TYPE");
    nnpccl_tools::add_parsed(app, "-o,--op", &o->op, read_redop, nnpccl_tools::unknown("op"),
                             "sum prod min max avg (the same time: shown in the table only)", "OP");
    app.add_option("-r,--root", o->root, "root rank of broadcast, reduce, gather and scatter, default 0")
        ->transform(nnpccl_tools::whole_number(0))
        ->type_name("RANK");
    app.add_flag("--in-place", o->in_place, "simulate the in-place call (default: out of place)");
    return factor;
}

// How it is simulated: which algorithms, the executor's chunks and slots,
// what is written besides the table, and the budget.
void add_simulation_options(CLI::App &app, Options *o) {
    CLI::Option *algo = app.add_option("--algo", o->algo,
                                       "simulate algorithm NAME (or a short name, as NNPCCL_ALGO takes it)\n"
                                       "instead of the selector's choice; an error where it does not apply")
                            ->type_name("NAME");
    CLI::Option *all = app.add_flag("--all-algos", o->all_algos,
                                    "simulate every algorithm that applies, side by side, with the\n"
                                    "model's choice and the fastest simulated one");
    algo->excludes(all);
    app.add_option("--chunk", o->chunk_bytes, "the largest message in bytes (default NNPCCL_CHUNK_SIZE, else 512K);\n"
                   "on a machine of links each algorithm runs in it or a half, quarter,\n"
                   "... of it, as the model predicts fastest (the chunk column)")
        ->transform(nnpccl_tools::size_value())
        ->type_name("SIZE");
    app.add_option("--slots", o->slots,
                   "messages a stream holds before a send waits (default NNPCCL_SHM_SLOTS,\n"
                   "else 8); 0: no limit")
        ->transform(nnpccl_tools::whole_number(0))
        ->type_name("N");
    app.add_option("--trace", o->trace_path,
                   "write the run (one size, one algorithm) as a Chrome trace-event file\n"
                   "(Perfetto, chrome://tracing): pid = rank, tid = channel, one event per step")
        ->type_name("FILE");
    app.add_option("--svg", o->svg_path,
                   "draw the topology (one size, one algorithm) with each link coloured by\n"
                   "its utilisation over the collective")
        ->type_name("FILE");
    app.add_option("--max-hops", o->max_hops,
                   "simulate message by message up to about this many message-link\n"
                   "crossings (K, M, G suffixes; default 64M); larger calls are\n"
                   "extrapolated from the same call at 1/2^k of the size (marked ~)")
        ->transform(nnpccl_tools::size_value())
        ->type_name("N");
    app.add_flag("--exact", o->exact, "never extrapolate, however long it takes");
    app.add_option("-j,--jobs", o->jobs, "simulations run at once (default: the cores)")
        ->transform(nnpccl_tools::whole_number(1))
        ->type_name("N");
}

// What a person planning a job asks: the per-link table, the report, the
// machine changed without a topology file, and the finer model.
void add_planning_options(CLI::App &app, Options *o) {
    app.add_option("--links-csv", o->links_csv,
                   "write every directed link (one size, one algorithm): from, to, torus\n"
                   "dimension, bytes carried, busy time, utilisation, peak queue")
        ->type_name("FILE");
    app.add_flag("--report", o->report,
                 "print the bottleneck links and the critical path of the call (one\n"
                 "size, one algorithm): its ranks, links, and latency against data\n"
                 "against waiting");
    app.add_option("--top", o->top, "bottleneck links (and path messages) --report lists, default 10")
        ->transform(nnpccl_tools::whole_number(1))
        ->type_name("N");
    using nnpccl_tools::prefixed;
    nnpccl_tools::add_parsed(app, "--link-gbps", &o->what_if.link_gbps, read_positive,
                             prefixed("not a bandwidth in GB/s above 0: "), "every link's bandwidth per direction",
                             "GBPS");
    nnpccl_tools::add_parsed(app, "--link-latency", &o->what_if.link_latency_us, read_non_negative,
                             prefixed("not a latency in us, 0 or more: "), "every link's latency", "US");
    app.add_option_function<std::vector<std::string>>(
           "--fail-link",
           [o](const std::vector<std::string> &pairs) {
               for (const std::string &t : pairs) {
                   std::pair<int, int> p;
                   read_pair(t.c_str(), &p);
                   o->what_if.failed_links.push_back(p);
               }
           },
           "the cable between chips A and B is down (both directions; repeat for\n"
           "more): routes go around it, searched per source")
        ->check(CLI::Validator(
            [](std::string &t) {
                std::pair<int, int> p;
                return read_pair(t.c_str(), &p) ? std::string() : t + " is not two chips A-B";
            },
            ""))
        ->type_name("A-B");
    app.add_option_function<std::vector<std::string>>(
           "--fail-chip",
           [o](const std::vector<std::string> &chips) {
               for (const std::string &t : chips) {
                   int c = 0;
                   read_chip(t.c_str(), &c);
                   o->what_if.failed_chips.push_back(c);
               }
           },
           "chip N is gone with its cables: the job runs on its other chips, one\n"
           "rank fewer (repeat for more)")
        ->check(CLI::Validator(
            [](std::string &t) {
                int c;
                return read_chip(t.c_str(), &c) ? std::string() : t + " is not a chip number";
            },
            ""))
        ->type_name("N");
    nnpccl_tools::add_parsed(app, "--fidelity", &o->credits, read_fidelity, nnpccl_tools::unknown("fidelity"),
                             "default | credits: finite link buffers and a per-message\n"
                             "overhead (docs/simulation.md)",
                             "MODE");
    app.add_option("--credit-bytes", o->credit_bytes, "credits: each link's buffer, default 512K")
        ->transform(nnpccl_tools::size_value())
        ->type_name("SIZE");
    nnpccl_tools::add_parsed(app, "--message-overhead", &o->message_overhead_us, read_non_negative,
                             prefixed("not a time in us, 0 or more: "),
                             "credits: us per message at the sender, default 0.2", "US");
}

} // namespace

void usage_error(const std::string &why) { kUsage.error(why); }

Options parse_options(int argc, char **argv) {
    Options o;
    CLI::App app{kDescription, "ccl-sim"};
    app.footer(kFooter + describe_presets());
    nnpccl_tools::house_style(app, 26);
    const CLI::Option *factor = add_call_options(app, &o);
    add_simulation_options(app, &o);
    add_planning_options(app, &o);
    kUsage.parse(app, argc, argv);
    if (o.collective.empty()) usage_error("name a collective (" + sim_collective_names() + ")");
    if (o.sweep.max_bytes < o.sweep.min_bytes) usage_error("-e is smaller than -b");
    nnpccl_tools::default_step(factor, &o.sweep);
    if (o.exact) o.max_hops = 0;
    if (!o.credits && (o.credit_bytes >= 0 || o.message_overhead_us >= 0))
        usage_error("--credit-bytes and --message-overhead set the credits mode: add --fidelity credits");
    if (o.credits && o.credit_bytes == 0) usage_error("--credit-bytes 0: a link needs a buffer of at least a byte");
    return o;
}

} // namespace nnpccl::sim
