// ccl-bench: measures nnpccl's collectives the way nccl-tests measures
// NCCL, with the same flags and the same table, so existing habits and
// parsers work. Run `ccl-bench --help`.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

#include "check_data.hpp"
#include "command_line.hpp"
#include "explain.hpp"
#include "local_launch.hpp"
#include "nnpccl.h"
#include "nnpccl_inspect.h"
#include "soak.hpp"
#include "sweep.hpp"

namespace {

using nnpccl_bench::CollInfo;
using nnpccl_bench::Options;

const CollInfo kColls[] = {
    {"allreduce", NNPCCL_COLL_ALLREDUCE}, {"reduce_scatter", NNPCCL_COLL_REDUCE_SCATTER},
    {"allgather", NNPCCL_COLL_ALLGATHER}, {"broadcast", NNPCCL_COLL_BROADCAST},
    {"reduce", NNPCCL_COLL_REDUCE},       {"gather", NNPCCL_COLL_GATHER},
    {"scatter", NNPCCL_COLL_SCATTER},     {"alltoall", NNPCCL_COLL_ALLTOALL},
    {"sendrecv", NNPCCL_COLL_SEND, true},
};

// The help's text beyond the options: the other modes and how to read the table.
const char kDescription[] =
    "ccl-bench COLLECTIVE [options]: time COLLECTIVE over a sweep of sizes, checked bit for bit\n"
    "ccl-bench COLLECTIVE --explain | --compare ROUNDS [options]: predictions, or every algorithm measured\n"
    "ccl-bench --soak SECONDS [options]   ccl-bench --list-algos\n";
const char kFooter[] =
    "The table matches nccl-tests: out-of-place then in-place columns; busbw = algbw x\n"
    "2(n-1)/n for allreduce, (n-1)/n for reduce_scatter, allgather, gather, scatter and\n"
    "alltoall (size: the whole buffer of n blocks), 1 otherwise.";

// One line, exit status 2: scripts tell a usage error from a failed run (1).
const nnpccl_tools::Usage kUsage("ccl-bench", "ccl-bench --help");

const CollInfo *find_collective(const std::string &name) {
    for (const CollInfo &c : kColls)
        if (name == c.name) return &c;
    return nullptr;
}

bool read_datatype(const char *text, nnpccl_datatype_t *out) {
    return nnpccl_datatype_from_name(text, out) == NNPCCL_SUCCESS;
}
bool read_redop(const char *text, nnpccl_redop_t *out) { return nnpccl_redop_from_name(text, out) == NNPCCL_SUCCESS; }

// The command line as given, before it becomes Options.
struct CommandLine {
    Options o;
    std::string coll_name, algo, topo, transport;
    int check = 1, soak_seconds = 0;
    bool list_algos = false;
    const CLI::Option *factor = nullptr; // -f, to tell whether it was given
};

// The sweep as nccl-tests takes it: the collective, sizes, iterations,
// checking, datatype, op, root and JSON output.
void add_sweep_options(CLI::App &app, CommandLine *cl) {
    Options &o = cl->o;
    std::string names;
    for (const CollInfo &c : kColls) names += std::string(names.empty() ? "" : ", ") + c.name;
    app.add_option("COLLECTIVE", cl->coll_name,
                   "allreduce | reduce_scatter | allgather | broadcast | reduce | gather |\n"
                   "scatter | alltoall | sendrecv (each rank sends to rank+1 and receives\n"
                   "from rank-1 at once; it has no in-place form: those columns say N/A)")
        ->check(CLI::Validator(
            [names](std::string &name) {
                return find_collective(name) ? std::string() : "unknown collective '" + name + "' (" + names + ")";
            },
            ""))
        ->type_name("NAME");
    cl->factor = nnpccl_tools::add_sweep_options(app, &o.sizes);
    app.add_option("-n,--iters", o.iters, "timed iterations per size, default 20")
        ->transform(nnpccl_tools::whole_number(1))
        ->type_name("N");
    app.add_option("-w,--warmup_iters", o.warmup, "untimed iterations first, default 5")
        ->transform(nnpccl_tools::whole_number(0))
        ->type_name("N");
    app.add_option("-c,--check", cl->check, "1: verify every result bit for bit (default), 0: do not")
        ->transform(nnpccl_tools::whole_number(0))
        ->type_name("0|1");
    nnpccl_tools::add_parsed(app, "-d,--datatype", &o.dt, read_datatype, nnpccl_tools::unknown("datatype"),
                             "int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double", "TYPE");
    nnpccl_tools::add_parsed(app, "-o,--op", &o.op, read_redop, nnpccl_tools::unknown("op"), "sum prod min max avg",
                             "OP");
    app.add_option("-r,--root", o.root, "root rank of broadcast, reduce, gather and scatter, default 0")
        ->transform(nnpccl_tools::whole_number(0))
        ->type_name("RANK");
    app.add_option("-J,--output_file", o.json_path, "also write the results as JSON to this file")->type_name("FILE");
}

// Where it runs (transport, topology, ranks, a forced algorithm) and the
// modes other than the sweep.
void add_run_options(CLI::App &app, CommandLine *cl) {
    Options &o = cl->o;
    app.add_option("--transport", cl->transport,
                   "auto (shm within a host, ofi across hosts), shm, ofi (libfabric,\n"
                   "NNPCCL_OFI_PROVIDER picks the provider), or socket (nnpccl's own TCP);\n"
                   "sets NNPCCL_TRANSPORT")
        ->check(CLI::IsMember({"auto", "shm", "ofi", "socket"}))
        ->type_name("T");
    app.add_option("--topo", cl->topo,
                   "plan on this machine: a preset (flat, ring:N, fc:N, hcm8, torus:XxY, torus:XxYxZ,\n"
                   "nnpt-ring8, nnpt-hcm8, nnpt-pod32, nnpt-pod1024, hosts:HxL, hosts:A,B,...)\n"
                   "or a topology file;\n"
                   "sets NNPCCL_TOPO (NNPCCL_EMULATE_LINKS=1 also paces traffic to its links)")
        ->type_name("T");
    app.add_option("--soak", cl->soak_seconds,
                   "instead of a sweep: a random mix of every collective, size (whole\n"
                   "buffers up to -e), datatype and op, all checked, then ops, bytes, wrong\n"
                   "values, fds, and memory: VmHWM, Pss, the shm queues' share")
        ->transform(nnpccl_tools::whole_number(1))
        ->type_name("SECONDS");
    app.add_option("--seed", o.soak_seed,
                   "with --soak: replay the mix a soak printed as its seed (default: from the clock)")
        ->type_name("N");
    app.add_option("--np", o.np,
                   "start N ranks on this host; without it the launcher's environment\n"
                   "(mpirun, mpiexec, srun, torchrun-style RANK/WORLD_SIZE) is used")
        ->transform(nnpccl_tools::whole_number(1))
        ->type_name("N");
    app.add_option("--algo", cl->algo,
                   "force algorithm NAME for COLLECTIVE (sets NNPCCL_ALGO=COLLECTIVE:NAME);\n"
                   "the call fails if NAME does not apply on the topology")
        ->type_name("NAME");
    app.add_flag("--explain", o.explain,
                 "run nothing: per size, each algorithm's predicted time and busbw on the\n"
                 "topology (--topo, --np ranks), the planner's choice marked, and the bound");
    app.add_flag("--list-algos", cl->list_algos, "list the algorithms: the collectives each serves, when it applies");
    app.add_option("--compare", o.compare_rounds,
                   "per size, every algorithm serving COLLECTIVE forced and the selector's own\n"
                   "choice, out of place, each on a communicator of its own, in R rounds of -n\n"
                   "calls that take turns; prints each one's median time, the choice, and its\n"
                   "forced time over the fastest forced one (the selector's error)")
        ->transform(nnpccl_tools::whole_number(1))
        ->type_name("R");
    app.add_option("--tune", o.tune_path,
                   "with --compare (5 rounds if not given): write the fastest algorithm per size\n"
                   "to FILE, NNPCCL_TUNING_FILE's format, merged with FILE's other collectives;\n"
                   "jobs that set NNPCCL_TUNING_FILE=FILE then prefer them, reproducibly")
        ->type_name("FILE");
}

// The options that go together, checked; --topo, --transport and --algo
// set the variables every rank inherits.
Options settle(CommandLine &cl) {
    Options &o = cl.o;
    o.check = cl.check != 0;
    o.soak_seconds = cl.soak_seconds;
    if (!cl.topo.empty()) setenv("NNPCCL_TOPO", cl.topo.c_str(), 1);
    if (!cl.transport.empty()) setenv("NNPCCL_TRANSPORT", cl.transport.c_str(), 1);
    o.coll = find_collective(cl.coll_name);
    if (o.coll == nullptr && o.soak_seconds == 0) kUsage.error("name a collective (or --soak SECONDS)");
    if (o.coll == nullptr) o.coll = &kColls[0];
    if (!cl.algo.empty()) {
        std::string error;
        if (!nnpccl_bench::check_algorithm_name(o.coll->coll, cl.algo, &error)) kUsage.error("--algo: " + error);
        // An exchange is a send and a recv.
        const std::string forced =
            o.coll->exchange ? "send:" + cl.algo + ";recv:" + cl.algo : o.coll->name + (":" + cl.algo);
        setenv("NNPCCL_ALGO", forced.c_str(), 1);
    }
    if (!o.tune_path.empty() && o.compare_rounds == 0) o.compare_rounds = 5;
    if (o.compare_rounds > 0) {
        if (!cl.algo.empty()) kUsage.error("--compare runs every algorithm: it takes no --algo");
        if (!o.json_path.empty()) kUsage.error("--compare writes no JSON: drop -J");
        if (o.coll->exchange || o.soak_seconds > 0)
            kUsage.error("--compare needs a collective (not sendrecv, not --soak)");
    }
    if (o.sizes.max_bytes < o.sizes.min_bytes && o.soak_seconds == 0) kUsage.error("-e is smaller than -b");
    nnpccl_tools::default_step(cl.factor, &o.sizes);
    return o;
}

Options parse_options(int argc, char **argv) {
    CommandLine cl;
    CLI::App app{kDescription, "ccl-bench"};
    app.footer(kFooter);
    nnpccl_tools::house_style(app, 26);
    add_sweep_options(app, &cl);
    add_run_options(app, &cl);
    kUsage.parse(app, argc, argv);
    if (cl.list_algos) {
        nnpccl_bench::print_algorithm_list();
        std::exit(0);
    }
    return settle(cl);
}

int run_rank(const Options &o, nnpccl_comm_t comm) {
    int rank = 0, nranks = 1;
    nnpccl_comm_rank(comm, &rank);
    nnpccl_comm_size(comm, &nranks);
    if (nnpccl_check::has_root(o.coll->coll) && o.root >= nranks) {
        if (rank == 0) std::fprintf(stderr, "ccl-bench: -r %d is not a rank of %d\n", o.root, nranks);
        nnpccl_comm_destroy(comm);
        return 2;
    }
    if (o.coll->exchange && o.soak_seconds == 0 && nranks < 2) {
        if (rank == 0) std::fprintf(stderr, "ccl-bench: sendrecv needs 2 ranks or more (a rank cannot send to itself)\n");
        nnpccl_comm_destroy(comm);
        return 2;
    }
    int status = o.soak_seconds > 0     ? run_soak(comm, rank, nranks, o.soak_seconds, o.sizes.max_bytes, o.soak_seed)
                 : o.compare_rounds > 0 ? nnpccl_bench::run_compare(o, comm, rank, nranks)
                                        : nnpccl_bench::run_sweep(o, comm, rank, nranks);
    nnpccl_result_t rc = nnpccl_comm_destroy(comm);
    if (rc != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "ccl-bench: rank %d: destroy failed: %s\n", rank, nnpccl_get_last_error(nullptr));
        return 1;
    }
    return status;
}

