// ccl-bench: measures nnpccl's collectives the way nccl-tests measures
// NCCL, with the same flags and the same table, so existing habits and
// parsers work. Run `ccl-bench --help`.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "config.hpp"
#include "dtype.hpp"
#include "explain.hpp"
#include "local_launch.hpp"
#include "soak.hpp"
#include "sweep.hpp"
#include "nnpccl.h"

namespace {

using nnpccl::Collective;
using nnpccl_bench::CollInfo;
using nnpccl_bench::Options;

const CollInfo kColls[] = {
    {"allreduce", Collective::Allreduce}, {"reduce_scatter", Collective::ReduceScatter},
    {"allgather", Collective::Allgather}, {"broadcast", Collective::Broadcast},
    {"reduce", Collective::Reduce},       {"gather", Collective::Gather},
    {"scatter", Collective::Scatter},     {"alltoall", Collective::Alltoall},
    {"sendrecv", Collective::Send, true},
};

const char kUsage[] =
    "usage: ccl-bench COLLECTIVE [options]   or   ccl-bench --soak SECONDS [options]\n"
    "  COLLECTIVE      allreduce | reduce_scatter | allgather | broadcast | reduce | gather |\n"
    "                  scatter | alltoall | sendrecv (each rank sends to rank+1 and receives\n"
    "                  from rank-1 at once; it has no in-place form: those columns say N/A)\n"
    "  -b, --minbytes  smallest size in bytes (K, M, G suffixes), default 32M\n"
    "  -e, --maxbytes  largest size, default 32M\n"
    "  -f, --stepfactor  multiply the size by this each step, default 1 (2 when -e > -b)\n"
    "  -i, --stepbytes  add this many bytes each step instead\n"
    "  -n, --iters     timed iterations per size, default 20\n"
    "  -w, --warmup_iters  untimed iterations first, default 5\n"
    "  -c, --check     1: verify every result bit for bit (default), 0: do not\n"
    "  -d, --datatype  int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double\n"
    "  -o, --op        sum prod min max avg\n"
    "  -r, --root      root rank of broadcast, reduce, gather and scatter, default 0\n"
    "  -J, --output_file  also write the results as JSON to this file\n"
    "  --transport T   auto (shm within a host, ofi across hosts), shm, or ofi (libfabric,\n"
    "                  NNPCCL_OFI_PROVIDER picks the provider); sets NNPCCL_TRANSPORT\n"
    "  --topo T        plan on this machine: a preset (flat, ring:N, fc:N, hcm8, torus:XxY,\n"
    "                  nnpt-ring8, nnpt-hcm8, nnpt-pod32, nnpt-pod1024) or a topology file;\n"
    "                  sets NNPCCL_TOPO (NNPCCL_EMULATE_LINKS=1 also paces traffic to its links)\n"
    "  --soak SECONDS  instead of a sweep: a random mix of every collective, size (up to -e),\n"
    "                  datatype and op, all checked, then ops, bytes, wrong values, RSS and fds\n"
    "  --np N          start N ranks on this host; without it the launcher's environment\n"
    "                  (mpirun, mpiexec, srun, torchrun-style RANK/WORLD_SIZE) is used\n"
    "  --algo NAME     force algorithm NAME for COLLECTIVE (sets NNPCCL_ALGO=COLLECTIVE:NAME);\n"
    "                  the call fails if NAME does not apply on the topology\n"
    "  --explain       run nothing: per size, each algorithm's predicted time and busbw on the\n"
    "                  topology (--topo, --np ranks), the planner's choice marked, and the bound\n"
    "  --list-algos    list the algorithms: the collectives each serves, when it applies\n"
    "  --compare R     per size, every algorithm serving COLLECTIVE forced and the selector's own\n"
    "                  choice, out of place, each on a communicator of its own, in R rounds of -n\n"
    "                  calls that take turns; prints each one's median time, the choice, and its\n"
    "                  forced time over the fastest forced one (the selector's error)\n"
    "The table matches nccl-tests: out-of-place then in-place columns; busbw = algbw x\n"
    "2(n-1)/n for allreduce, (n-1)/n for reduce_scatter, allgather, gather, scatter and\n"
    "alltoall (size: the whole buffer of n blocks), 1 otherwise.\n";

[[noreturn]] void usage_error(const std::string &why) {
    std::fprintf(stderr, "ccl-bench: %s\n%s", why.c_str(), kUsage);
    std::exit(2);
}

size_t parse_size_arg(const char *flag, const char *text) {
    auto v = nnpccl::parse_size(text);
    if (!v) usage_error(std::string(flag) + " " + text + " is not a size");
    return *v;
}

int parse_int_arg(const char *flag, const char *text, int min) {
    char *end = nullptr;
    long v = std::strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || v < min || v > 1 << 30)
        usage_error(std::string(flag) + " " + text + " is not a whole number >= " + std::to_string(min));
    return static_cast<int>(v);
}

