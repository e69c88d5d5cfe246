// The peers' command line: nccl-tests's flags and defaults (except -f, which
// defaults to 2), read by the tools' own library (tools/common/) as
// ccl-bench reads its own, with the peers' messages.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "command_line.hpp"
#include "peer_types.hpp"
#include "size_sweep.hpp"

namespace peer_bench {

struct Options {
    Collective collective = Collective::AllReduce;
    size_t min_bytes = 32u << 20;
    size_t max_bytes = 32u << 20;
    size_t step_factor = 2;       // -f: multiply the size by this; 1 = add step_bytes
    size_t step_bytes = 1u << 20; // -i: used only with -f 1
    int iters = 20;
    int warmup_iters = 5;
    Dtype dtype = Dtype::Float;
    RedOp op = RedOp::Sum;
    int root = 0;
    bool check = true;
    // Launcher flags, accepted only by tools that launch their own ranks.
    int launch_ranks = 0;  // --np N
    std::string store_dir; // --store DIR
};

// A parser of whole numbers in [min, max] into an int or a size_t.
template <typename T> auto number_in(long min, long max) {
    return [min, max](const char *text, T *out) {
        long value = 0;
        if (!nnpccl_tools::read_decimal(text, min, max, &value)) return false;
        *out = static_cast<T>(value);
        return true;
    };
}

inline bool read_positive_size(const char *text, size_t *out) { return nnpccl_tools::read_size(text, out) && *out > 0; }

inline bool read_flag(const char *text, bool *out) {
    long value = 0;
    if (!nnpccl_tools::read_decimal(text, 0, 1, &value)) return false;
    *out = value != 0;
    return true;
}

// The flags of every peer, defined once for parsing and for --help.
// *collective receives COLLECTIVE; --np and --store are hidden when the tool
// does not launch its own ranks, and parse_options refuses them then.
inline void define_options(CLI::App &app, bool launcher, Options *opts, std::string *collective) {
    using nnpccl_tools::add_parsed;
    using nnpccl_tools::prefixed;
    nnpccl_tools::house_style(app, 26);
    app.add_option("COLLECTIVE", *collective, "allreduce | reduce_scatter | allgather | broadcast | reduce")
        ->required()
        ->check(CLI::Validator(
            [](std::string &text) {
                Collective c;
                return parse_collective(text.c_str(), &c) ? std::string() : "unknown collective: " + text;
            },
            ""))
        ->type_name("NAME");
    add_parsed(app, "-b,--minbytes", &opts->min_bytes, nnpccl_tools::read_size, prefixed("not a size: "),
               "smallest size (default 32M; suffixes K M G = powers of 1024)", "SIZE");
    add_parsed(app, "-e,--maxbytes", &opts->max_bytes, nnpccl_tools::read_size, prefixed("not a size: "),
               "largest size (default 32M)", "SIZE");
    add_parsed(app, "-f,--stepfactor", &opts->step_factor, number_in<size_t>(1, 1 << 20),
               prefixed("not a whole number in [1, 1048576]: "), "multiply the size by this between rows (default 2)",
               "N");
    add_parsed(app, "-i,--stepbytes", &opts->step_bytes, read_positive_size, prefixed("not a size above 0: "),
               "add this between rows when -f is 1 (default 1M)", "SIZE");
    add_parsed(app, "-n,--iters", &opts->iters, number_in<int>(1, INT_MAX), prefixed("not a whole number >= 1: "),
               "timed iterations per row (default 20)", "N");
    add_parsed(app, "-w,--warmup_iters", &opts->warmup_iters, number_in<int>(0, INT_MAX),
               prefixed("not a whole number >= 0: "), "untimed iterations before each timed block (default 5)", "N");
    add_parsed(app, "-d,--datatype", &opts->dtype, parse_dtype, prefixed("unsupported datatype: "),
               "int8 uint8 int32 uint32 int64 uint64 float double (default float)", "TYPE");
    add_parsed(app, "-o,--op", &opts->op, parse_redop, prefixed("unsupported op: "), "sum prod min max (default sum)",
               "OP");
    add_parsed(app, "-r,--root", &opts->root, number_in<int>(0, INT_MAX), prefixed("not a whole number >= 0: "),
               "root of broadcast and reduce (default 0)", "RANK");
    add_parsed(app, "-c,--check", &opts->check, read_flag, prefixed("not 0 or 1: "),
               "verify every element bit for bit (default 1)", "0|1");
    const char *group = launcher ? "Options" : "";
    add_parsed(app, "--np", &opts->launch_ranks, number_in<int>(1, 4096), prefixed("not a rank count in [1, 4096]: "),
               "fork N local ranks (otherwise RANK/WORLD_SIZE or the\n"
               "OMPI_COMM_WORLD_*, PMI_*, SLURM_* variables name this rank)",
               "N")
        ->group(group);
    app.add_option("--store", opts->store_dir,
                   "empty directory shared by all ranks for the rendezvous\n"
                   "(without --np; default $GLOO_BENCH_STORE)")
        ->type_name("DIR")
        ->group(group);
}

inline void print_usage(const char *tool, bool launcher) {
    CLI::App app{"Times COLLECTIVE over a sweep of sizes, as ccl-bench does, each result checked bit for bit.\n", tool};
    Options opts;
    std::string collective;
    define_options(app, launcher, &opts, &collective);
    std::fputs(app.help().c_str(), stderr);
}

// Returns false and fills *error when the command line is wrong; with an
// empty *error when it asks for --help.
inline bool parse_options(int argc, char **argv, bool accept_launcher_flags, Options *opts, std::string *error) {
    CLI::App app;
    std::string collective;
    define_options(app, accept_launcher_flags, opts, &collective);
    switch (nnpccl_tools::parse_command_line(app, argc, argv, error)) {
    case nnpccl_tools::Parsed::Help: return *error = "", false;
    case nnpccl_tools::Parsed::Error: return false;
    case nnpccl_tools::Parsed::Run: break;
    }
    for (const char *flag : {"--np", "--store"})
        if (!accept_launcher_flags && app.get_option(flag)->count() > 0)
            return *error = std::string(flag) + " is not for this tool; use its launcher (mpirun -np N)", false;
    parse_collective(collective.c_str(), &opts->collective);
    if (opts->min_bytes > opts->max_bytes) return *error = "-b is larger than -e", false;
    return true;
}

// parse_options for a tool's main(): -1 when the run goes on; otherwise the
// exit status, having printed the help (0) or the error in one line (2) if
// `speaking` (an MPI tool's rank 0 only).
inline int read_command_line(const char *tool, int argc, char **argv, bool launcher, Options *opts,
                             bool speaking = true) {
    std::string error;
    if (parse_options(argc, argv, launcher, opts, &error)) return -1;
    if (speaking) {
        if (!error.empty())
            std::fprintf(stderr, "%s: %s (see --help)\n", tool, error.c_str());
        else
            print_usage(tool, launcher);
    }
    return error.empty() ? 0 : 2;
}

// The sizes of the rows, as nccl-tests walks them: multiply by -f, or add -i
// when -f is 1; stop past -e.
inline std::vector<size_t> size_series(const Options &opts) {
    nnpccl_tools::SizeSweep sweep;
    sweep.min_bytes = opts.min_bytes;
    sweep.max_bytes = opts.max_bytes;
    sweep.step_factor = opts.step_factor;
    sweep.step_bytes = opts.step_factor > 1 ? 0 : opts.step_bytes;
    return nnpccl_tools::sweep_sizes(sweep);
}

} // namespace peer_bench