nnpccl_bench::ExplainRequest explain_request(const Options &o) {
    nnpccl_bench::ExplainRequest r;
    r.collective = o.coll->coll;
    const char *topology = std::getenv("NNPCCL_TOPO");
    r.topology = topology != nullptr ? topology : "";
    r.nranks = o.np;
    r.sizes = o.sizes;
    r.datatype = o.dt;
    // An exchange is planned as rank 0's send to rank 1.
    r.root = nnpccl_check::has_root(o.coll->coll) ? o.root : o.coll->exchange ? 1 : -1;
    return r;
}

} // namespace

int main(int argc, char **argv) {
    Options o = parse_options(argc, argv);
    if (o.explain) return nnpccl_bench::explain_plans(explain_request(o));
    if (o.np > 0) {
        return run_local_ranks(o.np, [&o](int rank, int nranks, const nnpccl_unique_id_t &id) {
            nnpccl_comm_t comm = nullptr;
            nnpccl_result_t rc = nnpccl_comm_init_rank(&comm, nranks, id, rank, nullptr);
            if (rc != NNPCCL_SUCCESS) {
                std::fprintf(stderr, "ccl-bench: rank %d: init failed: %s\n", rank, nnpccl_get_last_error(nullptr));
                return 1;
            }
            return run_rank(o, comm);
        });
    }
    nnpccl_comm_t comm = nullptr;
    nnpccl_result_t rc = nnpccl_comm_init_from_env(&comm, nullptr);
    if (rc != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "ccl-bench: init failed: %s\n(use --np N to start N ranks on this host)\n",
                     nnpccl_get_last_error(nullptr));
        return 1;
    }
    return run_rank(o, comm);
}