Options parse_options(int argc, char **argv) {
    Options o;
    bool factor_given = false;
    std::string algo;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        auto next = [&]() -> const char * {
            if (i + 1 >= argc) usage_error(a + " needs a value");
            return argv[++i];
        };
        if (a[0] != '-') {
            if (o.coll != nullptr) usage_error("unexpected argument '" + a + "'");
            for (const CollInfo &c : kColls)
                if (a == c.name) o.coll = &c;
            if (o.coll == nullptr) usage_error("unknown collective '" + a + "'");
        } else if (a == "-b" || a == "--minbytes") o.min_bytes = parse_size_arg("-b", next());
        else if (a == "-e" || a == "--maxbytes") o.max_bytes = parse_size_arg("-e", next());
        else if (a == "-f" || a == "--stepfactor") {
            o.step_factor = static_cast<size_t>(parse_int_arg("-f", next(), 1));
            factor_given = true;
        } else if (a == "-i" || a == "--stepbytes") o.step_bytes = parse_size_arg("-i", next());
        else if (a == "-n" || a == "--iters") o.iters = parse_int_arg("-n", next(), 1);
        else if (a == "-w" || a == "--warmup_iters") o.warmup = parse_int_arg("-w", next(), 0);
        else if (a == "-c" || a == "--check") o.check = parse_int_arg("-c", next(), 0) != 0;
        else if (a == "-d" || a == "--datatype") {
            const char *v = next();
            if (!nnpccl::parse_datatype(v, &o.dt)) usage_error(std::string("unknown datatype '") + v + "'");
        } else if (a == "-o" || a == "--op") {
            const char *v = next();
            if (!nnpccl::parse_redop(v, &o.op)) usage_error(std::string("unknown op '") + v + "'");
        } else if (a == "-r" || a == "--root") o.root = parse_int_arg("-r", next(), 0);
        else if (a == "-J" || a == "--output_file") o.json_path = next();
        else if (a == "--np") o.np = parse_int_arg("--np", next(), 1);
        else if (a == "--soak") o.soak_seconds = parse_int_arg("--soak", next(), 1);
        else if (a == "--topo") setenv("NNPCCL_TOPO", next(), 1); // every rank inherits it
        else if (a == "--algo") algo = next();
        else if (a == "--explain") o.explain = true;
        else if (a == "--compare") o.compare_rounds = parse_int_arg("--compare", next(), 1);
        else if (a == "--list-algos") {
            nnpccl_bench::print_algorithm_list();
            std::exit(0);
        }
        else if (a == "--transport") {
            std::string t = next();
            if (t != "auto" && t != "shm" && t != "ofi") usage_error("--transport " + t + " is not auto, shm or ofi");
            setenv("NNPCCL_TRANSPORT", t.c_str(), 1); // every rank inherits it
        }
        else usage_error("unknown option '" + a + "'");
    }
    if (o.coll == nullptr && o.soak_seconds == 0) usage_error("name a collective (or --soak SECONDS)");
    if (o.coll == nullptr) o.coll = &kColls[0];
    if (!algo.empty()) {
        std::string error;
        if (!nnpccl_bench::check_algorithm_name(o.coll->coll, algo, &error)) usage_error("--algo: " + error);
        // Every rank inherits it; an exchange is a send and a recv.
        const std::string forced = o.coll->exchange ? "send:" + algo + ";recv:" + algo : o.coll->name + (":" + algo);
        setenv("NNPCCL_ALGO", forced.c_str(), 1);
    }
    if (o.compare_rounds > 0) {
        if (!algo.empty()) usage_error("--compare runs every algorithm: it takes no --algo");
        if (!o.json_path.empty()) usage_error("--compare writes no JSON: drop -J");
        if (o.coll->exchange || o.soak_seconds > 0)
            usage_error("--compare needs a collective (not sendrecv, not --soak)");
    }
    if (o.max_bytes < o.min_bytes && o.soak_seconds == 0) usage_error("-e is smaller than -b");
    if (!factor_given && o.step_bytes == 0 && o.max_bytes > o.min_bytes) o.step_factor = 2;
    return o;
}

int run_rank(const Options &o, nnpccl_comm_t comm) {
    int rank = 0, nranks = 1;
    nnpccl_comm_rank(comm, &rank);
    nnpccl_comm_size(comm, &nranks);
    if (nnpccl::has_root(o.coll->coll) && o.root >= nranks) {
        if (rank == 0) std::fprintf(stderr, "ccl-bench: -r %d is not a rank of %d\n", o.root, nranks);
        nnpccl_comm_destroy(comm);
        return 2;
    }
    if (o.coll->exchange && o.soak_seconds == 0 && nranks < 2) {
        if (rank == 0) std::fprintf(stderr, "ccl-bench: sendrecv needs 2 ranks or more (a rank cannot send to itself)\n");
        nnpccl_comm_destroy(comm);
        return 2;
    }
    int status = o.soak_seconds > 0      ? run_soak(comm, rank, nranks, o.soak_seconds, o.max_bytes)
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
    r.topology = nnpccl::env_string("NNPCCL_TOPO");
    r.nranks = o.np;
    r.min_bytes = o.min_bytes;
    r.max_bytes = o.max_bytes;
    r.step_factor = o.step_factor;
    r.step_bytes = o.step_bytes;
    r.datatype = o.dt;
    // An exchange is planned as rank 0's send to rank 1.
    r.root = nnpccl::has_root(o.coll->coll) ? o.root : o.coll->exchange ? 1 : -1;
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
